package rpc

import (
	"bytes"
	"io/fs"
	"net/http"
	"strings"
)

// tokenCookie carries the token for a reload of the browser IDE.
const tokenCookie = "cellbox_token"

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
	if tok := r.URL.Query().Get("token"); tok != "" {
		// The guard checked it. A reload of the page (its address no longer
		// holds the token) then carries it as this cookie: HttpOnly, so
		// scripts cannot read it, and SameSite=Strict, so other sites'
		// pages cannot send it (the Origin check stops other local ones).
		http.SetCookie(w, &http.Cookie{
			Name: tokenCookie, Value: tok, Path: "/", HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
		})
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
