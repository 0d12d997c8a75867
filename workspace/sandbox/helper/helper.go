// Package helper carries the lean sandbox helper (cmd/cellbox-sandbox),
// built by `make helper`: the daemon registers it with
// sandbox.UseHelper, and every sandbox's init and spawner run it instead
// of re-executing the daemon's own binary.
//
// The binary is committed (git stores it compressed), so that `go build` and `go install`
// carry it; sources.sha256 names the sources it was built from, and
// TestCommittedHelperIsFresh fails when they changed since. The build is
// reproducible: `make helper` with the same Go release writes the same
// bytes (CGO_ENABLED=0, -trimpath, no build id).
package helper

import _ "embed"

// Binary is the helper executable.
//
//go:embed cellbox-sandbox
var Binary []byte
