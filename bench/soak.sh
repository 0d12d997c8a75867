#!/usr/bin/env bash
# The soak and leak check (bench/soak): 16 websocket clients against the
# real binary for DURATION, each with an overlay workspace, a python, a
# javascript and a bash kernel, a terminal and a watch, looping over
# executions, file writes, fs/didChange, terminal commands, changes,
# commit and discard. Prints the requests, executions, outputs and bytes,
# and the daemon's descriptors, goroutines, RSS, processes, mounts and
# state files before and after; exits non-zero when a request went
# unanswered, an output was lost or out of order, or a figure leaked.
#
# Environment:
#   DURATION            how long the clients loop (default 10m)
#   CLIENTS             websocket clients (default 16)
#   CELLBOX_BENCH_USER  the unprivileged user to run as when run as root
#                       (default: cellboxtest, if it exists)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(mktemp -d /tmp/cellbox-bench-bin.XXXXXX)
trap 'rm -rf "$bin"' EXIT
chmod 755 "$bin"
# Built without cgo, as the release binary is. The daemon's name holds
# "cellbox": a sandbox init whose parent does not look like cellbox is
# killed (workspace/cleanup_linux.go).
CGO_ENABLED=0 go build -o "$bin/cellbox" ./cmd/cellbox
CGO_ENABLED=0 go build -o "$bin/cellbox-soak" ./bench/soak
args=(-cellbox "$bin/cellbox" -duration "${DURATION:-10m}" -clients "${CLIENTS:-16}")

user=${CELLBOX_BENCH_USER:-}
if [[ $(id -u) == 0 && -z $user ]] && id cellboxtest >/dev/null 2>&1; then
	user=cellboxtest
fi
if [[ $(id -u) != 0 || -z $user ]]; then
	exec "$bin/cellbox-soak" "${args[@]}"
fi
# As root: the soak runs as the unprivileged user, as cellbox is meant to
# run, in a clean environment and a directory the user can enter.
env=(env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/tmp TMPDIR=/tmp LANG=C.UTF-8)
if command -v runuser >/dev/null; then
	as_user=(runuser -u "$user" --)
else
	as_user=(setpriv --reuid="$user" --regid="$user" --init-groups --)
fi
echo "== as $user, unprivileged"
cd / && "${as_user[@]}" "${env[@]}" "$bin/cellbox-soak" "${args[@]}"
