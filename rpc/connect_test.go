package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

const testToken = "test-token-0123456789abcdef"

// wsEcho is an in-test websocket peer standing in for the daemon's
// transport: it checks the token, echoes every message, and on command
// closes the connection the ways a daemon can.
type wsEcho struct {
	srv *httptest.Server
	// gotClose receives the close code the client sent.
	gotClose chan int
	// ponged is closed when the client answered the ping sent on connect.
	ponged chan struct{}
	// closeWith, when set, is sent as the close frame on a message
	// containing "method":"exit".
	closeCode   int
	closeReason string
}

func newWSEcho(t *testing.T) *wsEcho {
	t.Helper()
	e := &wsEcho{gotClose: make(chan int, 1), ponged: make(chan struct{})}
	up := websocket.Upgrader{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, `{"status":"ok"}`)
	})
	mux.HandleFunc("GET /rpc", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Origin") != "" {
			http.Error(w, "origin", http.StatusForbidden)
			return
		}
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		var once sync.Once
		conn.SetPongHandler(func(string) error {
			once.Do(func() { close(e.ponged) })
			return nil
		})
		conn.WriteControl(websocket.PingMessage, []byte("p"), time.Now().Add(time.Second))
		for {
			typ, msg, err := conn.ReadMessage()
			if err != nil {
				var ce *websocket.CloseError
				if errors.As(err, &ce) {
					e.gotClose <- ce.Code
				}
				return
			}
			switch {
			case bytes.Contains(msg, []byte(`"method":"crash"`)):
				conn.NetConn().Close()
				return
			case bytes.Contains(msg, []byte(`"method":"exit"`)):
				conn.WriteControl(websocket.CloseMessage,
					websocket.FormatCloseMessage(e.closeCode, e.closeReason), time.Now().Add(time.Second))
				continue // read the client's answer to the close
			}
			if err := conn.WriteMessage(typ, msg); err != nil {
				return
			}
		}
	})
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			http.Error(w, "token", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

// session is one Connect running against a wsEcho, with pipes for stdio.
type session struct {
	stdin  *io.PipeWriter
	stdout *bufio.Reader
	logs   *syncBuffer
	cancel context.CancelFunc
	done   chan connectResult
}

type connectResult struct {
	code int
	err  error
}

// startSession writes a runtime file for e (under this process's pid) in a
// fresh runtime dir and runs Connect. The executable does not exist, so a
// test fails loudly if Connect tries to start a daemon.
func startSession(t *testing.T, e *wsEcho, maxBytes int) *session {
	t.Helper()
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	state := t.TempDir()
	_, err := WriteRuntimeFile(RuntimeDir(state), RuntimeInfo{
		PID: os.Getpid(), URL: e.srv.URL + "/?token=" + testToken, Token: testToken, StartedAt: time.Now(),
	})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	s := &session{stdin: inW, stdout: bufio.NewReader(outR), logs: &syncBuffer{}, cancel: cancel, done: make(chan connectResult, 1)}
	go func() {
		code, err := Connect(ctx, ConnectOptions{
			StateDir:        state,
			Executable:      "/nonexistent/cellbox",
			Stdin:           inR,
			Stdout:          outW,
			Logger:          slog.New(slog.NewTextHandler(s.logs, nil)),
			MaxMessageBytes: maxBytes,
		})
		outW.Close()
		inR.Close() // ends the stdin pump if it is still reading
		s.done <- connectResult{code, err}
	}()
	t.Cleanup(func() {
		inW.Close()
		cancel()
		<-s.done
	})
	return s
}

func (s *session) send(t *testing.T, body string) {
	t.Helper()
	if _, err := io.WriteString(s.stdin, "Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body); err != nil {
		t.Fatalf("write stdin: %v", err)
	}
}

func (s *session) recv(t *testing.T) string {
	t.Helper()
	type frame struct {
		body []byte
		err  error
	}
	ch := make(chan frame, 1)
	go func() {
		b, err := ReadFrame(s.stdout, 64<<20, nil)
		ch <- frame{bytes.Clone(b), err}
	}()
	select {
	case f := <-ch:
		if f.err != nil {
			t.Fatalf("read stdout: %v", f.err)
		}
		return string(f.body)
	case <-time.After(5 * time.Second):
		t.Fatal("no frame on stdout after 5s")
	}
	return ""
}

func (s *session) wait(t *testing.T) connectResult {
	t.Helper()
	select {
	case r := <-s.done:
		s.done <- r // for the cleanup
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("Connect did not return after 5s")
	}
	return connectResult{}
}

func TestConnectBridgesFrames(t *testing.T) {
	e := newWSEcho(t)
	s := startSession(t, e, 0)

	msgs := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","method":"initialized","params":{}}`,
		`{"jsonrpc":"2.0","id":"ü","method":"fs/write","params":{"content":"` + strings.Repeat("λ", 200<<10) + `"}}`,
	}
	for _, m := range msgs {
		s.send(t, m)
	}
	for i, want := range msgs {
		if got := s.recv(t); got != want {
			t.Errorf("message %d came back as %.80q, want %.80q", i, got, want)
		}
	}
	select {
	case <-e.ponged:
	case <-time.After(5 * time.Second):
		t.Error("the daemon's ping was not answered")
	}

	// Stdin EOF: close 1000, exit 0; the daemon keeps the kernels.
	s.stdin.Close()
	if r := s.wait(t); r.code != 0 || r.err != nil {
		t.Errorf("after stdin EOF: Connect = %d, %v; want 0, nil", r.code, r.err)
	}
	select {
	case code := <-e.gotClose:
		if code != websocket.CloseNormalClosure {
			t.Errorf("daemon got close code %d, want 1000", code)
		}
	case <-time.After(5 * time.Second):
		t.Error("daemon got no close frame after stdin EOF")
	}
}

