package network

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Close ends the listeners, tunnels in progress and half-done handshakes,
// and every goroutine the Server started.
func TestCloseEndsEverything(t *testing.T) {
	echo := echoServer(t, "tcp", "127.0.0.1:0")
	_, ps, _ := net.SplitHostPort(echo)
	port := must(strconv.Atoi(ps))
	_, webPort := backend(t)
	base := goroutines()

	rules := []Rule{must(ParseRule("127.0.0.1"))}
	s := NewServer(Options{Policy: func() Policy { return Policy{Mode: ModeAllowlist, Rules: rules} }})
	hl, sl := listen(t), listen(t)
	done := make(chan error, 2)
	go func() { done <- s.ServeHTTP(hl) }()
	go func() { done <- s.ServeSOCKS(sl) }()

	// A SOCKS tunnel and a CONNECT tunnel, each carrying data.
	socks, rep := socksDial(t, sl.Addr().String(), cmdConnect, atypIPv4, ip("127.0.0.1"), port)
	if rep != replySuccess {
		t.Fatalf("socks reply %#x", rep)
	}
	conn, br, resp := connect(t, hl.Addr().String(), echo)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT status %d", resp.StatusCode)
	}
	for _, tun := range []struct {
		w io.Writer
		r io.Reader
	}{{socks, socks}, {conn, br}} {
		io.WriteString(tun.w, "ping")
		buf := make([]byte, 4)
		if _, err := io.ReadFull(tun.r, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("tunnel echo %q, %v", buf, err)
		}
	}
	// Handshakes left half done.
	halfHTTP := dialTest(t, hl.Addr().String())
	io.WriteString(halfHTTP, "GET http://127.0.0.1/ HTTP/1.1\r\n")
	halfSOCKS := dialTest(t, sl.Addr().String())
	halfSOCKS.Write([]byte{5, 2})
	// A keep-alive connection, idle after its answer.
	idle := dialTest(t, hl.Addr().String())
	fmt.Fprintf(idle, "GET http://127.0.0.1:%s/ HTTP/1.1\r\nHost: x\r\n\r\n", webPort)
	if resp, err := http.ReadResponse(bufio.NewReader(idle), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("plain GET: %v", err)
	}

	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for range 2 {
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Fatalf("Serve returned %v", err)
		}
	}
	for _, c := range []net.Conn{socks, conn, halfHTTP, halfSOCKS, idle} {
		expectClosed(t, c)
	}
	waitFor(t, fmt.Sprintf("goroutines back to %d", base), func() bool { return goroutines() <= base })

	// A closed Server serves nothing, and closes what it is given.
	l := listen(t)
	if err := s.ServeSOCKS(l); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("ServeSOCKS after Close = %v", err)
	}
	if _, err := l.Accept(); err == nil {
		t.Fatal("listener still open")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestMaxConns(t *testing.T) {
	s := startServer(t, newResolver(), nil, func(o *Options) { o.MaxConns = 1 })
	first := dialTest(t, s.socksAddr)
	first.Write([]byte{5, 1, 0})
	var sel [2]byte
	if _, err := io.ReadFull(first, sel[:]); err != nil {
		t.Fatal(err)
	}
	second := dialTest(t, s.socksAddr)
	second.Write([]byte{5, 1, 0})
	second.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := io.ReadFull(second, sel[:]); !isTimeout(err) {
		t.Fatalf("second connection served past MaxConns: %v", err)
	}
	first.Close()
	second.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(second, sel[:]); err != nil || sel != [2]byte{5, 0} {
		t.Fatalf("second connection after the first closed: %x, %v", sel, err)
	}
}

// A policy change applies to the next connection.
func TestPolicyLive(t *testing.T) {
	echo := echoServer(t, "tcp", "127.0.0.1:0")
	var p atomic.Pointer[Policy]
	p.Store(&Policy{Mode: ModeAllowlist, Rules: []Rule{must(ParseRule("127.0.0.1"))}})
	s := startServer(t, newResolver(), nil, func(o *Options) { o.Policy = func() Policy { return *p.Load() } })
	if _, _, resp := connect(t, s.httpAddr, echo); resp.StatusCode != 200 {
		t.Fatalf("allowed: status %d", resp.StatusCode)
	}
	p.Store(&Policy{Mode: ModeNone})
	if _, _, resp := connect(t, s.httpAddr, echo); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("after network none: status %d", resp.StatusCode)
	}
}

