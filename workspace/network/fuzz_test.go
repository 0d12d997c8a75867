package network

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"testing"
)

// rw reads from a fixed input and discards what is written.
type rw struct{ io.Reader }

func (rw) Write(p []byte) (int, error) { return len(p), nil }

func FuzzSOCKSHandshake(f *testing.F) {
	f.Add([]byte{5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1, 0, 80})
	f.Add([]byte{5, 1, 0, 5, 1, 0, 3, 9, 'e', 'x', 'a', 'm', 'p', 'l', 'e', '.', 'c', 0, 80})
	f.Add([]byte{5, 1, 0, 5, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1, 1, 187})
	f.Add([]byte{5, 1, 0, 5, 3, 0, 1, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{5, 1, 2})
	f.Add([]byte{5, 0})
	f.Add([]byte{5, 255})
	f.Add([]byte{5, 1, 0, 5, 1, 0, 3, 0, 0, 80})
	r := newResolver("example.com", "93.184.215.14")
	p := Policy{Mode: ModeAllowlist, Rules: []Rule{must(ParseRule("*.com")), must(ParseRule("10.0.0.0/8"))}}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := negotiate(rw{bytes.NewReader(data)})
		var out bytes.Buffer
		writeSocksError(&out, err)
		if out.Len() != 0 && out.Len() != 2 && out.Len() != 10 {
			t.Fatalf("answer of %d bytes", out.Len())
		}
		if err != nil {
			return
		}
		if req.port < 0 || req.port > 65535 || req.host == "" || len(req.host) > 255 {
			t.Fatalf("bad request %+v", req)
		}
		addrs, reason, err := p.Check(context.Background(), r, req.host, req.port)
		if (err == nil) != (len(addrs) > 0) || (err != nil && reason == "") {
			t.Fatalf("Check = %v, %q, %v", addrs, reason, err)
		}
	})
}

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"github.com", "*.example.com:443", "10.0.0.0/8:5432", "[::1]:8080", "::1", "fd00::/8",
		"[fd00::/8]:1", "a..b", "*.", "host:0", "::ffff:1.2.3.4", "1.2.3.4/32", "127.1", "fe80::1%eth0"} {
		f.Add(s, "example.com", 443)
	}
	r := newResolver("example.com", "127.0.0.1", "example.com", "93.184.215.14")
	f.Fuzz(func(t *testing.T, s, host string, port int) {
		rule, err := ParseRule(s)
		if err != nil {
			return
		}
		again, err := ParseRule(rule.String())
		if err != nil || again != rule {
			t.Fatalf("%q -> %q -> %v, %v", s, rule.String(), again, err)
		}
		p := Policy{Mode: ModeAllowlist, Rules: []Rule{rule}}
		addrs, reason, err := p.Check(context.Background(), r, host, port)
		if (err == nil) != (len(addrs) > 0) || (err != nil && reason == "") {
			t.Fatalf("Check(%q, %d) under %q = %v, %q, %v", host, port, rule, addrs, reason, err)
		}
	})
}

func FuzzClientHello(f *testing.F) {
	f.Add(clientHello(f, "example.com"))
	f.Add(clientHello(f, ""))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte{0x16, 3, 1, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		name, read, err := readClientHello(context.Background(), bytes.NewReader(data))
		if len(read) > maxClientHello || !bytes.HasPrefix(data, read) {
			t.Fatalf("read %d bytes, not a prefix of the input", len(read))
		}
		_ = checkSNI("example.com", name, err)
	})
}

// clientHello returns the first flight of a TLS client for serverName.
func clientHello(tb testing.TB, serverName string) []byte {
	tb.Helper()
	a, b := net.Pipe()
	done := make(chan []byte)
	go func() {
		buf := make([]byte, 64<<10)
		n, _ := b.Read(buf)
		b.Close()
		done <- buf[:n]
	}()
	c := tls.Client(a, &tls.Config{ServerName: serverName, InsecureSkipVerify: serverName == ""})
	_ = c.Handshake()
	a.Close()
	return <-done
}

func TestReadClientHello(t *testing.T) {
	hello := clientHello(t, "Example.COM")
	for _, tt := range []struct {
		name  string
		in    []byte
		host  string
		allow bool
	}{
		{"match", hello, "example.com", true},
		{"match, trailing dot", hello, "example.com.", true},
		{"other", hello, "github.com", false},
		{"split in bytes", hello, "example.com", true}, // read one byte at a time below
		{"truncated", hello[:len(hello)/2], "example.com", false},
		{"http", []byte("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"), "example.com", false},
		{"no sni, ip target", clientHello(t, ""), "127.0.0.1", true},
		{"sni, ip target", hello, "127.0.0.1", false}, // a name present must be the target's
		{"no sni, name target", clientHello(t, ""), "example.com", false},
		{"huge record", append([]byte{0x16, 3, 1, 0x40, 0}, make([]byte, 20<<10)...), "example.com", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var r io.Reader = bytes.NewReader(tt.in)
			if tt.name == "split in bytes" {
				r = io.LimitReader(&oneByte{r}, int64(len(tt.in)))
			}
			name, read, err := readClientHello(context.Background(), r)
			if len(read) > maxClientHello {
				t.Fatalf("read %d bytes", len(read))
			}
			reason := checkSNI(tt.host, name, err)
			if (reason == "") != tt.allow {
				t.Fatalf("checkSNI(%q, %q, %v) = %q", tt.host, name, err, reason)
			}
		})
	}
}

type oneByte struct{ r io.Reader }

func (o *oneByte) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return o.r.Read(p)
}
