#!/usr/bin/env bash
# Issue 3's benchmark: bubblewrap against a cellbox workspace sandbox, side
# by side in one run (interleaved, shuffled each iteration): a cold sandbox
# running `true` and `python3 -c pass` (cellbox timed in process, as the
# daemon pays for a new sandbox, and as the `cellbox exec` command), a
# spawn into an open sandbox, and references (unshare, python on the
# host). Prints p50, p90 and the ratios against the aims.
#
# Environment:
#   N                   measured iterations (default 200)
#   WARMUP              unmeasured iterations first (default 5)
#   CELLBOX_BENCH_USER  the unprivileged user to measure as when run as
#                       root (default: cellboxtest, if it exists)
# As root, the figures that count are the unprivileged user's (run through
# runuser, or setpriv); root's own follow, labelled, for reference.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${N:-200}
warmup=${WARMUP:-5}

bin=$(mktemp -d /tmp/cellbox-bench-bin.XXXXXX)
trap 'rm -rf "$bin"' EXIT
chmod 755 "$bin"
# Sandbox code is built without cgo, as the release binary is. The
# benchmark's name holds "cellbox": a `cellbox exec` kills sandbox inits
# whose parent does not look like cellbox (workspace/cleanup_linux.go).
CGO_ENABLED=0 go build -o "$bin/cellbox" ./cmd/cellbox
CGO_ENABLED=0 go build -o "$bin/cellbox-sandbox-bench" ./bench/sandbox
args=(-n "$n" -warmup "$warmup" -cellbox "$bin/cellbox")

# shellcheck source=lib.sh
source bench/lib.sh
run_as_user_and_root "$bin/cellbox-sandbox-bench" "${args[@]}"
