#!/usr/bin/env bash
# The VS Code extension's tests: `npm ci` if node_modules is missing, typecheck and build the
# extension, then `node --test` on the client code against the REAL cellbox binary (built here
# without cgo, as released). The `vscode` module is faked (test/fake-vscode.ts) only for the
# parts that need a VS Code host; every protocol call goes to the real daemon.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$here"
[ -d node_modules ] || npm ci --no-audit --no-fund
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
if [ -z "${CELLBOX_BIN:-}" ]; then
	(cd "$repo" && CGO_ENABLED=0 ${GO:-go} build -o "$tmp/cellbox" ./cmd/cellbox)
	export CELLBOX_BIN="$tmp/cellbox"
fi
echo "== typecheck and build (tsc, esbuild)"
node_modules/.bin/tsc --noEmit -p .
node build.mjs
tests=("$@")
[ ${#tests[@]} -eq 0 ] && tests=(test/*.test.ts)
out=()
for t in "${tests[@]}"; do
	name="$(basename "$t" .ts)"
	node_modules/.bin/esbuild "$t" --bundle --platform=node --format=cjs --log-level=warning \
		--alias:vscode=./test/fake-vscode.ts --outfile="$tmp/$name.cjs"
	out+=("$tmp/$name.cjs")
done
echo "== client against the real daemon (node --test)"
node --test --test-timeout=120000 --test-reporter=spec "${out[@]}"