// The daemon's own proxy variables are never used.
func TestNoProxyFromEnvironment(t *testing.T) {
	dead := listen(t) // a "proxy" that answers nothing
	t.Setenv("HTTP_PROXY", "http://"+dead.Addr().String())
	t.Setenv("HTTPS_PROXY", "http://"+dead.Addr().String())
	t.Setenv("ALL_PROXY", "socks5://"+dead.Addr().String())
	dead.Close()
	_, port := backend(t)
	s := startServer(t, newResolver(), []string{"127.0.0.1"})
	if code, body := get(t, proxyClient(t, s.httpAddr), "http://127.0.0.1:"+port+"/env"); code != 200 {
		t.Fatalf("got %d %q", code, body)
	}
}

// upstreamProxy is a minimal CONNECT proxy that records what it was asked.
type upstreamProxy struct {
	mu      sync.Mutex
	targets []string
}

func (u *upstreamProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.targets = append(u.targets, r.Host+" auth="+r.Header.Get("Proxy-Authorization"))
	u.mu.Unlock()
	if r.Method != http.MethodConnect {
		http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
		return
	}
	var d net.Dialer
	target, err := d.DialContext(r.Context(), "tcp", r.Host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		target.Close()
		return
	}
	io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n")
	go func() { io.Copy(target, c); target.(*net.TCPConn).CloseWrite() }()
	io.Copy(c, target)
	c.Close()
	target.Close()
}

func (u *upstreamProxy) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.targets...)
}

func TestUpstream(t *testing.T) {
	up := &upstreamProxy{}
	ul := listen(t)
	us := &http.Server{Handler: up}
	go us.Serve(ul)
	t.Cleanup(func() { us.Close() })

	echo := echoServer(t, "tcp", "127.0.0.1:0")
	_, ps, _ := net.SplitHostPort(echo)
	_, bport := backend(t)
	upURL := &url.URL{Scheme: "http", Host: ul.Addr().String(), User: url.UserPassword("u", "p")}
	s := startServer(t, newResolver("echo.test", "127.0.0.1", "web.test", "127.0.0.1"),
		[]string{"echo.test", "web.test", "127.0.0.1"},
		func(o *Options) {
			o.Upstream = upURL
			o.Dial = func(context.Context, string, string) (net.Conn, error) {
				return nil, errors.New("Dial must not be used with an upstream proxy")
			}
		})

	c, rep := socksDial(t, s.socksAddr, cmdConnect, atypDomain, []byte("echo.test"), must(strconv.Atoi(ps)))
	if rep != replySuccess {
		t.Fatalf("socks reply %#x", rep)
	}
	echoRoundTrip(t, c, c, "via upstream")

	code, body := get(t, proxyClient(t, s.httpAddr), "http://web.test:"+bport+"/up")
	if code != 200 || body != "host=web.test:"+bport+" path=/up" {
		t.Fatalf("plain GET via upstream: %d %q", code, body)
	}
	if code, _ := get(t, proxyClient(t, s.httpAddr), "http://github.com/"); code != http.StatusForbidden {
		t.Fatalf("refused GET: %d", code)
	}

	seen := up.seen()
	want := []string{"127.0.0.1:" + ps + " auth=Basic dTpw", "127.0.0.1:" + bport + " auth=Basic dTpw"}
	if strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Fatalf("upstream was asked %q, want %q (checked addresses, never names; nothing for refusals)", seen, want)
	}

	t.Run("bad scheme", func(t *testing.T) {
		s := startServer(t, newResolver(), []string{"127.0.0.1"}, func(o *Options) {
			o.Upstream = &url.URL{Scheme: "socks5", Host: ul.Addr().String()}
		})
		_, br, resp := connect(t, s.httpAddr, echo)
		b, _ := io.ReadAll(bufio.NewReader(br))
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), "not supported") {
			t.Fatalf("got %d %q", resp.StatusCode, b)
		}
	})
}
