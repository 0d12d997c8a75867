# cellbox: `make serve` starts the daemon, `make test` runs every test.
GO ?= go
ADDR ?= 127.0.0.1:8765
BIN := bin/cellbox

.PHONY: build serve test bench generate fuzz

build:
	CGO_ENABLED=0 $(GO) build -o $(BIN) ./cmd/cellbox

# Starts cellbox on $(ADDR) and prints the URL (with its token) to open.
serve: build
	$(BIN) serve --listen $(ADDR)

# Every test: go vet is clean, the generated client types are fresh, the
# unit, end-to-end, attack-suite and fuzz-corpus tests pass built as the
# release is (without cgo), and the transport packages pass again under the
# race detector (which needs cgo). Set CELLBOX_TEST_USER to an unprivileged
# user to also run the sandbox tests as that user (CI does; .ci/run creates
# the user).
test:
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) test -count=1 -timeout 30m ./...
	$(GO) test -race -count=1 -timeout 20m ./rpc/... ./protocol/...
	bash editors/neovim/test/run.sh

# Benchmarks that print their figures: JSON-RPC round trips against the real
# binary, sandbox start and spawn side by side with bubblewrap, and terminal
# throughput and keystroke echo side by side with reading a pty directly.
bench:
	bash bench/rpc.sh
	bash bench/sandbox.sh
	bash bench/pty.sh
	bash bench/workspace.sh
	bash bench/watch.sh
	bash bench/kernel.sh

generate:
	$(GO) generate ./...

fuzz:
	$(GO) test ./rpc -run '^$$' -fuzz FuzzReadFrame -fuzztime 30s
	$(GO) test ./rpc -run '^$$' -fuzz FuzzValidateFrame -fuzztime 30s
	$(GO) test ./rpc -run '^$$' -fuzz FuzzDecodeParams -fuzztime 30s
