package sandbox

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// echoServer starts a python server in s that listens on addr:port and
// answers each line with "pong:" and the line, and returns once it
// listens.
func echoServer(t *testing.T, s *Sandbox, family, addr, port string) {
	t.Helper()
	script := `
import socket, sys, threading
s = socket.socket(socket.` + family + `, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("` + addr + `", ` + port + `))
s.listen(16)
print("listening", flush=True)
def serve(c):
    f = c.makefile("rwb")
    for line in f:
        f.write(b"pong:" + line)
        f.flush()
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Spawn(context.Background(), Spec{Argv: []string{"python3", "-c", script}, Stdout: w, Stderr: w})
	w.Close()
	if err != nil {
		t.Fatalf("spawn the server: %v", err)
	}
	t.Cleanup(func() { p.Kill(); r.Close() })
	br := bufio.NewReader(r)
	line, err := br.ReadString('\n')
	if err != nil || line != "listening\n" {
		rest, _ := io.ReadAll(br)
		t.Fatalf("the server said %q (%v)", line+string(rest), err)
	}
}

func ping(t *testing.T, s *Sandbox, port int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := s.DialPort(ctx, port)
	if err != nil {
		t.Fatalf("DialPort(%d): %v", port, err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || got != "pong:ping\n" {
		t.Fatalf("port %d answered %q (%v)", port, got, err)
	}
}

// TestSandboxDialPort: the daemon reaches a server listening in the
// sandbox's own network namespace through the init, on 127.0.0.1 and on
// ::1, and a port nothing listens on is ErrNotListening.
func TestSandboxDialPort(t *testing.T) {
	s, _, _ := testSandbox(t, ModeOverlay)
	echoServer(t, s, "AF_INET", "127.0.0.1", "8000")
	echoServer(t, s, "AF_INET6", "::1", "8001")
	ping(t, s, 8000)
	ping(t, s, 8001)
	for range 20 { // many connections, one after the other
		ping(t, s, 8000)
	}

	_, err := s.DialPort(context.Background(), 8002)
	if !errors.Is(err, ErrNotListening) {
		t.Errorf("a port nothing listens on: %v, want ErrNotListening", err)
	}
	if _, err := s.DialPort(context.Background(), 70000); err == nil || !strings.Contains(err.Error(), "not a TCP port") {
		t.Errorf("port 70000: %v", err)
	}
	s.Close()
	<-s.Done()
	if _, err := s.DialPort(context.Background(), 8000); !errors.Is(err, ErrClosed) {
		t.Errorf("a closed sandbox: %v, want ErrClosed", err)
	}
}

// TestSandboxDialPortGivenUp: connections whose caller stopped waiting
// (its context ended before the init's answer came) are closed, not left
// open in the daemon.
func TestSandboxDialPortGivenUp(t *testing.T) {
	s, _, _ := testSandbox(t, ModeOverlay)
	echoServer(t, s, "AF_INET", "127.0.0.1", "8000")
	ping(t, s, 8000) // the first dial's lazy setup out of the count
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before := fds()
	for range 50 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if c, err := s.DialPort(ctx, 8000); err == nil {
			c.Close() // the answer won the race: a connection, closed here
		}
	}
	ping(t, s, 8000) // every answer of the given-up dials came before this one's
	deadline := time.Now().Add(10 * time.Second)
	for fds() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := fds(); n > before {
		t.Fatalf("%d descriptors open after 50 given-up dials, %d before", n, before)
	}
}
