package main

// End-to-end tests: they build the real cellbox binary and drive it over
// stdio and websocket with go.lsp.dev/jsonrpc2 as the client, the way an
// editor would.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.lsp.dev/jsonrpc2"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/rpc"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

var cellboxBin string

// testLogLevel is the daemons' log level: debug for tests (their stderr is
// shown when a test fails), warn for benchmarks.
var testLogLevel = "debug"

func TestMain(m *testing.M) {
	if sandbox.Main() {
		return
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "cellbox-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	cellboxBin = filepath.Join(dir, "cellbox")
	args := []string{"build", "-o", cellboxBin}
	if os.Getenv("CELLBOX_E2E_RACE") != "" {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	// The binary releases are built without cgo (see the Makefile); the
	// race detector needs it.
	if os.Getenv("CELLBOX_E2E_RACE") == "" {
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
	}
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "build cellbox: %v\n", err)
		return 1
	}
	return m.Run()
}

// testEnv gives each daemon its own state and runtime dirs.
func testEnv(t testing.TB) []string {
	t.Helper()
	state := t.TempDir()
	run := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	env := []string{"CELLBOX_STATE_DIR=" + state, "XDG_RUNTIME_DIR=" + run, "CELLBOX_LOG_LEVEL=" + testLogLevel}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CELLBOX_") && !strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") {
			env = append(env, kv)
		}
	}
	return env
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// client is an editor-like JSON-RPC client of a cellbox process.
type client struct {
	conn jsonrpc2.Conn

	mu     sync.Mutex
	notes  []note
	answer func(method string, params json.RawMessage) (any, error)
}

type note struct {
	method string
	params json.RawMessage
}

func newClient(stream jsonrpc2.Stream) *client {
	c := &client{conn: jsonrpc2.NewConn(stream)}
	c.conn.Go(context.Background(), func(ctx context.Context, req *jsonrpc2.Request) (any, error) {
		params := append(json.RawMessage(nil), req.Params()...)
		if !req.IsCall() {
			// Recorded on the read loop, in wire order: a notification
			// the daemon sent before a response is in notes when the
			// call returns. (The method borrows the read buffer.)
			c.mu.Lock()
			c.notes = append(c.notes, note{strings.Clone(req.Method()), params})
			c.mu.Unlock()
			return nil, nil
		}
		jsonrpc2.Async(ctx) // a request of the daemon may wait for its answer
		c.mu.Lock()
		answer := c.answer
		c.mu.Unlock()
		if answer == nil {
			return nil, jsonrpc2.ErrMethodNotFound
		}
		return answer(req.Method(), params)
	})
	return c
}

// waitProgress waits for a $/progress under token: the request that
// carries it runs.
func (c *client) waitProgress(t testing.TB, token string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		c.mu.Lock()
		notes := append([]note(nil), c.notes...)
		c.mu.Unlock()
		for _, n := range notes {
			var p protocol.ProgressParams
			if n.method == protocol.MethodProgress && json.Unmarshal(n.params, &p) == nil && p.Token == token {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no $/progress under %q", token)
		}
	}
}

func (c *client) call(t testing.TB, method string, params, result any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.conn.Call(ctx, method, params, result)
	return err
}

func (c *client) mustCall(t testing.TB, method string, params, result any) {
	t.Helper()
	if err := c.call(t, method, params, result); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
}

func (c *client) initialize(t testing.TB) protocol.InitializeResult {
	t.Helper()
	var res protocol.InitializeResult
	c.mustCall(t, protocol.MethodInitialize, protocol.InitializeParams{
		ProtocolVersion: 1,
		ClientInfo:      &protocol.ClientInfo{Name: "e2e", Version: "1"},
		Capabilities:    &protocol.ClientCapabilities{InputRequest: true},
	}, &res)
	return res
}

func wantCode(t testing.TB, err error, code protocol.ErrorCode) string {
	t.Helper()
	var je *jsonrpc2.Error
	if !errors.As(err, &je) || protocol.ErrorCode(je.Code) != code {
		t.Fatalf("got %v, want error %d (%s)", err, code, code.ErrorName())
	}
	var data protocol.ErrorData
	if json.Unmarshal(je.Data, &data) != nil || data.ErrorCode != code.ErrorName() || data.Detail == "" {
		t.Fatalf("error %d has data %s, want errorCode %q and a detail", je.Code, je.Data, code.ErrorName())
	}
	return je.Message
}

// stdioProc is `cellbox serve --stdio` with its pipes.
type stdioProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startStdio(t testing.TB, args ...string) *stdioProc {
	t.Helper()
	return startStdioEnv(t, testEnv(t), args...)
}

