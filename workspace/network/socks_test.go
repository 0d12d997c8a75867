package network

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

// socksDial negotiates "no authentication" and sends a request; it returns
// the connection and the reply code.
func socksDial(t *testing.T, proxyAddr string, cmd, atyp byte, addr []byte, port int) (net.Conn, byte) {
	t.Helper()
	c := dialTest(t, proxyAddr)
	if _, err := c.Write([]byte{5, 1, 0}); err != nil {
		t.Fatal(err)
	}
	var sel [2]byte
	if _, err := io.ReadFull(c, sel[:]); err != nil || sel != [2]byte{5, 0} {
		t.Fatalf("method selection %v, %v", sel, err)
	}
	req := []byte{5, cmd, 0, atyp}
	if atyp == atypDomain {
		req = append(req, byte(len(addr)))
	}
	req = append(req, addr...)
	req = binary.BigEndian.AppendUint16(req, uint16(port))
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	var rep [10]byte
	if _, err := io.ReadFull(c, rep[:]); err != nil {
		t.Fatalf("reply: %v", err)
	}
	if rep[0] != 5 || rep[3] != atypIPv4 {
		t.Fatalf("malformed reply %v", rep)
	}
	return c, rep[1]
}

func ip(s string) []byte { return netip.MustParseAddr(s).AsSlice() }

func TestSOCKS(t *testing.T) {
	echo := echoServer(t, "tcp", "127.0.0.1:0")
	_, ps, _ := net.SplitHostPort(echo)
	port := must(strconv.Atoi(ps))
	r := newResolver("echo.test", "127.0.0.1", "evil.test", "127.0.0.1")
	s := startServer(t, r, []string{"echo.test", "evil.test:1", "127.0.0.1:" + ps})

	for _, tt := range []struct {
		name   string
		cmd    byte
		atyp   byte
		addr   []byte
		port   int
		reply  byte
		reason string
	}{
		{name: "domain", cmd: cmdConnect, atyp: atypDomain, addr: []byte("echo.test"), port: port, reply: replySuccess},
		{name: "domain upper case", cmd: cmdConnect, atyp: atypDomain, addr: []byte("ECHO.test."), port: port, reply: replySuccess},
		{name: "ipv4", cmd: cmdConnect, atyp: atypIPv4, addr: ip("127.0.0.1"), port: port, reply: replySuccess},
		{name: "ip literal as a domain", cmd: cmdConnect, atyp: atypDomain, addr: []byte("127.0.0.1"), port: port, reply: replySuccess},
		{name: "mapped loopback named", cmd: cmdConnect, atyp: atypIPv6, addr: ip("::ffff:127.0.0.1"), port: port, reply: replySuccess},
		{name: "name not allowed", cmd: cmdConnect, atyp: atypDomain, addr: []byte("github.com"), port: 443, reply: replyNotAllow, reason: "github.com is not in the allowlist"},
		{name: "name to loopback", cmd: cmdConnect, atyp: atypDomain, addr: []byte("evil.test"), port: 1, reply: replyNotAllow, reason: "resolves to 127.0.0.1"},
		{name: "metadata", cmd: cmdConnect, atyp: atypIPv4, addr: ip("169.254.169.254"), port: 80, reply: replyNotAllow, reason: "metadata"},
		{name: "mapped metadata", cmd: cmdConnect, atyp: atypIPv6, addr: ip("::ffff:169.254.169.254"), port: 80, reply: replyNotAllow, reason: "metadata"},
		{name: "v6 loopback", cmd: cmdConnect, atyp: atypIPv6, addr: ip("::1"), port: 80, reply: replyNotAllow, reason: "loopback"},
		{name: "bad name", cmd: cmdConnect, atyp: atypDomain, addr: []byte("a\x00b"), port: 80, reply: replyNotAllow, reason: "not a valid host name"},
		{name: "port 0", cmd: cmdConnect, atyp: atypIPv4, addr: ip("127.0.0.1"), port: 0, reply: replyNotAllow, reason: "out of range"},
		{name: "bind", cmd: cmdBind, atyp: atypIPv4, addr: ip("127.0.0.1"), port: port, reply: replyCmd},
		{name: "udp associate", cmd: cmdUDP, atyp: atypIPv4, addr: ip("0.0.0.0"), port: 0, reply: replyCmd},
		{name: "unknown command", cmd: 9, atyp: atypIPv4, addr: ip("127.0.0.1"), port: port, reply: replyCmd},
		{name: "unknown address type", cmd: cmdConnect, atyp: 7, addr: nil, port: port, reply: replyAtyp},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := len(r.called())
			c, rep := socksDial(t, s.socksAddr, tt.cmd, tt.atyp, tt.addr, tt.port)
			if rep != tt.reply {
				t.Fatalf("reply %#x, want %#x", rep, tt.reply)
			}
			if rep == replySuccess {
				echoRoundTrip(t, c, c, "through socks: "+tt.name)
				return
			}
			expectClosed(t, c)
			if tt.reason != "" {
				b := s.blocked.wait(t)
				if b.Via != "socks" || !strings.Contains(b.Reason, tt.reason) {
					t.Fatalf("OnBlocked got %+v, want %q", b, tt.reason)
				}
			}
			if tt.name == "name not allowed" && len(r.called()) != before {
				t.Fatal("the resolver was asked about a name not allowed")
			}
		})
	}
}

func TestSOCKSIPv6(t *testing.T) {
	echo := echoServer(t, "tcp6", "[::1]:0")
	_, ps, _ := net.SplitHostPort(echo)
	port := must(strconv.Atoi(ps))
	s := startServer(t, newResolver(), []string{"::1"})
	c, rep := socksDial(t, s.socksAddr, cmdConnect, atypIPv6, ip("::1"), port)
	if rep != replySuccess {
		t.Fatalf("reply %#x", rep)
	}
	echoRoundTrip(t, c, c, "over IPv6")
}

func TestSOCKSNegotiation(t *testing.T) {
	s := startServer(t, newResolver(), nil, func(o *Options) { o.HandshakeTimeout = 300 * time.Millisecond })

	t.Run("only username/password offered", func(t *testing.T) {
		c := dialTest(t, s.socksAddr)
		c.Write([]byte{5, 1, 2})
		got, _ := io.ReadAll(c)
		if string(got) != "\x05\xff" {
			t.Fatalf("got %x, want 05ff then close", got)
		}
	})
	t.Run("SOCKS4", func(t *testing.T) {
		c := dialTest(t, s.socksAddr)
		c.Write([]byte{4, 1, 0, 80, 127, 0, 0, 1, 0})
		if got, _ := io.ReadAll(c); len(got) != 0 {
			t.Fatalf("got %x, want a close", got)
		}
	})
	t.Run("slow greeting", func(t *testing.T) {
		c := dialTest(t, s.socksAddr)
		c.Write([]byte{5, 3, 0}) // two methods short
		expectClosed(t, c)
	})
	t.Run("slow request", func(t *testing.T) {
		c := dialTest(t, s.socksAddr)
		c.Write([]byte{5, 1, 0})
		br := bufio.NewReader(c)
		if sel, _ := br.Peek(2); string(sel) != "\x05\x00" {
			t.Fatalf("selection %x", sel)
		}
		c.Write([]byte{5, 1, 0, atypDomain, 200, 'a'}) // 199 bytes of name never come
		expectClosed(t, c)
	})
}
