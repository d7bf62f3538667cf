#!/usr/bin/env bash
# One debug build of every product and test target; the test suites reuse it.
# Warnings fail the build (STYLE.md: no warnings), including -require-explicit-sendable.
set -uo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "Building (debug, with tests)…"
swift build --build-tests -Xswiftc -Xfrontend -Xswiftc -require-explicit-sendable >"$log" 2>&1
status=$?
# Our own diagnostics only: SwiftPM's generated test runner has warnings we cannot fix.
diagnostics=$(grep -E "^/.*: (error|warning):" "$log" | grep -v "/.build/" | sort -u)
[[ -n "$diagnostics" ]] && echo "$diagnostics"
if [[ $status -ne 0 ]]; then
    tail -20 "$log"
    echo "build failed"
    exit 1
fi
if grep -q "warning:" <<<"$diagnostics"; then
    echo "build has warnings: the project builds warning-free"
    exit 1
fi
grep -E "Build complete" "$log" || true
