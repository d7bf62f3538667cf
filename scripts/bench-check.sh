#!/usr/bin/env bash
# The regression check of issue 29: server CPU per message in a short fixed workload (issue 29's
# peer workload, shorter), as a ratio against redis-server doing the same work in the same run,
# must not grow by more than 25 % over the committed baseline (scripts/bench-check.baseline).
# A ratio, not a time: this shared machine cannot hold an absolute figure, but both servers
# slow down alike. Each side runs BENCH_CHECK_ROUNDS times (default 3), interleaved; each
# round's ratio is Parley's figure over the Redis run beside it, and the median round counts,
# so one noisy round cannot fail the check.
#
#   scripts/bench-check.sh            compare against the baseline (exit 1 past 1.25×)
#   scripts/bench-check.sh --record   write the baseline from this run (commit it with the
#                                     change that moved it, and say why in docs/benchmarks.md)
#
# Uses the debug build `make build` made (CI builds nothing more), so the baseline is a debug
# figure: a tripwire for regressions, not the published ratio (scripts/bench-peer.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then sed -n 2,15p "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
record=false
[[ "${1:-}" == "--record" ]] && record=true
build=${BENCH_CHECK_BUILD:-debug}
server=".build/$build/parley-server"
bench=".build/$build/parley-bench"
baseline=scripts/bench-check.baseline
rounds=${BENCH_CHECK_ROUNDS:-3}
seconds=${BENCH_CHECK_SECONDS:-8}
[[ -x "$server" && -x "$bench" ]] || { echo "bench-check.sh needs $server and $bench: run make build" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "bench-check.sh needs redis-server (scripts/install-deps.sh --test)" >&2; exit 1; }
work=$(mktemp -d /tmp/parley-bench-check.XXXXXX)
pid=""
cleanup() { [[ -n "$pid" ]] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
threads=2
workload=(--users 200 --group-size 10 --rates 50 --duration "$seconds" --body-bytes 100 --json)
# shellcheck source=scripts/peer-servers.sh
. scripts/peer-servers.sh

for round in $(seq 1 "$rounds"); do
    echo "round $round of $rounds: Parley and redis-server, 200 users in rooms of 10, 50 msgs/s for ${seconds}s, without and with receipts…" >&2
    run_parley parley
    run_redis redis
    run_parley parley-receipts --receipts 1
    run_redis redis-receipts --receipts 1
done

python3 - "$work/results.jsonl" "$baseline" "$record" "$build" <<'PY'
import datetime, json, sys
results, baseline_path, record, build = sys.argv[1], sys.argv[2], sys.argv[3] == "true", sys.argv[4]
rows = [json.loads(line) for line in open(results) if line.startswith("{")]
def figures(label):
    found = [(float(r["server_cpu_ms_per_message"]), int(r["deliveries"]) == int(r["expected_deliveries"])) for r in rows if r["label"] == label]
    if not found or not all(complete for _, complete in found):
        sys.exit(f"bench-check: a run of {label} lost deliveries (every one must arrive); see the fanout output above")
    return [figure for figure, _ in found]
def ratio(parley, redis):
    # Each round's Parley over the Redis run beside it, and the median round: one noisy round
    # (on either side) cannot move it.
    pairs = sorted(p / max(r, 1e-9) for p, r in zip(figures(parley), figures(redis)))
    return pairs[len(pairs) // 2]
ratios = {"plain": ratio("parley", "redis"), "receipts": ratio("parley-receipts", "redis-receipts")}
for name, ratio in ratios.items():
    print(f"server CPU per message, Parley ÷ redis-server, {name}: {ratio:.2f}×")
if record:
    json.dump({"build": build, "recorded": str(datetime.date.today()), "ratios": {k: round(v, 2) for k, v in ratios.items()}},
              open(baseline_path, "w"), indent=2)
    open(baseline_path, "a").write("\n")
    print(f"recorded {baseline_path}")
    sys.exit(0)
baseline = json.load(open(baseline_path))
if baseline["build"] != build:
    sys.exit(f"bench-check: the baseline is a {baseline['build']} figure and this is {build}; record one with --record")
failed = False
for name, ratio in ratios.items():
    allowed = baseline["ratios"][name] * 1.25
    verdict = "ok" if ratio <= allowed else "REGRESSED"
    print(f"  {name}: {ratio:.2f}× against the baseline {baseline['ratios'][name]:.2f}× ({baseline['recorded']}), allowed {allowed:.2f}×: {verdict}")
    failed |= ratio > allowed
if failed:
    sys.exit("bench-check: server CPU per message grew more than 25 % against the baseline; profile it (docs/benchmarks.md), "
             "or, if the cost is meant, record a new baseline with --record and say why")
PY
