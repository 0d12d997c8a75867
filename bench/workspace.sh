#!/usr/bin/env bash
# Workspace changes and commit against the real cellbox binary (run as
# root, as CI does): workspace/changes on a 50,000-file project holding
# 1,000 changes (first call, which records baselines, then p50/p99 of 20),
# and workspace/commit of 1,000 changed files (p50 and max of 5 rounds,
# every file fsynced). Figures are wall-clock milliseconds at the client.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== cellbox workspace changes and commit, $(nproc) cores, $(df -T "${TMPDIR:-/tmp}" | awk 'NR==2 {print $2}') temp dir"
CGO_ENABLED=0 go test -count=1 -run '^$' -bench 'BenchmarkWorkspaceFiles' -benchtime 1x ./cmd/cellbox | grep -E '^Benchmark' |
    awk '{ for (i = 3; i < NF; i += 2) if ($(i+1) != "ns/op") printf "    %-18s %s\n", $(i+1), $i }'
