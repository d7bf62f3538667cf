# Parley: `make run` to start a server, `make test` for everything CI runs.
SHELL := /bin/bash
.DEFAULT_GOAL := help

SWIFT_BUILD_FLAGS ?=
PORT ?= 8080
HOST ?= 127.0.0.1
DATA ?= ./data

.PHONY: help deps test-deps run client build release test tsan fuzz-long bench clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 14

deps: ## Install missing system packages (quiet when none are missing)
	@scripts/install-deps.sh

release: deps ## Build parley-server and parley-bench in release mode
	@echo "Building parley-server and parley-bench (release)…"
	@swift build -c release -q --product parley-server $(SWIFT_BUILD_FLAGS)
	@swift build -c release -q --product parley-bench $(SWIFT_BUILD_FLAGS)

run: release ## Build (release) and start the server on $(HOST):$(PORT) with data in $(DATA)
	@echo "The terminal client: 'make client' builds it (then .build/release/parley --help)."
	@.build/release/parley-server --host $(HOST) --port $(PORT) --data-dir $(DATA)

client: deps ## Build the terminal client `parley` in release mode and say where it is
	@echo "Building parley, the terminal client (release)…"
	@swift build -c release -q --product parley $(SWIFT_BUILD_FLAGS)
	@echo "Built: $$(swift build -c release --show-bin-path)/parley   (try: $$(swift build -c release --show-bin-path)/parley --help)"

build: deps ## Debug build of everything, tests included (done once; every suite reuses it)
	@scripts/build.sh

test-deps: ## Install what the tests use as well (Python venv, tmux, Chromium and its driver)
	@scripts/install-deps.sh --test

test: test-deps build ## Everything CI runs: unit, integration, conformance and fuzz smoke tests
	@scripts/test.sh

tsan: deps ## The Swift tests under ThreadSanitizer (own scratch path; not in CI)
	@swift test --scratch-path .build-tsan --sanitize=thread

fuzz-long: build ## Run each fuzzer for 10 minutes (FUZZ_SECONDS to change)
	@FUZZ_SECONDS=$${FUZZ_SECONDS:-600} scripts/fuzz.sh

bench: ## Run the benchmarks against nginx, Redis, the sqlite3 CLI and vipsthumbnail; prints tables for docs/benchmarks.md
	@scripts/install-deps.sh --bench
	@scripts/bench.sh
	@scripts/bench-chat.sh
	@scripts/bench-realtime.sh
	@scripts/bench-media.sh
	@scripts/bench-channels.sh
	@scripts/bench-deliveries.sh
	@scripts/bench-peer.sh
	@ROUNDS=2 scripts/bench-trace.sh
	@scripts/bench-channel-peer.sh

clean: ## Remove build products and tool caches
	rm -rf .build .build-fuzz .build-tsan .venv .tools reports
