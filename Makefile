# cellbox: `make serve` starts the daemon, `make test` runs every test.
GO ?= go
ADDR ?= 127.0.0.1:8765
BIN := bin/cellbox

.PHONY: build serve test bench generate fuzz

build:
	$(GO) build -o $(BIN) ./cmd/cellbox

# Starts cellbox on $(ADDR) and prints the URL (with its token) to open.
serve: build
	$(BIN) serve --listen $(ADDR)

# Every test: the generated client types are fresh, go vet is clean, and the
# unit, end-to-end and fuzz-corpus tests pass with the race detector.
# Set CELLBOX_TEST_USER to an unprivileged user to also run the sandbox
# probes as that user (CI does; .ci/run creates the user).
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...

# Round-trip benchmarks against the real binary (bench/rpc.sh prints them).
bench:
	bash bench/rpc.sh

generate:
	$(GO) generate ./...

fuzz:
	$(GO) test ./rpc -run '^$$' -fuzz FuzzReadFrame -fuzztime 30s
	$(GO) test ./rpc -run '^$$' -fuzz FuzzValidateFrame -fuzztime 30s
	$(GO) test ./rpc -run '^$$' -fuzz FuzzDecodeParams -fuzztime 30s
