#!/usr/bin/env bash
# Everything CI runs, over the one debug build that `make build` made:
#   1. Swift unit and integration tests (XCTest + Swift Testing), the Swift WebSocket client
#      included, against a Python `websockets` server
#   2. fuzz-input replay (every saved crash and seed stays a test)
#   3. interop and API tests with real third-party peers: curl, h11, Python websockets and
#      http.client (every tutorial flow over REST, authorization, bad input, kill -9)
#   4. schemathesis against docs/openapi.yaml (no 5xx, every response matches the schema)
#   5. Autobahn|Testsuite sections 1-10
#   6. a short libFuzzer run per parser (FUZZ_SECONDS, default 30)
#   7. every Swift snippet in README.md and docs/sdk.md, compiled against the Parley product
#   8. server CPU per message, as a ratio against redis-server in the same run, within 25 % of
#      the committed baseline (scripts/bench-check.sh)
# Steps 1b and 3b run the domain, server and interop tests again on PostgreSQL, which
# scripts/services.sh starts (with Redis) on 127.0.0.1 in a temporary directory; step 3c runs
# the REST flows and the realtime protocol again over TLS.
set -uo pipefail
cd "$(dirname "$0")/.."
results=()
failed=0
step() {
    local name=$1
    shift
    echo
    echo "== $name"
    local started=$SECONDS
    if "$@"; then
        results+=("ok    $name ($((SECONDS - started)) s)")
    else
        results+=("FAIL  $name ($((SECONDS - started)) s)")
        failed=$((failed + 1))
    fi
}

# PARLEY_PYTHON: the Swift client's interop tests run a Python `websockets` server.
swift_tests() {
    PARLEY_PYTHON="$PWD/.venv/bin/python" swift test --skip-build 2>&1 | grep -vE "^(􀟈|◇|↳)|started\.$"
    return "${PIPESTATUS[0]}"
}
replay_fuzz_inputs() {
    local status=0
    for target in http websocket wire realtime media pusher bus webhooks filter linkpreview; do
        local inputs=(Fuzz/corpus/$target/* Fuzz/regressions/$target/*)
        local existing=()
        for input in "${inputs[@]}"; do [[ -f "$input" ]] && existing+=("$input"); done
        ".build/debug/fuzz-$target" "${existing[@]}" || status=1
    done
    return $status
}
services_dir=$(mktemp -d /tmp/parley-services.XXXXXX)
trap 'scripts/services.sh stop "$services_dir"' EXIT
swift_tests_postgres() (
    # A subshell: the services' variables must not reach the steps after this one.
    # shellcheck disable=SC1091
    . "$services_dir/env" && swift test --skip-build --filter "ParleyChatTests|ParleyServerTests|ParleyStoreTests|ParleyRedisTests" 2>&1 \
        | grep -vE "^(􀟈|◇|↳)|started\.$"
    exit "${PIPESTATUS[0]}"
)
swift_tests_postgres_shards() (
    export PARLEY_TEST_LOG_SHARDS=4
    swift_tests_postgres
)
interop_tests() {
    PARLEY_SERVER_BINARY=.build/debug/parley-server .venv/bin/python -m pytest -q -p no:cacheprovider Tests/Interop
}

interop_tests_tls() {
    # The REST flows and the realtime protocol again, every server on HTTPS/WSS (Tests/Interop/parley.py).
    PARLEY_TEST_TLS=1 PARLEY_SERVER_BINARY=.build/debug/parley-server .venv/bin/python -m pytest -q -p no:cacheprovider \
        Tests/Interop/test_api_flows.py Tests/Interop/test_realtime.py
}
interop_tests_postgres() {
    # shellcheck disable=SC1091
    ( . "$services_dir/env" && interop_tests )
}

step "Python test tools (.venv)" scripts/venv.sh
step "Swift tests" swift_tests
step "PostgreSQL and Redis on 127.0.0.1 (scripts/services.sh)" scripts/services.sh start "$services_dir"
step "Swift domain, store, server and bus tests on PostgreSQL + Redis" swift_tests_postgres
step "the same on a PostgreSQL log of four shards (PARLEY_TEST_LOG_SHARDS)" swift_tests_postgres_shards
step "fuzz input replay" replay_fuzz_inputs
step "interop and API (curl, h11, websockets, http.client)" interop_tests
step "interop and API on PostgreSQL" interop_tests_postgres
step "API flows and realtime over TLS (HTTPS, WSS)" interop_tests_tls
step "schemathesis (docs/openapi.yaml)" .venv/bin/python scripts/schemathesis.py
step "Autobahn|Testsuite" scripts/autobahn.sh
step "libFuzzer (${FUZZ_SECONDS:-30} s each)" scripts/fuzz.sh
step "doc snippets compile (README.md, docs/sdk.md)" python3 scripts/snippets.py
step "server CPU per message against redis-server (scripts/bench-check.sh)" scripts/bench-check.sh

echo
echo "== Summary"
printf '%s\n' "${results[@]}"
passed=$(( ${#results[@]} - failed ))
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
