# svc: the team broker. `make help` lists the targets.
GO      ?= go
BUF     := $(GO) tool -modfile=tools/buf/go.mod buf
TAGS    := sqlite_omit_load_extension
VERSION ?= 0.1.0
LDFLAGS := -X main.version=$(VERSION)
RUNDIR  ?= .run

# mattn/go-sqlite3 is cgo; without it the binary builds and then fails at run
# time, so every Go command runs with cgo on.
export CGO_ENABLED := 1

.PHONY: help build run run-postgres run-cluster generate check-generated lint vet test test-unit fuzz bench clean chromium postgres screenshots

help: ## List the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

build: ## Build bin/svc.
	@command -v gcc >/dev/null || { echo "gcc is required (cgo SQLite)"; exit 1; }
	$(GO) build -tags $(TAGS) -ldflags '$(LDFLAGS)' -o bin/svc ./cmd/svc

run: build ## Run the broker on 127.0.0.1:7433 with state in .run/ (first run prints the admin token).
	bin/svc serve --config-path $(RUNDIR)/svc.json --db-path $(RUNDIR)/svc.db

# State of its own under $(RUNDIR)/pg (cluster, team config, files); the
# cluster stops with svc when this started it (scripts/run-postgres.sh).
run-postgres: build postgres ## Run the broker on 127.0.0.1:7433 on a local PostgreSQL cluster in .run/pg (first run: initdb, prints the admin token).
	scripts/run-postgres.sh bin/svc $(RUNDIR)

# Two brokers of one team on 127.0.0.1:7433 and :7434, on make run-postgres's
# cluster (database svc_cluster) and a nats-server built from go.mod's
# module into $(RUNDIR)/bin; ^C stops everything it started
# (scripts/run-cluster.sh, docs/OPERATIONS.md "Several brokers").
run-cluster: build postgres ## Run two brokers on :7433 and :7434 sharing PostgreSQL (.run/pg) and NATS (first run prints the admin token).
	scripts/run-cluster.sh bin/svc $(RUNDIR)

generate: ## Regenerate gen/ from proto/ with the pinned local plugins.
	rm -rf gen/svc gen/openapi/svc.swagger.json
	$(BUF) generate

check-generated: ## Fail when gen/ differs from what proto/ generates.
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  $(BUF) generate -o "$$tmp" && \
	  diff -r --exclude=openapi.go "$$tmp/gen" gen || { echo "gen/ is stale: run make generate and commit"; exit 1; }

lint: ## buf lint, buf format, gofmt and go vet.
	$(BUF) lint
	$(BUF) format --diff --exit-code
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/'))" || { gofmt -l $$(git ls-files '*.go' | grep -v '^gen/'); echo "gofmt needed"; exit 1; }
	$(GO) vet -tags $(TAGS) ./...

test: check-generated lint test-unit ## Everything CI runs.

test-unit: chromium postgres ## Go tests with the race detector.
	@# The end-to-end tests (cmd/svc/e2e: real agents, Chromium) take longer than
	@# go test's default 10-minute limit on a 2-core machine.
	$(GO) test -race -count=1 -timeout 45m -tags $(TAGS) ./...
	@# The end-to-end suite again with every broker on PostgreSQL (a throwaway
	@# pgtest cluster; docs/TESTING.md). Without -race: the brokers' Go code is
	@# the pass above's, which runs it under -race; a -race PostgreSQL pass
	@# measured 42 min on a busy 2-core machine (docs/TESTING.md), which would
	@# take make test well past its 35-minute budget.
	SVC_E2E_STORE=postgres $(GO) test -count=1 -timeout 45m -tags $(TAGS) ./cmd/svc/e2e
	@# Resident memory only means something without the race detector.
	$(GO) test -count=1 -tags $(TAGS) ./cmd/svc/e2e -run '^TestStalledGRPCSubscribersAreReleased$$'

# The web app's tests drive Debian's chromium (cmd/svc/internal/browsertest).
# Installed only when missing; quiet unless apt-get fails.
chromium: ## Install Debian's chromium for the browser tests when /usr/bin/chromium is missing.
	@test -x /usr/bin/chromium || { \
	  echo "installing chromium for the browser tests (apt-get)"; \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  log=$$(mktemp); \
	  { $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq chromium; } >"$$log" 2>&1 \
	    || { cat "$$log"; rm -f "$$log"; echo "could not install chromium"; exit 1; }; \
	  rm -f "$$log"; }

# store/postgres's tests start a throwaway cluster from Debian's PostgreSQL
# binaries (store/postgres/pgtest); SVC_TEST_PG_URL points them at an
# existing server instead. Installed only when missing; quiet unless apt-get
# fails.
postgres: ## Install Debian's postgresql for the store tests when /usr/lib/postgresql/*/bin/initdb is missing.
	@[ -n "$$SVC_TEST_PG_URL" ] || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  echo "installing postgresql for the store tests (apt-get)"; \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  log=$$(mktemp); \
	  { $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends postgresql; } >"$$log" 2>&1 \
	    || { cat "$$log"; rm -f "$$log"; echo "could not install postgresql"; exit 1; }; \
	  rm -f "$$log"; }

screenshots: chromium ## Rewrite docs/webui/*.png: every page of the web app at 1280x800 and 375x812 (TestWebUIShowcase).
	SVC_WEBUI_SHOTS=$(CURDIR)/docs/webui $(GO) test -count=1 -tags $(TAGS) -run '^TestWebUIShowcase$$' ./cmd/svc/e2e

fuzz: ## Run every fuzz target briefly.
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$f"; $(GO) test -tags $(TAGS) -run '^$$' -fuzz "^$$f$$" -fuzztime 10s $$pkg || exit 1; \
	  done; \
	done

bench: ## Go benchmarks, then the load generator against a fresh bin/svc (cmd/svcload).
	$(MAKE) build
	$(GO) test -tags $(TAGS) -run '^$$' -bench . -benchmem ./...
	$(GO) run ./cmd/svcload --svc bin/svc

.PHONY: bench-quick
bench-quick: ## A short load-generator smoke run against a fresh bin/svc.
	$(MAKE) build
	$(GO) run ./cmd/svcload --svc bin/svc --quick

clean: ## Remove build output and local run state.
	rm -rf bin $(RUNDIR)
