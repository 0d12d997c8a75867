package network

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// backend is a loopback HTTP server that reports the Host it was asked for.
func backend(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "host=%s path=%s", r.Host, r.URL.Path)
	}))
	t.Cleanup(ts.Close)
	_, port, _ := net.SplitHostPort(ts.Listener.Addr().String())
	return ts, port
}

func proxyClient(t *testing.T, proxyAddr string) *http.Client {
	t.Helper()
	u := &url.URL{Scheme: "http", Host: proxyAddr}
	tr := &http.Transport{Proxy: http.ProxyURL(u), DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestHTTPPlain(t *testing.T) {
	_, port := backend(t)
	r := newResolver("backend.test", "127.0.0.1", "evil.test", "127.0.0.1")
	s := startServer(t, r, []string{"127.0.0.1", "backend.test", "evil.test"})
	c := proxyClient(t, s.httpAddr)

	t.Run("literal allowed", func(t *testing.T) {
		code, body := get(t, c, "http://127.0.0.1:"+port+"/a")
		if code != 200 || body != "host=127.0.0.1:"+port+" path=/a" {
			t.Fatalf("got %d %q", code, body)
		}
	})
	t.Run("name allowed", func(t *testing.T) {
		// backend.test resolves to 127.0.0.1, which the literal rule names.
		code, body := get(t, c, "http://backend.test:"+port+"/b")
		if code != 200 || body != "host=backend.test:"+port+" path=/b" {
			t.Fatalf("got %d %q", code, body)
		}
	})
	t.Run("refused", func(t *testing.T) {
		before := len(r.called())
		code, body := get(t, c, "http://github.com/")
		if code != http.StatusForbidden || !strings.Contains(body, "github.com is not in the allowlist") {
			t.Fatalf("got %d %q", code, body)
		}
		b := s.blocked.wait(t)
		if b.Host != "github.com" || b.Port != 80 || b.Via != "http" || !strings.Contains(b.Reason, "not in the allowlist") {
			t.Fatalf("OnBlocked got %+v", b)
		}
		if len(r.called()) != before {
			t.Fatal("the resolver was asked about a name not allowed")
		}
	})
	t.Run("metadata", func(t *testing.T) {
		code, body := get(t, c, "http://169.254.169.254/latest/meta-data/")
		if code != http.StatusForbidden || !strings.Contains(body, "metadata") {
			t.Fatalf("got %d %q", code, body)
		}
		if b := s.blocked.wait(t); b.Host != "169.254.169.254" {
			t.Fatalf("OnBlocked got %+v", b)
		}
	})
}

// rawRequest sends req on a new connection to addr and reads one response.
func rawRequest(t *testing.T, addr, req string) (*http.Response, string) {
	t.Helper()
	c := dialTest(t, addr)
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// The policy checks the absolute URL, which is what is dialled; the Host
// header cannot steer the check nor reach the target.
func TestHTTPHostHeaderDiffers(t *testing.T) {
	_, port := backend(t)
	s := startServer(t, newResolver(), []string{"127.0.0.1"})

	resp, body := rawRequest(t, s.httpAddr, "GET http://github.com/ HTTP/1.1\r\nHost: 127.0.0.1:"+port+"\r\nConnection: close\r\n\r\n")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "github.com") {
		t.Fatalf("disallowed URL with an allowed Host: %d %q", resp.StatusCode, body)
	}
	resp, body = rawRequest(t, s.httpAddr, "GET http://127.0.0.1:"+port+"/x HTTP/1.1\r\nHost: github.com\r\nConnection: close\r\n\r\n")
	if resp.StatusCode != 200 || body != "host=127.0.0.1:"+port+" path=/x" {
		t.Fatalf("allowed URL with another Host: %d %q (the target must see the URL's host)", resp.StatusCode, body)
	}
}

func TestHTTPModeNone(t *testing.T) {
	_, port := backend(t)
	s := startServer(t, newResolver(), nil, func(o *Options) {
		o.Policy = func() Policy { return Policy{Mode: ModeNone, Rules: []Rule{must(ParseRule("127.0.0.1"))}} }
	})
	code, body := get(t, proxyClient(t, s.httpAddr), "http://127.0.0.1:"+port+"/")
	if code != http.StatusForbidden || !strings.Contains(body, ReasonNone) {
		t.Fatalf("got %d %q", code, body)
	}
	if b := s.blocked.wait(t); b.Reason != ReasonNone {
		t.Fatalf("OnBlocked got %+v", b)
	}
}

func TestHTTPBounds(t *testing.T) {
	s := startServer(t, newResolver(), []string{"127.0.0.1"}, func(o *Options) { o.HandshakeTimeout = 300 * time.Millisecond })

	t.Run("oversized header", func(t *testing.T) {
		big := strings.Repeat("a", 100<<10)
		resp, _ := rawRequest(t, s.httpAddr, "GET http://127.0.0.1/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: "+big+"\r\n\r\n")
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("status %d, want 431", resp.StatusCode)
		}
	})
	t.Run("slow head", func(t *testing.T) {
		c := dialTest(t, s.httpAddr)
		if _, err := io.WriteString(c, "GET http://127.0.0.1/ HTTP/1.1\r\nHost: 127."); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		expectClosed(t, c) // by the header timeout, not by the test's deadline
		t.Logf("closed after %v", time.Since(start))
	})
	t.Run("not a proxy request", func(t *testing.T) {
		resp, body := rawRequest(t, s.httpAddr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "absolute form") {
			t.Fatalf("got %d %q", resp.StatusCode, body)
		}
	})
	t.Run("other scheme", func(t *testing.T) {
		resp, _ := rawRequest(t, s.httpAddr, "GET ftp://127.0.0.1/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("status %d, want 400", resp.StatusCode)
		}
	})
}

// connect sends CONNECT target on a new connection and returns the
// response and a reader positioned after it.
func connect(t *testing.T, proxyAddr, target string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c := dialTest(t, proxyAddr)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	return c, br, resp
}

func TestConnect(t *testing.T) {
	echo := echoServer(t, "tcp", "127.0.0.1:0")
	_, echoPort, _ := net.SplitHostPort(echo)
	s := startServer(t, newResolver("echo.test", "127.0.0.1"), []string{"echo.test", "127.0.0.1"})

	t.Run("tunnel with half-close", func(t *testing.T) {
		c, br, resp := connect(t, s.httpAddr, "echo.test:"+echoPort)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		echoRoundTrip(t, c, br, "hello through CONNECT")
	})
	for _, tt := range []struct{ target, reason string }{
		{"169.254.169.254:80", "metadata"},
		{"github.com:443", "github.com is not in the allowlist"},
		{"[::ffff:127.0.0.1]:" + echoPort, ""}, // named by the literal rule: allowed
		{"[::ffff:169.254.169.254]:80", "metadata"},
	} {
		t.Run("target "+tt.target, func(t *testing.T) {
			c, br, resp := connect(t, s.httpAddr, tt.target)
			if tt.reason == "" {
				if resp.StatusCode != 200 {
					t.Fatalf("status %d, want 200", resp.StatusCode)
				}
				echoRoundTrip(t, c, br, "mapped")
				return
			}
			body, _ := io.ReadAll(br)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), tt.reason) {
				t.Fatalf("got %d %q, want 403 with %q", resp.StatusCode, body, tt.reason)
			}
			if b := s.blocked.wait(t); b.Via != "connect" || !strings.Contains(b.Reason, tt.reason) {
				t.Fatalf("OnBlocked got %+v", b)
			}
		})
	}
	t.Run("name resolving to loopback", func(t *testing.T) {
		s := startServer(t, newResolver("evil.test", "127.0.0.1"), []string{"evil.test"})
		_, br, resp := connect(t, s.httpAddr, "evil.test:"+echoPort)
		body, _ := io.ReadAll(br)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "resolves to 127.0.0.1, a loopback address") {
			t.Fatalf("got %d %q", resp.StatusCode, body)
		}
	})
	t.Run("no port", func(t *testing.T) {
		_, _, resp := connect(t, s.httpAddr, "echo.test")
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("status %d, want 400", resp.StatusCode)
		}
	})
}

