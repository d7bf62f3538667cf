#!/usr/bin/env bash
# One channel, 1,000 subscribers (issue 15): the Pusher protocol's fan-out (the backend triggers
# each event over the signed HTTP API; 1,000 Pusher sockets receive it) against the native
# protocol's (one member sends into a public channel of 1,000 members' devices), in the same
# server, one after the other, at the same offered rates. Both store each message or event
# before delivering it. Prints a Markdown table for docs/benchmarks.md.
# BENCH_SECONDS (default 5) per rate; CHANNEL_RATES (default 20,50,100,200,300) per second;
# SUBSCRIBERS (default 1000).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${BENCH_SECONDS:-5}
rates=${CHANNEL_RATES:-20,50,100,200,300}
subscribers=${SUBSCRIBERS:-1000}
work=$(mktemp -d /tmp/parley-bench-channels.XXXXXX)
pid=""
cleanup() {
    [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

echo "Building release binaries…" >&2
swift build -c release --product parley-server >/dev/null
swift build -c release --product parley-bench >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
log="$work/server.log"
# One native sender carries the whole rate: lift the per-device command limit (50/s by
# default), which is not what this measures.
.build/release/parley-server --port "$port" --data-dir "$work/data" --signups-per-hour 1000000 \
    --argon2-passes 1 --argon2-memory-mib 1 --commands-per-second 100000 >"$log" 2>&1 &
pid=$!
for _ in $(seq 1 400); do grep -q "^Health:" "$log" && break; sleep 0.05; done
key=$(grep -m1 "app key:" "$log" | awk '{print $3}')
secret=$(cat "$work/data/first-app-secret")   # not printed to a log: the first start writes it here
app_id=$(grep -m1 "pusher app id:" "$log" | awk '{print $4}')

for protocol in native pusher; do
    echo "Channel fan-out over the $protocol protocol: $subscribers subscribers, ${seconds}s per rate ($rates/s)…" >&2
    .build/release/parley-bench channel-fanout --url "http://127.0.0.1:$port" --app-key "$key" --app-secret "$secret" \
        --pusher-app-id "$app_id" --protocol "$protocol" --subscribers "$subscribers" --rates "$rates" --duration "$seconds" \
        --json > "$work/$protocol.jsonl"
done

python3 - "$work/native.jsonl" "$work/pusher.jsonl" "$subscribers" <<'PY'
import json, sys
native = {r["offered_per_s"]: r for r in map(json.loads, open(sys.argv[1]))}
pusher = {r["offered_per_s"]: r for r in map(json.loads, open(sys.argv[2]))}
print(f"| messages/s into one channel of {sys.argv[3]} | native deliveries/s | native p50 / p99 ms | Pusher deliveries/s | Pusher p50 / p99 ms | Pusher ÷ native deliveries |")
print("|---|---|---|---|---|---|")
for rate in sorted(native):
    n, p = native[rate], pusher.get(rate)
    if p is None:
        continue
    ratio = p["deliveries_per_s"] / n["deliveries_per_s"] if n["deliveries_per_s"] else float("nan")
    print(f"| {int(rate)} | {n['deliveries_per_s']:.0f} ({n['deliveries']:.0f}/{n['expected_deliveries']:.0f}) | {n['p50_ms']:.2f} / {n['p99_ms']:.2f} "
          f"| {p['deliveries_per_s']:.0f} ({p['deliveries']:.0f}/{p['expected_deliveries']:.0f}) | {p['p50_ms']:.2f} / {p['p99_ms']:.2f} | {ratio:.2f}x |")
PY
