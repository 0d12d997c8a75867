package network

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"time"
)

// serveConnect answers a CONNECT: refused with 403 and the reason, or, once
// the checked address is dialled, 200 and a tunnel.
func (s *Server) serveConnect(w http.ResponseWriter, r *http.Request) {
	authority := r.URL.Host
	if authority == "" {
		authority = r.Host
	}
	host, port, err := splitTarget(authority)
	if err != nil {
		connectError(w, http.StatusBadRequest, "CONNECT needs host:port: "+err.Error())
		return
	}
	ctx := r.Context()
	addrs, reason, err := s.check(ctx, host, port, "connect")
	switch {
	case errors.Is(err, ErrRefused):
		connectError(w, http.StatusForbidden, reason)
		return
	case err != nil:
		connectError(w, http.StatusBadGateway, reason)
		return
	}
	target, err := s.dialChecked(ctx, addrs, port)
	if err != nil {
		connectError(w, http.StatusBadGateway, "cannot connect to "+hostPort(host, port)+": "+err.Error())
		return
	}
	client, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		_ = target.Close()
		connectError(w, http.StatusInternalServerError, "cannot take over the connection")
		return
	}
	_ = client.SetDeadline(time.Time{}) // the server's header deadline
	var clientR io.Reader = client
	if n := rw.Reader.Buffered(); n > 0 {
		// Bytes sent along with the CONNECT (a ClientHello, often).
		ahead, _ := rw.Reader.Peek(n)
		clientR = io.MultiReader(bytes.NewReader(bytes.Clone(ahead)), client)
	}
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		_ = client.Close()
		_ = target.Close()
		return
	}
	s.tunnel(client, clientR, target, host, port, "connect")
}

// connectError answers a CONNECT that gets no tunnel, and closes.
func connectError(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Connection", "close")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	http.Error(w, text, status)
}

// tunnel runs an accepted tunnel: for port 443 it first reads the client's
// ClientHello (bounded in size and time) and refuses one that names another
// server, or a stream that is not TLS; then it replays what it read and
// splices both ways. It closes both connections.
func (s *Server) tunnel(client net.Conn, clientR io.Reader, target net.Conn, host string, port int, via string) {
	if port == 443 {
		_ = client.SetReadDeadline(time.Now().Add(s.o.HandshakeTimeout))
		serverName, read, err := readClientHello(s.ctx, clientR)
		_ = client.SetReadDeadline(time.Time{})
		if reason := checkSNI(host, serverName, err); reason != "" {
			s.blocked(Blocked{Host: truncate(host, 255), Port: port, Reason: reason, Via: via})
			_ = client.Close()
			_ = target.Close()
			return
		}
		clientR = io.MultiReader(bytes.NewReader(read), clientR)
	}
	s.splice(client, clientR, target)
}
