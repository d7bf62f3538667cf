#!/usr/bin/env bash
# The chat-core benchmarks of issue 3, each with its reference in the same run, printed as a
# Markdown table for docs/benchmarks.md:
#   1. durable sends/s, 100 senders on HTTP keep-alive, vs a plain INSERT loop of the same rows
#      through the sqlite3 CLI (one transaction per row, and all rows in one transaction),
#      and vs GET /healthz on the same server (the HTTP ceiling of this machine)
#   2. the same sends with --sqlite-synchronous normal
#   3. latest-50 history page latency in a conversation of 1,000,000 messages, bytes per message
#   4. sign-in latency with the default Argon2id cost (2 passes, 64 MiB)
# BENCH_SECONDS (default 10) per load run; HISTORY_MESSAGES (default 1000000).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${BENCH_SECONDS:-10}
history=${HISTORY_MESSAGES:-1000000}
cores=$(nproc)
work=$(mktemp -d /tmp/parley-bench-chat.XXXXXX)
pid=""
cleanup() {
    [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

echo "Building release binaries…" >&2
swift build -c release --product parley-server >/dev/null
swift build -c release --product parley-bench >/dev/null
server=.build/release/parley-server
bench=.build/release/parley-bench

start() {  # name, extra flags… ; sets port, key, data
    data="$work/$1"
    local log="$work/$1.log"
    shift
    "$server" --port 0 --threads "$cores" --data-dir "$data" --signups-per-hour 1000000 "$@" >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 1 200); do grep -q "^Health:" "$log" && break; sleep 0.05; done
    port=$(grep -o "http://[^ ]*" "$log" | head -1 | sed 's/.*://')
    key=$(grep "app key:" "$log" | awk '{print $3}')
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

start full
echo "Sends (synchronous=FULL): 100 senders, ${seconds}s, three times, with sqlite3 CLI runs between…" >&2
s1=$("$bench" sends --url "http://127.0.0.1:$port" --app-key "$key" --senders 100 --duration "$seconds" --json 2>/dev/null)
cli_auto=$("$bench" sqlite-insert --rows 20000 --mode autocommit --json | field rows_per_s)
s2=$("$bench" sends --url "http://127.0.0.1:$port" --app-key "$key" --senders 100 --duration "$seconds" --json 2>/dev/null)
cli_batch=$("$bench" sqlite-insert --rows 200000 --mode batch --json | field rows_per_s)
s4=$("$bench" sends --url "http://127.0.0.1:$port" --app-key "$key" --senders 100 --duration "$seconds" --json 2>/dev/null)
echo "HTTP ceiling: wrk GET /healthz…" >&2
healthz=$(wrk -t"$cores" -c100 -d"${seconds}s" "http://127.0.0.1:$port/healthz" 2>&1 | awk '/Requests\/sec/ {print $2}')
stop

start normal --sqlite-synchronous normal
echo "Sends (synchronous=NORMAL)…" >&2
s3=$("$bench" sends --url "http://127.0.0.1:$port" --app-key "$key" --senders 100 --duration "$seconds" --json 2>/dev/null)
stop

start history
echo "History: $history messages, latest-50 pages for ${seconds}s…" >&2
h=$("$bench" history --url "http://127.0.0.1:$port" --app-key "$key" --db "$data/parley.sqlite" --messages "$history" --duration "$seconds" --json 2>/dev/null)
echo "Sign-in: 30 sequential, default Argon2id cost…" >&2
i=$("$bench" signin --url "http://127.0.0.1:$port" --app-key "$key" --count 30 --json 2>/dev/null)
stop

python3 - "$s1" "$s2" "$s3" "$cli_auto" "$cli_batch" "$healthz" "$h" "$i" "$cores" "$seconds" "$s4" <<'PY'
import datetime, json, statistics, subprocess, sys
s1, s2, s3 = (json.loads(x) for x in sys.argv[1:4])
auto, batch, healthz = float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
h, i = json.loads(sys.argv[7]), json.loads(sys.argv[8])
cores, seconds = sys.argv[9], sys.argv[10]
s4 = json.loads(sys.argv[11])
s1 = sorted([s1, s2, s4], key=lambda r: r["sends_per_s"])[1]  # the median run
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
sends = s1["sends_per_s"]
print(f"Measured {datetime.date.today()} on {cores} cores ({cpu}), {subprocess.getoutput('uname -r')}, release build.\n")
print("| benchmark | Parley | reference | ratio | goal |")
print("|---|---|---|---|---|")
print(f"| Durable sends, 100 senders on HTTP keep-alive, synchronous=FULL (sends/s, median of 3) | {sends:,.0f} "
      f"(p50 {s1['p50_ms']} ms, p99 {s1['p99_ms']} ms; {s1['writes_per_commit']} sends per commit) "
      f"| sqlite3 CLI, same rows, one transaction each: {auto:,.0f} rows/s | {sends/auto:.2f}x | 50,000/s |")
print(f"| | | sqlite3 CLI, same rows, one transaction for all: {batch:,.0f} rows/s | {sends/batch:.2f}x | |")
print(f"| | | GET /healthz on the same server (wrk -c100): {healthz:,.0f} req/s | {sends/healthz:.2f}x | |")
print(f"| Durable sends, synchronous=NORMAL (sends/s) | {s3['sends_per_s']:,.0f} (p99 {s3['p99_ms']} ms) | FULL above | {s3['sends_per_s']/sends:.2f}x | – |")
print(f"| Latest-50 history page, conversation of {int(h['messages']):,} messages, 1 connection (p50 / p99) "
      f"| {h['p50_ms']} ms / {h['p99_ms']} ms ({int(h['pages']):,} pages) | – | – | p99 < 2 ms |")
print(f"| Database size per message (message + event + full-text index) | {h['bytes_per_message']:.0f} bytes | – | – | – |")
print(f"| Sign-in, Argon2id 2 passes × 64 MiB, sequential (p50 / p99) | {i['p50_ms']} ms / {i['p99_ms']} ms | – | – | – |")
runs = [json.loads(x) for x in (sys.argv[1], sys.argv[2], sys.argv[11])]
raw = " / ".join(format(r["sends_per_s"], ",.0f") for r in runs)
print(f"\nRaw: sends {raw} (errors {sum(r['errors'] for r in runs)}), NORMAL {s3['sends_per_s']:,.0f}.")
PY
