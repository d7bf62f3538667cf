#!/usr/bin/env bash
# What delivery traces cost (issue 35, docs/trace.md): issue 29's peer workload (200 users in
# rooms of 10, 100-byte texts, every receiver marking each message delivered and read) on one
# build, with tracing on (the default, --trace-retention 24) and off (--trace-retention 0),
# alternating, ROUNDS rounds (default 3) at each of RATES (default 50,500) msgs/s for SECONDS
# (default 15) each. Prints server CPU ms per message for each run and the ratio on ÷ off of
# the means. The goal: at most 1.10.
#
#   scripts/bench-trace.sh [TREE]   (TREE: a checkout with release builds; default: this one)
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then sed -n 2,9p "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
tree=$(cd "${1:-.}" && pwd)
rounds=${ROUNDS:-3}
rates=${RATES:-50,500}
seconds=${SECONDS_PER_RUN:-15}
# shellcheck source=scripts/peer-servers.sh
. scripts/peer-servers.sh
peer_setup "$tree" parley-bench-trace
threads=$(nproc)
workload=(--users 200 --group-size 10 --rates "$rates" --duration "$seconds" --body-bytes 100 --json --receipts 1)
for round in $(seq 1 "$rounds"); do
    echo "round $round of $rounds: tracing on, then off (swapped every other round)…" >&2
    if (( round % 2 )); then order=(on off); else order=(off on); fi
    for mode in "${order[@]}"; do
        if [[ "$mode" == on ]]; then PARLEY_FLAGS="" run_parley trace-on; else PARLEY_FLAGS="--trace-retention 0" run_parley trace-off; fi
    done
done
python3 - "$work/results.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print("| msgs/s | tracing | server CPU ms per message, each round | mean | delivered |")
print("|---|---|---|---|---|")
for rate in sorted({int(r["offered_per_s"]) for r in rows}):
    means = {}
    for mode in ("on", "off"):
        runs = [r for r in rows if r["label"] == f"trace-{mode}" and int(r["offered_per_s"]) == rate]
        cpu = [float(r["server_cpu_ms_per_message"]) for r in runs]
        means[mode] = statistics.mean(cpu)
        print(f"| {rate:,} | {mode} | {' · '.join(f'{c:.3f}' for c in cpu)} | {means[mode]:.3f} | "
              f"{sum(int(r['deliveries']) for r in runs):,} / {sum(int(r['expected_deliveries']) for r in runs):,} |")
    print(f"\nAt {rate:,} msgs/s tracing on costs {means['on'] / means['off']:.2f}× off (the goal: ≤ 1.10×).\n")
PY
