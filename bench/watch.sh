#!/usr/bin/env bash
# File watching against the real cellbox binary (PROTOCOL.md §3 fs/watch):
# the time from a write by code in the sandbox to the fs/didChange that
# reports it at a stdio client, p50/p90/p99, for N writes (N=...) each of
#  - isolated writes (60-120 ms apart: each waits for the 10 ms a batch gathers),
#  - steady writes (20-40 ms apart: batches go at least 50 ms apart),
#  - continuous writes (one every millisecond).
# Aim: p99 under 150 ms.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${N:-200}
runs=${RUNS:-1}
echo "== write in the sandbox -> fs/didChange at the client, $n writes per case, $runs run(s), $(nproc) cores"
CELLBOX_BENCH_WATCH_N=$n CGO_ENABLED=0 go test -count=1 -run '^$' -bench 'WatchLatency' -benchtime "${runs}x" -timeout 30m ./cmd/cellbox |
	grep -E '^watch latency'
