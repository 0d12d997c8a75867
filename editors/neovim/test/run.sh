#!/usr/bin/env bash
# Runs the Neovim plugin's tests: real headless Neovim against the real cellbox binary.
# Builds the binary once (without cgo, as released), then runs every test/test_*.lua in its own
# nvim with a timeout (60 s, or the file's "-- run.sh timeout: SECONDS" line, or
# $CELLBOX_NVIM_TEST_TIMEOUT); exits non-zero if any fails or times out.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
plugin="$(dirname "$here")"
repo="$(cd "$plugin/../.." && pwd)"
cd "$repo"

# Without Neovim the tests skip, saying so; in CI (CI=true, which installs neovim) that is a failure.
if ! command -v nvim >/dev/null || ! nvim --headless -u NONE -i NONE -c 'if !has("nvim-0.7") | cquit 1 | endif | qall!' </dev/null >/dev/null 2>&1; then
	echo "editors/neovim/test/run.sh: SKIP: Neovim 0.7 or later not found (apt-get install neovim)" >&2
	[ "${CI:-}" = true ] && exit 1
	exit 0
fi
tmp="$(mktemp -d)"
# `cellbox connect` (test_connect.lua) starts a long-lived daemon; its runtime file (in
# $XDG_RUNTIME_DIR/cellbox, which points into $tmp) holds its pid, stopped here at the end.
cleanup() {
	for f in "$tmp"/run/cellbox/server-*.json "$tmp"/state-*/server-*.json; do
		[ -f "$f" ] || continue
		pid="$(sed -n 's/.*"pid": *\([0-9][0-9]*\).*/\1/p' "$f")"
		[ -n "$pid" ] && kill "$pid" 2>/dev/null
	done
	sleep 0.2
	rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/run" && chmod 700 "$tmp/run"
export XDG_RUNTIME_DIR="$tmp/run"
echo "building cellbox..."
CGO_ENABLED=0 ${GO:-go} build -o "$tmp/bin/cellbox" ./cmd/cellbox || exit 1
export CELLBOX_BIN="$tmp/bin/cellbox"
export PATH="$tmp/bin:$PATH"
export XDG_CACHE_HOME="$tmp/cache" XDG_STATE_HOME="$tmp/xstate" XDG_DATA_HOME="$tmp/data"

fail=0
tests=("$@")
[ ${#tests[@]} -eq 0 ] && tests=("$here"/test_*.lua)
for t in "${tests[@]}"; do
	name="$(basename "$t")"
	export CELLBOX_STATE_DIR="$tmp/state-${name%.lua}"
	mkdir -p "$CELLBOX_STATE_DIR"
	start=$(date +%s)
	# A file that needs longer says so in a line "-- run.sh timeout: SECONDS".
	limit="$(sed -n 's/^-- run.sh timeout: \([0-9][0-9]*\)$/\1/p' "$t" | head -1)"
	timeout -k 5 ${CELLBOX_NVIM_TEST_TIMEOUT:-${limit:-60}} nvim --headless -u NONE -i NONE \
		--cmd "set rtp+=$plugin" -c "luafile $t" </dev/null >"$tmp/out" 2>"$tmp/err"
	rc=$?
	sed 's/^/    /' "$tmp/out"
	if [ $rc -ne 0 ]; then
		[ $rc -eq 124 ] && echo "    (timed out)"
		sed 's/^/    stderr: /' "$tmp/err" | tail -20
		echo "FAIL $name ($(( $(date +%s) - start ))s)"
		fail=1
	else
		echo "ok   $name ($(( $(date +%s) - start ))s)"
	fi
done
exit $fail
