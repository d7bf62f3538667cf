#!/usr/bin/env bash
# Runs every networking benchmark with its reference in the same run, on this machine, and
# prints a Markdown table for docs/benchmarks.md. Needs: `make bench` installs wrk, nginx and
# redis-server. Servers run on 127.0.0.1 only and are stopped at the end.
#   BENCH_SECONDS (default 10) per wrk run; BENCH_CONNECTIONS (default 10000) idle sockets.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${BENCH_SECONDS:-10}
idle=${BENCH_CONNECTIONS:-10000}
cores=$(nproc)
work=$(mktemp -d /tmp/parley-bench.XXXXXX)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    [[ -f "$work/nginx.pid" ]] && kill -QUIT "$(cat "$work/nginx.pid")" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

echo "Building release binaries…" >&2
swift build -c release --product parley-server >/dev/null
swift build -c release --product parley-bench >/dev/null
server=.build/release/parley-server
bench=.build/release/parley-bench

start_parley() {  # prints the port
    local log="$work/parley-$1.log"
    "$server" --port 0 --threads "$cores" --data-dir "$work/data" --enable-echo >"$log" 2>&1 &
    pids+=($!)
    echo $! > "$work/parley.pid"
    for _ in $(seq 1 100); do grep -q "listening on" "$log" && break; sleep 0.05; done
    grep -o "http://[^ ]*" "$log" | head -1 | sed 's/.*://'
}

wrk_rps() {  # url -> requests/s
    wrk -t"$cores" -c50 -d"${seconds}s" --latency "$1" 2>&1 | awk '/Requests\/sec/ {print $2}'
}

# 1. HTTP keep-alive: GET /healthz vs nginx serving a small static file, one worker per core.
port=$(start_parley http)
mkdir -p "$work/html" "$work/tmp"
printf '{"status":"ok"}' > "$work/html/healthz"
cat > "$work/nginx.conf" <<NGINX
worker_processes $cores;
daemon on;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $work/tmp/body; proxy_temp_path $work/tmp/proxy; fastcgi_temp_path $work/tmp/fcgi;
  uwsgi_temp_path $work/tmp/uwsgi; scgi_temp_path $work/tmp/scgi;
  keepalive_requests 10000000;
  server { listen 127.0.0.1:0; root $work/html; location / { default_type application/json; } }
}
NGINX
# nginx cannot listen on port 0 and report it: pick a free port through Python.
nginx_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sed -i "s/listen 127.0.0.1:0;/listen 127.0.0.1:$nginx_port;/" "$work/nginx.conf"
nginx -c "$work/nginx.conf"
sleep 0.3
echo "HTTP: wrk -t$cores -c50 -d${seconds}s (parley, nginx, parley, nginx)…" >&2
p1=$(wrk_rps "http://127.0.0.1:$port/healthz"); n1=$(wrk_rps "http://127.0.0.1:$nginx_port/healthz")
p2=$(wrk_rps "http://127.0.0.1:$port/healthz"); n2=$(wrk_rps "http://127.0.0.1:$nginx_port/healthz")
kill -QUIT "$(cat "$work/nginx.pid")"; rm -f "$work/nginx.pid"

# 2. Broadcast: 1 publisher, 1,000 subscribers, 64-byte messages vs redis-server pub/sub.
redis_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
    --logfile "$work/redis.log" --maxclients 20000 &
pids+=($!)
sleep 0.5
echo "Broadcast: 1,000 subscribers, parley and redis alternately, 3 rounds…" >&2
b_parley=(); b_redis=()
for _ in 1 2 3; do
    b_parley+=($("$bench" broadcast --url "ws://127.0.0.1:$port/echo/broadcast" --clients 1000 --messages 2000 --json 2>/dev/null \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["deliveries_per_s"])'))
    b_redis+=($("$bench" broadcast --redis "127.0.0.1:$redis_port" --clients 1000 --messages 2000 --json 2>/dev/null \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["deliveries_per_s"])'))
done

# 3. Echo latency on one connection.
echo "Echo: 20,000 round trips of 100 bytes…" >&2
echo_result=$("$bench" echo --url "ws://127.0.0.1:$port/echo/ws" --count 20000 --size 100)

# 4. Memory per idle WebSocket, on a fresh server.
kill "$(cat "$work/parley.pid")"
sleep 0.3
port=$(start_parley idle)
echo "Idle: $idle WebSockets…" >&2
idle_result=$("$bench" idle --url "ws://127.0.0.1:$port/echo/ws" --connections "$idle" --server-pid "$(cat "$work/parley.pid")" 2>/dev/null)

python3 - "$p1" "$p2" "$n1" "$n2" "${b_parley[*]}" "${b_redis[*]}" "$echo_result" "$idle_result" "$cores" "$seconds" <<'PY'
import statistics, sys, subprocess, datetime
p1, p2, n1, n2 = map(float, sys.argv[1:5])
bp = [float(x) for x in sys.argv[5].split()]
br = [float(x) for x in sys.argv[6].split()]
echo = dict(kv.split("=") for kv in sys.argv[7].split())
idle = dict(kv.split("=") for kv in sys.argv[8].split())
cores, seconds = sys.argv[9], sys.argv[10]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"Measured {datetime.date.today()} on {cores} cores ({cpu}), {subprocess.getoutput('uname -r')}, release build.\n")
print("| benchmark | Parley | reference | ratio | goal |")
print("|---|---|---|---|---|")
hp, hn = (p1 + p2) / 2, (n1 + n2) / 2
print(f"| HTTP keep-alive GET /healthz, wrk -t{cores} -c50 -d{seconds}s (req/s, mean of 2) | {hp:,.0f} | nginx static file: {hn:,.0f} | {hp/hn:.2f}x | ≥ 1.0x |")
mp, mr = statistics.median(bp), statistics.median(br)
print(f"| WebSocket broadcast, 1 publisher → 1,000 subscribers, 64 B (deliveries/s, median of 3) | {mp:,.0f} | redis pub/sub: {mr:,.0f} | {mp/mr:.2f}x | ≥ 0.8x |")
print(f"| Idle WebSocket memory, {int(idle['connections']):,} open (RSS growth per connection) | {float(idle['bytes_per_connection'])/1024:.1f} KiB | – | – | < 8 KiB |")
print(f"| Echo round trip, 1 connection, 100 B (p50 / p99) | {echo['p50_us']} µs / {echo['p99_us']} µs ({echo['round_trips_per_s']} round trips/s) | – | – | – |")
print(f"\nRaw: HTTP parley {p1:,.0f} / {p2:,.0f}, nginx {n1:,.0f} / {n2:,.0f}; broadcast parley {bp}, redis {br}; "
      f"idle opened in {idle['open_seconds']} s, RSS {idle['rss_before_kib']} → {idle['rss_after_kib']} KiB.")
PY
