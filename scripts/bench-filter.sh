#!/usr/bin/env bash
# Issue 32's benchmark, printed for docs/benchmarks.md: what the content filter costs a send
# (docs/trust-and-safety.md). Durable sends by 100 senders in 10 groups over HTTP keep-alive
# (parley-bench sends), ROUNDS (default 3) rounds of BENCH_SECONDS (default 10) each, with:
#   none       no blocklist and no hook (the reference);
#   blocklist  one 20-entry blocklist (15 words and phrases, 5 regular expressions) that no
#              bench message matches, so every send is checked in full and written;
#   hook       a before-send hook on 127.0.0.1 that accepts every message (asyncio, HTTP/1.1
#              keep-alive), so every send waits for one round trip to the app's backend.
# Each row: sends/s, p50 and p99 ms, and the server's CPU per send (utime + stime from /proc),
# with each figure's ratio to the same round's "none". The three run in a rotating order.
# Needs release builds (swift build -c release).
set -uo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == "--help" || "${1:-}" == "-h" ]]; then sed -n 2,13p "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
tree=${BENCH_TREE:-.}
for binary in parley-server parley-bench; do
    [[ -x $tree/.build/release/$binary ]] || { echo "missing $tree/.build/release/$binary: swift build -c release first" >&2; exit 1; }
done
seconds=${BENCH_SECONDS:-10}
rounds=${ROUNDS:-3}
work=$(mktemp -d /tmp/parley-bench-filter.XXXXXX)

# The hook: answers {"action":"accept"} to each request as soon as its body is in.
cat >"$work/hook.py" <<'PY'
import asyncio
ANSWER = b'{"action":"accept"}'
REPLY = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER)
class Hook(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport, self.buffer = transport, b""
    def data_received(self, data):
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            length = 0
            for line in self.buffer[:end].split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length:]
            self.transport.write(REPLY)
async def main():
    server = await asyncio.get_running_loop().create_server(Hook, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()
asyncio.run(main())
PY
python3 "$work/hook.py" >"$work/hook.port" &
hook=$!
trap 'kill $hook 2>/dev/null; wait $hook 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 1 100); do [[ -s "$work/hook.port" ]] && break; sleep 0.05; done
hook_url="http://127.0.0.1:$(cat "$work/hook.port")/before-send"

blocklist='{"mode":"reject","reason":"not here","words":["buy followers","cheap pills","free money","click here now","casino bonus",
"crypto giveaway","miracle cure","lose weight fast","work from home","act now","limited offer","winner winner","wire transfer",
"nigerian prince","hot singles"],"regexes":["fr[e3]{2}\\s*sp[i1]ns?","\\bviagr[a@]\\b","(?:bit\\.ly|tinyurl)/\\w+",
"\\d{3}-\\d{3}-\\d{4}","(?:[a-z0-9]+\\.){2,}(?:ru|cn)/"]}'

start() {  # label: starts a server; sets pid, url, key, secret
    local data="$work/$1-$RANDOM"
    "$tree/.build/release/parley-server" --port 0 --threads "$(nproc)" --data-dir "$data" --signups-per-hour 1000000 \
        --argon2-passes 1 --argon2-memory-mib 1 --webhooks-allow-private --server-api-requests-per-second 100000 >"$data.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 200); do grep -q "^Health:" "$data.log" 2>/dev/null && break; sleep 0.05; done
    url=$(grep -o "http://[^ ]*" "$data.log" | head -1)
    key=$(grep "app key:" "$data.log" | awk '{print $3}')
    secret=$(cat "$data/first-app-secret")
}
server_api() {  # method, path, body
    curl -sf -o /dev/null -X "$1" "$url$2" -H "Authorization: Bearer $secret" -H 'Content-Type: application/json' ${3:+-d "$3"} \
        || { echo "the server refused $1 $2" >&2; exit 1; }
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }

echo "The content filter's cost per send; $rounds rounds of $seconds s, 100 senders in 10 groups:" >&2
echo "| round | filter | sends/s | p50 ms | p99 ms | errors | server CPU µs/send | sends/s ÷ none | CPU ÷ none |"
echo "|---|---|---|---|---|---|---|---|---|"
measure() {  # round, label → prints a row; remembers "none"'s figures
    local round=$1 label=$2
    start "$label"
    case $label in
        blocklist) server_api PUT /v1/server/blocklists/bench "$blocklist" ;;
        hook) server_api PUT /v1/server/before-send "{\"url\":\"$hook_url\",\"timeoutMilliseconds\":2000}" ;;
    esac
    local before; before=$(cpu_ticks)
    local result; result=$("$tree/.build/release/parley-bench" sends --url "$url" --app-key "$key" --senders 100 --receivers 2 \
        --duration "$seconds" --json 2>/dev/null)
    local after; after=$(cpu_ticks)
    kill "$pid"; wait "$pid" 2>/dev/null
    python3 - "$round" "$label" "$result" "$before" "$after" "$seconds" "$work/none-$round" <<'PY'
import json, os, sys
round_, label, result, before, after, seconds, reference = sys.argv[1:]
r = json.loads(result)
ticks = os.sysconf("SC_CLK_TCK")
sends = r["sends_per_s"] * float(seconds)
cpu_us = (int(after) - int(before)) / ticks / max(sends, 1) * 1e6
if label == "none":
    open(reference, "w").write(json.dumps({"rate": r["sends_per_s"], "cpu": cpu_us}))
base = json.load(open(reference)) if os.path.exists(reference) else None
ratio = lambda a, b: f"{a / b:.2f}×" if base else "–"
print(f"| {round_} | {label} | {r['sends_per_s']:.0f} | {r['p50_ms']} | {r['p99_ms']} | {r['errors']} | {cpu_us:.0f} | "
      f"{ratio(r['sends_per_s'], base['rate']) if base else '–'} | {ratio(cpu_us, base['cpu']) if base else '–'} |")
PY
}
for round in $(seq 1 "$rounds"); do
    # "none" first in each round, so each ratio has its reference; the other two alternate.
    measure "$round" none
    if (( round % 2 )); then measure "$round" blocklist; measure "$round" hook; else measure "$round" hook; measure "$round" blocklist; fi
done
