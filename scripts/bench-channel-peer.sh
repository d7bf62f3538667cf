#!/usr/bin/env bash
# Issue 29's big room: a public channel of SUBSCRIBERS (default 10,000) connected members, one
# of them sending, against redis-server pub/sub with as many subscribers on one channel, in the
# same run: deliveries/s, send-to-receive p50/p99 and server CPU per message at each offered
# rate. Parley stores and fsyncs every message before delivering it; Redis keeps nothing.
# Prints a Markdown table for docs/benchmarks.md.
#
#   scripts/bench-channel-peer.sh [TREE]   (TREE: a checkout with release builds; default: this one)
#
# SUBSCRIBERS (10000), CHANNEL_RATES (5,10,20 messages/s), BENCH_SECONDS (10 per rate).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then sed -n 2,10p "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
tree=$(cd "${1:-.}" && pwd)
seconds=${BENCH_SECONDS:-10}
rates=${CHANNEL_RATES:-5,10,20}
subscribers=${SUBSCRIBERS:-10000}
command -v redis-server >/dev/null || { echo "bench-channel-peer.sh needs redis-server (scripts/install-deps.sh --bench)" >&2; exit 1; }
# Each side holds one descriptor per subscriber, and the load generator as many again.
[[ $(ulimit -n) -ge $((subscribers + 1024)) ]] || ulimit -n $((subscribers * 2 + 1024)) 2>/dev/null \
    || { echo "raise the descriptor limit (ulimit -n) to at least $((subscribers + 1024))" >&2; exit 1; }
if [[ "$tree" == "$(pwd)" ]]; then
    echo "Building release binaries…" >&2
    swift build -c release --product parley-server >/dev/null
    swift build -c release --product parley-bench >/dev/null
fi
server="$tree/.build/release/parley-server"
bench="$(pwd)/.build/release/parley-bench"
[[ -x "$server" && -x "$bench" ]] || { echo "missing release builds: swift build -c release in $tree and here" >&2; exit 1; }
work=$(mktemp -d /tmp/parley-bench-channel-peer.XXXXXX)
pid=""
cleanup() { [[ -n "$pid" ]] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

echo "Parley: a public channel of $subscribers connected members, $rates msgs/s, ${seconds}s each…" >&2
port=$(free_port)
# One sender carries the whole rate: lift its per-device command limit (not what this measures).
"$server" --port "$port" --data-dir "$work/data" --signups-per-hour 1000000 --argon2-passes 1 --argon2-memory-mib 1 \
    --commands-per-second 100000 --log-level warn >"$work/server.log" 2>&1 &
pid=$!
for _ in $(seq 1 400); do grep -q "^Health:" "$work/server.log" && break; sleep 0.05; done
key=$(grep -m1 "app key:" "$work/server.log" | grep -oE "pk_[A-Za-z0-9_-]+") \
    || { echo "parley-server did not start:" >&2; cat "$work/server.log" >&2; exit 1; }
"$bench" channel-fanout --url "http://127.0.0.1:$port" --app-key "$key" --protocol native --subscribers "$subscribers" \
    --rates "$rates" --duration "$seconds" --server-pid "$pid" --json 2>>"$work/bench.err" >"$work/parley.jsonl"
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""

echo "redis-server pub/sub: $subscribers subscribers on one channel, the same rates…" >&2
port=$(free_port)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --maxclients $((subscribers + 100)) \
    --daemonize no --logfile "$work/redis.log" &
pid=$!
for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
"$bench" channel-fanout --protocol redis --redis "127.0.0.1:$port" --subscribers "$subscribers" \
    --rates "$rates" --duration "$seconds" --server-pid "$pid" --json 2>>"$work/bench.err" >"$work/redis.jsonl"
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""

python3 - "$work/parley.jsonl" "$work/redis.jsonl" "$subscribers" "$seconds" <<'PY'
import datetime, json, subprocess, sys
parley = {int(r["offered_per_s"]): r for r in map(json.loads, open(sys.argv[1]))}
redis = {int(r["offered_per_s"]): r for r in map(json.loads, open(sys.argv[2]))}
members, seconds = sys.argv[3], sys.argv[4]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"Measured {datetime.date.today()} on {subprocess.getoutput('nproc')} cores ({cpu}), release build, servers and load "
      f"generator on the same cores; {seconds} s per rate; `scripts/bench-channel-peer.sh`.\n")
print(f"| msgs/s into {int(members):,} | Parley deliveries/s (all?) | p50 / p99 ms | CPU ms/msg | Redis deliveries/s (all?) | p50 / p99 ms | CPU ms/msg | CPU ratio |")
print("|---|---|---|---|---|---|---|---|")
for rate in sorted(parley):
    p, r = parley[rate], redis.get(rate)
    if r is None:
        continue
    def cell(x):
        whole = "all" if int(x["deliveries"]) == int(x["expected_deliveries"]) else f"{int(x['deliveries']):,} of {int(x['expected_deliveries']):,}"
        return f"{float(x['deliveries_per_s']):,.0f} ({whole})"
    ratio = float(p["server_cpu_ms_per_message"]) / float(r["server_cpu_ms_per_message"]) if float(r["server_cpu_ms_per_message"]) else float("nan")
    print(f"| {rate} | {cell(p)} | {p['p50_ms']} / {p['p99_ms']} | {p['server_cpu_ms_per_message']} | {cell(r)} | {r['p50_ms']} / {r['p99_ms']} "
          f"| {r['server_cpu_ms_per_message']} | **{ratio:.1f}×** |")
print(f"\nMemory with {int(members):,} connected: Parley RSS {parley[max(parley)]['server_rss_mib']} MiB, private {parley[max(parley)]['server_private_mib']} MiB; "
      f"Redis RSS {redis[max(redis)]['server_rss_mib']} MiB, private {redis[max(redis)]['server_private_mib']} MiB.")
PY
