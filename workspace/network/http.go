package network

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/elazarl/goproxy"
)

// ServeHTTP serves the HTTP proxy (absolute-form requests and CONNECT) on l
// until l or the Server is closed. It returns ErrServerClosed after Close.
func (s *Server) ServeHTTP(l net.Listener) error {
	if !s.addListener(l) || !s.begin() {
		_ = l.Close()
		return ErrServerClosed
	}
	defer s.wg.Done()
	defer s.removeListener(l)
	srv := &http.Server{
		Handler:           http.HandlerFunc(s.handleHTTP),
		ReadHeaderTimeout: s.o.HandshakeTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
		ErrorLog:          slog.NewLogLogger(s.o.Logger.Handler(), slog.LevelDebug),
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.servers[srv] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.servers, srv)
		s.mu.Unlock()
	}()
	err := srv.Serve(s.limit(l))
	if s.ctx.Err() != nil || errors.Is(err, http.ErrServerClosed) {
		return ErrServerClosed
	}
	return fmt.Errorf("serve http proxy: %w", err)
}

// handleHTTP sends CONNECT to serveConnect and every other request to
// goproxy. CONNECT is not left to goproxy: its ConnectHijack hands over the
// bare connection and drops what the HTTP server read ahead of it, which is
// the ClientHello of a client that sends it along with its CONNECT.
func (s *Server) handleHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.begin() {
		http.Error(w, "proxy closed", http.StatusServiceUnavailable)
		return
	}
	defer s.wg.Done()
	if r.Method == http.MethodConnect {
		s.serveConnect(w, r)
		return
	}
	s.proxy.ServeHTTP(w, r)
}

// checkedKey carries a request's checked target from the request handler
// to the transport's dial.
type checkedKey struct{}

type checked struct {
	host  string // as in the URL, lower case
	port  int
	addrs []netip.Addr
}

// newHTTPProxy builds goproxy for plain (absolute-form) requests. Its
// defaults read the daemon's own proxy variables (Tr.Proxy and
// ConnectDial); both are replaced: the transport has no proxy and dials
// only what the request handler checked, and CONNECT never reaches it.
func (s *Server) newHTTPProxy() (http.Handler, *http.Transport) {
	p := goproxy.NewProxyHttpServer()
	p.Logger = log.New(slogWriter{s.o.Logger}, "", 0)
	p.Verbose = false
	p.KeepAcceptEncoding = true // the client's Accept-Encoding goes through; the body is not touched
	p.NonproxyHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "this is cellbox's HTTP proxy: send requests in absolute form (http://host/path), or CONNECT", http.StatusBadRequest)
	})
	tr := &http.Transport{
		Proxy:                  nil, // never the environment's; Upstream is handled in dialChecked
		DialContext:            s.dialForTransport,
		ForceAttemptHTTP2:      false,
		DisableCompression:     true,
		MaxIdleConns:           64,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    defaultHandshake,
		MaxResponseHeaderBytes: 1 << 20,
	}
	p.Tr = tr
	refuse := func(network, addr string) (net.Conn, error) {
		return nil, errors.New("CONNECT is served by cellbox, not goproxy")
	}
	p.ConnectDial = refuse
	p.ConnectDialWithReq = func(_ *http.Request, network, addr string) (net.Conn, error) { return refuse(network, addr) }
	p.OnRequest().HandleConnect(goproxy.AlwaysReject) // not reached: handleHTTP takes CONNECT
	p.OnRequest().DoFunc(s.checkRequest)
	return p, tr
}

// checkRequest decides a plain request by the URL goproxy will dial (the
// Host header of an absolute-form request is replaced by the URL's host by
// net/http, so the two cannot disagree). A refusal is answered with 403 and
// the reason.
func (s *Server) checkRequest(r *http.Request, _ *goproxy.ProxyCtx) (*http.Request, *http.Response) {
	var port int
	switch strings.ToLower(r.URL.Scheme) {
	case "http":
		port = 80
	case "https":
		port = 443
	default:
		return r, textResponse(r, http.StatusBadRequest, fmt.Sprintf("scheme %q is not supported by the proxy", truncate(r.URL.Scheme, 32)))
	}
	host := r.URL.Hostname()
	if ps := r.URL.Port(); ps != "" {
		p, why := parsePort(ps)
		if why != "" {
			return r, textResponse(r, http.StatusBadRequest, why)
		}
		port = int(p)
	}
	addrs, reason, err := s.check(r.Context(), host, port, "http")
	switch {
	case errors.Is(err, ErrRefused):
		return r, textResponse(r, http.StatusForbidden, reason)
	case err != nil:
		return r, textResponse(r, http.StatusBadGateway, reason)
	}
	c := checked{host: strings.ToLower(host), port: port, addrs: addrs}
	return r.WithContext(context.WithValue(r.Context(), checkedKey{}, c)), nil
}

// dialForTransport dials, for goproxy's transport, the addresses the
// request handler checked. A dial for anything else is refused.
func (s *Server) dialForTransport(ctx context.Context, network, addr string) (net.Conn, error) {
	c, ok := ctx.Value(checkedKey{}).(checked)
	if !ok {
		return nil, fmt.Errorf("dial %s: not checked by the network policy", addr)
	}
	host, port, err := splitTarget(addr)
	if err != nil || !strings.EqualFold(host, c.host) || port != c.port {
		return nil, fmt.Errorf("dial %s: not the checked target %s", addr, hostPort(c.host, c.port))
	}
	return s.dialChecked(ctx, c.addrs, c.port)
}

func textResponse(r *http.Request, status int, text string) *http.Response {
	resp := goproxy.NewResponse(r, goproxy.ContentTypeText+"; charset=utf-8", status, text+"\n")
	resp.Header.Set("X-Content-Type-Options", "nosniff")
	return resp
}

// slogWriter turns goproxy's log lines into debug records.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.l.Debug("network: goproxy", "msg", strings.TrimSpace(string(p)))
	return len(p), nil
}
