package preview

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/netutil"
)

// Param is the query parameter that carries a preview's token.
const Param = "cellbox-preview"

// cookiePrefix starts the name of every preview's cookie; the rest is the
// preview's port.
const cookiePrefix = "cellbox-preview-"

// embedSuffix ends the name of the cookie a framed preview carries.
const embedSuffix = "-embed"

// ErrNotListening is what Dial returns when nothing listens on the port
// yet: the preview answers 502 with a page that retries.
var ErrNotListening = errors.New("nothing listens on that port")

// copyBuffers are the proxy's body buffers: 128 KiB, a quarter of the
// system calls of its default 32 KiB on a large body.
var copyBuffers = &bufferPool{}

type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 128<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }

// Options configure one preview.
type Options struct {
	// Host is the loopback address to listen on (default 127.0.0.1).
	Host string
	// Name is the preview's own host name under .localhost, which
	// browsers resolve to the loopback themselves (BrowserURL): a site
	// of its own, so that no other preview, and nothing else served on
	// the loopback, shares its cookies. "": no BrowserURL.
	Name string
	// Dial opens one connection to the server in the sandbox. An error
	// wrapping ErrNotListening means nothing listens yet.
	Dial func(ctx context.Context) (net.Conn, error)
	// Port is the server's port in the sandbox (for messages).
	Port int
	// MaxConns bounds the browser connections served at once (default 256).
	MaxConns int
	Logger   *slog.Logger
}

// Server is one preview: a listener of its own and the proxy behind it.
type Server struct {
	opts   Options
	ln     net.Listener
	srv    *http.Server
	token  string // of URL (Host: a loopback address or localhost)
	btoken string // of BrowserURL (Host: Name)
	cookie string
	url    string
	burl   string
	rp     *httputil.ReverseProxy
	tr     *http.Transport
	once   sync.Once
	cancel context.CancelFunc // ends every request's context (Close)
}

// Start listens on a new loopback port and serves the preview there.
func Start(opts Options) (*Server, error) {
	if opts.Dial == nil {
		return nil, errors.New("preview: no Dial")
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if ip := net.ParseIP(opts.Host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("preview: %q is not a loopback address", opts.Host)
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 256
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.Name = strings.ToLower(opts.Name)
	if opts.Name != "" && (!strings.HasSuffix(opts.Name, ".localhost") || strings.ContainsAny(opts.Name, ":/[]") || len(opts.Name) > 253) {
		return nil, fmt.Errorf("preview: %q is not a name under .localhost", opts.Name)
	}
	var raw [48]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, fmt.Errorf("preview token: %w", err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(opts.Host, "0"))
	if err != nil {
		return nil, fmt.Errorf("preview of port %d: listen on %s: %w", opts.Port, opts.Host, err)
	}
	s := &Server{opts: opts, ln: ln, token: base64.RawURLEncoding.EncodeToString(raw[:24]), btoken: base64.RawURLEncoding.EncodeToString(raw[24:])}
	port := ln.Addr().(*net.TCPAddr).Port
	s.cookie = cookiePrefix + strconv.Itoa(port)
	u := url.URL{Scheme: "http", Host: net.JoinHostPort(opts.Host, strconv.Itoa(port)), Path: "/", RawQuery: Param + "=" + s.token}
	s.url = u.String()
	if opts.Name != "" {
		u.Host, u.RawQuery = net.JoinHostPort(opts.Name, strconv.Itoa(port)), Param+"="+s.btoken
		s.burl = u.String()
	}
	s.tr = &http.Transport{
		DialContext:            func(ctx context.Context, _, _ string) (net.Conn, error) { return opts.Dial(ctx) },
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        30 * time.Second,
		MaxResponseHeaderBytes: 1 << 20,
		DisableCompression:     true,
	}
	s.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = "sandbox"
			pr.Out.Host = pr.In.Host // the app builds its URLs from what the browser asked
			// The page's own requests name its URL, token included, as
			// their Referer: the app gets it without.
			if ref := pr.Out.Header.Get("Referer"); ref != "" {
				if u, err := url.Parse(ref); err == nil && u.Query().Has(Param) {
					q := u.Query()
					q.Del(Param)
					u.RawQuery = q.Encode()
					pr.Out.Header.Set("Referer", u.String())
				}
			}
		},
		Transport: s.tr,
		// FlushInterval 0: a response of unknown length or an event
		// stream is flushed as it comes anyway; the rest is written with
		// its head, one write fewer per response than -1.
		BufferPool: copyBuffers,
		ModifyResponse: func(resp *http.Response) error {
			stripSetCookie(resp.Header)
			// It would clear every loopback origin's cookies: the other
			// previews' too (cookies ignore ports).
			resp.Header.Del("Clear-Site-Data")
			return nil
		},
		ErrorHandler: s.proxyError,
		ErrorLog:     slog.NewLogLogger(opts.Logger.Handler(), slog.LevelDebug),
	}
	// Every request's context ends with Close: the upgraded (websocket)
	// connections too, which http.Server.Close does not track.
	base, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.srv = &http.Server{
		BaseContext:       func(net.Listener) context.Context { return base },
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(opts.Logger.Handler(), slog.LevelDebug),
	}
	go func() { _ = s.srv.Serve(netutil.LimitListener(ln, opts.MaxConns)) }()
	return s, nil
}

// URL is the preview at its loopback address, token included: what any
// program on the machine can open.
func (s *Server) URL() string { return s.url }

