package network

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// maxUpstreamResponse bounds the upstream proxy's answer to CONNECT.
const maxUpstreamResponse = 64 << 10

// checkUpstream accepts http://host:port proxies only.
func checkUpstream(u *url.URL) error {
	switch {
	case u.Scheme != "http":
		return fmt.Errorf("upstream proxy %s: scheme %q is not supported (use http://host:port)", u.Redacted(), u.Scheme)
	case u.Hostname() == "":
		return fmt.Errorf("upstream proxy %s: no host", u.Redacted())
	}
	return nil
}

// dialUpstream opens a tunnel to addr, a checked "IP:port", through the
// upstream proxy.
//
// The CONNECT names the checked IP address, not the host name, so the
// upstream proxy cannot resolve the name to another address than the one
// the policy checked (DNS rebinding past the policy). The cost: an upstream
// that filters by name sees only addresses, and the daemon must be able to
// resolve names itself. A TLS client's SNI still carries the name.
func (s *Server) dialUpstream(ctx context.Context, addr string) (net.Conn, error) {
	if s.upErr != nil {
		return nil, s.upErr
	}
	u := s.o.Upstream
	proxyAddr := u.Host
	if u.Port() == "" {
		proxyAddr = net.JoinHostPort(u.Hostname(), "80")
	}
	// The upstream proxy is the operator's configuration, not the sandbox's
	// input: it is dialled as given.
	d := net.Dialer{Timeout: defaultDial}
	c, err := d.DialContext(ctx, "tcp", proxyAddr)
	if err != nil {
		return nil, fmt.Errorf("upstream proxy %s: %w", u.Redacted(), err)
	}
	tc, err := connectThrough(ctx, c, u, addr, s.o.HandshakeTimeout)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("upstream proxy %s: %w", u.Redacted(), err)
	}
	return tc, nil
}

// connectThrough asks the proxy on c for a tunnel to addr.
func connectThrough(ctx context.Context, c net.Conn, u *url.URL, addr string, timeout time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	req := "CONNECT " + addr + " HTTP/1.1\r\nHost: " + addr + "\r\n"
	if u.User != nil {
		pass, _ := u.User.Password()
		cred := base64.StdEncoding.EncodeToString([]byte(u.User.Username() + ":" + pass))
		req += "Proxy-Authorization: Basic " + cred + "\r\n"
	}
	req += "\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		return nil, fmt.Errorf("CONNECT %s: %w", addr, err)
	}
	br := bufio.NewReader(io.LimitReader(c, maxUpstreamResponse))
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return nil, fmt.Errorf("CONNECT %s: %w", addr, err)
	}
	// The body is left alone: a 2xx answer to CONNECT has none, and what
	// follows belongs to the tunnel.
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("CONNECT %s: %s", addr, resp.Status)
	}
	if !stop() {
		return nil, ctx.Err()
	}
	_ = c.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		// Bytes the proxy sent after its answer belong to the tunnel.
		buffered, _ := br.Peek(br.Buffered())
		return &prefixConn{Conn: c, r: io.MultiReader(bytes.NewReader(bytes.Clone(buffered)), c)}, nil
	}
	return c, nil
}

// prefixConn reads r (bytes read ahead, then the connection) and half-closes
// like the connection.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(closeWriter); ok {
		return cw.CloseWrite()
	}
	return errNoHalfClose
}
