package rpc

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler is the HTTP side of the daemon (PROTOCOL.md §1): /rpc (websocket),
// /healthz, /metrics, the browser client at /, and what HandleHTTP added
// (/mcp). Every request must pass the Origin check and carry the token.
func (d *Daemon) Handler(ctx context.Context) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /rpc", func(w http.ResponseWriter, r *http.Request) { d.serveWebsocket(ctx, w, r) })
	mux.HandleFunc("GET /healthz", d.serveHealth)
	mux.Handle("GET /metrics", promhttp.HandlerFor(d.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /{$}", d.serveUI) // ui.go
	d.mu.Lock()
	for pattern, h := range d.extra { // inproc.go
		mux.Handle(pattern, h)
	}
	d.mu.Unlock()
	return d.guard(mux)
}

// guard enforces §1: Origin absent, same-origin or allowed (else 403), and
// the token as a Bearer header, ?token= or the page's cookie (else 401).
func (d *Daemon) guard(next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(d.opts.Token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !d.hostAllowed(r) {
			d.metrics.httpDenied.WithLabelValues("host").Inc()
			d.log.Warn("request for a foreign host name refused", "host", r.Host, "path", r.URL.Path)
			http.Error(w, fmt.Sprintf("host %q is not this daemon's: use http://127.0.0.1:PORT or http://localhost:PORT, or name it in --allow-origin", r.Host), http.StatusForbidden)
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" && !d.originAllowed(origin, r.Host) {
			d.metrics.httpDenied.WithLabelValues("origin").Inc()
			d.log.Warn("request from a foreign origin refused", "origin", origin, "path", r.URL.Path)
			http.Error(w, fmt.Sprintf("origin %q is not allowed; start cellbox with --allow-origin %s to allow it", origin, origin), http.StatusForbidden)
			return
		}
		got := sha256.Sum256([]byte(requestToken(r)))
		if d.opts.Token == "" || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			d.metrics.httpDenied.WithLabelValues("token").Inc()
			w.Header().Set("WWW-Authenticate", `Bearer realm="cellbox"`)
			if r.Method == http.MethodGet && r.URL.Path == "/" {
				serveReload(w) // ui.go: a reload of the browser IDE
				return
			}
			http.Error(w, "missing or wrong token: open the URL cellbox printed at start, or send Authorization: Bearer TOKEN", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func requestToken(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		if tok, ok := strings.CutPrefix(h, "Bearer "); ok {
			return strings.TrimSpace(tok)
		}
		return ""
	}
	return r.URL.Query().Get("token")
}

// hostAllowed is the defence against DNS rebinding: a page of
// evil.example whose name is made to resolve to 127.0.0.1 reaches the
// daemon with its own name in Host (and as its Origin, which then looks
// same-origin). Only the names the daemon is really reached by pass: a
// loopback address or localhost, the address it listens on, this
// machine's host name (for --allow-remote), and the hosts of
// --allow-origin.
func (d *Daemon) hostAllowed(r *http.Request) bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true // RFC 6761: always loopback, never resolved by DNS
	}
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsLoopback() {
			return true
		}
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			if ta, ok := la.(*net.TCPAddr); ok && ta.IP.Equal(ip) {
				return true
			}
		}
	}
	if name, err := os.Hostname(); err == nil && host == strings.ToLower(name) {
		return true
	}
	for _, a := range d.opts.AllowOrigins {
		if u, err := url.Parse(a); err == nil && strings.EqualFold(u.Hostname(), host) {
			return true
		}
	}
	return false
}

// originAllowed: the server's own origin, or one listed in --allow-origin.
func (d *Daemon) originAllowed(origin, host string) bool {
	o := strings.TrimSuffix(strings.ToLower(origin), "/")
	h := strings.ToLower(host)
	if o == "http://"+h || o == "https://"+h {
		return true
	}
	for _, a := range d.opts.AllowOrigins {
		if strings.TrimSuffix(strings.ToLower(a), "/") == o {
			return true
		}
	}
	return false
}

var upgrader = websocket.Upgrader{
	ReadBufferSize:  32 << 10,
	WriteBufferSize: 32 << 10,
	// guard has checked Origin already, with --allow-origin.
	CheckOrigin: func(*http.Request) bool { return true },
}

func (d *Daemon) serveWebsocket(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		d.log.Debug("websocket upgrade failed", "err", err)
		return // Upgrade has answered the client
	}
	t := newWSTransport(ws, d.opts.MaxMessageBytes)
	pingDone := make(chan struct{})
	go t.pingLoop(pingDone)
	defer close(pingDone)
	var once sync.Once
	d.serveConn(ctx, newStream(t, d.rejected), "websocket", clientDirOf(r), func(code int) {
		once.Do(func() {
			reason := "exit without shutdown"
			if code == 0 {
				reason = "exit after shutdown"
			}
			t.closeWith(websocket.CloseNormalClosure, reason)
			_ = t.close()
		})
	})
	if ctx.Err() != nil {
		t.closeWith(websocket.CloseGoingAway, "cellbox daemon is stopping")
	}
	_ = t.close()
}

// ClientDirHeader carries the working directory of `cellbox connect`, the
// editor's, to the daemon it bridges to: a workspace/open without a root
// opens it, as it would over stdio, not the daemon's own directory.
const ClientDirHeader = "Cellbox-Client-Dir"

func clientDirOf(r *http.Request) string {
	dir := r.Header.Get(ClientDirHeader)
	if dir == "" || !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return ""
	}
	return dir
}

// serveHealth is GET /healthz: 200 {"status":"ok"}, or 503 naming the
// failing check.
func (d *Daemon) serveHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if err := d.checkStateDir(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string]string{"status": "error", "check": "stateDir", "detail": err.Error()})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"status": "ok"})
}

func (d *Daemon) checkStateDir() error {
	if d.opts.StateDir == "" {
		return nil
	}
	f, err := os.CreateTemp(d.opts.StateDir, ".healthz-*")
	if err != nil {
		return fmt.Errorf("state dir %s is not writable: %w", d.opts.StateDir, err)
	}
	name := f.Name()
	_ = f.Close()
	return os.Remove(filepath.Clean(name))
}

// serveIndex is the browser client's place; this build serves a short page
// that says how to reach the daemon.
func (d *Daemon) serveIndex(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.Header().Set("Referrer-Policy", "no-referrer")
	fmt.Fprintf(w, `<!doctype html><meta charset="utf-8"><title>cellbox</title>
<style>body{font:16px system-ui;margin:3em;max-width:40em}</style>
<h1>cellbox %s</h1>
<p>The daemon is running. Editors connect to the websocket endpoint <code>/rpc</code>
with the token, or run <code>cellbox connect</code>.</p>`, htmlEscape(d.opts.Version))
}

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

// Serve serves HTTP on ln until ctx is done, then closes every connection.
func (d *Daemon) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           d.Handler(ctx),
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          nil,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve http on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shut down http: %w", err)
	}
	return nil
}
