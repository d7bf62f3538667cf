#!/usr/bin/env bash
# The realtime benchmarks of issue 4, each with its reference in the same run, printed as a
# Markdown table for docs/benchmarks.md:
#   1. fan-out: 1,000 devices in conversations of 10, each user sending at a steady share of
#      the offered rate over the realtime WebSocket (durable: every message is committed before
#      it is delivered); accepted messages/s, deliveries/s, send-to-receive p50/p99 per rate;
#      then redis-server pub/sub doing the same fan-out with no persistence;
#   2. many idle authenticated sockets from several loopback source addresses (reconnecting
#      from four others: see parley-bench connections --help): the server's
#      RSS per socket, and the time to reconnect and re-authenticate them all after a restart.
# BENCH_SECONDS (default 5) per rate; IDLE_CONNECTIONS (default 19800: this machine's hard
# limit on open files per process is 20,000, and the server needs a few for itself).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${BENCH_SECONDS:-5}
idle=${IDLE_CONNECTIONS:-19800}
rates=${FANOUT_RATES:-1000,2000,3000,4000,5000,6000,8000}
redis_rates=${REDIS_RATES:-1000,2000,3000,4000,5000,6000,8000,10000,15000,20000}
cores=$(nproc)
work=$(mktemp -d /tmp/parley-bench-realtime.XXXXXX)
pid=""
redis_pid=""
cleanup() {
    [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true
    [[ -n "$redis_pid" ]] && kill "$redis_pid" 2>/dev/null || true
    jobs -p | xargs -r kill 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

echo "Building release binaries…" >&2
swift build -c release --product parley-server >/dev/null
swift build -c release --product parley-bench >/dev/null
server=.build/release/parley-server
bench=.build/release/parley-bench
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start() {  # data dir name, port, extra flags… ; sets pid, key
    local data="$work/$1" port=$2
    local log="$work/$1.$(date +%s%N).log"
    shift 2
    # Cheap password hashing: setup signs in thousands of users; no password is hashed while measuring.
    "$server" --port "$port" --threads "$cores" --data-dir "$data" --signups-per-hour 1000000 \
        --argon2-passes 1 --argon2-memory-mib 1 "$@" >>"$log" 2>&1 &
    pid=$!
    for _ in $(seq 1 400); do grep -q "^Health:" "$log" && break; sleep 0.05; done
    key=$(grep -m1 -E "app key:|App 'default' key:" "$log" | grep -oE "pk_[A-Za-z0-9_-]+" | head -1)
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }
rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

port=$(free_port)
start fanout "$port"
echo "Fan-out through Parley: 1,000 devices, conversations of 10, ${seconds}s per rate ($rates/s)…" >&2
"$bench" fanout --url "http://127.0.0.1:$port" --app-key "$key" --users 1000 --group-size 10 --rates "$rates" \
    --duration "$seconds" --json > "$work/fanout-parley.jsonl" 2>/dev/null
stop

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
    --logfile "$work/redis.log" --maxclients 20000 &
redis_pid=$!
for _ in $(seq 1 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.05; done
echo "Fan-out through redis-server pub/sub (nothing stored), same shape ($redis_rates/s)…" >&2
"$bench" fanout --redis "127.0.0.1:$redis_port" --users 1000 --group-size 10 --rates "$redis_rates" \
    --duration "$seconds" --json > "$work/fanout-redis.jsonl" 2>/dev/null
kill "$redis_pid"; wait "$redis_pid" 2>/dev/null || true; redis_pid=""

echo "Idle: $idle authenticated sockets from 4 loopback addresses, two client processes…" >&2
port=$(free_port)
start idle "$port"
before=$(rss_kib "$pid")
half=$((idle / 2))
"$bench" connections --url "http://127.0.0.1:$port" --app-key "$key" --connections "$half" --users 200 \
    --sources 127.0.0.2,127.0.0.3 --reconnect-sources 127.0.0.6,127.0.0.7 --offset 2 --restart-wait 1 --json > "$work/idle-a.jsonl" 2>"$work/idle-a.err" &
a=$!
"$bench" connections --url "http://127.0.0.1:$port" --app-key "$key" --connections "$((idle - half))" --users 200 \
    --sources 127.0.0.4,127.0.0.5 --reconnect-sources 127.0.0.8,127.0.0.9 --offset 1 --restart-wait 1 --json > "$work/idle-b.jsonl" 2>"$work/idle-b.err" &
b=$!
for _ in $(seq 1 1200); do
    [[ $(cat "$work"/idle-*.jsonl 2>/dev/null | grep -c connections-open) -ge 2 ]] && break
    sleep 0.25
done
sleep 2
after=$(rss_kib "$pid")
open_connections=$(ls /proc/"$pid"/fd | wc -l)
echo "Restarting the server with $open_connections descriptors open…" >&2
t0=$(date +%s.%N)
stop
t1=$(date +%s.%N)
start idle "$port"
t2=$(date +%s.%N)
echo "  graceful stop took $(python3 -c "print(round($t1-$t0,2))") s, start $(python3 -c "print(round($t2-$t1,2))") s" >&2
wait "$a" "$b" || true
stop

python3 - "$work" "$before" "$after" "$idle" "$cores" "$seconds" <<'PY'
import datetime, json, subprocess, sys
work, before, after, idle, cores, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
def lines(name):
    with open(f"{work}/{name}") as f:
        return [json.loads(l) for l in f if l.strip().startswith("{")]
parley, redis = lines("fanout-parley.jsonl"), lines("fanout-redis.jsonl")
idle_rows = lines("idle-a.jsonl") + lines("idle-b.jsonl")
opened = [r for r in idle_rows if r["benchmark"] == "connections-open"]
again = [r for r in idle_rows if r["benchmark"] == "connections-reconnect"]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"Measured {datetime.date.today()} on {cores} cores ({cpu}), {subprocess.getoutput('uname -r')}, release build, "
      f"server and load generator on the same cores; {seconds} s per rate.\n")
print("| offered msgs/s | Parley accepted/s | Parley deliveries/s | Parley p50 / p99 ms | Redis deliveries/s | Redis p50 / p99 ms |")
print("|---|---|---|---|---|---|")
by_rate = {int(r["offered_per_s"]): r for r in redis}
for r in parley:
    rate = int(r["offered_per_s"])
    x = by_rate.pop(rate, None)
    redis_cells = f"{float(x['deliveries_per_s']):,.0f} | {x['p50_ms']} / {x['p99_ms']}" if x else "– | –"
    print(f"| {rate:,} | {float(r['accepted_per_s']):,.0f} | {float(r['deliveries_per_s']):,.0f} | {r['p50_ms']} / {r['p99_ms']} | {redis_cells} |")
for rate, x in sorted(by_rate.items()):
    print(f"| {rate:,} | – | – | – | {float(x['deliveries_per_s']):,.0f} | {x['p50_ms']} / {x['p99_ms']} |")
def best(rows):
    ok = [float(r["deliveries_per_s"]) for r in rows if float(r["p99_ms"]) < 20 and int(r["deliveries"]) == int(r["expected_deliveries"])]
    return max(ok) if ok else 0
bp, br = best(parley), best(redis)
peak = max(float(r["deliveries_per_s"]) for r in parley)
print(f"\nMost deliveries/s with p99 under 20 ms and nothing missing: Parley {bp:,.0f}, Redis {br:,.0f} "
      f"(ratio {bp / br if br else 0:.2f}x; goal 100,000). Parley's peak deliveries/s at any latency: {peak:,.0f}.")
per = (after - before) * 1024 / max(1, sum(int(r["connections"]) for r in opened))
total_open = sum(int(r["connections"]) for r in opened)
open_s = max(float(r["open_seconds"]) for r in opened) if opened else 0
reconnected = sum(int(r["connections"]) for r in again)
reconnect_s = max(float(r["reconnect_seconds"]) for r in again) if again else 0
back_s = max(float(r["after_first_seconds"]) for r in again) if again else 0
print(f"\n| idle authenticated sockets | server RSS before / after | RSS per socket | time to open all | reconnected after restart | from the restart's first close to all back | from the first one back to all back |")
print("|---|---|---|---|---|---|---|")
print(f"| {total_open:,} (goal 20,000) | {before/1024:.0f} MiB / {after/1024:.0f} MiB | {per/1024:.1f} KiB | {open_s:.1f} s | {reconnected:,} | {reconnect_s:.1f} s | {back_s:.1f} s |")
PY
