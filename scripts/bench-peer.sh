#!/usr/bin/env bash
# Issue 29's peer workload: server CPU per message, Parley against redis-server pub/sub in the
# same run. 200 users in 20 rooms of 10, each user sending at a steady share of RATES messages/s
# (default 50,500), 100-byte texts, over each server's own protocol; then the same with every
# receiver marking each message delivered and read. Parley stores and fsyncs every message
# before its ack and Redis keeps nothing: Redis is the floor, not a peer. So each run is also
# made against a durable Redis (the message XADDed to a stream and each receipt SET before the
# PUBLISH, the AOF fsynced before any reply or delivery: `--appendfsync always`), the peer that
# keeps what Parley keeps. Also each server's memory just started, before any client. Prints a
# Markdown table for docs/benchmarks.md.
#
#   scripts/bench-peer.sh [TREE]   (TREE: a checkout with release builds; default: this one)
#
# PEER_SECONDS (default 20) per rate. The load generator is parley-bench fanout (--receipts 1,
# --body-bytes 100, --server-pid), so the figure can be re-run without Python.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then sed -n 2,15p "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
tree=$(cd "${1:-.}" && pwd)
seconds=${PEER_SECONDS:-20}
rates=${PEER_RATES:-50,500}
cores=$(nproc)
command -v redis-server >/dev/null || { echo "bench-peer.sh needs redis-server (scripts/install-deps.sh --bench)" >&2; exit 1; }
# shellcheck source=scripts/peer-servers.sh
. scripts/peer-servers.sh
peer_setup "$tree" parley-bench-peer
threads="$cores"
workload=(--users 200 --group-size 10 --rates "$rates" --duration "$seconds" --body-bytes 100 --json)

echo "Parley: 200 users in 20 rooms of 10, $rates msgs/s, ${seconds}s each…" >&2
run_parley parley
echo "redis-server pub/sub, the same…" >&2
run_redis redis
echo "…and again with delivered and read receipts from every receiver…" >&2
run_parley parley-receipts --receipts 1
run_redis redis-receipts --receipts 1
echo "…and a durable Redis (XADD / SET before PUBLISH, AOF fsynced always), without and with receipts…" >&2
REDIS_DURABLE=1 run_redis redis-durable
REDIS_DURABLE=1 run_redis redis-durable-receipts --receipts 1

python3 - "$work/results.jsonl" "$cores" "$seconds" "$work/idle.jsonl" <<'PY'
import datetime, json, subprocess, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
idle = {r["label"]: r for r in (json.loads(l) for l in open(sys.argv[4]) if l.startswith("{"))}
cores, seconds = sys.argv[2], sys.argv[3]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"Measured {datetime.date.today()} on {cores} cores ({cpu}), {subprocess.getoutput('uname -r')}, release build, "
      f"servers and load generator on the same cores; {seconds} s per rate; `scripts/bench-peer.sh`.\n")
print("| msgs/s | receipts | Parley CPU ms per message | Redis | ratio | durable Redis | ratio | Parley p99 ms | Redis p99 ms | durable Redis p99 ms | delivered (Parley / expected) | Parley RSS / private MiB | Redis RSS / private MiB |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
def find(label, rate):
    return next(r for r in rows if r["label"] == label and int(r["offered_per_s"]) == rate)
for rate in sorted({int(r["offered_per_s"]) for r in rows}):
    for receipts in (False, True):
        p = find("parley-receipts" if receipts else "parley", rate)
        r = find("redis-receipts" if receipts else "redis", rate)
        d = find("redis-durable-receipts" if receipts else "redis-durable", rate)
        ratio = float(p["server_cpu_ms_per_message"]) / max(float(r["server_cpu_ms_per_message"]), 1e-9)
        durable = float(p["server_cpu_ms_per_message"]) / max(float(d["server_cpu_ms_per_message"]), 1e-9)
        print(f"| {rate:,} | {'yes' if receipts else 'no'} | {float(p['server_cpu_ms_per_message']):.3f} | {float(r['server_cpu_ms_per_message']):.3f} | "
              f"**{ratio:.1f}×** | {float(d['server_cpu_ms_per_message']):.3f} | **{durable:.1f}×** | {p['p99_ms']} | {r['p99_ms']} | {d['p99_ms']} | "
              f"{int(p['deliveries']):,} / {int(p['expected_deliveries']):,} | "
              f"{p['server_rss_mib']} / {p['server_private_mib']} | {r['server_rss_mib']} / {r['server_private_mib']} |")
print(f"\nJust started, before any client: Parley {idle['parley']['rss_mib']} MiB RSS / {idle['parley']['private_mib']} MiB private, "
      f"Redis {idle['redis']['rss_mib']} / {idle['redis']['private_mib']}.")
for rate in sorted({int(r["offered_per_s"]) for r in rows}):
    plain, with_receipts = find("parley", rate), find("parley-receipts", rate)
    print(f"\nParley at {rate:,} msgs/s: receipts cost {float(with_receipts['server_cpu_ms_per_message']) / max(float(plain['server_cpu_ms_per_message']), 1e-9):.2f}× "
          f"the run without them.")
PY