// tls443 starts a TLS server for example.com (httptest's certificate) and a
// proxy that allows example.com and reaches that server as 127.0.0.1:443.
func tls443(t *testing.T, opts ...serverOpt) (*testServer, *httptest.Server) {
	t.Helper()
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "tls host=%s", r.Host)
	}))
	t.Cleanup(ts.Close)
	opts = append([]serverOpt{redirectDial("127.0.0.1:443", ts.Listener.Addr().String())}, opts...)
	s := startServer(t, newResolver("example.com", "127.0.0.1"), []string{"example.com", "127.0.0.1"}, opts...)
	return s, ts
}

func TestConnectTLS(t *testing.T) {
	s, ts := tls443(t)
	tr := ts.Client().Transport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: s.httpAddr})
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Get("https://example.com/")
	if err != nil {
		t.Fatalf("GET through CONNECT: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "tls host=example.com" {
		t.Fatalf("body %q", body)
	}
	if n := s.blocked.count(); n != 0 {
		t.Fatalf("%d refusals", n)
	}
}

func TestConnectSNI(t *testing.T) {
	s, ts := tls443(t)
	roots := ts.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs

	t.Run("other server name", func(t *testing.T) {
		c, _, resp := connect(t, s.httpAddr, "example.com:443")
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		// The certificate is valid for example.com only; skip verification
		// so only the proxy can stop this handshake.
		tc := tls.Client(c, &tls.Config{ServerName: "evil.test", InsecureSkipVerify: true})
		if err := tc.Handshake(); err == nil {
			t.Fatal("TLS handshake with another SNI went through")
		}
		b := s.blocked.wait(t)
		if b.Host != "example.com" || b.Port != 443 || !strings.Contains(b.Reason, "names evil.test") {
			t.Fatalf("OnBlocked got %+v", b)
		}
	})
	t.Run("no server name", func(t *testing.T) {
		c, _, _ := connect(t, s.httpAddr, "example.com:443")
		tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true}) // no ServerName: no SNI
		if err := tc.Handshake(); err == nil {
			t.Fatal("TLS handshake without SNI went through")
		}
		if b := s.blocked.wait(t); !strings.Contains(b.Reason, "names no server") {
			t.Fatalf("OnBlocked got %+v", b)
		}
	})
	t.Run("not TLS", func(t *testing.T) {
		c, _, _ := connect(t, s.httpAddr, "example.com:443")
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
		expectClosed(t, c)
		if b := s.blocked.wait(t); !strings.Contains(b.Reason, "did not start with a TLS ClientHello") {
			t.Fatalf("OnBlocked got %+v", b)
		}
	})
	t.Run("hello sent with the CONNECT", func(t *testing.T) {
		// A client that pipelines its ClientHello behind the CONNECT: the
		// proxy must find it in what the HTTP server read ahead.
		raw := dialTest(t, s.httpAddr)
		pc := &pipelinedConn{Conn: raw, prefix: "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"}
		tc := tls.Client(pc, &tls.Config{ServerName: "example.com", RootCAs: roots})
		if err := tc.Handshake(); err != nil {
			t.Fatalf("handshake: %v", err)
		}
		fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if string(body) != "tls host=example.com" {
			t.Fatalf("body %q", body)
		}
	})
	t.Run("slow hello", func(t *testing.T) {
		s, _ := tls443(t, func(o *Options) { o.HandshakeTimeout = 300 * time.Millisecond })
		c, _, resp := connect(t, s.httpAddr, "example.com:443")
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		io.WriteString(c, "\x16\x03\x01") // the start of a record, then nothing
		expectClosed(t, c)
		if b := s.blocked.wait(t); !strings.Contains(b.Reason, "timeout") {
			t.Fatalf("OnBlocked got %+v", b)
		}
	})
}

// pipelinedConn writes prefix together with the first write, and drops the
// proxy's CONNECT response before the first read.
type pipelinedConn struct {
	net.Conn
	prefix  string
	wrote   bool
	br      *bufio.Reader
	skipped bool
}

func (c *pipelinedConn) Write(p []byte) (int, error) {
	if !c.wrote {
		c.wrote = true
		if _, err := c.Conn.Write(append([]byte(c.prefix), p...)); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *pipelinedConn) Read(p []byte) (int, error) {
	if !c.skipped {
		c.skipped = true
		c.br = bufio.NewReader(c.Conn)
		resp, err := http.ReadResponse(c.br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("CONNECT: %s", resp.Status)
		}
	}
	return c.br.Read(p)
}
