package network

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"time"
)

// maxClientHello bounds what is read ahead to find a ClientHello: one full
// TLS record (16 KiB and its 5-byte header).
const maxClientHello = 16<<10 + 5

var (
	errNotTLS      = errors.New("not a TLS ClientHello")
	errHelloTooBig = errors.New("no ClientHello within 16 KiB")
	errHelloSeen   = errors.New("ClientHello read") // ends crypto/tls's handshake once the hello is parsed
)

// readClientHello reads a TLS ClientHello from r, at most maxClientHello
// bytes, and returns its server name (empty when it has none) and every byte
// it read, which the caller replays to the target. crypto/tls parses the
// hello: it runs a server handshake over a conn that records what it reads,
// discards what it writes, and stops the handshake from GetConfigForClient.
// The caller bounds the time with a read deadline.
func readClientHello(ctx context.Context, r io.Reader) (serverName string, read []byte, err error) {
	rc := &recordingConn{r: r}
	var seen bool
	cfg := &tls.Config{
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			seen = true
			serverName = hello.ServerName
			return nil, errHelloSeen
		},
	}
	herr := tls.Server(rc, cfg).HandshakeContext(ctx)
	switch {
	case seen:
		return serverName, rc.read, nil
	case rc.err != nil && !errors.Is(rc.err, io.EOF):
		// A read error (deadline, closed, too long) is the reason, not
		// the handshake's reading of it.
		return "", rc.read, rc.err
	case herr == nil:
		return "", rc.read, errNotTLS // cannot happen: no certificate
	}
	return "", rc.read, errNotTLS
}

// recordingConn is what crypto/tls sees while reading a ClientHello.
type recordingConn struct {
	r    io.Reader
	read []byte
	err  error // the first read error
}

func (c *recordingConn) Read(p []byte) (int, error) {
	room := maxClientHello - len(c.read)
	if room <= 0 {
		c.err = errHelloTooBig
		return 0, c.err
	}
	if len(p) > room {
		p = p[:room]
	}
	n, err := c.r.Read(p)
	c.read = append(c.read, p[:n]...)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

func (c *recordingConn) Write(p []byte) (int, error)      { return len(p), nil } // alerts go nowhere
func (c *recordingConn) Close() error                     { return nil }
func (c *recordingConn) LocalAddr() net.Addr              { return dummyAddr{} }
func (c *recordingConn) RemoteAddr() net.Addr             { return dummyAddr{} }
func (c *recordingConn) SetDeadline(time.Time) error      { return nil }
func (c *recordingConn) SetReadDeadline(time.Time) error  { return nil }
func (c *recordingConn) SetWriteDeadline(time.Time) error { return nil }

type dummyAddr struct{}

func (dummyAddr) Network() string { return "tcp" }
func (dummyAddr) String() string  { return "client" }

// checkSNI decides a port-443 tunnel from its ClientHello: the server name
// must be the requested host (case-insensitively, without a trailing dot);
// for an IP-literal target a hello without one is fine. It returns the
// reason for a refusal, or "".
func checkSNI(host string, serverName string, helloErr error) string {
	switch {
	case errors.Is(helloErr, errNotTLS):
		return "port 443 carries TLS only, and this connection did not start with a TLS ClientHello"
	case errors.Is(helloErr, errHelloTooBig):
		return "no TLS ClientHello within the first 16 KiB"
	case isTimeout(helloErr):
		return "no TLS ClientHello before the handshake timeout"
	case helloErr != nil:
		return "the connection ended before its TLS ClientHello: " + helloErr.Error()
	}
	want := strings.ToLower(strings.TrimSuffix(host, "."))
	_, isIP := parseTargetIP(host)
	switch {
	case serverName == "" && isIP:
		return ""
	case serverName == "":
		return "the TLS ClientHello names no server, but the tunnel is to " + truncate(want, 255)
	case strings.EqualFold(strings.TrimSuffix(serverName, "."), want):
		return ""
	}
	return "the TLS ClientHello names " + truncate(serverName, 255) + ", not " + truncate(want, 255)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
