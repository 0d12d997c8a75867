//go:build linux

// Package benchutil is what the benchmarks under bench/ share: the real
// daemon started with a state of its own and spoken to over its websocket
// as an editor does, /proc figures of a process tree, and order statistics.
// It is small on purpose: each benchmark keeps its own steps and report.
package benchutil

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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	"go.lsp.dev/jsonrpc2"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Daemon is `cellbox serve --listen 127.0.0.1:0` with a state dir, a
// package cache and an XDG_RUNTIME_DIR of its own. --listen, not --stdio:
// only then does it serve /metrics, whose go_goroutines the benchmarks
// read (the two flags exclude each other).
type Daemon struct {
	Bin    string
	State  string
	Stderr *TailBuffer

	cmd     *exec.Cmd
	run     string
	runtime string // the runtime file, where a local client finds the token
	base    string // http://127.0.0.1:PORT
	token   string // from the runtime file
	exited  chan struct{}
	waitErr error
}

// Options start a daemon.
type Options struct {
	Bin  string   // the cellbox binary
	Dir  string   // created if missing; the daemon's dirs go below it
	Args []string // more flags of serve, after --listen and --state-dir
	Env  []string // more KEY=VALUE for its environment
}

var urlRE = regexp.MustCompile(`http://127\.0\.0\.1:\d+/\?token=[0-9a-f]+`)

// Start starts the daemon and waits for the URL it prints when it listens.
func Start(o Options) (*Daemon, error) {
	d := &Daemon{Bin: o.Bin, State: filepath.Join(o.Dir, "state"), run: filepath.Join(o.Dir, "run"),
		Stderr: &TailBuffer{Max: 16 << 10}, exited: make(chan struct{})}
	for _, p := range []string{d.State, d.run} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			return nil, err
		}
	}
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--state-dir", d.State,
		"--package-cache", filepath.Join(o.Dir, "packages"), "--log-level", "warn"}, o.Args...)
	d.cmd = exec.Command(o.Bin, args...)
	// The caller's CELLBOX_* would override nothing given as a flag, but
	// could change what is measured (CELLBOX_SANDBOX_HELPER): only o.Env's.
	d.cmd.Env = append([]string{"XDG_RUNTIME_DIR=" + d.run}, o.Env...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CELLBOX_") && !strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") {
			d.cmd.Env = append(d.cmd.Env, kv)
		}
	}
	d.cmd.Stderr = d.Stderr
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", o.Bin, err)
	}
	go func() { d.waitErr = d.cmd.Wait(); close(d.exited) }()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := urlRE.FindString(sc.Text()); m != "" {
				found <- m
				break
			}
		}
		close(found)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var url string
	select {
	case url = <-found:
	case <-d.exited:
	case <-time.After(60 * time.Second):
	}
	if url == "" {
		d.Kill()
		return nil, fmt.Errorf("serve --listen printed no URL%s", d.Stderr.Show())
	}
	d.base = url[:strings.Index(url, "/?")]
	// The token as a local client finds it: in the runtime file.
	d.runtime = filepath.Join(d.run, "cellbox", fmt.Sprintf("server-%d.json", d.PID()))
	var info struct{ Token string }
	b, err := os.ReadFile(d.runtime)
	if err == nil {
		err = json.Unmarshal(b, &info)
	}
	if err != nil || info.Token == "" || !strings.HasSuffix(url, "="+info.Token) {
		d.Kill()
		return nil, fmt.Errorf("runtime file %s: no token, or not the printed one (%v)", d.runtime, err)
	}
	d.token = info.Token
	return d, nil
}

// PID is the daemon's process id.
func (d *Daemon) PID() int { return d.cmd.Process.Pid }

// RuntimeFile is the file the daemon wrote its URL and token to; it must
// remove it when it exits.
func (d *Daemon) RuntimeFile() string { return d.runtime }

// Stop ends the daemon as Terminate does and waits until the processes
// that were below it are gone too.
func (d *Daemon) Stop() error {
	below := Scan().Under(d.PID())
	if err := d.Terminate(); err != nil {
		return err
	}
	return WaitGone(below, 10*time.Second)
}

// Terminate ends the daemon with SIGTERM, as a service manager does, and
// says whether it exited 0 within 60 s (killed if not). It does not wait
// for the processes below it: Stop does, and the soak judges them itself.
func (d *Daemon) Terminate() error {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(60 * time.Second):
		d.Kill()
		return errors.New("the daemon did not exit within 60 s of SIGTERM")
	}
	if d.waitErr != nil {
		return fmt.Errorf("the daemon exited with %v after SIGTERM%s", d.waitErr, d.Stderr.Show())
	}
	return nil
}

// Kill kills the daemon (its sandboxes' inits die with it: their parent
// death signal).
func (d *Daemon) Kill() {
	_ = d.cmd.Process.Kill()
	<-d.exited
}

