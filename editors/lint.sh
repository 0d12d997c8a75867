#!/usr/bin/env bash
# Lints the editor clients; exits non-zero on any finding (warnings included).
#  - eslint (typescript-eslint's recommended rules, lint/eslint.config.mjs) on the TypeScript and
#    build/test JavaScript of the VS Code extension (vscode/), the browser IDE (browser/) and
#    their generated protocol (protocol/). Its packages are those of lint/package-lock.json:
#    `npm ci` in editors/lint (run here when lint/node_modules is missing).
#  - luacheck (Debian's lua-check: apt-get install lua-check) on the Neovim plugin and its
#    tests, configured by neovim/.luacheckrc.
# Usage: bash editors/lint.sh
set -euo pipefail
editors="$(cd "$(dirname "$0")" && pwd)"
cd "$editors"
fail=0

echo "== eslint (vscode, browser, protocol)"
[ -d lint/node_modules ] || (cd lint && npm ci --no-audit --no-fund)
lint/node_modules/.bin/eslint --config lint/eslint.config.mjs --max-warnings 0 . || fail=1

echo "== luacheck (neovim)"
if command -v luacheck >/dev/null; then
	(cd neovim && luacheck --no-color --codes -q --config .luacheckrc lua plugin test) || fail=1
else
	echo "editors/lint.sh: luacheck not found (apt-get install lua-check)" >&2
	fail=1
fi

exit $fail
