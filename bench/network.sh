#!/usr/bin/env bash
# The network's benchmark (PROTOCOL.md §9), side by side with its peers in
# one run, interleaved (bench/network/main.go): the sandbox's proxies (the
# HTTP proxy forwarding a request and tunnelling CONNECT, and SOCKS5)
# against a direct connection to the same loopback server, for the
# latency a request gains and a 100 MB download's throughput; and an npm
# install through the daemon's package cache against a plain npm install
# from npm's own cache, both caches warm. The install needs the npm
# registry once (to warm the caches).
#
# Environment:
#   N         measured requests per side (default 500)
#   MB        the download's size (default 100)
#   INSTALLS  measured installs per side (default 5; 0 skips them)
#   PACKAGE   the npm package (default left-pad@1.3.0)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(mktemp -d /tmp/cellbox-network-bench-bin.XXXXXX)
trap 'rm -rf "$bin"' EXIT
chmod 755 "$bin"
CGO_ENABLED=0 go build -o "$bin/cellbox" ./cmd/cellbox
CGO_ENABLED=0 go build -o "$bin/cellbox-network-bench" ./bench/network
"$bin/cellbox-network-bench" -cellbox "$bin/cellbox" -n "${N:-500}" -mb "${MB:-100}" \
	-installs "${INSTALLS:-5}" -package "${PACKAGE:-left-pad@1.3.0}"
