#!/usr/bin/env bash
# Issue 19's benchmarks: what undo and attribution cost an agent.
#
#   1. The round trip of a python `run` (kernel/execute) against the real
#      binary, in one run side by side: plain (its changed files tracked),
#      with checkpoint: true when nothing changed (the automatic checkpoint
#      is reused), and with checkpoint: true when each execution writes a
#      file (one is taken, copying only what changed); the ratios to plain.
#      The project holds FILES files (default 1000), CHANGED (default 100) of
#      them changed in the workspace.
#   2. The tracker's own cost per execution (BenchmarkTrack).
#   3. Checkpoint and fork time against the upper layer's size: 1k, 10k and
#      100k files (CELLBOX_BENCH_BIG=1 adds one 1 GiB file): the first
#      checkpoint, one after one file changed, an automatic one with nothing
#      changed, and a fork (BenchmarkCheckpoint).
#
# Environment: RUNS (round trips per case, default 2000), CELLBOX_BENCH_BIN
# (another build of cellbox for the round trips: an earlier one, for a
# before and after).
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=0
runs=${RUNS:-2000}

echo "== run round trip (python, p50 and p99 in µs)"
out=$(go test ./cmd/cellbox/ -run '^$' -bench 'BenchmarkExecuteAgents' -benchtime "${runs}x" 2>&1) || { echo "$out"; exit 1; }
echo "$out" | grep '^Benchmark'
echo "$out" | awk '
	/^BenchmarkExecuteAgents\// {
		split($1, n, "/"); sub(/-[0-9]+$/, "", n[2])
		for (i = 1; i <= NF; i++) { if ($i == "p50-µs") p50[n[2]] = $(i-1); if ($i == "p99-µs") p99[n[2]] = $(i-1) }
	}
	END {
		printf "%-24s %10s %10s %12s\n", "case", "p50 µs", "p99 µs", "p50 / plain"
		split("plain checkpoint-unchanged checkpoint-one-write", cs, " ")
		for (k = 1; k <= 3; k++) { c = cs[k]; if (c in p50) printf "%-24s %10s %10s %11.2fx\n", c, p50[c], p99[c], p50[c] / p50["plain"] }
	}'

echo
echo "== the tracker alone"
go test ./workspace/ -run '^$' -bench 'BenchmarkTrack' -benchtime 2000x 2>&1 | grep '^Benchmark'

echo
echo "== checkpoints and fork against the upper layer's size"
go test ./workspace/ -run '^$' -bench 'BenchmarkCheckpoint' -benchtime 1x -timeout 60m 2>&1 | grep -E '^Benchmark|^ok|FAIL'
