#!/usr/bin/env bash
# The go kernel (kernel/drivers/godriver) side by side with `go run` of the
# same programs on the host, in one run: start to the first result the
# first time ever (daemon, sandbox, kernel, and the packages every program
# needs compiled into the user's empty shared build cache, against `go run`
# with an empty GOCACHE), then with that cache warm in a new daemon
# (against `go run` with its cache warm), the cell after it, and the median
# round trip of later cells (each a new program: main compiled and linked),
# with the ratios. The user's cache directory is a temporary one
# (XDG_CACHE_HOME). bench/gokernel is the program.
#
# Environment:
#   N                   measured later cells per side (default 20)
#   CELLBOX_BENCH_USER  the unprivileged user to measure as when run as
#                       root (default: cellboxtest, if it exists)
set -euo pipefail
cd "$(dirname "$0")/.."
gocmd=$(command -v go)
bin=$(mktemp -d /tmp/cellbox-go-bench-bin.XXXXXX)
trap 'rm -rf "$bin"' EXIT
chmod 755 "$bin"
# The daemon's name holds "cellbox": a sandbox init whose parent does not
# look like cellbox is killed (workspace/cleanup_linux.go).
CGO_ENABLED=0 go build -o "$bin/cellbox" ./cmd/cellbox
CGO_ENABLED=0 go build -o "$bin/gokernel" ./bench/gokernel
args=(-cellbox "$bin/cellbox" -go "$gocmd" -n "${N:-20}")
user=${CELLBOX_BENCH_USER:-}
if [[ $(id -u) == 0 && -z $user ]] && id cellboxtest >/dev/null 2>&1; then
	user=cellboxtest
fi
if [[ $(id -u) != 0 || -z $user ]]; then
	"$bin/gokernel" "${args[@]}"
	exit
fi
echo "== as $user, unprivileged"
# The user's home: the daemons' user cache directory is made below its
# .cache (a sandbox cannot be shown one below /tmp).
home=$(getent passwd "$user" | cut -d: -f6)
env=(env -i "PATH=$(dirname "$gocmd"):/usr/local/bin:/usr/bin:/bin" "HOME=$home" TMPDIR=/tmp LANG=C.UTF-8)
if command -v runuser >/dev/null; then
	(cd / && runuser -u "$user" -- "${env[@]}" "$bin/gokernel" "${args[@]}")
else
	(cd / && setpriv --reuid="$user" --regid="$user" --init-groups -- "${env[@]}" "$bin/gokernel" "${args[@]}")
fi
