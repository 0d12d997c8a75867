package rpc

import (
	"bytes"
	"io/fs"
	"net/http"
	"strings"
)

// serveUI is GET /: the browser IDE of Options.UI (one self-contained
// index.html, script and styles inline), with the Content-Security-Policy
// its build wrote to the file csp (allowing exactly its inline script by
// hash). The guard has checked the token: the page reads it from its URL
// once and removes it from the address bar. Without Options.UI, or when it
// lacks either file, this is serveIndex's short page.
func (d *Daemon) serveUI(w http.ResponseWriter, r *http.Request) {
	if d.opts.UI == nil {
		d.serveIndex(w, r)
		return
	}
	page, err := fs.ReadFile(d.opts.UI, "index.html")
	if err != nil {
		d.log.Warn("browser IDE missing from this build; serving the placeholder", "err", err)
		d.serveIndex(w, r)
		return
	}
	csp, err := fs.ReadFile(d.opts.UI, "csp")
	if err != nil || len(bytes.TrimSpace(csp)) == 0 {
		d.log.Warn("browser IDE has no csp file; serving the placeholder", "err", err)
		d.serveIndex(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", strings.TrimSpace(string(csp)))
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store") // the URL that fetched it carries the token
	_, _ = w.Write(page)
}