// Metrics reads the samples of GET /metrics that have no labels, over a
// connection closed after the response so it is not counted next time.
func (d *Daemon) Metrics(ctx context.Context) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Close = true
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || strings.HasPrefix(f[0], "#") || strings.Contains(f[0], "{") {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			out[f[0]] = v
		}
	}
	return out, sc.Err()
}

// Conn is one client connection: JSON-RPC over the daemon's websocket.
type Conn struct {
	conn jsonrpc2.Conn
}

// DialWebsocket opens /rpc with the token, for a client that speaks over
// the websocket itself (see NewWSStream); Dial also initializes.
func (d *Daemon) DialWebsocket() (*websocket.Conn, error) {
	dialer := *websocket.DefaultDialer
	dialer.HandshakeTimeout = 60 * time.Second
	ws, _, err := dialer.Dial("ws"+strings.TrimPrefix(d.base, "http")+"/rpc", http.Header{"Authorization": {"Bearer " + d.token}})
	if err != nil {
		return nil, fmt.Errorf("dial %s/rpc: %w", d.base, err)
	}
	return ws, nil
}

// Dial opens /rpc with the token and initializes. onNote sees every
// notification, on the connection's read loop: all notifications sent
// before a response have been seen when its Call returns.
func (d *Daemon) Dial(name string, onNote func(method string, params json.RawMessage)) (*Conn, error) {
	ws, err := d.DialWebsocket()
	if err != nil {
		return nil, err
	}
	c := &Conn{conn: jsonrpc2.NewConn(NewWSStream(ws, nil, nil))}
	c.conn.Go(context.Background(), func(_ context.Context, req *jsonrpc2.Request) (any, error) {
		if req.IsCall() {
			return nil, jsonrpc2.ErrMethodNotFound // kernel/inputRequest: benchmarks type nothing
		}
		if onNote != nil {
			onNote(req.Method(), json.RawMessage(req.Params()))
		}
		return nil, nil
	})
	var res protocol.InitializeResult
	err = c.Call(protocol.MethodInitialize, protocol.InitializeParams{
		ProtocolVersion: 1, ClientInfo: &protocol.ClientInfo{Name: name, Version: "1"},
	}, &res)
	if err == nil {
		err = c.conn.Notify(context.Background(), protocol.MethodInitialized, struct{}{})
	}
	if err != nil {
		c.conn.Close()
		return nil, fmt.Errorf("initialize: %w%s", err, d.Stderr.Show())
	}
	return c, nil
}

// Call sends one request and waits up to 2 minutes for its answer.
func (c *Conn) Call(method string, params, result any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.conn.Call(ctx, method, params, result); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	return nil
}

// Close ends the connection as an editor does: shutdown, exit.
func (c *Conn) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = c.conn.Call(ctx, protocol.MethodShutdown, nil, nil)
	_ = c.conn.Notify(ctx, protocol.MethodExit, nil)
	select {
	case <-c.conn.Done():
	case <-ctx.Done():
	}
	c.conn.Close()
}

// NewWSStream adapts a websocket to jsonrpc2.Stream, one message a
// websocket message. tx and rx, when not nil, count the bytes written and
// read (the soak reports them).
func NewWSStream(ws *websocket.Conn, tx, rx *atomic.Int64) jsonrpc2.Stream {
	return &wsStream{ws: ws, tx: tx, rx: rx}
}

type wsStream struct {
	ws     *websocket.Conn
	tx, rx *atomic.Int64
	mu     sync.Mutex // one writer at a time, as gorilla/websocket requires
}

func (s *wsStream) Read(context.Context) (jsonrpc2.Message, int64, error) {
	_, b, err := s.ws.ReadMessage()
	if err != nil {
		return nil, 0, err
	}
	if s.rx != nil {
		s.rx.Add(int64(len(b)))
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
	if s.tx != nil {
		s.tx.Add(int64(len(b)))
	}
	return int64(len(b)), s.ws.WriteMessage(websocket.TextMessage, b)
}

func (s *wsStream) Close() error { return s.ws.Close() }

// TailBuffer keeps the last Max bytes written to it.
type TailBuffer struct {
	Max int
	mu  sync.Mutex
	b   []byte
}

func (t *TailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.Max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// Show is the buffer as the end of an error message.
func (t *TailBuffer) Show() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.b) == 0 {
		return ""
	}
	return "\n--- its stderr (the end) ---\n" + strings.TrimRight(string(t.b), "\n")
}

// RemoveAll removes a benchmark's directory; overlayfs leaves work/work
// with mode 000, which its owner must open up first.
func RemoveAll(dir string) {
	_ = filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if e != nil && e.IsDir() {
			_ = os.Chmod(path, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}
