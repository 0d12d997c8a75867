package rpc

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"io/fs"
	"net/http"
	"strings"
)

// legacyTokenCookie is the cookie that earlier builds set to carry the
// token across a reload. Cookies ignore ports, so every other server on
// 127.0.0.1 received it: the page now removes it, and the guard ignores it.
const legacyTokenCookie = "cellbox_token"

// reloadScript runs in the page served for GET / without a token (a reload
// of the browser IDE, whose address no longer holds it). It reads the token
// the IDE kept in sessionStorage, which only this origin (scheme, host and
// port) can read, and loads the IDE again with it; the IDE then removes it
// from the address bar. A token that fails is forgotten, so a restarted
// daemon cannot loop.
const reloadScript = `(function(){var m=document.getElementById("m");try{var u=new URL(location.href),k="cellbox.token",t=sessionStorage.getItem(k);if(u.searchParams.has("token")){sessionStorage.removeItem(k);return}if(t){m.textContent="Reconnecting\u2026";u.searchParams.set("token",t);location.replace(u.href)}}catch(e){}})();`

var reloadPage = []byte(`<!doctype html><meta charset="utf-8"><title>cellbox</title>` +
	`<p id="m">Missing or wrong token: open the URL cellbox printed when it started.</p>` +
	`<script>` + reloadScript + `</script>`)

var reloadCSP = func() string {
	sum := sha256.Sum256([]byte(reloadScript))
	return "default-src 'none'; script-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}()

// serveReload answers GET / without a valid token: 401, with a page that
// holds nothing but the script that reloads the IDE with the token this
// tab already has.
func serveReload(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", reloadCSP)
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write(reloadPage)
}

// serveUI is GET /: the browser IDE of Options.UI (one self-contained
// index.html, script and styles inline), with the Content-Security-Policy
// its build wrote to the file csp (allowing exactly its inline script by
// hash). The guard has checked the token: the page reads it from its URL
// once, keeps it in sessionStorage and removes it from the address bar; a
// reload comes back without it and gets serveReload's page. Without Options.UI, or when it
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
	if _, err := r.Cookie(legacyTokenCookie); err == nil {
		http.SetCookie(w, &http.Cookie{Name: legacyTokenCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
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