// BrowserURL is the preview at its own name (Options.Name), with a token
// of its own: what a browser opens. "" without a Name.
func (s *Server) BrowserURL() string { return s.burl }

// Addr is the preview's listening address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the preview: its listener and every connection through it.
func (s *Server) Close() error {
	s.once.Do(func() {
		_ = s.srv.Close()
		s.cancel()
		s.tr.CloseIdleConnections()
	})
	return nil
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Which URL the request is of: each has its own token, and its
	// cookies are of its own host. A page at BrowserURL reads its token
	// from its address; with it, it cannot open URL's host, whose cookies
	// are every loopback service's.
	token := s.token
	switch host := hostOf(r.Host); {
	case s.opts.Name != "" && host == s.opts.Name:
		token = s.btoken
	case !loopbackHost(host):
		http.Error(w, "preview: the Host header must name this machine's loopback or this preview", http.StatusForbidden)
		return
	}
	q := r.URL.Query()
	if tok, ok := q[Param]; ok {
		if len(tok) != 1 || !valid(tok[0], token) {
			s.unauthorized(w)
			return
		}
		// Two cookies, for the host asked: a SameSite=Strict one for a
		// preview opened in a tab (or framed by a page of the same site),
		// and one that a page framed by another site carries (the browser
		// IDE's pane at a preview's name, an editor's webview):
		// SameSite=None needs Secure, which browsers accept from loopback
		// origins over http, and Partitioned keeps it where third-party
		// cookies are blocked. Neither is taken from another origin
		// (cookieOK).
		http.SetCookie(w, &http.Cookie{Name: s.cookie, Value: token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		http.SetCookie(w, &http.Cookie{Name: s.cookie + embedSuffix, Value: token, Path: "/", HttpOnly: true, Secure: true, SameSite: http.SameSiteNoneMode, Partitioned: true})
		q.Del(Param) // the app never sees it
		r.URL.RawQuery = q.Encode()
		r.RequestURI = ""
	} else if !s.cookieOK(r, token) {
		s.unauthorized(w)
		return
	}
	s.stripCookie(r)
	s.rp.ServeHTTP(w, r)
}

func valid(tok, want string) bool {
	return subtle.ConstantTimeCompare([]byte(tok), []byte(want)) == 1
}

// cookieOK: the request carries this preview's cookie, of token, and does
// not come from another origin.
func (s *Server) cookieOK(r *http.Request, token string) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return false
	}
	// A browser without Fetch Metadata still names the page's origin on
	// a POST, a CORS request or a websocket handshake.
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
		return false
	}
	for _, c := range r.Cookies() {
		if (c.Name == s.cookie || c.Name == s.cookie+embedSuffix) && valid(c.Value, token) {
			return true
		}
	}
	return false
}

// stripCookie removes every preview cookie from the request: the app
// never sees a token. The app's own cookies go on byte for byte (quoted
// values, bytes Go's cookie parser refuses), in their order.
func (s *Server) stripCookie(r *http.Request) {
	lines := r.Header.Values("Cookie")
	if len(lines) == 0 {
		return
	}
	var keep []string
	dropped := false
	for _, line := range lines {
		for _, part := range strings.Split(line, ";") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			name, _, _ := strings.Cut(part, "=")
			if strings.HasPrefix(strings.ToLower(strings.TrimSpace(name)), cookiePrefix) {
				dropped = true
				continue
			}
			keep = append(keep, part)
		}
	}
	if !dropped {
		return
	}
	r.Header.Del("Cookie")
	if len(keep) > 0 {
		r.Header.Set("Cookie", strings.Join(keep, "; "))
	}
}

func (s *Server) unauthorized(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	fmt.Fprintf(w, "<!DOCTYPE html><title>cellbox preview</title><p>This preview of port %d needs its link: open it from the editor (it carries the preview's token).</p>\n", s.opts.Port)
}

// proxyError answers what the proxy could not get from the app: 502 with
// a page that tries again while nothing listens yet (a server starting).
func (s *Server) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) {
		return // the browser went away
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusBadGateway)
	if errors.Is(err, ErrNotListening) {
		fmt.Fprintf(w, "<!DOCTYPE html><meta http-equiv=\"refresh\" content=\"2\"><title>cellbox preview</title><p>Nothing listens on port %d in the workspace's sandbox yet. This page tries again every 2 seconds.</p>\n", s.opts.Port)
		return
	}
	s.opts.Logger.Debug("preview: proxy error", "port", s.opts.Port, "err", err)
	fmt.Fprintf(w, "<!DOCTYPE html><title>cellbox preview</title><p>The server on port %d in the workspace's sandbox did not answer: %s</p>\n", s.opts.Port, html.EscapeString(err.Error()))
}

// stripSetCookie drops the cookies an app sets under a preview's cookie
// names: an app must not log another preview out.
func stripSetCookie(h http.Header) {
	sc := h.Values("Set-Cookie")
	if len(sc) == 0 {
		return
	}
	h.Del("Set-Cookie")
	for _, v := range sc {
		name, _, _ := strings.Cut(v, "=")
		if !strings.HasPrefix(strings.ToLower(strings.TrimSpace(name)), cookiePrefix) {
			h.Add("Set-Cookie", v)
		}
	}
}

// hostOf is a Host header's host, lowercase, without its port and a
// final dot.
func hostOf(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// loopbackHost: a host that is a loopback address or localhost (another
// name under .localhost is another preview's, or nobody's).
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
