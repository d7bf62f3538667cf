# Sourced by scripts/bench-peer.sh and scripts/bench-check.sh: one run of issue 29's peer
# workload against parley-server or redis-server, its JSON line appended to $work/results.jsonl
# with a "label". The caller sets: server, bench (binaries), work (a scratch directory),
# threads (parley-server's --threads), workload (an array of parley-bench fanout flags, with
# --json), and pid="" with a trap that kills "$pid". PARLEY_FLAGS adds flags to parley-server.

# Release binaries for a run against TREE (built first when TREE is this checkout): sets
# server (TREE's parley-server), bench (this checkout's parley-bench), work (a scratch
# directory, removed on exit) and pid="" with the trap that kills "$pid".
peer_setup() {  # tree, scratch directory prefix
    local tree=$1
    if [[ "$tree" == "$(pwd)" ]]; then
        echo "Building release binaries…" >&2
        swift build -c release --product parley-server >/dev/null
        swift build -c release --product parley-bench >/dev/null
    fi
    server="$tree/.build/release/parley-server"
    bench="$(pwd)/.build/release/parley-bench"
    [[ -x "$server" && -x "$bench" ]] || { echo "missing release builds: swift build -c release in $tree and here" >&2; exit 1; }
    work=$(mktemp -d "/tmp/$2.XXXXXX")
    pid=""
    trap 'if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null; fi; rm -rf "$work"' EXIT
}

# The memory of a server just started, before any client (RSS and private MiB from
# smaps_rollup), appended to $work/idle.jsonl.
idle_memory() {  # label, pid
    awk -v label="$1" '/^Rss:/ {rss=$2} /^Private_(Clean|Dirty):/ {private+=$2}
        END {printf "{\"label\":\"%s\",\"rss_mib\":%.1f,\"private_mib\":%.1f}\n", label, rss/1024, private/1024}' \
        "/proc/$2/smaps_rollup" >>"$work/idle.jsonl"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

run_parley() {  # label, extra fanout flags…
    local label=$1 port log key
    shift
    port=$(free_port)
    log="$work/$label.log"
    rm -rf "$work/$label"
    "$server" --port "$port" --threads "$threads" --data-dir "$work/$label" --signups-per-hour 1000000 \
        --argon2-passes 1 --argon2-memory-mib 1 --log-level warn ${PARLEY_FLAGS:-} >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 1 400); do grep -q "^Health:" "$log" && break; sleep 0.05; done
    key=$(grep -m1 "app key:" "$log" | grep -oE "pk_[A-Za-z0-9_-]+") || { echo "parley-server did not start:" >&2; cat "$log" >&2; exit 1; }
    idle_memory "$label" "$pid"
    "$bench" fanout --url "http://127.0.0.1:$port" --app-key "$key" "${workload[@]}" --server-pid "$pid" "$@" 2>>"$work/bench.err" \
        | sed "s/^{/{\"label\":\"$label\",/" >>"$work/results.jsonl"
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
}

# With REDIS_DURABLE=1, the durable reference: redis-server appends every write to its AOF and
# fsyncs it before any reply or published message leaves (`--appendfsync always`), and the load
# generator stores each message (XADD) and receipt (SET) before publishing it.
run_redis() {  # label, extra fanout flags…
    local label=$1 port durable=()
    shift
    port=$(free_port)
    if [[ "${REDIS_DURABLE:-0}" == 1 ]]; then
        rm -rf "$work/$label-aof"; mkdir -p "$work/$label-aof"
        durable=(--appendonly yes --appendfsync always --dir "$work/$label-aof")
        set -- "$@" --redis-durable 1
    else
        durable=(--appendonly no)
    fi
    redis-server --port "$port" --bind 127.0.0.1 --save '' "${durable[@]}" --daemonize no --logfile "$work/redis.log" &
    pid=$!
    for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
    idle_memory "$label" "$pid"
    "$bench" fanout --redis "127.0.0.1:$port" "${workload[@]}" --server-pid "$pid" "$@" 2>>"$work/bench.err" \
        | sed "s/^{/{\"label\":\"$label\",/" >>"$work/results.jsonl"
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
}
