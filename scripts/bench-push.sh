#!/usr/bin/env bash
# Issue 17's benchmark, against the fake APNs of the tests (Tests/Interop/fakepush.py: HTTP/2
# over TLS, every provider token verified), printed for docs/benchmarks.md:
#   1. the send path's cost of push: durable sends/s and p99 by 100 senders in 10 groups, each
#      group with 2 more members who never send, everyone with a device (so every message has
#      receivers to push), with push off against push on, alternating, ROUNDS (default 3) rounds. With
#      push on the confirmation window is 60 s, so the run measures what a send pays (the
#      outbox row in its transaction) and not the workers, which are measured next;
#   2. pushes/s the workers sustain: a backlog of messages whose pushes fall due at once
#      (--push-window 0, 20 senders in 2 groups with 5 silent receivers each, for PUSH_SECONDS,
#      default 5), then the backlog left when
#      the sends stop timed to its last push, through the server's own parley_push_sent_total.
# Needs release builds (swift build -c release) and the test venv (scripts/venv.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == "--help" || "${1:-}" == "-h" ]]; then sed -n 2,12p "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
for binary in parley-server parley-bench; do
    [[ -x .build/release/$binary ]] || { echo "missing .build/release/$binary: swift build -c release first" >&2; exit 1; }
done
[[ -x .venv/bin/python ]] || { echo "missing .venv: run scripts/venv.sh" >&2; exit 1; }
seconds=${BENCH_SECONDS:-10}
rounds=${ROUNDS:-3}
work=$(mktemp -d /tmp/parley-bench-push.XXXXXX)
.venv/bin/python Tests/Interop/fakepush.py "$work/flags" >"$work/fake.log" 2>&1 &
fake=$!
trap 'kill $fake 2>/dev/null; wait $fake 2>/dev/null; grep "^fake:" "$work/fake.log" >&2; rm -rf "$work"' EXIT
for _ in $(seq 1 200); do [[ -s "$work/flags" ]] && break; sleep 0.05; done
mapfile -t push_flags <"$work/flags"

start() {  # label, extra flags…: starts a server; sets pid, url, key
    local label=$1; shift
    local data="$work/$label-$RANDOM"
    .build/release/parley-server --port 0 --threads "$(nproc)" --data-dir "$data" --signups-per-hour 1000000 \
        --argon2-passes 1 --argon2-memory-mib 1 "$@" >"$data.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 200); do grep -q "^Health:" "$data.log" 2>/dev/null && break; sleep 0.05; done
    url=$(grep -o "http://[^ ]*" "$data.log" | head -1)
    key=$(grep "app key:" "$data.log" | awk '{print $3}')
}
sent() { curl -s "$url/metrics" | awk '/^parley_push_sent_total\{provider="apns"\}/ {print $2}'; }

echo "Send path, push off against push on (every receiver offline with a device), $rounds rounds of $seconds s:" >&2
echo "| round | push | sends/s | p50 ms | p99 ms | errors |"
echo "|---|---|---|---|---|---|"
measure() {  # round, label, flags…
    local round=$1 label=$2; shift 2
    start "$label" "$@"
    result=$(.build/release/parley-bench sends --url "$url" --app-key "$key" --senders 100 --receivers 2 --devices 1 --duration "$seconds" --json 2>/dev/null)
    kill "$pid"; wait "$pid" 2>/dev/null
    python3 -c "import json,sys; r=json.loads(sys.argv[3]); print(f'| {sys.argv[1]} | {sys.argv[2]} | {r[\"sends_per_s\"]} | {r[\"p50_ms\"]} | {r[\"p99_ms\"]} | {r[\"errors\"]} |')" \
        "$round" "$label" "$result"
}
for round in $(seq 1 "$rounds"); do
    if (( round % 2 )); then
        measure "$round" off; measure "$round" on "${push_flags[@]}" --push-window 60
    else
        measure "$round" on "${push_flags[@]}" --push-window 60; measure "$round" off
    fi
done

echo "Worker throughput: a backlog pushed at once…" >&2
start drain "${push_flags[@]}" --push-window 0 ${PUSH_CONCURRENCY:+--push-concurrency $PUSH_CONCURRENCY}
before=$(sent); before=${before:-0}
result=$(.build/release/parley-bench sends --url "$url" --app-key "$key" --senders 20 --conversations 2 --receivers 5 --devices 1 \
         --duration "${PUSH_SECONDS:-5}" --json 2>/dev/null)
messages=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['sends'])" "$result")
expected=$(( messages * 5 ))  # five members who never send, pushed for every message (senders read as they send)
mid=$(sent); mid=${mid:-0}
begin=$(date +%s.%N); last=$mid; stalled=0
while (( stalled < 50 )); do
    now=$(sent); now=${now:-0}
    if [[ "$now" != "$last" ]]; then last=$now; stalled=0; end=$(date +%s.%N); else stalled=$((stalled + 1)); fi
    (( now - before >= expected )) && break
    sleep 0.1
done
kill "$pid"; wait "$pid" 2>/dev/null
python3 -c "
import sys
before, mid, last, expected, begin, end, messages = (int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
                                                    float(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7]))
print()
print(f'Worker: {messages} messages, {last - before} of {expected} pushes sent; {mid - before} while the sends ran, '
      f'then the backlog of {last - mid} at {(last - mid) / max(end - begin, 1e-9):.0f} pushes/s over {end - begin:.1f} s')
" "$before" "$mid" "$last" "$expected" "$begin" "${end:-$begin}" "$messages"