// startStdioEnv starts `serve --stdio` with env (another daemon on the
// same state dir, say).
func startStdioEnv(t testing.TB, env []string, args ...string) *stdioProc {
	t.Helper()
	cmd := exec.Command(cellboxBin, append([]string{"serve", "--stdio", "--test-hooks"}, args...)...)
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	return &stdioProc{cmd: cmd, stdin: stdin, stdout: stdout, stderr: startProc(t, cmd)}
}

func (p *stdioProc) client() *client { return newClient(headerStream(p.stdout, p.stdin)) }

// headerStream is LSP framing over a child's stdout and stdin, as an editor
// speaks to cellbox.
func headerStream(r io.Reader, w io.WriteCloser) jsonrpc2.Stream {
	return jsonrpc2.NewHeaderStream(struct {
		io.Reader
		io.Writer
		io.Closer
	}{r, w, w})
}

// startProc starts cmd with its stderr kept, and kills it when the test
// ends, showing that stderr if the test failed.
func startProc(t testing.TB, cmd *exec.Cmd) *syncBuffer {
	t.Helper()
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", strings.Join(cmd.Args, " "), stderr.String())
		}
	})
	return stderr
}

// waitExit returns cmd's exit code, failing after 10 s.
func waitExit(t testing.TB, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
		return 0
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not exit within 10s", strings.Join(cmd.Args, " "))
		return -1
	}
}

// wait returns the process's exit code, failing after 10 s.
func (p *stdioProc) wait(t testing.TB) int { return waitExit(t, p.cmd) }

func TestStdioLifecycle(t *testing.T) {
	for _, tt := range []struct {
		name     string
		shutdown bool
		want     int
	}{{"exit after shutdown", true, 0}, {"exit without shutdown", false, 1}} {
		t.Run(tt.name, func(t *testing.T) {
			p := startStdio(t)
			c := p.client()
			wantCode(t, c.call(t, protocol.MethodDaemonStats, struct{}{}, nil), protocol.CodeServerNotInitialized)
			res := c.initialize(t)
			checkCapabilities(t, res)
			_ = c.conn.Notify(context.Background(), protocol.MethodInitialized, struct{}{})
			var stats protocol.DaemonStats
			c.mustCall(t, protocol.MethodDaemonStats, struct{}{}, &stats)
			if stats.MemoryBytes <= 0 || stats.Connections != 1 {
				t.Fatalf("daemon/stats = %+v", stats)
			}
			if tt.shutdown {
				c.mustCall(t, protocol.MethodShutdown, nil, nil)
				wantCode(t, c.call(t, protocol.MethodDaemonStats, struct{}{}, nil), protocol.CodeInvalidRequest)
			}
			_ = c.conn.Notify(context.Background(), protocol.MethodExit, nil)
			if code := p.wait(t); code != tt.want {
				t.Fatalf("exit code %d, want %d", code, tt.want)
			}
		})
	}
}

// checkCapabilities: initialize reports what this host really has. CI runs
// on a host with every default layer and the three interpreters.
func checkCapabilities(t testing.TB, res protocol.InitializeResult) {
	t.Helper()
	if res.ProtocolVersion != 1 || res.ServerInfo.Name != "cellbox" || res.ServerInfo.Version == "" {
		t.Fatalf("initialize = %+v", res)
	}
	sb := res.Capabilities.Sandbox
	if !sb.UserNamespaces || !sb.Overlay || !sb.PidNamespace || !sb.NetworkNamespace || !sb.Seccomp {
		t.Errorf("sandbox capabilities = %+v, want the default layers on this host", sb)
	}
	if sb.Cgroups || !strings.Contains(sb.Reason, "cgroups") {
		t.Errorf("cgroups reported %v with reason %q; this host delegates no cgroup", sb.Cgroups, sb.Reason)
	}
	langs := map[string]protocol.LanguageCapability{}
	for _, l := range res.Capabilities.Languages {
		langs[l.ID] = l
	}
	for _, id := range []string{"python", "javascript", "bash"} {
		if l := langs[id]; !l.Available || l.Version == "" || len(l.FileExtensions) == 0 {
			t.Errorf("language %s = %+v, want available with a version", id, l)
		}
	}
	if res.Capabilities.Limits.MaxCodeBytes <= 0 || res.Capabilities.Limits.MaxKernels <= 0 {
		t.Errorf("limits = %+v", res.Capabilities.Limits)
	}
}

