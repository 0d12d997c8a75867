#!/usr/bin/env bash
# The sql kernel's benchmark: cellbox's sql kernel (SQLite through
# modernc.org/sqlite, in the workspace's sandbox, over JSON-RPC) side by side
# with the sqlite3 shell (Debian's, /usr/bin/sqlite3), in one run,
# interleaved: cold start to the first result (a kernel in a fresh scratch
# workspace against starting sqlite3), and the round trip of `SELECT 1` and
# of a 1,000-row select on a warm kernel against a persistent sqlite3 fed
# over a pipe (p50/p99); where PostgreSQL is installed, `%connect postgres`
# (the first, with initdb, and the next, a copy of the template) and `SELECT 1`
# on it against a persistent psql. Prints tables of figures and ratios
# (bench/sql/main.go).
#
# Environment:
#   N                   measured cold starts per side (default 20)
#   WARMUP              unmeasured cold starts per side first (default 3)
#   RTT                 measured round trips per query and side (default 500)
#   CELLBOX_BENCH_USER  the unprivileged user to measure as when run as
#                       root (default: cellboxtest, if it exists)
# As root, the figures are the unprivileged user's (run through runuser, or
# setpriv); ROOT_TOO=1 adds root's own, labelled, for reference.
set -euo pipefail
cd "$(dirname "$0")/.."
sqlite3=/usr/bin/sqlite3
if [[ ! -x $sqlite3 ]]; then
	echo "sql.sh: $sqlite3 is missing: apt-get install sqlite3" >&2
	exit 1
fi

bin=$(mktemp -d /tmp/cellbox-sql-bench-bin.XXXXXX)
trap 'rm -rf "$bin"' EXIT
chmod 755 "$bin"
# Built without cgo, as the release binary is. The daemon's name holds
# "cellbox": a sandbox init whose parent does not look like cellbox is
# killed (workspace/cleanup_linux.go).
CGO_ENABLED=0 go build -o "$bin/cellbox" ./cmd/cellbox
CGO_ENABLED=0 go build -o "$bin/cellbox-sql-bench" ./bench/sql
args=(-cellbox "$bin/cellbox" -sqlite3 "$sqlite3" -n "${N:-20}" -warmup "${WARMUP:-3}" -rtt "${RTT:-500}")

if [[ $(id -u) != 0 ]]; then
	"$bin/cellbox-sql-bench" "${args[@]}" -label "as $(id -un)"
	exit
fi

user=${CELLBOX_BENCH_USER:-}
if [[ -z $user ]] && id cellboxtest >/dev/null 2>&1; then
	user=cellboxtest
fi
if [[ -n $user ]]; then
	env=(env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/tmp TMPDIR=/tmp LANG=C.UTF-8)
	if command -v runuser >/dev/null; then
		as_user=(runuser -u "$user" --)
	else
		as_user=(setpriv --reuid="$user" --regid="$user" --init-groups --)
	fi
	(cd / && "${as_user[@]}" "${env[@]}" "$bin/cellbox-sql-bench" "${args[@]}" -label "as $user, unprivileged")
else
	echo "== no unprivileged user: set CELLBOX_BENCH_USER (or create cellboxtest) to measure as one"
fi
if [[ -n ${ROOT_TOO:-} || -z $user ]]; then
	echo
	"$bin/cellbox-sql-bench" "${args[@]}" -label "as root, for reference"
fi
