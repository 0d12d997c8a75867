package network

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// SOCKS5 (RFC 1928), as much as the proxy serves: no authentication,
// CONNECT only, IPv4, IPv6 and domain-name addresses.
const (
	socksVersion  = 5
	methodNoAuth  = 0x00
	methodNone    = 0xFF // no acceptable methods
	cmdConnect    = 0x01
	cmdBind       = 0x02
	cmdUDP        = 0x03
	atypIPv4      = 0x01
	atypDomain    = 0x03
	atypIPv6      = 0x04
	replySuccess  = 0x00
	replyFailure  = 0x01 // general SOCKS server failure
	replyNotAllow = 0x02 // connection not allowed by ruleset
	replyNetUnr   = 0x03 // network unreachable
	replyHostUnr  = 0x04 // host unreachable
	replyRefused  = 0x05 // connection refused
	replyCmd      = 0x07 // command not supported
	replyAtyp     = 0x08 // address type not supported
)

// socksRequest is a parsed CONNECT request.
type socksRequest struct {
	host string // a domain name as sent, or an IP literal
	port int
}

// socksError is a negotiation that ends with a reply (when reply is not 0)
// or, for a greeting without "no authentication", the method 0xFF.
type socksError struct {
	reply  byte // the REP to send; 0: none (close only)
	method bool // answer the greeting with 0xFF
	msg    string
}

func (e *socksError) Error() string { return "socks: " + e.msg }