func TestStdioMissingInterpreter(t *testing.T) {
	cmd := exec.Command(cellboxBin, "serve", "--stdio")
	cmd.Env = append(testEnv(t), "PATH="+t.TempDir())
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	startProc(t, cmd)
	c := newClient(headerStream(stdout, stdin))
	res := c.initialize(t)
	for _, l := range res.Capabilities.Languages {
		if strings.HasPrefix(l.ID, "jupyter:") {
			continue // a kernelspec's program is looked up on the sandbox's PATH, not the daemon's
		}
		if l.ID == "sql" {
			if !l.Available {
				t.Errorf("language sql (built in) with an empty PATH: %+v, want available", l)
			}
			continue
		}
		if l.Available || !strings.Contains(l.Reason, "not found") {
			t.Errorf("language %s with an empty PATH: %+v, want unavailable with the reason", l.ID, l)
		}
	}
}

func TestStdioConcurrencyCancelAndClientRequests(t *testing.T) {
	p := startStdio(t)
	c := p.client()
	c.initialize(t)

	// A slow request does not delay a fast one.
	slow := make(chan error, 1)
	go func() {
		slow <- c.call(t, "cellboxTest/sleep", map[string]any{"ms": 3000, "workDoneToken": "slow"}, nil)
	}()
	c.waitProgress(t, "slow") // the slow request runs
	start := time.Now()
	c.mustCall(t, protocol.MethodDaemonStats, struct{}{}, nil)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("daemon/stats took %v behind a slow request", d)
	}
	select {
	case <-slow:
		t.Fatal("slow request finished before the fast one was answered")
	default:
	}

	// Server-to-client request.
	c.mu.Lock()
	c.answer = func(method string, params json.RawMessage) (any, error) {
		return protocol.KernelInputReply{Value: "from the editor"}, nil
	}
	c.mu.Unlock()
	var reply protocol.KernelInputReply
	c.mustCall(t, "cellboxTest/askClient", map[string]string{"prompt": "?"}, &reply)
	if reply.Value != "from the editor" {
		t.Fatalf("askClient = %+v", reply)
	}
	if err := <-slow; err != nil {
		t.Fatalf("slow request: %v", err)
	}
}

// TestStdioCancelRaw sends $/cancelRequest by id, as LSP clients do.
func TestStdioCancelRaw(t *testing.T) {
	p := startStdio(t)
	w := p.stdin
	r := bufio.NewReader(p.stdout)
	send := func(s string) {
		if _, err := w.Write(rpc.AppendFrame(nil, []byte(s))); err != nil {
			t.Fatal(err)
		}
	}
	recv := func() map[string]json.RawMessage {
		body, err := rpc.ReadFrame(r, 1<<24, nil)
		if err != nil {
			t.Fatalf("read: %v (stderr: %s)", err, p.stderr.String())
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("stdout carried a non-JSON frame %q", body)
		}
		return m
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	recv()
	start := time.Now()
	send(`{"jsonrpc":"2.0","id":"slow","method":"cellboxTest/sleep","params":{"ms":30000}}`)
	send(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"slow"}}`)
	m := recv()
	if string(m["id"]) != `"slow"` || !strings.Contains(string(m["error"]), "-32800") {
		t.Fatalf("cancelled request answered %v", m)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("cancel took %v", d)
	}
}

// TestStdioBadInput: malformed frames over the real binary's stdin each get
// their answer, and stdout carries nothing but protocol frames.
func TestStdioBadInput(t *testing.T) {
	p := startStdio(t, "--max-message-bytes", "65536")
	r := bufio.NewReader(p.stdout)
	inputs := []struct {
		raw  string
		code string
	}{
		{"Content-Length: zz\r\n\r\n", "-32700"},
		{string(rpc.AppendFrame(nil, []byte(`not json`))), "-32700"},
		{string(rpc.AppendFrame(nil, []byte(`[]`))), "-32600"},
		{string(rpc.AppendFrame(nil, []byte(`{"jsonrpc":"2.0","id":3,"method":"daemon/stats"}`))), "-32002"},
		{string(rpc.AppendFrame(nil, []byte(`{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"x"}}`))), "-32602"},
		{"X-Huge: " + strings.Repeat("h", 1<<20) + "\r\nContent-Length: 2\r\n\r\n{}", "-32700"},
		{string(rpc.AppendFrame(nil, []byte(`{"jsonrpc":"2.0","id":5,"method":"x","params":"`+strings.Repeat("p", 70000)+`"}`))), "-32600"},
	}
	go func() {
		for _, in := range inputs {
			if _, err := io.WriteString(p.stdin, in.raw); err != nil {
				return
			}
		}
	}()
	for _, in := range inputs {
		body, err := rpc.ReadFrame(r, 1<<24, nil)
		if err != nil {
			t.Fatalf("reading the answer to %.40q: %v", in.raw, err)
		}
		if !json.Valid(body) || !strings.Contains(string(body), `"code":`+in.code) {
			t.Fatalf("answer to %.40q = %s, want code %s", in.raw, body, in.code)
		}
	}
	// Still serving; then cut the input mid-frame: the daemon exits 1, no panic.
	c := p.client()
	c.initialize(t)
	_, _ = io.WriteString(p.stdin, "Content-Length: 50\r\n\r\n{\"jsonrpc\"")
	_ = p.stdin.Close()
	if code := p.wait(t); code != 1 {
		t.Fatalf("exit code %d after truncated input, want 1", code)
	}
	if strings.Contains(p.stderr.String(), "panic") {
		t.Fatalf("daemon panicked:\n%s", p.stderr.String())
	}
}

// listenProc is `cellbox serve --listen 127.0.0.1:0`.
type listenProc struct {
	cmd    *exec.Cmd
	url    string // http://127.0.0.1:PORT/?token=...
	base   string // http://127.0.0.1:PORT
	token  string
	env    []string
	stderr *syncBuffer
}

var urlRE = regexp.MustCompile(`http://127\.0\.0\.1:\d+/\?token=([0-9a-f]+)`)

