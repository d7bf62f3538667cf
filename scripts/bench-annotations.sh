#!/usr/bin/env bash
# Issue 19's benchmarks, printed for docs/benchmarks.md (`parley-bench annotations`):
#   1. a reaction against a message on the write path: 50 keep-alive connections sending text
#      to 10 groups, then the same connections each toggling reactions on a message of its
#      group (every request adds or takes back one): reactions/s ÷ sends/s in the same run;
#      and the same connections each saving a newer draft in its group (issue 33): drafts/s ÷ sends/s;
#      and each voting in its group's poll, a different answer every time: votes/s ÷ sends/s;
#      and (last) each sending text with a different link, every one a link-preview job the
#      node works on meanwhile: linked sends/s ÷ sends/s, and their p50 against the sends' p50;
#   2. a latest-50 history page of a group whose messages carry three reactions each, a
#      mention, (every fifth) a pin and (every other) a thread of two replies, against one of
#      plain messages, on one connection:
#      pages/s ÷ pages/s in the same run.
# ROUNDS (default 3) rounds of BENCH_SECONDS (default 5) per phase, a fresh server and data
# directory each round. Needs release builds (swift build -c release).
set -uo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == "--help" || "${1:-}" == "-h" ]]; then sed -n 2,15p "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
for binary in parley-server parley-bench; do
    [[ -x .build/release/$binary ]] || { echo "missing .build/release/$binary: swift build -c release first" >&2; exit 1; }
done
seconds=${BENCH_SECONDS:-5}
rounds=${ROUNDS:-3}
work=$(mktemp -d /tmp/parley-bench-annotations.XXXXXX)
pid=
trap '[[ -n "$pid" ]] && kill $pid 2>/dev/null; rm -rf "$work"' EXIT
echo "| round | sends/s | reactions/s | reaction ÷ send | drafts/s | draft ÷ send | votes/s | vote ÷ send | plain pages/s | decorated pages/s | decorated ÷ plain | plain p50 ms | decorated p50 ms | linked sends/s | link ÷ send | send p50 ms | linked p50 ms | errors |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for round in $(seq 1 "$rounds"); do
    data="$work/round$round"
    .build/release/parley-server --port 0 --threads "$(nproc)" --data-dir "$data" --signups-per-hour 1000000 \
        --argon2-passes 1 --argon2-memory-mib 1 >"$data.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 200); do grep -q "^Health:" "$data.log" 2>/dev/null && break; sleep 0.05; done
    url=$(grep -o "http://[^ ]*" "$data.log" | head -1)
    key=$(grep "app key:" "$data.log" | awk '{print $3}')
    line=$(.build/release/parley-bench annotations --url "$url" --app-key "$key" --duration "$seconds" --json 2>"$work/progress.log") \
        || { cat "$work/progress.log" >&2; exit 1; }
    kill "$pid"; wait "$pid" 2>/dev/null; pid=
    python3 - "$round" "$line" <<'PY'
import json, sys
r = json.loads(sys.argv[2])
print(f"| {sys.argv[1]} | {r['sends_per_s']} | {r['reactions_per_s']} | {r['reaction_vs_send']} | {r['drafts_per_s']} | {r['draft_vs_send']} | "
      f"{r['votes_per_s']} | {r['vote_vs_send']} | {r['plain_pages_per_s']} | "
      f"{r['decorated_pages_per_s']} | {r['decorated_vs_plain']} | {r['plain_p50_ms']} | {r['decorated_p50_ms']} | "
      f"{r['linked_sends_per_s']} | {r['link_vs_send']} | {r['send_p50_ms']} | {r['linked_p50_ms']} | {r['errors']} |")
PY
done
