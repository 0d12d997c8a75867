package rpc

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"testing/fstest"
)

// The browser IDE of Options.UI is served at / with its CSP, only with the
// token; without Options.UI (or without its csp file) / is the placeholder.
func TestServeUI(t *testing.T) {
	ui := fstest.MapFS{
		"index.html": {Data: []byte("<!doctype html><title>the ide</title><script>ide()</script>")},
		"csp":        {Data: []byte("default-src 'none'; script-src 'sha256-abc'\n")},
	}
	srv := startHTTP(t, Options{UI: ui})

	resp, body := get(t, srv.URL+"/?token="+httpToken, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "the ide") {
		t.Fatalf("GET /?token: %d %q", resp.StatusCode, body)
	}
	for k, want := range map[string]string{
		"Content-Security-Policy": "default-src 'none'; script-src 'sha256-abc'",
		"Referrer-Policy":         "no-referrer",
		"Cache-Control":           "no-store",
		"X-Content-Type-Options":  "nosniff",
		"Content-Type":            "text/html; charset=utf-8",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}

	// No cookie carries the token: cookies ignore ports, so every other
	// server on 127.0.0.1 would receive it. A cookie of an earlier build is
	// removed, and opens nothing.
	for _, c := range resp.Cookies() {
		t.Errorf("the page set a cookie: %+v", c)
	}
	resp, body = get(t, srv.URL+"/?token="+httpToken, http.Header{"Cookie": {"cellbox_token=" + httpToken}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "the ide") {
		t.Fatalf("GET /?token with the old cookie: %d %.200q", resp.StatusCode, body)
	}
	if cs := resp.Cookies(); len(cs) != 1 || cs[0].Name != "cellbox_token" || cs[0].MaxAge >= 0 || cs[0].Value != "" {
		t.Fatalf("the old token cookie was not removed: %+v", cs)
	}
	resp, body = get(t, srv.URL+"/", http.Header{"Cookie": {"cellbox_token=" + httpToken}})
	if resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, "the ide") {
		t.Fatalf("the old cookie still opens the IDE: %d %q", resp.StatusCode, body)
	}

	// A reload (no token in the address) gets 401 and a page with only the
	// script that reloads with the token this tab kept in sessionStorage.
	resp, body = get(t, srv.URL+"/", nil)
	if resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, "the ide") {
		t.Fatalf("GET / without the token: %d %q", resp.StatusCode, body)
	}
	if !strings.Contains(body, `sessionStorage.getItem(k)`) || strings.Contains(body, httpToken) {
		t.Fatalf("the reload page: %q", body)
	}
	sum := sha256.Sum256([]byte(reloadScript))
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'") || !strings.HasPrefix(csp, "default-src 'none'") {
		t.Fatalf("the reload page's CSP %q does not allow exactly its script", csp)
	}
	if !strings.Contains(body, "<script>"+reloadScript+"</script>") {
		t.Fatal("the reload page's script is not the one its CSP hashes")
	}
	resp, _ = get(t, srv.URL+"/index.html?token="+httpToken, nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /index.html: %d, want 404 (the page is only at /)", resp.StatusCode)
	}

	noCSP := startHTTP(t, Options{UI: fstest.MapFS{"index.html": ui["index.html"]}})
	resp, body = get(t, noCSP.URL+"/?token="+httpToken, nil)
	if resp.StatusCode != http.StatusOK || strings.Contains(body, "the ide") || !strings.Contains(body, "/rpc") {
		t.Fatalf("UI without csp: %d %q, want the placeholder", resp.StatusCode, body)
	}
	plain := startHTTP(t, Options{})
	if resp, body = get(t, plain.URL+"/?token="+httpToken, nil); !strings.Contains(body, "/rpc") {
		t.Fatalf("no UI: %d %q, want the placeholder", resp.StatusCode, body)
	}
}