func startListen(t testing.TB, args ...string) *listenProc {
	t.Helper()
	env := testEnv(t)
	cmd := exec.Command(cellboxBin, append([]string{"serve", "--listen", "127.0.0.1:0", "--test-hooks"}, args...)...)
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &listenProc{cmd: cmd, env: env, stderr: startProc(t, cmd)}
	sc := bufio.NewScanner(stdout)
	deadline := time.AfterFunc(15*time.Second, func() { _ = cmd.Process.Kill() })
	defer deadline.Stop()
	for sc.Scan() {
		if m := urlRE.FindStringSubmatch(sc.Text()); m != nil {
			p.url, p.token = m[0], m[1]
			p.base = strings.TrimSuffix(m[0][:strings.Index(m[0], "/?")], "/")
			break
		}
	}
	if p.url == "" {
		t.Fatalf("serve --listen printed no URL; stderr:\n%s", p.stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return p
}

// wsStream adapts a websocket to jsonrpc2.Stream for the test client.
type wsStream struct {
	ws *websocket.Conn
	mu sync.Mutex
}

func (s *wsStream) Read(context.Context) (jsonrpc2.Message, int64, error) {
	_, b, err := s.ws.ReadMessage()
	if err != nil {
		return nil, 0, err
	}
	m, err := jsonrpc2.DecodeMessage(b)
	return m, int64(len(b)), err
}

func (s *wsStream) Write(_ context.Context, m jsonrpc2.Message) (int64, error) {
	b, err := jsonrpc2.EncodeMessage(m)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(b)), s.ws.WriteMessage(websocket.TextMessage, b)
}

func (s *wsStream) Close() error { return s.ws.Close() }

func (p *listenProc) dial(t testing.TB, header http.Header) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	url := "ws" + strings.TrimPrefix(p.base, "http") + "/rpc"
	ws, resp, err := websocket.DefaultDialer.Dial(url, header)
	if ws != nil {
		t.Cleanup(func() { ws.Close() })
	}
	return ws, resp, err
}

func (p *listenProc) wsClient(t testing.TB) (*client, *websocket.Conn) {
	t.Helper()
	ws, _, err := p.dial(t, http.Header{"Authorization": {"Bearer " + p.token}})
	if err != nil {
		t.Fatal(err)
	}
	return newClient(&wsStream{ws: ws}), ws
}

