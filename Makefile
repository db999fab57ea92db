# planwright — make run | make test | make build | make lint | make bench

SHELL   := bash
GO      ?= go
PKGS    ?= ./...
# Extra flags for go test, e.g. make test TESTFLAGS="-run TestServe -count=1".
TESTFLAGS ?=
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
# make run serves SQLite at data/planwright.db with the demo model, whatever
# PLANWRIGHT_* variables the shell has; override RUN_ENV to change that.
RUN_ENV ?= PLANWRIGHT_DB_DRIVER=sqlite PLANWRIGHT_DB_DSN=data/planwright.db PLANWRIGHT_LLM_PROVIDER=demo

.PHONY: run build test vet staticcheck lint fmt-check bench clean

run: build
	$(RUN_ENV) ./bin/planwright serve

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/planwright ./cmd/planwright

# The PostgreSQL suites run against TEST_DATABASE_URL, or a throwaway cluster
# when PostgreSQL is installed (scripts/with-postgres.sh), or are skipped.
test: vet staticcheck
	./scripts/with-postgres.sh $(GO) test -race $(TESTFLAGS) $(PKGS)

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

clean:
	rm -rf bin
