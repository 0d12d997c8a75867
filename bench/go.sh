#!/usr/bin/env bash
# The go kernel (kernel/drivers/godriver) side by side with `go run` of the
# same programs on the host, in one run: cold start to the first result
# (daemon, sandbox, kernel, and the standard library's packages compiled
# into the sandbox's empty build cache, against `go run` with an empty
# GOCACHE), the first cell after it, and the median round trip of later
# cells (each a new program: main compiled and linked), with the ratios.
# bench/gokernel is the program.
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
env=(env -i "PATH=$(dirname "$gocmd"):/usr/local/bin:/usr/bin:/bin" HOME=/tmp TMPDIR=/tmp LANG=C.UTF-8)
if command -v runuser >/dev/null; then
	(cd / && runuser -u "$user" -- "${env[@]}" "$bin/gokernel" "${args[@]}")
else
	(cd / && setpriv --reuid="$user" --regid="$user" --init-groups -- "${env[@]}" "$bin/gokernel" "${args[@]}")
fi
