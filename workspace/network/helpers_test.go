package network

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"
)

// fakeResolver answers from a map and records every name it was asked.
type fakeResolver struct {
	answers map[string][]netip.Addr

	mu    sync.Mutex
	calls []string
}

func newResolver(kv ...string) *fakeResolver {
	r := &fakeResolver{answers: map[string][]netip.Addr{}}
	for i := 0; i+1 < len(kv); i += 2 {
		r.answers[kv[i]] = append(r.answers[kv[i]], netip.MustParseAddr(kv[i+1]))
	}
	return r
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	r.calls = append(r.calls, host)
	r.mu.Unlock()
	if a, ok := r.answers[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (r *fakeResolver) called() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// blockedLog records OnBlocked calls.
type blockedLog struct {
	mu   sync.Mutex
	list []Blocked
	ch   chan Blocked
}

func newBlockedLog() *blockedLog { return &blockedLog{ch: make(chan Blocked, 64)} }

func (b *blockedLog) add(x Blocked) {
	b.mu.Lock()
	b.list = append(b.list, x)
	b.mu.Unlock()
	select {
	case b.ch <- x:
	default:
	}
}

// wait returns the next refusal.
func (b *blockedLog) wait(t *testing.T) Blocked {
	t.Helper()
	select {
	case x := <-b.ch:
		return x
	case <-time.After(30 * time.Second):
		t.Fatal("no OnBlocked call")
		return Blocked{}
	}
}

func (b *blockedLog) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.list)
}

// testServer is a Server serving both proxies on loopback listeners.
type testServer struct {
	*Server
	httpAddr, socksAddr string
	blocked             *blockedLog
	resolver            *fakeResolver
	done                chan error // each Serve's result
}

type serverOpt func(*Options)

// startServer serves policy (an allowlist of rules) with resolver r.
func startServer(t *testing.T, r *fakeResolver, rules []string, opts ...serverOpt) *testServer {
	t.Helper()
	rs, err := ParseRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{blocked: newBlockedLog(), resolver: r, done: make(chan error, 2)}
	o := Options{
		Policy:           func() Policy { return Policy{Mode: ModeAllowlist, Rules: rs} },
		OnBlocked:        ts.blocked.add,
		Resolver:         r,
		HandshakeTimeout: 5 * time.Second,
	}
	for _, f := range opts {
		f(&o)
	}
	ts.Server = NewServer(o)
	hl := listen(t)
	sl := listen(t)
	ts.httpAddr, ts.socksAddr = hl.Addr().String(), sl.Addr().String()
	go func() { ts.done <- ts.ServeHTTP(hl) }()
	go func() { ts.done <- ts.ServeSOCKS(sl) }()
	t.Cleanup(func() {
		if err := ts.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		for range 2 {
			if err := <-ts.done; !errors.Is(err, ErrServerClosed) {
				t.Errorf("Serve returned %v, want ErrServerClosed", err)
			}
		}
	})
	return ts
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// echoServer echoes every connection until the client half-closes, then
// half-closes too. It returns its address.
func echoServer(t *testing.T, network, addr string) string {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("cannot listen on %s %s: %v", network, addr, err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
				_ = c.(*net.TCPConn).CloseWrite()
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	return l.Addr().String()
}

// redirectDial dials from (a checked "IP:port") at to instead, and any
// other address as given; tests use it to reach a loopback server as if it
// listened on port 443.
func redirectDial(from, to string) serverOpt {
	return func(o *Options) {
		o.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == from {
				addr = to
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
	}
}

// dialTest connects to addr with a deadline long enough for a loaded
// machine, so a bug shows as a failure rather than a hang.
func dialTest(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// echoRoundTrip writes msg, half-closes and expects msg back then EOF.
func echoRoundTrip(t *testing.T, c net.Conn, r io.Reader, msg string) {
	t.Helper()
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read echo: %v", err)
	}
	if string(got) != msg {
		t.Fatalf("echo = %q, want %q", got, msg)
	}
}

// waitFor polls cond until it holds, failing after a generous deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// expectClosed reads c until the server closes it.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	_, err := io.Copy(io.Discard, c)
	if err != nil && isTimeout(err) {
		t.Fatal("connection still open")
	}
}

func goroutines() int { return runtime.NumGoroutine() }

func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprint(err))
	}
	return v
}
