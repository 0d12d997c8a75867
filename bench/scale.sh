#!/usr/bin/env bash
# The daemon's scaling curve (bench/scale): one daemon grown through
# K = 1, 10, 50, 200 idle python kernels (over ceil(K/4) overlay workspaces,
# with K/2 terminals). At each point: the daemon's RSS, descriptors and
# goroutines (/metrics), the RSS and PSS of everything below it and per
# kernel, the CPU all of it uses in a quiet window, and the p50/p99 of
# kernel/execute `1+1`, kernel/list and daemon/stats, with the ratio of the
# largest point to the smallest (aim: within 1.5x); the growth per added
# kernel between points. Then a burst of kernel starts in new scratch
# workspaces, at once and back to back (aim: p99 under 3x p50); then 10
# idle kernels under the lean sandbox helper against the daemon's binary
# re-executed (CELLBOX_SANDBOX_HELPER=self), with ipykernel beside them.
#
# Environment:
#   POINTS              the curve's kernel counts (default 1,10,50,200)
#   QUIET               the idle-CPU window at each point but the largest
#                       (default 10s)
#   QUIET_LAST          the window at the largest point (default 60s, or
#                       QUIET when that is set)
#   RTT                 measured `1+1` round trips per point (default 300)
#   BURST               kernels of the burst (default 20; 0: none)
#   COMPARE_SELF        lean helper against self (default true)
#   COMPARE_KERNELS     idle kernels in each daemon of that (default 10)
#   CELLBOX_BENCH_USER  the unprivileged user to measure as when run as
#                       root (default: cellboxtest, if it exists)
# As root, the figures that count are the unprivileged user's (run through
# runuser, or setpriv); root's own follow, labelled, for reference.
set -euo pipefail
cd "$(dirname "$0")/.."
python=/usr/bin/python3

bin=$(mktemp -d /tmp/cellbox-bench-bin.XXXXXX)
trap 'rm -rf "$bin"' EXIT
chmod 755 "$bin"
# Built without cgo, as the release binary is. The daemon's name holds
# "cellbox": a sandbox init whose parent does not look like cellbox is
# killed (workspace/cleanup_linux.go).
CGO_ENABLED=0 go build -o "$bin/cellbox" ./cmd/cellbox
CGO_ENABLED=0 go build -o "$bin/cellbox-scale-bench" ./bench/scale
args=(-cellbox "$bin/cellbox" -points "${POINTS:-1,10,50,200}" -quiet "${QUIET:-10s}"
	-quiet-last "${QUIET_LAST:-${QUIET:-60s}}" -rtt "${RTT:-300}" -burst "${BURST:-20}"
	-compare-self="${COMPARE_SELF:-true}" -compare-kernels "${COMPARE_KERNELS:-10}" -python "$python")
# ipykernel beside the helpers' comparison, through bench/kernel's Jupyter
# side (copied where the unprivileged user can read it), when Debian's
# jupyter_client and ipykernel are there.
if "$python" -c 'import jupyter_client, ipykernel' 2>/dev/null; then
	cp bench/kernel/jupyter_side.py "$bin/"
	chmod 644 "$bin/jupyter_side.py"
	args+=(-jupyter-side "$bin/jupyter_side.py")
else
	echo "scale.sh: $python lacks jupyter_client or ipykernel: no ipykernel row (apt-get install python3-jupyter-client python3-ipykernel)" >&2
fi

# shellcheck source=lib.sh
source bench/lib.sh
run_as_user_and_root "$bin/cellbox-scale-bench" "${args[@]}"
