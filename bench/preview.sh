#!/usr/bin/env bash
# A preview's cost (workspace/exposePort, bench/preview), side by side with
# its peer in one run, interleaved: the same python server
# (cmd/cellbox/testdata/preview_app.py, http.server.ThreadingHTTPServer, HTTP/1.1
# keep-alive) run by a python kernel in a workspace's sandbox and reached
# through the preview's URL (each connection dialed by the sandbox's init,
# proxied by the daemon), against that code run by a plain python3 on the
# host and reached directly. Figures, with the ratio preview ÷ direct: GET
# 1 KiB on one keep-alive connection (p50, p99), on a new connection each
# (the app closing it, so the preview dials the sandbox each time; and the
# app keeping it), the throughput of 1 MiB bodies, a websocket echo's
# round trip; and the CPU per request of the daemon, the sandbox's
# helpers, the app and the client.
#
# Environment:
#   N       GETs on one keep-alive connection per side (default 2000)
#   N_NEW   GETs on a new connection each, per side and kind (default 300)
#   MIB     MiB fetched for the throughput, per side (default 200)
#   N_WS    websocket echoes per side (default 2000)
#   ROUNDS  rounds each figure is cut into, the sides alternating (default 10)
#   CELLBOX_BENCH_USER  the unprivileged user to measure as when run as
#                       root (default: cellboxtest, if it exists)
# As root, the figures that count are the unprivileged user's (run through
# runuser, or setpriv); root's own follow, labelled, for reference.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(mktemp -d /tmp/cellbox-preview-bench-bin.XXXXXX)
trap 'rm -rf "$bin"' EXIT
chmod 755 "$bin"
# Built without cgo, as the release binary is. The daemon's name holds
# "cellbox": a sandbox init whose parent does not look like cellbox is
# killed (workspace/cleanup_linux.go).
CGO_ENABLED=0 go build -o "$bin/cellbox" ./cmd/cellbox
CGO_ENABLED=0 go build -o "$bin/cellbox-preview-bench" ./bench/preview
# The app: the preview tests' own, copied where the unprivileged user reads it.
install -m 644 cmd/cellbox/testdata/preview_app.py "$bin/preview_app.py"
# shellcheck source=lib.sh
source bench/lib.sh
run_as_user_and_root "$bin/cellbox-preview-bench" -cellbox "$bin/cellbox" -app "$bin/preview_app.py" -n "${N:-2000}" -n-new "${N_NEW:-300}" \
	-mib "${MIB:-200}" -n-ws "${N_WS:-2000}" -rounds "${ROUNDS:-10}"
