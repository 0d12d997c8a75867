# cellbox: `make serve` starts the daemon, `make test` runs every test.
GO ?= go
ADDR ?= 127.0.0.1:8765
BIN := bin/cellbox

.PHONY: build serve test lint test-loaded bench generate fuzz ui helper

build: ui helper
	CGO_ENABLED=0 $(GO) build -o $(BIN) ./cmd/cellbox

# The lean sandbox helper (cmd/cellbox-sandbox), which the binary embeds
# from workspace/sandbox/helper: rebuilt here (reproducibly, so an
# unchanged helper is the same bytes) and committed, so that go build and
# go install carry it; TestCommittedHelperIsFresh fails when its sources
# changed since. make test does not rebuild it: CI tests what is committed.
helper:
	GO=$(GO) bash workspace/sandbox/helper/build.sh

# The browser IDE (editors/browser): npm ci when the lock file changes, then
# a type check and esbuild make dist/index.html, one self-contained page that
# the binary embeds (go:embed). dist/ is committed, so that go build and go
# install serve the page without node; rebuild and commit it after changing
# the page's sources (editors/browser's TestCommittedPageIsFresh checks).
UI_DIR := editors/browser
UI := $(UI_DIR)/dist/index.html
ui: $(UI)
$(UI_DIR)/node_modules/.package-lock.json: $(UI_DIR)/package-lock.json
	cd $(UI_DIR) && npm ci --no-audit --no-fund
$(UI): $(UI_DIR)/node_modules/.package-lock.json $(UI_DIR)/build.mjs $(UI_DIR)/tsconfig.json $(wildcard $(UI_DIR)/src/* $(UI_DIR)/client/* editors/protocol/*)
	cd $(UI_DIR) && npm run build

# Starts cellbox on $(ADDR) and prints the URL (with its token) to open.
serve: build
	$(BIN) serve --listen $(ADDR)

# The lint gate (make test runs it first): gofmt, go vet and staticcheck
# (staticcheck.conf) on the Go code, which must also build and vet for
# macOS (sandboxes need Linux; the binary says so at run time there); eslint
# on both TypeScript projects and luacheck on the Neovim plugin
# (editors/lint.sh: npm ci in editors/lint, apt package lua-check).
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint: ui
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'))"; \
		if [ -n "$$unformatted" ]; then echo "gofmt -w these files:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	GOOS=darwin $(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	bash editors/lint.sh

# Every test: the lint gate passes, the generated client types are fresh, the
# unit, end-to-end, attack-suite and fuzz-corpus tests pass built as the
# release is (without cgo), and the transport and kernel packages pass again under the
# race detector (which needs cgo). Set CELLBOX_TEST_USER to an unprivileged
# user to also run the sandbox tests as that user (CI does; .ci/run creates
# the user). The browser IDE's tests need /usr/bin/chromium (apt package
# chromium) and leave screenshots in artifacts/browser/.
test: lint
	CGO_ENABLED=0 $(GO) test -count=1 -timeout 30m ./...
	$(GO) test -race -count=1 -timeout 20m ./rpc/... ./protocol/... ./kernel/...
	bash editors/browser/test/run.sh
	bash editors/neovim/test/run.sh
	bash editors/vscode/test/run.sh

# make test three times in a row with every core kept busy by a CPU burner
# (RUNS=N for another count): the suite must pass on a loaded machine.
test-loaded:
	bash .ci/test-loaded.sh

# Benchmarks that print their figures: JSON-RPC round trips against the real
# binary, sandbox start and spawn side by side with bubblewrap, and terminal
# throughput and keystroke echo side by side with reading a pty directly,
# and a 10-minute soak of 16 clients with its leak check (DURATION=...).
bench:
	bash bench/rpc.sh
	bash bench/sandbox.sh
	bash bench/pty.sh
	bash bench/workspace.sh
	bash bench/watch.sh
	bash bench/kernel.sh
	bash bench/scale.sh
	bash bench/soak.sh
	bash bench/agents.sh

generate:
	$(GO) generate ./...

fuzz:
	$(GO) test ./rpc -run '^$$' -fuzz FuzzReadFrame -fuzztime 30s
	$(GO) test ./rpc -run '^$$' -fuzz FuzzValidateFrame -fuzztime 30s
	$(GO) test ./rpc -run '^$$' -fuzz FuzzDecodeParams -fuzztime 30s
