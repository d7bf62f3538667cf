#!/usr/bin/env bash
# Issue 16's benchmark, printed as Markdown for docs/benchmarks.md: durable sends/s and fan-out
# deliveries/s with p99 for
#   1. one node on SQLite (the reference: every ratio is against it, in the same run)
#   2. one node on PostgreSQL
#   3. three nodes on PostgreSQL + Redis (sends spread over the nodes; fan-out devices dealt
#      over the nodes, so most deliveries cross through Redis)
#   4. and 5. the same two on a database made with LOG_SHARDS shards (default 4; 1 skips
#      them): a writer per shard, no lock shared by every write (docs/decisions/0026, part 4)
# and the CPU each process spent per message (nodes, PostgreSQL's processes, Redis), from
# /proc/<pid>/stat before and after each run.
# PostgreSQL runs with fsync on (durable, like SQLite's synchronous=FULL) from scripts/services.sh.
# BENCH_SECONDS (default 10) per sends run; FANOUT_RATE (default 2000 messages/s) offered to
# FANOUT_USERS (default 1000) devices in groups of 10 for 5 s. BENCH_BINARIES=<dir> runs the
# parley-server and parley-bench in <dir> (another build's, for an A/B) instead of building.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${BENCH_SECONDS:-10}
rate=${FANOUT_RATE:-2000}
users=${FANOUT_USERS:-1000}
cores=$(nproc)
tick=$(getconf CLK_TCK)
work=$(mktemp -d /tmp/parley-bench-nodes.XXXXXX)
chmod 755 "$work"   # PostgreSQL runs as its own user and must reach its directory
node_pids=()
cleanup() {
    for pid in "${node_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    scripts/services.sh stop "$work/services" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

if [[ -n "${BENCH_BINARIES:-}" ]]; then
    # Another build's binaries (an A/B against the build before): nothing is built.
    server=$(cd "$BENCH_BINARIES" && pwd)/parley-server
    bench=$(cd "$BENCH_BINARIES" && pwd)/parley-bench
    [[ -x "$server" && -x "$bench" ]] || { echo "BENCH_BINARIES=$BENCH_BINARIES has no parley-server and parley-bench" >&2; exit 2; }
else
    echo "Building release binaries…" >&2
    swift build -c release --product parley-server >/dev/null
    swift build -c release --product parley-bench >/dev/null
    server=.build/release/parley-server
    bench=.build/release/parley-bench
fi

PARLEY_PG_FSYNC=on scripts/services.sh start "$work/services" >&2
# shellcheck disable=SC1091
. "$work/services/env"
redis_port=${PARLEY_TEST_REDIS_URL##*:}

# shellcheck source=scripts/cpu-ticks.sh
. "$(dirname "$0")/cpu-ticks.sh"
redis_pid() { cat "$work/services/redis.pid"; }

urls=()
key=""
start_nodes() {  # name count flags…
    local name=$1 count=$2 index log port
    shift 2
    urls=()
    node_pids=()
    for index in $(seq 1 "$count"); do
        log="$work/$name-$index.log"
        "$server" --port 0 --threads "$cores" --data-dir "$work/$name-data" --signups-per-hour 1000000 \
            --argon2-passes 1 --argon2-memory-mib 8 "$@" >"$log" 2>&1 &
        node_pids+=("$!")
        for _ in $(seq 1 400); do grep -q "^Health:" "$log" && break; sleep 0.05; done
        grep -q "^Health:" "$log" || { cat "$log" >&2; exit 1; }
        port=$(grep -o "http://[^ ]*" "$log" | head -1 | sed 's/.*://')
        urls+=("http://127.0.0.1:$port")
        if [[ $index -eq 1 ]]; then
            key=$(grep -E "app key:|App 'default' key:" "$log" | head -1 | sed -E "s/.*key: *([^ ]+).*/\1/")
        fi
    done
}
stop_nodes() {
    for pid in "${node_pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    node_pids=()
}
fresh_database() {
    PGOPTIONS="-c client_min_messages=warning" psql "$PARLEY_TEST_POSTGRES_URL" -qc "DROP DATABASE IF EXISTS $1 WITH (FORCE)" >/dev/null
    psql "$PARLEY_TEST_POSTGRES_URL" -qc "CREATE DATABASE $1" >/dev/null
    echo "${PARLEY_TEST_POSTGRES_URL%/*}/$1"
}
json() { python3 -c "import json,sys; rows=[json.loads(l) for l in sys.stdin if l.startswith('{')]; print(json.dumps(rows))"; }

measure() {  # label: runs sends then fan-out against ${urls[@]}, recording CPU per message
    local label=$1 count=${#urls[@]} senders per
    senders=$((100 / count * count))
    per=$((senders / count))
    echo "$label: sends, $senders senders over $count node(s), ${seconds}s…" >&2
    local before_nodes before_pg before_redis
    before_nodes=$(ticks "${node_pids[@]}"); before_pg=$(ticks $(pg_pids)); before_redis=$(ticks "$(redis_pid)")
    local outputs=()
    for url in "${urls[@]}"; do
        "$bench" sends --url "$url" --app-key "$key" --senders "$per" --duration "$seconds" --json >"$work/sends-$label-${url##*:}.json" 2>/dev/null &
        outputs+=("$!")
    done
    for pid in "${outputs[@]}"; do wait "$pid"; done
    local nodes_cpu pg_cpu redis_cpu
    nodes_cpu=$(( $(ticks "${node_pids[@]}") - before_nodes )); pg_cpu=$(( $(ticks $(pg_pids)) - before_pg ))
    redis_cpu=$(( $(ticks "$(redis_pid)") - before_redis ))
    cat "$work"/sends-"$label"-*.json | json >"$work/$label.sends"
    echo "$nodes_cpu $pg_cpu $redis_cpu" >"$work/$label.sends_cpu"

    echo "$label: fan-out, $users devices in groups of 10, $rate messages/s offered…" >&2
    before_nodes=$(ticks "${node_pids[@]}"); before_pg=$(ticks $(pg_pids)); before_redis=$(ticks "$(redis_pid)")
    local joined
    joined=$(IFS=,; echo "${urls[*]}")
    "$bench" fanout --url "$joined" --app-key "$key" --users "$users" --group-size 10 --rates "$rate" \
        --duration 5 --json 2>/dev/null | json >"$work/$label.fanout"
    nodes_cpu=$(( $(ticks "${node_pids[@]}") - before_nodes )); pg_cpu=$(( $(ticks $(pg_pids)) - before_pg ))
    redis_cpu=$(( $(ticks "$(redis_pid)") - before_redis ))
    echo "$nodes_cpu $pg_cpu $redis_cpu" >"$work/$label.fanout_cpu"
}

start_nodes sqlite 1
measure sqlite
stop_nodes

url=$(fresh_database parley_bench_one)
start_nodes pg1 1 --database-url "$url"
measure pg1
stop_nodes

url=$(fresh_database parley_bench_three)
start_nodes pg3 3 --database-url "$url" --redis-url "$PARLEY_TEST_REDIS_URL"
measure pg3
stop_nodes

shards=${LOG_SHARDS:-4}
if [[ $shards -gt 1 ]]; then
    url=$(fresh_database parley_bench_one_sharded)
    start_nodes pg1s 1 --database-url "$url" --log-shards "$shards"
    measure pg1s
    stop_nodes

    url=$(fresh_database parley_bench_three_sharded)
    start_nodes pg3s 3 --database-url "$url" --redis-url "$PARLEY_TEST_REDIS_URL" --log-shards "$shards"
    measure pg3s
    stop_nodes
fi

python3 - "$tick" "$work" "$shards" <<'EOF'
import json, os, sys
tick, work, shards = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
labels = {"sqlite": "1 node, SQLite (reference)", "pg1": "1 node, PostgreSQL", "pg3": "3 nodes, PostgreSQL + Redis"}
if shards > 1:
    labels["pg1s"] = f"1 node, PostgreSQL, {shards} shards"
    labels["pg3s"] = f"3 nodes, PostgreSQL + Redis, {shards} shards"
def read(name, part):
    with open(os.path.join(work, f"{name}.{part}")) as file:
        text = file.read()
    return json.loads(text) if part in ("sends", "fanout") else [int(x) for x in text.split()]
r = {name: {part: read(name, part) for part in ("sends", "sends_cpu", "fanout", "fanout_cpu")} for name in labels}
def sends(name):
    rows = r[name]["sends"]
    total = sum(float(x["sends"]) for x in rows)
    rate = sum(float(x["sends_per_s"]) for x in rows)
    p99 = max(float(x["p99_ms"]) for x in rows)
    errors = sum(int(x["errors"]) for x in rows)
    return total, rate, p99, errors
def fan(name):
    row = r[name]["fanout"][0]
    return float(row["deliveries_per_s"]), float(row["p99_ms"]), int(row["deliveries"]), int(row["expected_deliveries"]), int(row["sent"])
ref_sends = sends("sqlite")[1]
ref_fan = fan("sqlite")[0]
print("| setup | durable sends/s | vs reference | p99 ms | errors | CPU ms per send: nodes / PostgreSQL / Redis |")
print("|---|---|---|---|---|---|")
for name, label in labels.items():
    total, rate, p99, errors = sends(name)
    cpu = [c * 1000 / tick / max(total, 1) for c in r[name]["sends_cpu"]]
    print(f"| {label} | {rate:,.0f} | {rate / ref_sends:.2f}× | {p99:.1f} | {errors} | {cpu[0]:.3f} / {cpu[1]:.3f} / {cpu[2]:.3f} |")
print()
print("| setup | fan-out deliveries/s | vs reference | delivered / expected | p99 ms | CPU ms per message sent: nodes / PostgreSQL / Redis |")
print("|---|---|---|---|---|---|")
for name, label in labels.items():
    rate, p99, delivered, expected, sent = fan(name)
    cpu = [c * 1000 / tick / max(sent, 1) for c in r[name]["fanout_cpu"]]
    print(f"| {label} | {rate:,.0f} | {rate / ref_fan:.2f}× | {delivered:,} / {expected:,} | {p99:.1f} | {cpu[0]:.3f} / {cpu[1]:.3f} / {cpu[2]:.3f} |")
EOF
