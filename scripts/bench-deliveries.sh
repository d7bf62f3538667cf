#!/usr/bin/env bash
# Delivery counts in a public channel of 10,000 members (issue 15, part 2; decision 0017):
# every member marks one message read, 32 at a time over HTTP, while its author's device
# listens. Run twice in a row on fresh servers: with delivery counts flushed every second (the
# default) and, as the reference, with a flush interval longer than the run (the receipts'
# cost alone). Prints a Markdown table: receipts/s of each and their ratio, the
# delivery.updated events the author received, and how long after the last receipt the
# author's counts showed every member.
# MEMBERS (default 10000).
set -euo pipefail
cd "$(dirname "$0")/.."
members=${MEMBERS:-10000}
work=$(mktemp -d /tmp/parley-bench-deliveries.XXXXXX)
pid=""
cleanup() { [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
echo "Building release binaries…" >&2
swift build -c release --product parley-server >/dev/null
swift build -c release --product parley-bench >/dev/null
measure() {  # label interval
    local log="$work/$1.log"
    .build/release/parley-server --port 0 --data-dir "$work/$1" --signups-per-hour 1000000 --argon2-passes 1 --argon2-memory-mib 1 \
        --delivery-update-interval "$2" >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 1 400); do grep -q "^Health:" "$log" && break; sleep 0.05; done
    local port key
    port=$(grep -o "http://[^ ]*" "$log" | head -1 | sed 's/.*://')
    key=$(grep -m1 "app key:" "$log" | awk '{print $3}')
    echo "$1: $members members, flush every $2 s…" >&2
    .build/release/parley-bench channel-receipts --url "http://127.0.0.1:$port" --app-key "$key" --members "$members" --json >"$work/$1.json"
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
}
measure counts 1
measure reference 3600
python3 - "$work/counts.json" "$work/reference.json" <<'PY'
import json, sys
counts, reference = (json.loads(open(path).read().strip().splitlines()[-1]) for path in sys.argv[1:3])
print(f"| channel of {int(counts['members'])} | receipts/s | receipts took | delivery.updated to the author | author saw all {int(counts['members'])} |")
print("|---|---|---|---|---|")
print(f"| counts every 1 s | {counts['receipts_per_s']:.0f} | {counts['receipts_seconds']:.2f} s | {counts['author_events']:.0f} | "
      f"{counts['all_counted_after_last_receipt_ms']} ms after the last receipt |")
print(f"| reference: no flush during the run | {reference['receipts_per_s']:.0f} | {reference['receipts_seconds']:.2f} s | "
      f"{reference['author_events']:.0f} | never (by design) |")
print(f"| ratio (counts ÷ reference receipts/s) | {counts['receipts_per_s'] / reference['receipts_per_s']:.2f}x | | | |")
PY
