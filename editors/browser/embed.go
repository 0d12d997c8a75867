// Package browser holds the built browser IDE: dist/index.html, one
// self-contained page (script and styles inline) that `cellbox serve
// --listen` serves at /. The built page is committed, so that a plain
// `go build ./cmd/cellbox` or `go install` serves the whole IDE without
// node; `make build` (npm ci && npm run build in this directory) rebuilds it,
// and TestCommittedPageIsFresh fails when dist/ is older than its sources.
package browser

import (
	"embed"
	"io/fs"
)

//go:embed dist
var dist embed.FS

// FS is the built page: index.html, and csp (the Content-Security-Policy
// that allows exactly its inline script).
func FS() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // "dist" is a valid path: cannot happen
	}
	return sub
}