func TestConnectAnswersBadFrameLocally(t *testing.T) {
	tests := []struct {
		name      string
		raw       string
		code      int
		errorCode string
	}{
		{"bad content length", "Content-Length: abc\r\n\r\n", -32700, "parse_error"},
		{"no content length", "Content-Type: x\r\n\r\n", -32700, "parse_error"},
		{"too big", "Content-Length: 200\r\n\r\n" + strings.Repeat("x", 200), -32600, "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newWSEcho(t)
			s := startSession(t, e, 100)
			if _, err := io.WriteString(s.stdin, tt.raw); err != nil {
				t.Fatal(err)
			}
			var reply struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
					Data    struct {
						ErrorCode string `json:"errorCode"`
						Detail    string `json:"detail"`
					} `json:"data"`
				} `json:"error"`
			}
			got := s.recv(t)
			if err := json.Unmarshal([]byte(got), &reply); err != nil {
				t.Fatalf("reply %q: %v", got, err)
			}
			if reply.JSONRPC != "2.0" || string(reply.ID) != "null" || reply.Error.Code != tt.code ||
				reply.Error.Data.ErrorCode != tt.errorCode || reply.Error.Message == "" || reply.Error.Data.Detail != reply.Error.Message {
				t.Errorf("reply = %s, want code %d errorCode %s, id null", got, tt.code, tt.errorCode)
			}

			// The bridge goes on: the next frame reaches the daemon.
			next := `{"jsonrpc":"2.0","id":2,"method":"workspace/list","params":{}}`
			s.send(t, next)
			if got := s.recv(t); got != next {
				t.Errorf("after the bad frame got %q, want the echo %q", got, next)
			}
		})
	}
}

func TestConnectExitCode(t *testing.T) {
	tests := []struct {
		name     string
		code     int
		reason   string
		method   string
		wantExit int
		wantLog  string
	}{
		{"exit after shutdown", websocket.CloseNormalClosure, CloseReasonExitAfterShutdown, "exit", 0, ""},
		{"exit without shutdown", websocket.CloseNormalClosure, CloseReasonExitWithoutShutdown, "exit", 1, "reason=\"exit without shutdown\""},
		{"message too big", websocket.CloseMessageTooBig, "message exceeds 16777216 bytes", "exit", 1, "code=1009"},
		{"going away", websocket.CloseGoingAway, "daemon stopping", "exit", 1, "code=1001"},
		{"abnormal closure", 0, "", "crash", 1, "code=1006"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newWSEcho(t)
			e.closeCode, e.closeReason = tt.code, tt.reason
			s := startSession(t, e, 0)
			s.send(t, `{"jsonrpc":"2.0","method":"`+tt.method+`"}`)
			r := s.wait(t)
			if r.code != tt.wantExit || r.err != nil {
				t.Errorf("Connect = %d, %v; want %d, nil", r.code, r.err, tt.wantExit)
			}
			if logs := s.logs.String(); !strings.Contains(logs, tt.wantLog) {
				t.Errorf("log %q does not contain %q", logs, tt.wantLog)
			}
		})
	}
}

