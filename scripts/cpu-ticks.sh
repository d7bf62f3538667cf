# Sourced by the benchmark scripts: CPU time of processes, from /proc, in clock ticks
# (getconf CLK_TCK a second).
#   ticks PID…   user + system ticks of the given processes (gone ones count 0)
#   pg_pids      the PostgreSQL server of $PARLEY_PG_DATA and its children (scripts/services.sh's env)

ticks() {
    local total=0 pid
    for pid in "$@"; do
        [[ -r /proc/$pid/stat ]] && total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
    done
    echo "$total"
}

pg_pids() {
    local master
    master=$(head -1 "$PARLEY_PG_DATA/postmaster.pid")
    echo "$master" $(pgrep -P "$master" || true)
}
