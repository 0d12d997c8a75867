#!/usr/bin/env bash
# Round trip of a no-op request (daemon/stats) against the real cellbox
# binary over stdio and websocket: one connection, and 16 concurrent
# connections (websocket) or 16 requests in flight (stdio). Prints p50/p99
# latency and requests per second; plus the daemon's in-process share.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${N:-20000}
echo "== cellbox JSON-RPC round trips (daemon/stats), $n requests each, $(nproc) cores"
go test -count=1 -run '^$' -bench 'RoundTrip|Concurrent' -benchtime "${n}x" ./cmd/cellbox | grep -E '^Benchmark'
echo "== in-process dispatch (no process switch)"
go test -count=1 -run '^$' -bench Dispatch -benchtime 3s ./rpc | grep -E '^Benchmark'
