package network

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"time"
)

// Blocked is one refused connection.
type Blocked struct {
	Host   string
	Port   int
	Reason string
	Via    string // "http", "connect", "socks"
}

// Options configure a Server.
type Options struct {
	// Policy is read for every connection, so a change applies to new
	// connections at once. nil refuses everything.
	Policy func() Policy
	// OnBlocked, if set, is called once per refusal. It must not block long.
	OnBlocked func(Blocked)
	// Resolver looks allowed names up; nil is net.DefaultResolver.
	Resolver Resolver
	// Dial connects to a checked address; addr is always "IP:port". nil is a
	// net.Dialer with a 10 s timeout. With Upstream set, Dial is not used.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Upstream is an explicit upstream HTTP proxy (http://[user:pass@]host:port)
	// that every checked connection goes through (as CONNECT IP:port); nil
	// dials directly. It is never read from the environment.
	Upstream *url.URL
	// Logger receives what the proxies log; nil discards.
	Logger *slog.Logger
	// MaxConns bounds concurrent connections per listener; 0 is 256. Past
	// it, connections wait in the listener's backlog.
	MaxConns int
	// HandshakeTimeout bounds a client's request head (HTTP), its SOCKS
	// negotiation and its TLS ClientHello; 0 is 10 s.
	HandshakeTimeout time.Duration
}

// Bounds on what sandboxed clients may send before a tunnel is up.
const (
	defaultMaxConns  = 256
	defaultHandshake = 10 * time.Second
	defaultDial      = 10 * time.Second
	maxHeaderBytes   = 32 << 10 // an HTTP request head (net/http adds 4 KiB of slack)
)

// Server serves the HTTP and SOCKS5 proxies of one workspace on listeners
// made inside its network namespace. Every byte it reads from a client is
// untrusted.
type Server struct {
	o         Options
	upErr     error // a bad Upstream: every dial fails with it
	ctx       context.Context
	cancel    context.CancelFunc
	proxy     http.Handler    // goproxy, for requests other than CONNECT
	tr        *http.Transport // goproxy's transport: dials through the policy
	wg        sync.WaitGroup  // Serve loops, SOCKS connections, HTTP handlers
	closeOnce sync.Once
	closeErr  error // set once by close

	// mu guards the fields below.
	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	servers   map[*http.Server]struct{}
	conns     map[net.Conn]struct{}
}

// NewServer returns a Server; nothing is served until ServeHTTP or
// ServeSOCKS is called.
func NewServer(o Options) *Server {
	if o.Policy == nil {
		o.Policy = func() Policy { return Policy{Mode: ModeNone} }
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.Dial == nil {
		d := &net.Dialer{Timeout: defaultDial}
		o.Dial = d.DialContext
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxConns <= 0 {
		o.MaxConns = defaultMaxConns
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = defaultHandshake
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		o:         o,
		ctx:       ctx,
		cancel:    cancel,
		listeners: map[net.Listener]struct{}{},
		servers:   map[*http.Server]struct{}{},
		conns:     map[net.Conn]struct{}{},
	}
	if o.Upstream != nil {
		if s.upErr = checkUpstream(o.Upstream); s.upErr != nil {
			o.Logger.Error("network: upstream proxy unusable; every connection will fail", "err", s.upErr)
		}
	}
	s.proxy, s.tr = s.newHTTPProxy()
	return s
}

// Close closes the listeners the Server serves and every open connection,
// and waits for its goroutines. Serve calls return ErrServerClosed.
func (s *Server) Close() error {
	s.closeOnce.Do(s.close)
	return s.closeErr
}

func (s *Server) close() {
	s.mu.Lock()
	s.closed = true
	s.cancel()
	// Closing takes no lock: a closing connection removes itself under mu.
	listeners := mapKeys(s.listeners)
	servers := mapKeys(s.servers)
	conns := mapKeys(s.conns)
	s.mu.Unlock()
	var errs []error
	for _, l := range listeners {
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for _, srv := range servers {
		_ = srv.Close() // its listener (closed above) and its connections
	}
	for _, c := range conns {
		_ = c.Close()
	}
	s.wg.Wait()
	s.tr.CloseIdleConnections()
	s.closeErr = errors.Join(errs...)
}

// begin registers a goroutine with the Server; false when it is closed.
// Pairs with s.wg.Done. Adding under mu before closed is set keeps Add from
// racing with Close's Wait.
func (s *Server) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// addListener registers l so Close closes it.
func (s *Server) addListener(l net.Listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.listeners[l] = struct{}{}
	return true
}

func (s *Server) removeListener(l net.Listener) {
	s.mu.Lock()
	delete(s.listeners, l)
	s.mu.Unlock()
}

// limitListener bounds a listener's open connections and registers each
// with the Server, so Close ends them.
type limitListener struct {
	net.Listener
	s   *Server
	sem chan struct{}
}

func (s *Server) limit(l net.Listener) *limitListener {
	return &limitListener{Listener: l, s: s, sem: make(chan struct{}, s.o.MaxConns)}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.s.ctx.Done():
		return nil, ErrServerClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		if l.s.ctx.Err() != nil {
			return nil, ErrServerClosed
		}
		return nil, err
	}
	tc := &trackedConn{Conn: c, release: func() { <-l.sem }, s: l.s}
	l.s.mu.Lock()
	if l.s.closed {
		l.s.mu.Unlock()
		_ = tc.Close()
		return nil, ErrServerClosed
	}
	l.s.conns[tc] = struct{}{}
	l.s.mu.Unlock()
	return tc, nil
}

// trackedConn is a client connection: closing it frees its slot.
type trackedConn struct {
	net.Conn
	s       *Server
	once    sync.Once
	release func()
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
		c.release()
	})
	return err
}

