#!/usr/bin/env bash
# Alternating A/B between two release builds, so a change is measured against what it
# replaced in the same session. AB_BENCH=sends (default: durable sends), AB_BENCH=fanout
# (1,000 devices in conversations of 10 at FANOUT_RATES, default 2000,3000,4000 messages/s) or
# AB_BENCH=http (wrk -t2 -c50 on AB_PATH, default /healthz, with the app key: requests/s and
# the server's CPU microseconds per request, from /proc; AB_PATH=/v1/me measures a request
# that is refused and logged):
#   git worktree add /tmp/base <commit> && (cd /tmp/base && swift build -c release)
#   swift build -c release && scripts/bench-ab.sh /tmp/base .
# Each run starts a fresh server and data directory and drives it with `parley-bench sends`
# (100 senders, BENCH_SECONDS, default 10); ROUNDS (default 3) rounds, the order swapped every
# round so drift on a shared machine falls on both sides. Prints one line per run:
# sends: label sends/s p50_ms p99_ms sends_per_commit errors; pages: label plain pages/s p50_ms
# decorated pages/s p50_ms errors;
# fanout: label offered/s deliveries/s expected p50_ms p99_ms (one line per rate);
# http: label path requests/s cpu_us_per_request.
# Both trees' servers are driven by NEW_TREE's parley-bench, so only the server differs.
# AB_BENCH=pages: `parley-bench annotations`' history phases, latest-50 pages a second on one
# connection (plain, and decorated with reactions, mentions, a pin and threads) with their p50:
# a page is several reads, so this is the latency of the store's reads.
# AB_BENCH=peer: issue 29's peer workload (200 users in rooms of 10, PEER_RATE messages/s,
# default 50, 100-byte texts; with PEER_RECEIPTS=1, the default, every receiver marks each
# message delivered and read): the server's CPU ms per message (and PostgreSQL's, with
# AB_POSTGRES=1) and p99, every delivery counted.
# AB_POSTGRES=1 (sends, pages, peer) runs each server on a fresh database of the PostgreSQL that
# scripts/services.sh started (source its env first; start it with PARLEY_PG_FSYNC=on to
# measure durable sends) and, for sends, adds the CPU ms per send of the server and of PostgreSQL.
# AB_SHARDS=N (with AB_POSTGRES=1) makes each database a log of N shards (`--log-shards`).
# AB_FLAGS adds flags to both servers (e.g. AB_FLAGS=--test-mode: push on, to test mode's fakes).
set -uo pipefail
if [[ $# -ne 2 || "$1" == "--help" || "$1" == "-h" ]]; then
    echo "usage: scripts/bench-ab.sh OLD_TREE NEW_TREE   (each with .build/release/parley-server and parley-bench)" >&2
    exit 2
fi
old=$(cd "$1" && pwd) new=$(cd "$2" && pwd)
seconds=${BENCH_SECONDS:-10}
bench=${AB_BENCH:-sends}
rates=${FANOUT_RATES:-2000,3000,4000}
path=${AB_PATH:-/healthz}
case "$bench" in sends|fanout|http|pages|peer) ;; *) echo "AB_BENCH is sends, fanout, http, pages or peer, not '$bench'" >&2; exit 2 ;; esac
if [[ "$bench" == http ]] && ! command -v wrk >/dev/null; then echo "AB_BENCH=http needs wrk (make bench installs it)" >&2; exit 1; fi
rounds=${ROUNDS:-3}
for tree in "$old" "$new"; do
    for binary in parley-server parley-bench; do
        [[ -x "$tree/.build/release/$binary" ]] || { echo "missing $tree/.build/release/$binary: swift build -c release there first" >&2; exit 1; }
    done
done
postgres=${AB_POSTGRES:-0}
if [[ "$postgres" == 1 ]]; then
    [[ "$bench" == sends || "$bench" == pages || "$bench" == peer ]] || { echo "AB_POSTGRES=1 measures sends, pages and peer only" >&2; exit 2; }
    [[ -n "${PARLEY_TEST_POSTGRES_URL:-}" && -n "${PARLEY_PG_DATA:-}" ]] \
        || { echo "AB_POSTGRES=1 needs scripts/services.sh's env: source <dir>/env first" >&2; exit 2; }
