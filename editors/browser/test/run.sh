#!/usr/bin/env bash
# The browser IDE's tests: the client library with node --test against the
# real daemon, then the page in Debian's chromium with playwright-core.
# Needs `npm ci && npm run build` done (make test does it) and
# /usr/bin/chromium (apt-get install chromium). Screenshots go to
# artifacts/browser/ at the repository root.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$here"
[ -f dist/index.html ] || { echo "dist/index.html missing: run 'npm ci && npm run build' in editors/browser" >&2; exit 1; }
[ -d node_modules ] || { echo "node_modules missing: run 'npm ci' in editors/browser" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
if [ -z "${CELLBOX_BIN:-}" ]; then
	(cd "$repo" && CGO_ENABLED=0 go build -o "$tmp/cellbox" ./cmd/cellbox)
	export CELLBOX_BIN="$tmp/cellbox"
fi
export CELLBOX_ARTIFACTS="${CELLBOX_ARTIFACTS:-$repo/artifacts/browser}"
mkdir -p "$CELLBOX_ARTIFACTS"
cp test/daemon.mjs "$tmp/daemon.mjs"
node_modules/.bin/esbuild test/client.test.ts --bundle --platform=node --format=esm --log-level=warning \
	--external:./daemon.mjs --outfile="$tmp/client.test.mjs"
echo "== client library (node --test)"
node --experimental-websocket --test --test-timeout=60000 --test-reporter=spec "$tmp/client.test.mjs"
echo "== page in chromium (playwright-core)"
# One file per part of the page (each starts its own daemon and chromium).
node --test --test-concurrency=1 --test-timeout=180000 --test-reporter=spec test/*.test.mjs
