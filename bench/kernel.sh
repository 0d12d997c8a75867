#!/usr/bin/env bash
# Issue 5's benchmark: cellbox's python kernel side by side with Jupyter's
# (Debian's python3-ipykernel through python3-jupyter-client, run by
# /usr/bin/python3), both measured in one run, interleaved: cold start to
# the first result, the round trip of `1+1` (p50/p99), the time to deliver
# a 100,000-line print (against python printing to a pipe by itself), the
# interrupt latency of `while True: pass`, the RSS of an idle kernel, and
# 100 idle cellbox kernels with the daemon's own RSS. Prints one table of
# figures, ratios and aims, then the raw numbers.
#
# KERNEL_LANGUAGE=jupyter:python3 measures the Jupyter bridge's cost instead: the
# kernelspec python3 (ipykernel) hosted in a cellbox sandbox (kernel/start
# {language: "jupyter:python3"}) against the same kernel bare, through
# jupyter_client: cold start to the first result, the `1+1` round trip, the
# flood and the interrupt, with the ratio hosted/bare (aim below 1.2x); no
# memory step (bench/kernel/hosted.go).
#
# Environment:
#   KERNEL_LANGUAGE     python (the default), or jupyter:NAME of a Python
#                       kernelspec NAME (not LANGUAGE: gettext reads that)
#   N                   measured cold starts and floods per case (default 20)
#   WARMUP              unmeasured cold starts and floods first (default 3)
#   RTT                 measured round trips per side (default 1000)
#   INTERRUPTS          measured interrupts per side (default 30)
#   KERNELS             idle kernels started at once (default 100)
#   SETTLE_MS           how long the loop runs after its busy status before
#                       the interrupt (default 10)
#   CELLBOX_BENCH_USER  the unprivileged user to measure as when run as
#                       root (default: cellboxtest, if it exists)
# As root, the figures that count are the unprivileged user's (run through
# runuser, or setpriv); root's own follow, labelled, for reference.
set -euo pipefail
cd "$(dirname "$0")/.."
python=/usr/bin/python3
if ! "$python" -c 'import jupyter_client, ipykernel' 2>/dev/null; then
	echo "kernel.sh: $python lacks jupyter_client or ipykernel: apt-get install python3-jupyter-client python3-ipykernel" >&2
	exit 1
fi
if [[ ! -s kernel/drivers/driver.py ]]; then
	echo "kernel.sh: kernel/drivers/driver.py is empty: cellbox has no python driver to measure yet" >&2
	exit 1
fi

bin=$(mktemp -d /tmp/cellbox-bench-bin.XXXXXX)
trap 'rm -rf "$bin"' EXIT
chmod 755 "$bin"
# Built without cgo, as the release binary is. The daemon's name holds
# "cellbox": a sandbox init whose parent does not look like cellbox is
# killed (workspace/cleanup_linux.go).
CGO_ENABLED=0 go build -o "$bin/cellbox" ./cmd/cellbox
CGO_ENABLED=0 go build -o "$bin/cellbox-kernel-bench" ./bench/kernel
args=(-cellbox "$bin/cellbox" -python "$python" -n "${N:-20}" -warmup "${WARMUP:-3}" -rtt "${RTT:-1000}"
	-interrupts "${INTERRUPTS:-30}" -kernels "${KERNELS:-100}" -settle "${SETTLE_MS:-10}ms")
if [[ -n ${KERNEL_LANGUAGE:-} ]]; then
	args+=(-language "$KERNEL_LANGUAGE")
fi

# shellcheck source=lib.sh
source bench/lib.sh
run_as_user_and_root "$bin/cellbox-kernel-bench" "${args[@]}"