func TestConnectContextCancelled(t *testing.T) {
	e := newWSEcho(t)
	s := startSession(t, e, 0)
	s.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize"}`)
	s.recv(t)
	s.cancel()
	if r := s.wait(t); r.code != 1 {
		t.Errorf("after cancel: Connect = %d, %v; want 1", r.code, r.err)
	}
	select {
	case code := <-e.gotClose:
		if code != websocket.CloseGoingAway {
			t.Errorf("daemon got close code %d, want 1001", code)
		}
	case <-time.After(5 * time.Second):
		t.Error("daemon got no close frame after cancel")
	}
}

func TestFindOrStartSkipsUnusableDaemons(t *testing.T) {
	e := newWSEcho(t)
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	state := t.TempDir()
	dir := RuntimeDir(state)
	good := RuntimeInfo{PID: os.Getpid(), URL: e.srv.URL + "/?token=" + testToken, Token: testToken, StartedAt: time.Now()}
	// Newer, alive, but its token is refused: not the daemon to use.
	bad := RuntimeInfo{PID: os.Getppid(), URL: e.srv.URL + "/?token=wrong", Token: "wrong", StartedAt: time.Now().Add(time.Second)}
	for _, info := range []RuntimeInfo{good, bad} {
		if _, err := WriteRuntimeFile(dir, info); err != nil {
			t.Fatal(err)
		}
	}
	got, err := findOrStartDaemon(t.Context(), state, "/nonexistent/cellbox", nil, time.Second, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if got.Token != testToken {
		t.Errorf("picked the daemon with token %q, want the healthy one", got.Token)
	}
}

// writeScript writes an executable shell script into a temp dir.
func writeScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cellbox")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestStartDaemonExitsEarly(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "")
	state := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "daemon.log"), []byte("from an earlier run\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The script reports how it was started: args, session, stdin, cwd.
	exe := writeScript(t, `sid=$(cut -d' ' -f6 /proc/$$/stat)
echo "args: $*" >&2
echo "session: $sid pid: $$" >&2
echo "stdin: $(readlink /proc/$$/fd/0)" >&2
echo "cwd: $(pwd)"
echo boom >&2
exit 3
`)
	start := time.Now()
	_, err := findOrStartDaemon(t.Context(), state, exe, []string{"--log-level", "debug"}, 10*time.Second, slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatal("findOrStartDaemon succeeded with a daemon that exits")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("early exit noticed after %v", d)
	}
	msg := err.Error()
	t.Log(msg)
	for _, want := range []string{
		"exited with status 3",
		"boom",
		"args: serve --listen 127.0.0.1:0 --state-dir " + state + " --log-level debug",
		"stdin: /dev/null",
		"cwd: /",
		filepath.Join(state, "daemon.log"),
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not contain %q", want)
		}
	}
	if strings.Contains(msg, "earlier run") {
		t.Error("error quotes daemon.log from before this start")
	}
	var sid, pid int
	for _, line := range strings.Split(msg, "\n") {
		if _, err := fmt.Sscanf(line, "session: %d pid: %d", &sid, &pid); err == nil {
			break
		}
	}
	if sid == 0 || sid != pid {
		t.Errorf("daemon ran in session %d with pid %d; want its own session (setsid)", sid, pid)
	}
	assertMode(t, filepath.Join(state, "daemon.log"), 0o600)
}

func TestStartDaemonTimeout(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "")
	state := t.TempDir()
	exe := writeScript(t, "echo starting >&2\nexec sleep 30\n")
	start := time.Now()
	_, err := findOrStartDaemon(t.Context(), state, exe, nil, 200*time.Millisecond, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "no runtime file") || !strings.Contains(err.Error(), "starting") {
		t.Errorf("err = %v; want no runtime file, quoting the log", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v with a 200ms start timeout", d)
	}
}

// TestStartDaemonLock runs two finders at once against a daemon that never
// comes up: the lock makes the second start only after the first gave up.
func TestStartDaemonLock(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "")
	state := t.TempDir()
	trace := filepath.Join(t.TempDir(), "trace")
	exe := writeScript(t, fmt.Sprintf("echo start >> %[1]s\nsleep 0.3\necho end >> %[1]s\nexit 1\n", trace))
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = findOrStartDaemon(t.Context(), state, exe, nil, 10*time.Second, slog.New(slog.DiscardHandler))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			t.Errorf("finder %d succeeded", i)
		}
	}
	data, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(data)); strings.Join(got, ",") != "start,end,start,end" {
		t.Errorf("daemon starts = %v; want one after the other", got)
	}
	assertMode(t, filepath.Join(RuntimeDir(state), "connect.lock"), 0o600)
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
