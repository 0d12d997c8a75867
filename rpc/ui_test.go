package rpc

import (
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

	// A reload (no token in the address) works through the page's cookie,
	// which scripts cannot read and other sites cannot send.
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "cellbox_token" {
			cookie = c
		}
	}
	if cookie == nil || cookie.Value != httpToken || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" {
		t.Fatalf("token cookie = %+v", cookie)
	}
	resp, body = get(t, srv.URL+"/", http.Header{"Cookie": {"cellbox_token=" + httpToken}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "the ide") {
		t.Fatalf("reload with the cookie: %d %q", resp.StatusCode, body)
	}
	resp, _ = get(t, srv.URL+"/", http.Header{"Cookie": {"cellbox_token=wrong"}})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong cookie: %d", resp.StatusCode)
	}

	resp, body = get(t, srv.URL+"/", nil)
	if resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, "the ide") {
		t.Fatalf("GET / without the token: %d %q", resp.StatusCode, body)
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
