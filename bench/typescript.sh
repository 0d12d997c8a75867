#!/usr/bin/env bash
# cellbox's typescript kernel side by side with tsx's REPL (npm's tsx@4,
# installed into a temporary directory by this script), in one run,
# interleaved: cold start to the first result and the round trip of a
# one-line TypeScript cell (p50/p99), with the ratio cellbox/tsx.
# bench/typescript/main.go is the program; see it for what each figure is.
#
# Environment:
#   N                   measured cold starts per side (default 20)
#   WARMUP              unmeasured cold starts per side first (default 3)
#   RTT                 measured round trips per side (default 500)
#   CELLBOX_BENCH_USER  the unprivileged user to measure as when run as
#                       root (default: cellboxtest, if it exists)
# As root, the figures are the unprivileged user's (run through runuser, or
# setpriv); ROOT_TOO=1 adds root's own, labelled, for reference.
set -euo pipefail
cd "$(dirname "$0")/.."
node=$(command -v node) || { echo "typescript.sh: node not found on PATH" >&2; exit 1; }
command -v npm >/dev/null || { echo "typescript.sh: npm not found on PATH (it installs tsx)" >&2; exit 1; }

bin=$(mktemp -d /tmp/cellbox-ts-bench-bin.XXXXXX)
trap 'rm -rf "$bin"' EXIT
chmod 755 "$bin"
# Built without cgo, as the release binary is. The daemon's name holds
# "cellbox": a sandbox init whose parent does not look like cellbox is
# killed (workspace/cleanup_linux.go).
CGO_ENABLED=0 go build -o "$bin/cellbox" ./cmd/cellbox
CGO_ENABLED=0 go build -o "$bin/cellbox-ts-bench" ./bench/typescript
(cd "$bin" && npm install --no-audit --no-fund --no-save --silent --prefix "$bin/npm" tsx@4 >/dev/null)
chmod -R a+rX "$bin/npm"
args=(-cellbox "$bin/cellbox" -node "$node" -tsx "$bin/npm/node_modules/tsx" -n "${N:-20}" -warmup "${WARMUP:-3}" -rtt "${RTT:-500}")

if [[ $(id -u) != 0 ]]; then
	"$bin/cellbox-ts-bench" "${args[@]}" -label "as $(id -un)"
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
	(cd / && "${as_user[@]}" "${env[@]}" "$bin/cellbox-ts-bench" "${args[@]}" -label "as $user, unprivileged")
else
	echo "== no unprivileged user: set CELLBOX_BENCH_USER (or create cellboxtest) to measure as one"
	ROOT_TOO=1
fi
if [[ ${ROOT_TOO:-} == 1 ]]; then
	echo
	"$bin/cellbox-ts-bench" "${args[@]}" -label "as root, for reference"
fi