// negotiate runs the server side of a SOCKS5 handshake on rw up to the
// request: it reads the greeting, selects "no authentication", and reads the
// CONNECT request. Everything it reads is bounded by the protocol's own
// lengths (at most 2+255 and 4+1+255+2 bytes). On a *socksError the caller
// sends its answer (writeSocksError) and closes.
func negotiate(rw io.ReadWriter) (socksRequest, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(rw, hdr[:]); err != nil {
		return socksRequest{}, fmt.Errorf("socks greeting: %w", err)
	}
	if hdr[0] != socksVersion {
		return socksRequest{}, &socksError{msg: fmt.Sprintf("version %d, not 5", hdr[0])}
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(rw, methods); err != nil {
		return socksRequest{}, fmt.Errorf("socks greeting: %w", err)
	}
	noAuth := false
	for _, m := range methods {
		noAuth = noAuth || m == methodNoAuth
	}
	if !noAuth {
		return socksRequest{}, &socksError{method: true, msg: "the client offers no method without authentication"}
	}
	if _, err := rw.Write([]byte{socksVersion, methodNoAuth}); err != nil {
		return socksRequest{}, fmt.Errorf("socks method: %w", err)
	}

	var req [4]byte // VER CMD RSV ATYP
	if _, err := io.ReadFull(rw, req[:]); err != nil {
		return socksRequest{}, fmt.Errorf("socks request: %w", err)
	}
	if req[0] != socksVersion {
		return socksRequest{}, &socksError{reply: replyFailure, msg: fmt.Sprintf("request version %d, not 5", req[0])}
	}
	switch req[1] {
	case cmdConnect:
	case cmdBind, cmdUDP:
		return socksRequest{}, &socksError{reply: replyCmd, msg: fmt.Sprintf("command %d is not supported (CONNECT only)", req[1])}
	default:
		return socksRequest{}, &socksError{reply: replyCmd, msg: fmt.Sprintf("unknown command %d", req[1])}
	}
	var host string
	switch req[3] {
	case atypIPv4:
		var a [4]byte
		if _, err := io.ReadFull(rw, a[:]); err != nil {
			return socksRequest{}, fmt.Errorf("socks request: %w", err)
		}
		host = netip.AddrFrom4(a).String()
	case atypIPv6:
		var a [16]byte
		if _, err := io.ReadFull(rw, a[:]); err != nil {
			return socksRequest{}, fmt.Errorf("socks request: %w", err)
		}
		host = netip.AddrFrom16(a).String()
	case atypDomain:
		var n [1]byte
		if _, err := io.ReadFull(rw, n[:]); err != nil {
			return socksRequest{}, fmt.Errorf("socks request: %w", err)
		}
		name := make([]byte, n[0])
		if _, err := io.ReadFull(rw, name); err != nil {
			return socksRequest{}, fmt.Errorf("socks request: %w", err)
		}
		if n[0] == 0 {
			return socksRequest{}, &socksError{reply: replyHostUnr, msg: "empty domain name"}
		}
		host = string(name)
	default:
		return socksRequest{}, &socksError{reply: replyAtyp, msg: fmt.Sprintf("address type %d is not supported", req[3])}
	}
	var p [2]byte
	if _, err := io.ReadFull(rw, p[:]); err != nil {
		return socksRequest{}, fmt.Errorf("socks request: %w", err)
	}
	return socksRequest{host: host, port: int(p[0])<<8 | int(p[1])}, nil
}

// writeSocksError sends what a failed negotiation owes the client.
func writeSocksError(w io.Writer, err error) {
	var se *socksError
	switch {
	case !errors.As(err, &se):
	case se.method:
		_, _ = w.Write([]byte{socksVersion, methodNone})
	case se.reply != 0:
		writeSocksReply(w, se.reply)
	}
}

// writeSocksReply sends a reply. BND.ADDR is always 0.0.0.0:0: the
// daemon's own addresses are none of the sandbox's business.
func writeSocksReply(w io.Writer, rep byte) {
	_, _ = w.Write([]byte{socksVersion, rep, 0, atypIPv4, 0, 0, 0, 0, 0, 0})
}

// ServeSOCKS serves SOCKS5 on l until l or the Server is closed. It returns
// ErrServerClosed after Close.
func (s *Server) ServeSOCKS(l net.Listener) error {
	if !s.addListener(l) || !s.begin() {
		_ = l.Close()
		return ErrServerClosed
	}
	defer s.wg.Done()
	defer s.removeListener(l)
	ll := s.limit(l)
	var tempDelay time.Duration
	for {
		c, err := ll.Accept()
		if err != nil {
			if s.ctx.Err() != nil || errors.Is(err, ErrServerClosed) {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				// Out of descriptors, say: back off as net/http does.
				tempDelay = min(max(2*tempDelay, 5*time.Millisecond), time.Second)
				s.o.Logger.Warn("network: socks accept", "err", err, "retry_in", tempDelay)
				select {
				case <-time.After(tempDelay):
				case <-s.ctx.Done():
					return ErrServerClosed
				}
				continue
			}
			return fmt.Errorf("serve socks: %w", err)
		}
		tempDelay = 0
		if !s.begin() {
			_ = c.Close()
			return ErrServerClosed
		}
		go func() {
			defer s.wg.Done()
			s.serveSOCKSConn(c)
		}()
	}
}

// serveSOCKSConn serves one SOCKS connection: the negotiation within the
// handshake timeout, the policy, the dial, then the tunnel.
func (s *Server) serveSOCKSConn(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(s.o.HandshakeTimeout))
	req, err := negotiate(c)
	if err != nil {
		writeSocksError(c, err)
		s.o.Logger.Debug("network: socks negotiation failed", "err", err)
		_ = c.Close()
		return
	}
	// The lookup and dial are the daemon's, not the client's: they have
	// their own timeouts, and the client waits for the reply.
	_ = c.SetDeadline(time.Time{})
	addrs, _, err := s.check(s.ctx, req.host, req.port, "socks")
	if err != nil {
		if errors.Is(err, ErrRefused) {
			writeSocksReply(c, replyNotAllow)
		} else {
			writeSocksReply(c, replyHostUnr)
		}
		_ = c.Close()
		return
	}
	target, err := s.dialChecked(s.ctx, addrs, req.port)
	if err != nil {
		writeSocksReply(c, dialReply(err))
		_ = c.Close()
		return
	}
	_ = c.SetWriteDeadline(time.Now().Add(s.o.HandshakeTimeout))
	writeSocksReply(c, replySuccess)
	_ = c.SetWriteDeadline(time.Time{})
	s.tunnel(c, c, target, req.host, req.port, "socks")
}

// dialReply maps a dial error to a SOCKS reply.
func dialReply(err error) byte {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return replyRefused
	case errors.Is(err, syscall.ENETUNREACH):
		return replyNetUnr
	case errors.Is(err, syscall.EHOSTUNREACH), isTimeout(err):
		return replyHostUnr
	}
	return replyFailure
}
