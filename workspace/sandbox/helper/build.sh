#!/usr/bin/env bash
# Builds the lean sandbox helper (cmd/cellbox-sandbox) into
# cellbox-sandbox beside this script, and writes sources.sha256: the
# SHA-256 of every file of this module it is built from, plus go.mod and
# go.sum (TestCommittedHelperIsFresh recomputes them). Reproducible: the
# same Go release writes the same bytes.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=workspace/sandbox/helper
go=${GO:-go}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=0 "$go" build -trimpath -buildvcs=false -ldflags='-s -w -buildid=' -o "$tmp/cellbox-sandbox" ./cmd/cellbox-sandbox
mod=$("$go" list -m)
{
	echo "# the sources of cellbox-sandbox (built with $("$go" env GOVERSION), $(stat -c %s "$tmp/cellbox-sandbox") bytes); run make helper after changing any"
	{
		"$go" list -deps -f '{{if .Module}}{{if eq .Module.Path "'"$mod"'"}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}{{end}}' ./cmd/cellbox-sandbox |
			sed "s|^$PWD/||"
		echo go.mod
		echo go.sum
	} | LC_ALL=C sort | xargs sha256sum
} >"$tmp/sources.sha256"
mv "$tmp/cellbox-sandbox" "$tmp/sources.sha256" "$out/"
echo "$out/cellbox-sandbox: $(stat -c %s "$out/cellbox-sandbox") bytes"
