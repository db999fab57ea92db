# planwright — make run | make test | make build | make lint | make bench | make bench-service

SHELL   := bash
GO      ?= go
PKGS    ?= ./...
# Extra flags for go test, e.g. make test TESTFLAGS="-run TestServe -count=1".
TESTFLAGS ?=
# A package's time limit: generous, since the PostgreSQL, process and browser
# suites slow down on a loaded 2-core machine; CI's whole run has 90 minutes.
TEST_TIMEOUT ?= 20m
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
# make run serves SQLite at data/planwright.db with the demo model, whatever
# PLANWRIGHT_* variables the shell has; override RUN_ENV to change that.
RUN_ENV ?= PLANWRIGHT_DB_DRIVER=sqlite PLANWRIGHT_DB_DSN=data/planwright.db PLANWRIGHT_LLM_PROVIDER=demo

.PHONY: run build test vet staticcheck lint fmt-check bench bench-service clean

run: build
	$(RUN_ENV) ./bin/planwright serve

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/planwright ./cmd/planwright

# The PostgreSQL suites run against TEST_DATABASE_URL, or a throwaway cluster
# when PostgreSQL is installed (scripts/with-postgres.sh), or are skipped; the
# run ends with one line each saying whether the PostgreSQL, browser and Jaeger suites
# ran or were skipped (scripts/with-suite-report.sh).
test: vet staticcheck
	./scripts/with-postgres.sh ./scripts/with-suite-report.sh $(GO) test -race -timeout $(TEST_TIMEOUT) $(TESTFLAGS) $(PKGS)

vet:
	$(GO) vet $(PKGS)

staticcheck:
	$(GO) tool staticcheck $(PKGS)

lint: fmt-check vet staticcheck

fmt-check:
	@out=$$(gofmt -l $$(find . -name "*.go" -not -path "./.git/*")); \
	if [[ -n "$$out" ]]; then echo "gofmt -w needed for:"; echo "$$out"; exit 1; fi

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# The service benchmark (not part of make test; see bench/README.md): builds
# planwright and bench/mcpwork, serves workloads W1–W4 on SQLite and on
# PostgreSQL (BENCH_DATABASE_URL, else TEST_DATABASE_URL; skipped with a
# message when neither is reachable) and prints the service's figures against
# its targets. BENCH_FLAGS narrows it, e.g.
# make bench-service BENCH_FLAGS="-drivers sqlite -workloads W1,W2 -quick".
BENCH_FLAGS ?=
bench-service:
	$(GO) run ./bench/service $(BENCH_FLAGS)

clean:
	rm -rf bin
