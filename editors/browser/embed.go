// Package browser holds the built browser IDE: dist/index.html, one
// self-contained page (script and styles inline) that `cellbox serve
// --listen` serves at /. Build it with `npm ci && npm run build` in this
// directory (make build does). Only dist/README.md is committed, so a Go
// build without the page still works; rpc then serves a short page at /.
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
