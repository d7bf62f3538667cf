# Sourced by scripts/bench-peer.sh and scripts/bench-check.sh: one run of issue 29's peer
# workload against parley-server or redis-server, its JSON line appended to $work/results.jsonl
# with a "label". The caller sets: server, bench (binaries), work (a scratch directory),
# threads (parley-server's --threads), workload (an array of parley-bench fanout flags, with
# --json), and pid="" with a trap that kills "$pid".

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

run_parley() {  # label, extra fanout flags…
    local label=$1 port log key
    shift
    port=$(free_port)
    log="$work/$label.log"
    rm -rf "$work/$label"
    "$server" --port "$port" --threads "$threads" --data-dir "$work/$label" --signups-per-hour 1000000 \
        --argon2-passes 1 --argon2-memory-mib 1 --log-level warn >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 1 400); do grep -q "^Health:" "$log" && break; sleep 0.05; done
    key=$(grep -m1 "app key:" "$log" | grep -oE "pk_[A-Za-z0-9_-]+") || { echo "parley-server did not start:" >&2; cat "$log" >&2; exit 1; }
    "$bench" fanout --url "http://127.0.0.1:$port" --app-key "$key" "${workload[@]}" --server-pid "$pid" "$@" 2>>"$work/bench.err" \
        | sed "s/^{/{\"label\":\"$label\",/" >>"$work/results.jsonl"
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
}

run_redis() {  # label, extra fanout flags…
    local label=$1 port
    shift
    port=$(free_port)
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --logfile "$work/redis.log" &
    pid=$!
    for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
    "$bench" fanout --redis "127.0.0.1:$port" "${workload[@]}" --server-pid "$pid" "$@" 2>>"$work/bench.err" \
        | sed "s/^{/{\"label\":\"$label\",/" >>"$work/results.jsonl"
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
}
