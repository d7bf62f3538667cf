#!/usr/bin/env bash
# Fuzzes the HTTP parser, the WebSocket decoder, the API request bodies, a realtime session, the upload path (media) and the Pusher endpoints' parsers with form bodies (pusher), what a node reads from Redis (bus) and what webhooks parse (addresses, URLs, signatures: webhooks) and the content filter's regular expressions and blocklists (filter) and what link previews read from strangers (pages, oEmbed, links in text: linkpreview) with libFuzzer (+ AddressSanitizer).
# FUZZ_SECONDS per target (default 30; `make fuzz-long` runs 600). A crash is copied into
# Fuzz/regressions/<target>/, which every `make test` replays forever after, and fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-30}
echo "Building fuzzers (libFuzzer + ASan, separate scratch path)…"
for target in http websocket wire realtime media pusher bus webhooks filter linkpreview; do
    # One combined -sanitize flag: SwiftPM passes `--sanitize=fuzzer --sanitize=address` as two
    # flags and the frontend keeps only the last, silently dropping coverage or ASan.
    swift build --scratch-path .build-fuzz --sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING \
        --product "fuzz-$target" 2>&1 | grep -E "error:|Compiling fuzz|Build complete" | grep -v "^\[" || true
done
status=0
for target in http websocket wire realtime media pusher bus webhooks filter linkpreview; do
    work=".build-fuzz/corpus-$target"
    mkdir -p "$work" "Fuzz/artifacts" "Fuzz/regressions/$target"
    echo "Fuzzing $target for ${seconds}s…"
    # SWIFT_BACKTRACE=enable=no lets libFuzzer catch the trap and write the crash input.
    if ! SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=0 ".build-fuzz/debug/fuzz-$target" \
        "$work" "Fuzz/corpus/$target" -max_total_time="$seconds" -max_len=8192 -timeout=10 \
        -artifact_prefix="Fuzz/artifacts/$target-" -print_final_stats=1 > ".build-fuzz/fuzz-$target.log" 2>&1; then
        echo "fuzz-$target FOUND A FAILURE:"
        grep -E "ERROR|Fatal error|Precondition|SUMMARY|Test unit written" ".build-fuzz/fuzz-$target.log" | head -20
        for artifact in Fuzz/artifacts/"$target"-*; do
            [[ -f "$artifact" ]] && cp "$artifact" "Fuzz/regressions/$target/" && echo "kept $artifact as a regression input"
        done
        status=1
    else
        grep -E "DONE" ".build-fuzz/fuzz-$target.log" | tail -1 | sed "s/^/  /"
        if grep -q "no interesting inputs" ".build-fuzz/fuzz-$target.log"; then
            echo "fuzz-$target is not instrumented for coverage"
            status=1
        fi
    fi
done
exit $status
