#!/usr/bin/env bash
# Throwaway PostgreSQL and Redis on 127.0.0.1 for tests and benchmarks, in a directory of their own.
#   scripts/services.sh start <dir>   initdb (as the unprivileged `postgres` user when run as root),
#                                     start both, and write <dir>/env with the variables tests read
#   scripts/services.sh stop <dir>    stop both and remove <dir>
# Ports: PARLEY_PG_PORT and PARLEY_REDIS_PORT, else free ones the kernel picks.
set -euo pipefail

usage() { echo "usage: scripts/services.sh start|stop <dir>" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
action=$1
dir=$2
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
pg_port=${PARLEY_PG_PORT:-$(free_port)}
redis_port=${PARLEY_REDIS_PORT:-$(free_port)}
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[[ -n "$pg_bin" ]] || { echo "PostgreSQL is not installed: run scripts/install-deps.sh --test" >&2; exit 1; }

as_pg() {
    if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$action" in
start)
    mkdir -p "$dir/pg"
    chmod 755 "$dir"
    [[ $(id -u) -eq 0 ]] && chown postgres:postgres "$dir/pg"
    if [[ ! -f "$dir/pg/data/PG_VERSION" ]]; then
        as_pg "$pg_bin/initdb" -D "$dir/pg/data" -A trust -U postgres --no-sync -E UTF8 --locale=C.UTF-8 >"$dir/pg/initdb.log" 2>&1 \
            || { cat "$dir/pg/initdb.log" >&2; exit 1; }
    fi
    # fsync off: test data is thrown away; the benchmarks say which setting they measured.
    # max_connections: swift-testing runs every domain test at once, each harness with a fresh
    # database and three connections, beside servers with pools of their own (400 ran out at
    # 228 tests: "too many clients already").
    as_pg "$pg_bin/pg_ctl" -D "$dir/pg/data" -l "$dir/pg/server.log" -w start \
        -o "-c listen_addresses=127.0.0.1 -p $pg_port -k $dir/pg -c fsync=${PARLEY_PG_FSYNC:-off} -c max_connections=1000 -c shared_buffers=256MB" >/dev/null \
        || { cat "$dir/pg/server.log" >&2; exit 1; }
    redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" --daemonize yes \
        --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
    for _ in $(seq 1 100); do
        redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
        sleep 0.05
    done
    redis-cli -p "$redis_port" ping >/dev/null || { cat "$dir/redis.log" >&2; exit 1; }
    cat >"$dir/env" <<ENV
export PARLEY_TEST_POSTGRES="host=127.0.0.1 port=$pg_port user=postgres"
export PARLEY_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$pg_port/postgres"
export PARLEY_TEST_REDIS_URL="redis://127.0.0.1:$redis_port"
export PARLEY_PG_BIN="$pg_bin"
export PARLEY_PG_DATA="$dir/pg/data"
ENV
    echo "PostgreSQL on 127.0.0.1:$pg_port, Redis on 127.0.0.1:$redis_port ($dir/env)"
    ;;
stop)
    [[ -d "$dir/pg/data" ]] && as_pg "$pg_bin/pg_ctl" -D "$dir/pg/data" -m immediate stop >/dev/null 2>&1 || true
    [[ -f "$dir/redis.pid" ]] && kill "$(cat "$dir/redis.pid")" 2>/dev/null || true
    rm -rf "$dir"
    ;;
*) usage ;;
esac
