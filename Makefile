# Paddock. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
BIN := bin
PKGS ?= ./...
# The guest agent is static: it runs inside images that have no Go runtime
# and a libc we do not control. libseccomp is linked in statically.
GUEST_TAGS := netgo,osusergo
GUEST_LDFLAGS := -s -w -linkmode external -extldflags "-static"

.PHONY: help build guest paddock cross test test-short test-nonroot bench deps clean vet screenshots

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

# The Go SDK and the CLI's client verbs build for macOS and Windows (the
# daemon's commands are Linux-only stubs there); client/deps_test.go keeps
# the SDK free of the daemon's dependencies.
cross: ## build ./client, ./cmd/paddock and ./hypervisor/all for darwin/arm64 and windows/amd64
	CGO_ENABLED=0 GOOS=darwin GOARCH=arm64 $(GO) build -o /dev/null ./client ./cmd/paddock ./hypervisor/all
	CGO_ENABLED=0 GOOS=windows GOARCH=amd64 $(GO) build -o /dev/null ./client ./cmd/paddock ./hypervisor/all

vet: ## gofmt check and go vet on every package
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Every test, a line a package (failures in full), then every skipped test
# with its reason. PADDOCK_REQUIRE_LIVE=1 (.ci/run sets it) fails the run
# when a test was skipped that is not in scripts/expected-skips.txt.
test: build cross ## run every test (needs root for the sandbox tests); lists the skips at the end
	@rc=0; PADDOCK_GUEST=$(CURDIR)/$(BIN)/paddock-guest $(GO) tool gotestsum --format pkgname-and-test-fails --format-icons text \
		--format-hide-empty-pkg --hide-summary=skipped --jsonfile $(BIN)/test-events.json \
		-- -count=1 -timeout 20m $(PKGS) || rc=1; \
	$(GO) run ./internal/tools/skipcheck -json $(BIN)/test-events.json -expected scripts/expected-skips.txt || rc=1; \
	$(MAKE) --no-print-directory test-nonroot || rc=1; \
	exit $$rc

# Packages (pkg or pkg:run-pattern, quoted for the shell) whose tests must
# pass as an ordinary user: what runs on the fake backend needs no root.
# A listed test that needs root fails there, and so does any skip
# (scripts/test-nonroot.sh). hostd/api's are the access, identity,
# idempotency, error-body and OpenAPI tests.
NONROOT_API_TESTS = TestRouteAccess|TestTenantIsolation|TestReviewTenantIsolationAllRoutes|TestSandboxesAndSessionsApart|TestSessionTokens|TestSessionTokenOps|TestSessionTokenLifetime|TestGrantAccess|TestPTYTicket|TestIdempotency|TestIdempotencyConcurrent|TestSandboxIdempotency|TestLifecycleIfMatch|TestSandboxProcessJudged|TestErrorKinds|TestOpenAPI.*|TestReplayRouteAccess|TestAttackReplayDoesNoMoreThanExec
NONROOT_PKGS ?= ./hypervisor/fake ./hypervisor:TestFakeConformance ./guest/agent:TestUnprivileged \
	./errdefs ./client ./cmd/paddock:TestExitCode \
	'./internal/testutil:^TestRequiresRootInTheNonrootRun$$' \
	'./hostd/session:^(TestPipelineHookRefuses|TestPipelineHookSeesSessionTenant|TestPipelineWalk|TestJudgeWithoutApprovals|TestBudgetsSeam|TestAwaitApprovalWalksTheJudgeStep|TestSweepHandsSandboxesToHooks)$$' ./hostd/grants ./hostd/approvals ./hostd/budgets ./hostd/session/sessiontest \
	'./hostd/sandboxes:^(TestSandboxPipelineSteps|TestSandboxHookRefuses|TestSandboxProcessJudgedOnEnv|TestSandboxProcessNeedsBudgets|TestCheckPath)$$' \
	'./hostd/previews:^(TestPreviewConnTable|TestRewriteDevTools|TestPreviewLocation|TestPreviewHostToken|FuzzRewriteDevTools)$$' \
	./hostd/replay \
	'./hostd/api:^($(NONROOT_API_TESTS))$$'
# The route table, its binding, the handlers' fail-closed identity and the gateway's use of the table.
NONROOT_PKGS += './hostd/api/routes:TestTable|TestMatch|TestEdgeLimit' './hostd/api:^(TestRouteTableBound|TestRouteBodyLimits|TestHandlersNeedCaller|TestWhoamiNeedsCaller)$$' './hostd/session:^TestCallerFailsClosed$$' ./gateway/limits './gateway/auth:TestIsTicketRequest'
# The workspace's file change and git verb refused by a command hook, and its git config parsing.
NONROOT_PKGS += './hostd/workspace:^(TestWorkspaceHookRefuses|TestAttackFileRecordAfterDisconnect|TestKeepGitKey|TestSafeGitConfigRoundTrip|TestCleanMessage)$$'

# The promotion's plan, its walk of the parent's pipeline, and the core's hold it uses.
NONROOT_PKGS += './hostd/promote:^(TestPromotePipelineSteps|TestMakePlan|TestRelPaths|TestCheckpointTag)$$' './hostd/session:^TestHold$$'

test-nonroot: ## run the tests that need no root as uid 65534 (setpriv when run by root)
	GO=$(GO) ./scripts/test-nonroot.sh $(NONROOT_PKGS)

test-short: ## unit tests only
	$(GO) test -short -count=1 ./...

bench: build ## benchmarks against peers measured in the same run
	PADDOCK_GUEST=$(CURDIR)/$(BIN)/paddock-guest $(GO) run ./cmd/paddock-bench

screenshots: ## retake the web console's screenshots in docs/console/ (its browser tests, a real daemon; root)
	PADDOCK_SCREENSHOTS=1 $(GO) test -count=1 ./console

clean: ## remove build output
	rm -rf $(BIN)
