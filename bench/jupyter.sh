#!/usr/bin/env bash
# cellbox as a Jupyter kernel: the cellbox-python kernelspec (`cellbox
# jupyter install --language python`, which runs `cellbox jupyter-kernel`
# on the user's daemon) side by side with ipykernel (the kernelspec
# python3), both driven through Debian's jupyter_client by /usr/bin/python3,
# in one run, interleaved: start to kernel_info ready, the `1+1` round trip
# (p50/p99) and a 100,000-line print, with the ratios and aims. Also the
# same asked of the daemon over its websocket (bench/jupyter/probe), to say
# where cellbox-python's time goes. bench/jupyter/bench.py is the program;
# see it for what each figure is.
#
# Everything of the run lives in a temporary directory: Jupyter's data dir
# with the kernelspec, the daemon's state and runtime dirs (the first
# cellbox-python kernel starts the daemon, as on a user's machine; it is
# stopped at the end), the project the kernels start in.
#
# Environment:
#   N                   measured starts per side (default 20)
#   WARMUP              unmeasured starts per side first (default 2)
#   RTT                 measured `1+1` round trips per side (default 500)
#   FLOODS              measured floods per side (default 20)
#   CELLBOX_BENCH_USER  the unprivileged user to measure as when run as
#                       root (default: cellboxtest, if it exists)
# As root, the figures are the unprivileged user's (run through runuser, or
# setpriv); ROOT_TOO=1 adds root's own, labelled, for reference.
set -euo pipefail
cd "$(dirname "$0")/.."
python=/usr/bin/python3
if ! "$python" -c 'import jupyter_client, ipykernel' 2>/dev/null; then
	echo "jupyter.sh: $python lacks jupyter_client or ipykernel: apt-get install python3-jupyter-client python3-ipykernel" >&2
	exit 1
fi

bin=$(mktemp -d /tmp/cellbox-jupyter-bench-bin.XXXXXX)
trap 'rm -rf "$bin"' EXIT
chmod 755 "$bin"
# Built without cgo, as the release binary is. The daemon's name holds
# "cellbox": a sandbox init whose parent does not look like cellbox is
# killed (workspace/cleanup_linux.go).
CGO_ENABLED=0 go build -o "$bin/cellbox" ./cmd/cellbox
CGO_ENABLED=0 go build -o "$bin/cellbox-jupyter-probe" ./bench/jupyter/probe
cp bench/jupyter/bench.py "$bin/bench.py"
chmod 644 "$bin/bench.py"
args=(--cellbox "$bin/cellbox" --probe "$bin/cellbox-jupyter-probe" -n "${N:-20}" --warmup "${WARMUP:-2}"
	--rtt "${RTT:-500}" --floods "${FLOODS:-20}")

if [[ $(id -u) != 0 ]]; then
	"$python" "$bin/bench.py" "${args[@]}" --label "as $(id -un)"
	exit
fi

user=${CELLBOX_BENCH_USER:-}
if [[ -z $user ]] && id cellboxtest >/dev/null 2>&1; then
	user=cellboxtest
fi
if [[ -n $user ]]; then
	# A clean environment, and a directory the user can enter.
	env=(env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/tmp TMPDIR=/tmp LANG=C.UTF-8)
	if command -v runuser >/dev/null; then
		as_user=(runuser -u "$user" --)
	else
		as_user=(setpriv --reuid="$user" --regid="$user" --init-groups --)
	fi
	(cd / && "${as_user[@]}" "${env[@]}" "$python" "$bin/bench.py" "${args[@]}" --label "as $user, unprivileged")
else
	echo "== no unprivileged user: set CELLBOX_BENCH_USER (or create cellboxtest) to measure as one"
	ROOT_TOO=1
fi
if [[ ${ROOT_TOO:-} == 1 ]]; then
	echo
	"$python" "$bin/bench.py" "${args[@]}" --label "as root, for reference"
fi
