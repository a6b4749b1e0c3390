# Jam developer commands. `make dev` runs Jam; `make test` is the test command CI runs.
GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
WORKFLOWCHECK := go.temporal.io/sdk/contrib/tools/workflowcheck@v0.6.0

.PHONY: dev build test test-unit test-e2e test-race check vet fmt-check workflowcheck ci bench soak screenshots

## dev: run everything in one process (embedded Temporal + Web UI, API, worker, SQLite)
##      with jam-testagent beside it as the default provider
dev: build
	./bin/jam dev

## build: build bin/jam, bin/jam-testagent (the scripted ACP agent) and bin/jam-stubmodel
##        (the scripted model server)
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/jam ./cmd/jam
	$(GO) build -o bin/jam-testagent ./cmd/jam-testagent
	$(GO) build -o bin/jam-stubmodel ./cmd/jam-stubmodel

## test: every test (test-unit, then test-e2e); Postgres tests run when JAM_TEST_DATABASE_URL is
##       set (required with JAM_REQUIRE_POSTGRES=1). The two run one after the other: run
##       beside the other packages' builds, the end-to-end tests missed their placement and
##       failover bounds on a 2-core machine (see the revert of 29e9ce4).
##       Both run even when the first fails; each one's wall time is printed at the end.
test:
	@rc=0; \
	start=$$(date +%s); $(MAKE) --no-print-directory test-unit || rc=1; unit=$$(( $$(date +%s) - start )); \
	start=$$(date +%s); $(MAKE) --no-print-directory test-e2e || rc=1; e2e=$$(( $$(date +%s) - start )); \
	echo "test-unit took $$unit s, test-e2e took $$e2e s"; exit $$rc

## test-unit: every package but ./test (in-process tests: store, API, workflows, adapters, tools)
UNIT_PKGS = $(shell $(GO) list -e ./... | grep -vx 'github.com/jam-dev/jam/test')
test-unit:
	$(GO) test -count=1 -parallel 4 -timeout 20m $(UNIT_PKGS)

## test-e2e: ./test, the cross-process tests: each runs its own `jam dev` or `jam server` and
##           workers, E2E_PARALLEL (6) at a time. Much of each test is waiting on Jam's own
##           timers (idle reaps, node failover, a killed worker's activity timeout), so at 4
##           the two cores were idle part of the time; on a slower or busier machine run
##           `make test E2E_PARALLEL=4`
E2E_PARALLEL ?= 6
test-e2e:
	$(GO) test -count=1 -parallel $(E2E_PARALLEL) -timeout 20m ./test/

## test-race: the race detector over the runtime activities, API, Band, permission and question brokers, provider adapters and tools
test-race:
	$(GO) test -race -count=1 -timeout 10m ./activities/ ./api/ ./internal/band/ ./internal/permission/ ./internal/questions/ ./internal/provider/... ./internal/tools/

## check: vet, formatting and the workflow determinism check
check: vet fmt-check workflowcheck

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## workflowcheck: static determinism check of workflows/ (Temporal's workflowcheck)
workflowcheck:
	$(GO) run $(WORKFLOWCHECK) ./workflows/...

## ci: what CI runs (.ci/run): services, checks and tests with Postgres required
ci:
	./.ci/run

## bench: benchmarks on SQLite and (when JAM_TEST_DATABASE_URL is set) Postgres; not gated by CI
##        - a journaled workspace operation in the store; 32 concurrent posters (posts/s)
##        - post -> event stream latency, 20 subscribers at 200 messages/s (p50/p95/p99 ms)
##        - one ACP turn through the adapter and jam-testagent (p50/p95 ms)
##        - RoomSession: live turn overhead and wake (p50/p95 ms), 10,000 dormant rooms (bind
##          time, child processes, RSS), 50 rooms messaged at once (turns/s); JSON report in
##          bench/roomsession.json (JAM_BENCH_ROOMS=N for fewer rooms)
##        - checkpoint of a 10,000-file, 1 GiB provider state: first generation vs `cp -a`, second
##          generation after 1% of the files changed vs the first; bench/checkpoint.json
##        - workspace export of a 10,000-file, 1 GiB workspace (durable) vs `cp -a` + sync (and
##          `cp -a --reflink=always` where supported), medians of alternating runs; bench/export.json
##        - Codex, Claude Code and Copilot (the real codex, claude and copilot, scripted model
##          server) beside the ACP test agent: first wake, re-wake (resume) and live post -> reply, p50/p95 ms;
##          bench/providers.json
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./internal/store/
	$(GO) test -run '^$$' -bench PostToEventStream -benchtime 600x ./api/
	$(GO) test -run '^$$' -bench . -benchtime 200x ./internal/provider/acp/
	JAM_BENCH=1 $(GO) test -count=1 -run '^TestCheckpointBenchmark$$' -timeout 20m -v ./internal/checkpoint/
	JAM_BENCH=1 $(GO) test -count=1 -run '^TestExportBenchmark$$' -timeout 30m -v ./internal/workspace/
	JAM_BENCH=1 $(GO) test -count=1 -run '^TestRoomSessionBenchmark$$' -timeout 60m -v ./test/
	JAM_BENCH=1 $(GO) test -count=1 -run '^TestProviderBenchmark$$' -timeout 30m -v ./test/

## soak: slow runs at real timescales; not gated by CI
##       - a question to the room's human answered three minutes after the real opencode and
##         claude asked it (the default 45 s inline wait, past MCP clients' one-minute patience)
soak:
	JAM_SOAK=1 $(GO) test -count=1 -run '^TestARealAgentsQuestionOutlivesTheToolCallThatAskedIt$$' -timeout 20m -v ./test/

## screenshots: the Temporal Web UI's workflow list filtered by JamRoom, a RoomSession's
##              timeline and its summary and details, photographed by headless Chromium
##              (Debian's chromium; playwright-core from npm) into docs/screenshots/; not gated by CI
PLAYWRIGHT_PREFIX ?= $(HOME)/.cache/jam-ci/playwright
screenshots:
	@command -v chromium >/dev/null || { echo "screenshots need Debian's chromium: apt-get install chromium" >&2; exit 1; }
	@test -f $(PLAYWRIGHT_PREFIX)/node_modules/playwright-core/package.json || \
		npm install --no-audit --no-fund --prefix $(PLAYWRIGHT_PREFIX) playwright-core@1.64.1
	JAM_SCREENSHOTS=1 PLAYWRIGHT_CORE_DIR=$(PLAYWRIGHT_PREFIX)/node_modules/playwright-core \
		$(GO) test -count=1 -run '^TestWebUIScreenshots$$' -timeout 10m -v ./test/
