#!/usr/bin/env bash
# Terminals against the real cellbox binary (PROTOCOL.md §5):
#  - throughput of `cat` of a 200 MB file (MB=...) through a terminal to a
#    stdio client and to a websocket client that ack as they go, side by
#    side with reading a terminal of the host directly in-process with
#    creack/pty (the physical limit of a pty on this machine), and the ratios;
#  - keystroke echo latency: pty/write of one char to the pty/output that
#    carries it back, p50/p99 over KEYS keystrokes (`cat` in raw mode).
# Aims: at least 50% of the direct throughput; echo p99 under 5 ms.
set -euo pipefail
cd "$(dirname "$0")/.."
mb=${MB:-200}
runs=${RUNS:-3}
keys=${KEYS:-1000}
echo "== terminal throughput: cat of a $mb MB file, $runs runs each (interleaved), $(nproc) cores"
CELLBOX_BENCH_PTY_MB=$mb CELLBOX_BENCH_PTY_RUNS=$runs CGO_ENABLED=0 go test -count=1 -run '^$' -bench 'PtyThroughput' -benchtime 1x -timeout 30m ./cmd/cellbox |
	grep -E '^(Benchmark|\s+pty_bench_test)'
echo "== keystroke echo (pty/write of one char -> its pty/output), $keys keystrokes"
CGO_ENABLED=0 go test -count=1 -run '^$' -bench 'PtyEcho' -benchtime "${keys}x" -timeout 10m ./cmd/cellbox |
	grep -E '^(Benchmark|\s+pty_bench_test)'