// CloseWrite half-closes the connection when the underlying one can.
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(closeWriter); ok {
		return cw.CloseWrite()
	}
	return errNoHalfClose
}

type closeWriter interface{ CloseWrite() error }

var errNoHalfClose = errors.New("connection cannot half-close")

// policy returns the current policy.
func (s *Server) policy() Policy { return s.o.Policy() }

// check runs the current policy on a target, reporting a refusal.
func (s *Server) check(ctx context.Context, host string, port int, via string) ([]netip.Addr, string, error) {
	addrs, reason, err := s.policy().Check(ctx, s.o.Resolver, host, port)
	if err != nil {
		if errors.Is(err, ErrRefused) {
			s.blocked(Blocked{Host: truncate(host, 255), Port: port, Reason: reason, Via: via})
		} else {
			s.o.Logger.Info("network: lookup failed", "via", via, "host", truncate(host, 255), "port", port, "err", err)
		}
	}
	return addrs, reason, err
}

func (s *Server) blocked(b Blocked) {
	s.o.Logger.Info("network: blocked", "via", b.Via, "host", b.Host, "port", b.Port, "reason", b.Reason)
	if s.o.OnBlocked != nil {
		s.o.OnBlocked(b)
	}
}

// dialChecked connects to the first of the checked addresses that answers,
// directly or through the upstream proxy.
func (s *Server) dialChecked(ctx context.Context, addrs []netip.Addr, port int) (net.Conn, error) {
	if len(addrs) == 0 {
		return nil, errors.New("dial: no checked address")
	}
	var errs []error
	for _, a := range addrs {
		addr := netip.AddrPortFrom(a, uint16(port)).String()
		var c net.Conn
		var err error
		if s.o.Upstream != nil {
			c, err = s.dialUpstream(ctx, addr)
		} else {
			c, err = s.o.Dial(ctx, "tcp", addr)
		}
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("dial %s: %w", hostPort(addrs[0].String(), port), errors.Join(errs...))
}

// splitTarget splits an untrusted "host:port" authority.
func splitTarget(authority string) (string, int, error) {
	host, portText, err := net.SplitHostPort(authority)
	if err != nil {
		return "", 0, err
	}
	port, why := parsePort(portText)
	if why != "" {
		return "", 0, errors.New(why)
	}
	return host, int(port), nil
}

// splice copies both ways between the client (reading from clientR, which
// replays what was read ahead) and the target until both directions end. A
// direction that ends cleanly half-closes the other side, so a client that
// shuts down its write side still gets the answer; an error, or the Server
// closing, ends both.
func (s *Server) splice(client net.Conn, clientR io.Reader, target net.Conn) {
	closeBoth := func() {
		_ = client.Close()
		_ = target.Close()
	}
	defer closeBoth()
	errc := make(chan error, 2)
	cp := func(dst net.Conn, src io.Reader) {
		// (splice(2) between the two sockets was measured slower on
		// loopback: bench/network.sh.)
		_, err := copyWide(dst, src)
		if err == nil {
			if cw, ok := dst.(closeWriter); ok {
				err = cw.CloseWrite()
			} else {
				err = errNoHalfClose
			}
		}
		errc <- err
	}
	go cp(target, clientR)
	go cp(client, target)
	done := s.ctx.Done()
	for pending := 2; pending > 0; {
		select {
		case err := <-errc:
			pending--
			if err != nil {
				closeBoth()
			}
		case <-done:
			closeBoth()
			done = nil
		}
	}
}

// copyBufs are copyWide's buffers.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 128<<10); return &b }}

// copyWide copies 128 KiB at a time, not io.Copy's 32 KiB: fewer system
// calls for a download. The plain wrappers keep either side's
// ReaderFrom/WriterTo from taking over with its own small buffer.
func copyWide(dst io.Writer, src io.Reader) (int64, error) {
	b := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(b)
	return io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, *b)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func mapKeys[K comparable, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
