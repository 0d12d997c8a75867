#!/usr/bin/env bash
# cellbox's r kernel side by side with IRkernel (Debian's r-cran-irkernel,
# the kernelspec `ir`, driven by jupyter_client from /usr/bin/python3), in
# one run, interleaved: cold start to the first result of `1+1` and the
# `1+1` round trip (p50/p99), with the ratios; a 100,000-line print next to
# Rscript printing it; and cellbox's ruby kernel
# next to a bare `ruby -e` start (no Jupyter kernel for Ruby here).
# bench/r/bench.py is the program.
#
# Environment:
#   N    measured cold starts per side (default 5)
#   RTT  measured round trips per side (default 200)
#   FLOOD  100,000-line prints per side (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
python=/usr/bin/python3
if ! "$python" -c 'import jupyter_client' 2>/dev/null || ! jupyter kernelspec list 2>/dev/null | grep -qw ir && [[ ! -d /usr/share/jupyter/kernels/ir ]]; then
	echo "r.sh: needs python3-jupyter-client and r-cran-irkernel (the kernelspec ir)" >&2
	exit 1
fi
bin=$(mktemp -d /tmp/cellbox-r-bench.XXXXXX)
trap 'rm -rf "$bin"' EXIT
CGO_ENABLED=0 go build -o "$bin/cellbox" ./cmd/cellbox
state=$(mktemp -d /tmp/cellbox-r-bench-state.XXXXXX)
trap 'rm -rf "$bin" "$state"' EXIT
XDG_STATE_HOME=$state XDG_RUNTIME_DIR=$state "$python" bench/r/bench.py --cellbox "$bin/cellbox" -n "${N:-5}" --rtt "${RTT:-200}" --flood "${FLOOD:-3}"