fi
work=$(mktemp -d /tmp/parley-ab.XXXXXX)
trap 'rm -rf "$work"' EXIT
# shellcheck source=scripts/cpu-ticks.sh
. "$(dirname "$0")/cpu-ticks.sh"
run() {  # tree label
    local tree=$1 label=$2 data="$work/$2-$RANDOM" port key result pid database=()
    if [[ "$postgres" == 1 ]]; then
        local name="parley_ab_$RANDOM" old_database
        # The last run's database goes, and a checkpoint writes its pages now rather than
        # during this run: each run starts from the same state.
        for old_database in $(psql "$PARLEY_TEST_POSTGRES_URL" -Atc "SELECT datname FROM pg_database WHERE datname LIKE 'parley_ab_%'"); do
            psql "$PARLEY_TEST_POSTGRES_URL" -qc "DROP DATABASE $old_database" >/dev/null
        done
        psql "$PARLEY_TEST_POSTGRES_URL" -qc "CHECKPOINT" >/dev/null
        psql "$PARLEY_TEST_POSTGRES_URL" -qc "CREATE DATABASE $name" >/dev/null
        database=(--database-url "${PARLEY_TEST_POSTGRES_URL%/*}/$name")
        [[ "${AB_SHARDS:-1}" -gt 1 ]] && database+=(--log-shards "$AB_SHARDS")
    fi
    "$tree/.build/release/parley-server" --port 0 --threads "$(nproc)" --data-dir "$data" --signups-per-hour 1000000 \
        --argon2-passes 1 --argon2-memory-mib 1 "${database[@]}" ${AB_FLAGS:-} >"$data.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 200); do grep -q "^Health:" "$data.log" 2>/dev/null && break; sleep 0.05; done
    port=$(grep -o "http://[^ ]*" "$data.log" | head -1 | sed 's/.*://')
    key=$(grep "app key:" "$data.log" | awk '{print $3}')
    if [[ "$bench" == http ]]; then
        local ticks_before ticks_after out
        ticks_before=$(awk '{print $14 + $15}' "/proc/$pid/stat")
        out=$(wrk -t2 -c50 -d"${seconds}s" -H "X-Parley-App-Key: $key" "http://127.0.0.1:$port$path" 2>&1)
        ticks_after=$(awk '{print $14 + $15}' "/proc/$pid/stat")
        kill "$pid"; wait "$pid" 2>/dev/null
        python3 -c "
import sys
label, path, before, after, hz, out = sys.argv[1:7]
requests = int(next(l.split()[0] for l in out.splitlines() if 'requests in' in l))
rate = next(l.split()[1] for l in out.splitlines() if l.startswith('Requests/sec'))
print(label, path, rate, '%.2f' % ((int(after) - int(before)) / int(hz) * 1e6 / requests))" \
            "$label" "$path" "$ticks_before" "$ticks_after" "$(getconf CLK_TCK)" "$out"
        return
    fi
    if [[ "$bench" == pages ]]; then
        result=$("$new/.build/release/parley-bench" annotations --url "http://127.0.0.1:$port" --app-key "$key" --duration "$seconds" --json 2>/dev/null)
        kill "$pid"; wait "$pid" 2>/dev/null
        python3 -c "
import json, sys
r = json.loads(sys.argv[2])
print(sys.argv[1], 'plain', r['plain_pages_per_s'], r['plain_p50_ms'], 'decorated', r['decorated_pages_per_s'], r['decorated_p50_ms'], 'errors', r['errors'])" \
            "$label" "$result"
        return
    fi
    if [[ "$bench" == fanout ]]; then
        result=$("$new/.build/release/parley-bench" fanout --url "http://127.0.0.1:$port" --app-key "$key" --users 1000 --group-size 10 \
                 --rates "$rates" --duration "$seconds" --json 2>/dev/null)
        kill "$pid"; wait "$pid" 2>/dev/null
        python3 -c "
import json, sys
for line in sys.argv[2].splitlines():
    r = json.loads(line)
    print(sys.argv[1], r['offered_per_s'], r['deliveries_per_s'], r['expected_deliveries'], r['p50_ms'], r['p99_ms'])" "$label" "$result"
        return
    fi
    local node_before pg_before node_after pg_after
    if [[ "$bench" == peer ]]; then
        pg_before=0
        [[ "$postgres" == 1 ]] && pg_before=$(ticks $(pg_pids))
        result=$("$new/.build/release/parley-bench" fanout --url "http://127.0.0.1:$port" --app-key "$key" --users 200 --group-size 10 \
                 --rates "${PEER_RATE:-50}" --duration "$seconds" --body-bytes 100 --receipts "${PEER_RECEIPTS:-1}" \
                 --server-pid "$pid" --json 2>/dev/null)
        pg_after=0
        [[ "$postgres" == 1 ]] && pg_after=$(ticks $(pg_pids))
        kill "$pid"; wait "$pid" 2>/dev/null
        python3 -c "
import json, sys
label, r, pg, hz = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
complete = 'all delivered' if int(r['deliveries']) == int(r['expected_deliveries']) else 'LOST %d of %d' % (int(r['expected_deliveries']) - int(r['deliveries']), int(r['expected_deliveries']))
print(label, r['offered_per_s'], 'cpu_ms_per_message node', r['server_cpu_ms_per_message'],
      'postgresql %.3f' % (pg * 1000 / hz / max(int(r['sent']), 1)), 'p99_ms', r['p99_ms'], complete)" \
            "$label" "$result" "$((pg_after - pg_before))" "$(getconf CLK_TCK)"
        return
    fi
    node_before=$(ticks "$pid"); pg_before=0
    [[ "$postgres" == 1 ]] && pg_before=$(ticks $(pg_pids))
    result=$("$new/.build/release/parley-bench" sends --url "http://127.0.0.1:$port" --app-key "$key" --senders 100 \
             --duration "$seconds" --json 2>/dev/null)
    node_after=$(ticks "$pid"); pg_after=0
    [[ "$postgres" == 1 ]] && pg_after=$(ticks $(pg_pids))
    kill "$pid"; wait "$pid" 2>/dev/null
    if [[ "$postgres" == 1 ]]; then
        python3 -c "
import json, sys
label, result, node, pg, hz = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
sends = max(int(result['sends']), 1)
print(label, result['sends_per_s'], result['p50_ms'], result['p99_ms'], result['writes_per_commit'], result['errors'],
      'cpu_ms_per_send node %.3f postgresql %.3f' % (node * 1000 / hz / sends, pg * 1000 / hz / sends))" \
            "$label" "$result" "$((node_after - node_before))" "$((pg_after - pg_before))" "$(getconf CLK_TCK)"
        return
    fi
    python3 -c "import json,sys; r=json.loads(sys.argv[2]); print(sys.argv[1], r['sends_per_s'], r['p50_ms'], r['p99_ms'], r['writes_per_commit'], r['errors'])" \
        "$label" "$result"
}
for round in $(seq 1 "$rounds"); do
    if (( round % 2 )); then run "$old" old; run "$new" new; else run "$new" new; run "$old" old; fi
done
