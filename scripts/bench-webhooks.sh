#!/usr/bin/env bash
# Issue 18's benchmarks, printed for docs/benchmarks.md:
#   1. the send path's cost of webhooks: durable sends/s and p99 by 100 senders in 10 groups with
#      no endpoint, one paused endpoint hearing message.created (what a send pays: the rows in
#      its transaction) and one delivering to a live receiver (the workers and the receiver on
#      the same cores too), in turn, ROUNDS (default 3) rounds of BENCH_SECONDS (default 10);
#   2. deliveries/s: a backlog (an endpoint paused while 20 senders send for BACKLOG_SECONDS,
#      default 5) delivered once resumed, timed through the server's own metrics, with one
#      endpoint (one lane: in order, one request at a time) and with 8 (8 lanes at once); the
#      reference is wrk posting the same body to the same receiver over 1 and 8 keep-alive
#      connections in the same run (what in-order delivery could reach at best).
# The receiver answers 204 to every POST (asyncio, HTTP/1.1 keep-alive). Needs release builds
# (swift build -c release) and wrk (scripts/install-deps.sh --bench).
set -uo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == "--help" || "${1:-}" == "-h" ]]; then sed -n 2,14p "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
for binary in parley-server parley-bench; do
    [[ -x .build/release/$binary ]] || { echo "missing .build/release/$binary: swift build -c release first" >&2; exit 1; }
done
command -v wrk >/dev/null || { echo "missing wrk: scripts/install-deps.sh --bench" >&2; exit 1; }
seconds=${BENCH_SECONDS:-10}
rounds=${ROUNDS:-3}
work=$(mktemp -d /tmp/parley-bench-webhooks.XXXXXX)

# The receiver: one process, answers 204 to each request as soon as its body is in.
cat >"$work/receiver.py" <<'PY'
import asyncio, sys
class Receiver(asyncio.Protocol):
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
            self.transport.write(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
async def main():
    server = await asyncio.get_running_loop().create_server(Receiver, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()
asyncio.run(main())
PY
python3 "$work/receiver.py" >"$work/receiver.port" &
receiver=$!
trap 'kill $receiver 2>/dev/null; wait $receiver 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 1 100); do [[ -s "$work/receiver.port" ]] && break; sleep 0.05; done
hook_url="http://127.0.0.1:$(cat "$work/receiver.port")/hooks"

start() {  # label, extra flags…: starts a server; sets pid, url, key, secret
    local label=$1; shift
    local data="$work/$label-$RANDOM"
    .build/release/parley-server --port 0 --threads "$(nproc)" --data-dir "$data" --signups-per-hour 1000000 \
        --argon2-passes 1 --argon2-memory-mib 1 --webhooks-allow-private --server-api-requests-per-second 100000 "$@" >"$data.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 200); do grep -q "^Health:" "$data.log" 2>/dev/null && break; sleep 0.05; done
    url=$(grep -o "http://[^ ]*" "$data.log" | head -1)
    key=$(grep "app key:" "$data.log" | awk '{print $3}')
    secret=$(cat "$data/first-app-secret")   # not printed to a log: the first start writes it here
}
server_api() {  # method, path, body
    curl -s -X "$1" "$url$2" -H "Authorization: Bearer $secret" -H 'Content-Type: application/json' ${3:+-d "$3"}
}
endpoint() {  # registers one endpoint hearing message.created; prints its id
    server_api POST /v1/server/webhooks "{\"url\":\"$hook_url\",\"events\":[\"message.created\"]}" \
        | python3 -c "import json,sys; print(json.load(sys.stdin)['id'])"
}
metric() { curl -s "$url/metrics" | awk -v name="$1" '$1 == name {print $2}'; }

echo "Send path: no endpoint, one paused, one delivering; $rounds rounds of $seconds s:" >&2
echo "| round | endpoint | sends/s | p50 ms | p99 ms | errors | delivered while sending |"
echo "|---|---|---|---|---|---|---|"
measure() {  # round, label
    local round=$1 label=$2
    start "$label"
    if [[ "$label" != "none" ]]; then
        local id; id=$(endpoint)
        [[ "$label" == "paused" ]] && server_api PATCH "/v1/server/webhooks/$id" '{"paused":true}' >/dev/null
    fi
    result=$(.build/release/parley-bench sends --url "$url" --app-key "$key" --senders 100 --receivers 2 --duration "$seconds" --json 2>/dev/null)
    delivered=$(curl -s "$url/metrics" | awk '$1 == "parley_webhook_deliveries_total{result=\"delivered\"}" {print $2}')
    kill "$pid"; wait "$pid" 2>/dev/null
    python3 -c "import json,sys; r=json.loads(sys.argv[3]); print(f'| {sys.argv[1]} | {sys.argv[2]} | {r[\"sends_per_s\"]} | {r[\"p50_ms\"]} | {r[\"p99_ms\"]} | {r[\"errors\"]} | {sys.argv[4]} |')" \
        "$round" "$label" "$result" "${delivered:-0}"
}
for round in $(seq 1 "$rounds"); do
    if (( round % 2 )); then
        measure "$round" none; measure "$round" paused; measure "$round" delivering
    else
        measure "$round" delivering; measure "$round" paused; measure "$round" none
    fi
done

drain() {  # endpoints: a paused backlog, then resumed and timed
    local count=$1
    start "drain$count"
    local ids=()
    for _ in $(seq 1 "$count"); do ids+=("$(endpoint)"); done
    for id in "${ids[@]}"; do server_api PATCH "/v1/server/webhooks/$id" '{"paused":true}' >/dev/null; done
    .build/release/parley-bench sends --url "$url" --app-key "$key" --senders 20 --conversations 2 --receivers 2 \
        --duration "${BACKLOG_SECONDS:-5}" --json >/dev/null 2>&1
    local waiting; waiting=$(metric parley_webhook_deliveries_waiting)
    local begin; begin=$(date +%s.%N)
    for id in "${ids[@]}"; do server_api PATCH "/v1/server/webhooks/$id" '{"paused":false}' >/dev/null; done
    while (( $(metric parley_webhook_deliveries_waiting) > 0 )); do sleep 0.05; done
    local end; end=$(date +%s.%N)
    kill "$pid"; wait "$pid" 2>/dev/null
    python3 -c "import sys; w, b, e = int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]); print(f'| {sys.argv[1]} | {w} | {e - b:.2f} | {w / (e - b):.0f} |')" \
        "$count" "$waiting" "$begin" "$end"
}
echo
echo "Deliveries/s: a paused backlog resumed, against wrk posting the same size to the same receiver:" >&2
echo "| endpoints (lanes) | deliveries | seconds | deliveries/s |"
echo "|---|---|---|---|"
drain 1
drain 8
body=$(python3 -c "print('x' * 700)")
cat >"$work/post.lua" <<LUA
wrk.method = "POST"
wrk.body = "$body"
wrk.headers["Content-Type"] = "application/json"
LUA
echo
echo "| reference: wrk, keep-alive connections | requests/s |"
echo "|---|---|"
for connections in 1 8; do
    rate=$(wrk -t1 -c"$connections" -d5s -s "$work/post.lua" "$hook_url" 2>/dev/null | awk '/Requests\/sec/ {print $2}')
    echo "| $connections | $rate |"
done