func TestWebsocketEndToEnd(t *testing.T) {
	p := startListen(t, "--max-message-bytes", "100000")

	// The runtime file: 0600, in $XDG_RUNTIME_DIR/cellbox, with pid, url, token.
	rtDir := filepath.Join(envValue(p.env, "XDG_RUNTIME_DIR"), "cellbox")
	rtFile := filepath.Join(rtDir, fmt.Sprintf("server-%d.json", p.cmd.Process.Pid))
	st, err := os.Stat(rtFile)
	if err != nil {
		t.Fatalf("runtime file: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("runtime file mode %v, want 0600", st.Mode().Perm())
	}
	var info rpc.RuntimeInfo
	b, _ := os.ReadFile(rtFile)
	if err := json.Unmarshal(b, &info); err != nil || info.PID != p.cmd.Process.Pid || info.Token != p.token || info.URL != p.url || info.StartedAt.IsZero() {
		t.Fatalf("runtime file = %s (%v)", b, err)
	}

	// Refused: no token, wrong token, foreign origin. Other connections fine.
	for _, h := range []struct {
		header http.Header
		want   int
	}{
		{http.Header{}, 401},
		{http.Header{"Authorization": {"Bearer wrong"}}, 401},
		{http.Header{"Authorization": {"Bearer " + p.token}, "Origin": {"https://evil.example"}}, 403},
	} {
		_, resp, err := p.dial(t, h.header)
		if err == nil || resp == nil || resp.StatusCode != h.want {
			t.Fatalf("dial with %v: %v, want HTTP %d", h.header, err, h.want)
		}
	}

	c, _ := p.wsClient(t)
	checkCapabilities(t, c.initialize(t))
	slow := make(chan error, 1)
	go func() {
		slow <- c.call(t, "cellboxTest/sleep", map[string]any{"ms": 3000, "workDoneToken": "slow"}, nil)
	}()
	c.waitProgress(t, "slow") // the slow request runs
	c.mustCall(t, protocol.MethodDaemonStats, struct{}{}, nil)
	select {
	case <-slow:
		t.Fatal("slow request finished before the fast one")
	default:
	}

	// $/cancelRequest over websocket ends the request with -32800.
	raw, _, err := p.dial(t, http.Header{"Authorization": {"Bearer " + p.token}})
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","id":"long","method":"cellboxTest/sleep","params":{"ms":30000}}`,
		`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"long"}}`,
	} {
		if err := raw.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	_ = raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, b, err := raw.ReadMessage()
		if err != nil {
			t.Fatalf("waiting for the cancelled request's answer: %v", err)
		}
		if strings.Contains(string(b), `"id":"long"`) {
			if !strings.Contains(string(b), `"code":-32800`) {
				t.Fatalf("cancelled request answered %s", b)
			}
			break
		}
	}

	// An oversized message closes that connection with a reason; c goes on.
	big, _, err := p.dial(t, http.Header{"Authorization": {"Bearer " + p.token}})
	if err != nil {
		t.Fatal(err)
	}
	_ = big.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":"`+strings.Repeat("x", 200000)+`"}}`))
	_ = big.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err = big.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseMessageTooBig || !strings.Contains(ce.Text, "100000") {
		t.Fatalf("oversized message: %v, want close 1009 naming the limit", err)
	}
	var stats protocol.DaemonStats
	c.mustCall(t, protocol.MethodDaemonStats, struct{}{}, &stats)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}

	// /healthz and /metrics with the token.
	for path, want := range map[string]string{"/healthz": `{"status":"ok"}`, "/metrics": "cellbox_rpc_requests_total"} {
		req, _ := http.NewRequest("GET", p.base+path, nil)
		req.Header.Set("Authorization", "Bearer "+p.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Fatalf("GET %s = %d %.200s", path, resp.StatusCode, body)
		}
	}

	// SIGTERM: a clean stop removes the runtime file.
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("daemon exit after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("daemon did not stop on SIGTERM")
	}
	if _, err := os.Stat(rtFile); !os.IsNotExist(err) {
		t.Fatalf("runtime file left after a clean exit: %v", err)
	}
}

func TestListenRefusesNonLoopback(t *testing.T) {
	cmd := exec.Command(cellboxBin, "serve", "--listen", "0.0.0.0:0")
	cmd.Env = testEnv(t)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 || !strings.Contains(string(out), "--allow-remote") {
		t.Fatalf("serve --listen 0.0.0.0:0 = %v\n%s\nwant a refusal naming --allow-remote", err, out)
	}
}

func TestHelpAndEnv(t *testing.T) {
	out, err := exec.Command(cellboxBin, "help", "serve").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--stdio", "--listen", "CELLBOX_TOKEN", "CELLBOX_MAX_MESSAGE_BYTES", "CELLBOX_ALLOW_ORIGIN", "CELLBOX_STATE_DIR", "CELLBOX_LOG_FORMAT"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("cellbox help serve lacks %q", want)
		}
	}
	cmd := exec.Command(cellboxBin, "serve", "--stdio")
	cmd.Env = append(testEnv(t), "CELLBOX_LOG_LEVEL=loud")
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "loud") {
		t.Fatalf("a bad CELLBOX_LOG_LEVEL was accepted: %v %s", err, out)
	}
	out, err = exec.Command(cellboxBin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "cellbox ") {
		t.Fatalf("version = %q, %v", out, err)
	}
	out, _ = exec.Command(cellboxBin, "frobnicate").CombinedOutput()
	if !strings.Contains(string(out), "unknown command") {
		t.Fatalf("unknown command: %q", out)
	}
}
