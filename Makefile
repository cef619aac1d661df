# Paddock. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
BIN := bin
PKGS ?= ./...
# The guest agent is static: it runs inside images that have no Go runtime
# and a libc we do not control. libseccomp is linked in statically.
GUEST_TAGS := netgo,osusergo
GUEST_LDFLAGS := -s -w -linkmode external -extldflags "-static"

.PHONY: help build guest paddock test test-short test-nonroot bench deps clean vet

help: ## show this help
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

deps: ## install the Debian packages building and testing need (root)
	./scripts/install-deps.sh

build: paddock guest ## build bin/paddock and bin/paddock-guest

paddock:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -o $(BIN)/paddock ./cmd/paddock

guest:
	@mkdir -p $(BIN)
	CGO_ENABLED=1 $(GO) build -tags $(GUEST_TAGS) -ldflags '$(GUEST_LDFLAGS)' -o $(BIN)/paddock-guest ./cmd/paddock-guest

vet: ## gofmt check and go vet on every package
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Every test, a line a package (failures in full), then every skipped test
# with its reason. PADDOCK_REQUIRE_LIVE=1 (.ci/run sets it) fails the run
# when a test was skipped that is not in scripts/expected-skips.txt.
test: build ## run every test (needs root for the sandbox tests); lists the skips at the end
	@rc=0; PADDOCK_GUEST=$(CURDIR)/$(BIN)/paddock-guest $(GO) tool gotestsum --format pkgname-and-test-fails --format-icons text \
		--format-hide-empty-pkg --hide-summary=skipped --jsonfile $(BIN)/test-events.json \
		-- -count=1 -timeout 20m $(PKGS) || rc=1; \
	$(GO) run ./internal/tools/skipcheck -json $(BIN)/test-events.json -expected scripts/expected-skips.txt || rc=1; \
	$(MAKE) --no-print-directory test-nonroot || rc=1; \
	exit $$rc

# Packages (pkg or pkg:run-pattern) whose tests must pass as an ordinary
# user: what runs on the fake backend needs no root.
NONROOT_PKGS ?= ./hypervisor/fake ./hypervisor:TestFakeConformance ./guest/agent:TestUnprivileged ./hostd/session:TestPipeline ./hostd/api:TestErrorKinds ./errdefs ./client ./cmd/paddock:TestExitCode
# The route table, its binding, the handlers' fail-closed identity and the gateway's use of the table.
NONROOT_PKGS += './hostd/api/routes:TestTable|TestMatch|TestEdgeLimit' './hostd/api:TestRouteTableBound|TestRouteBodyLimits|TestHandlersNeedCaller|TestWhoamiNeedsCaller|TestOpenAPIListsEveryRoute' './hostd/session:TestCallerFailsClosed|TestGrantCaller' ./gateway/limits './gateway/auth:TestIsTicketRequest'

test-nonroot: ## run the tests that need no root as uid 65534 (setpriv when run by root)
	GO=$(GO) ./scripts/test-nonroot.sh $(NONROOT_PKGS)

test-short: ## unit tests only
	$(GO) test -short -count=1 ./...

bench: build ## benchmarks against peers measured in the same run
	PADDOCK_GUEST=$(CURDIR)/$(BIN)/paddock-guest $(GO) run ./cmd/paddock-bench

clean: ## remove build output
	rm -rf $(BIN)
