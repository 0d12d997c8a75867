//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/cellbox-dev/cellbox/bench/internal/benchutil"
	"github.com/cellbox-dev/cellbox/protocol"
)

// daemon is `cellbox serve --stdio` with its own state and runtime dirs,
// and this program as its one client, as an editor runs it.
type daemon struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *benchutil.TailBuffer
	c      *client
	caps   protocol.ServerCapabilities
	closed bool
}

func startDaemon(bin, base string) (*daemon, error) {
	state, run := filepath.Join(base, "state"), filepath.Join(base, "run")
	for _, d := range []string{state, run} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(bin, "serve", "--stdio")
	cmd.Env = []string{"CELLBOX_STATE_DIR=" + state, "XDG_RUNTIME_DIR=" + run, "CELLBOX_LOG_LEVEL=warn"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CELLBOX_") && !strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	d := &daemon{cmd: cmd, stdin: stdin, stderr: &benchutil.TailBuffer{Max: 8 << 10}}
	cmd.Stderr = d.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d.c = newClient(jsonrpc2.NewHeaderStream(struct {
		io.Reader
		io.Writer
		io.Closer
	}{stdout, stdin, stdin}))
	var res protocol.InitializeResult
	err = d.c.call(protocol.MethodInitialize, protocol.InitializeParams{
		ProtocolVersion: 1,
		ClientInfo:      &protocol.ClientInfo{Name: "cellbox-kernel-bench", Version: "1"},
		Capabilities:    &protocol.ClientCapabilities{InputRequest: true},
	}, &res)
	if err == nil {
		err = d.c.conn.Notify(context.Background(), protocol.MethodInitialized, struct{}{})
	}
	if err != nil {
		d.close()
		return nil, fmt.Errorf("initialize: %w%s", err, d.stderr.Show())
	}
	d.caps = res.Capabilities
	return d, nil
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

// close ends the daemon as an editor does (shutdown, exit), killing it if
// it does not go within 10 s.
func (d *daemon) close() {
	if d.closed {
		return
	}
	d.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = d.c.conn.Call(ctx, protocol.MethodShutdown, nil, nil)
	_ = d.c.conn.Notify(ctx, protocol.MethodExit, nil)
	d.stdin.Close()
	done := make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-done
	}
	d.c.conn.Close()
}

// client speaks JSON-RPC to the daemon and follows its kernels'
// notifications. Its handler runs on the connection's read loop (not
// async), so every kernel/output of an execution has been counted when
// that execution's response is read.
type client struct {
	conn     jsonrpc2.Conn
	mu       sync.Mutex
	ks       map[string]*ktrack
	language string // of the kernels it starts; empty: python
}

// ktrack is what the notifications said about one kernel.
type ktrack struct {
	mu      sync.Mutex
	results []string // text/plain of kind result, since the last reset
	notes   int      // kernel/output notifications since the last reset
	streams int      // of kind stream
	capture bool     // keep stdout text in out, stderr in errOut
	out     strings.Builder
	errOut  strings.Builder
	busy    chan struct{} // a kernel/status busy arrived
}

func newClient(stream jsonrpc2.Stream) *client {
	c := &client{conn: jsonrpc2.NewConn(stream), ks: map[string]*ktrack{}}
	c.conn.Go(context.Background(), func(ctx context.Context, req *jsonrpc2.Request) (any, error) {
		if req.IsCall() {
			return nil, jsonrpc2.ErrMethodNotFound // kernel/inputRequest: the benchmark reads no input
		}
		switch req.Method() {
		case protocol.MethodKernelOutput:
			var p protocol.KernelOutputParams
			if json.Unmarshal(req.Params(), &p) != nil {
				return nil, nil
			}
			t := c.track(p.KernelID)
			t.mu.Lock()
			t.notes++
			switch p.Kind {
			case protocol.OutputKindResult:
				s, _ := p.Data["text/plain"].(string)
				t.results = append(t.results, s)
			case protocol.OutputKindStream:
				t.streams++
				if t.capture && p.Name == protocol.StreamStdout {
					t.out.WriteString(p.Text)
				} else if t.capture {
					t.errOut.WriteString(p.Text)
				}
			}
			t.mu.Unlock()
		case protocol.MethodKernelStatus:
			var p protocol.KernelStatusParams
			if json.Unmarshal(req.Params(), &p) == nil && p.State == protocol.KernelStateBusy {
				select {
				case c.track(p.KernelID).busy <- struct{}{}:
				default:
				}
			}
		}
		return nil, nil
	})
	return c
}

func (c *client) track(id string) *ktrack {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.ks[id]
	if t == nil {
		t = &ktrack{busy: make(chan struct{}, 1)}
		c.ks[id] = t
	}
	return t
}

// reset forgets what the kernel's notifications said so far.
func (t *ktrack) reset(capture bool) {
	t.mu.Lock()
	t.results, t.notes, t.streams, t.capture = nil, 0, 0, capture
	t.out.Reset()
	t.errOut.Reset()
	t.mu.Unlock()
	select {
	case <-t.busy:
	default:
	}
}

func (c *client) call(method string, params, result any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := c.conn.Call(ctx, method, params, result)
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	return nil
}

func (c *client) startKernel(workspaceID string) (protocol.KernelStartResult, error) {
	lang := c.language
	if lang == "" {
		lang = "python"
	}
	var res protocol.KernelStartResult
	err := c.call(protocol.MethodKernelStart, protocol.KernelStartParams{Language: lang, WorkspaceID: workspaceID}, &res)
	return res, err
}

func (c *client) execute(id, code string) (protocol.ExecuteResult, error) {
	var res protocol.ExecuteResult
	err := c.call(protocol.MethodKernelExecute, protocol.KernelExecuteParams{KernelID: id, Code: code}, &res)
	return res, err
}

// onePlusOne runs `1+1` and checks that it printed the result 2.
func (c *client) onePlusOne(id string) error {
	t := c.track(id)
	t.reset(false)
	res, err := c.execute(id, "1+1")
	if err != nil {
		return fmt.Errorf("1+1: %w", err)
	}
	t.mu.Lock()
	results := t.results
	t.mu.Unlock()
	if res.Status != protocol.ExecutionStatusOK || len(results) != 1 || results[0] != "2" {
		return fmt.Errorf("1+1: status %s, results %q", res.Status, results)
	}
	return nil
}

func (c *client) shutdownKernel(id string) error {
	err := c.call(protocol.MethodKernelShutdown, protocol.KernelIDParams{KernelID: id}, nil)
	c.mu.Lock()
	delete(c.ks, id)
	c.mu.Unlock()
	return err
}

// interruptSample is one interrupt of `while True: pass`.
type interruptSample struct {
	total    time.Duration // kernel/interrupt sent to the execute response
	call     time.Duration // the kernel/interrupt round trip
	busySeen bool
}

// interrupt runs `while True: pass`, waits for the busy status (or 50 ms)
// and settle more, sends kernel/interrupt and times until the execute
// response, which must say interrupted.
func (c *client) interrupt(id string, settle time.Duration) (interruptSample, error) {
	t := c.track(id)
	t.reset(false)
	type outcome struct {
		res protocol.ExecuteResult
		err error
		at  time.Time
	}
	done := make(chan outcome, 1)
	go func() {
		// stopOnError false, as the jupyter side (nothing is queued here).
		var res protocol.ExecuteResult
		no := false
		err := c.call(protocol.MethodKernelExecute, protocol.KernelExecuteParams{KernelID: id, Code: "while True: pass", StopOnError: &no}, &res)
		done <- outcome{res, err, time.Now()}
	}()
	var s interruptSample
	select {
	case <-t.busy:
		s.busySeen = true
	case <-time.After(50 * time.Millisecond):
	}
	time.Sleep(settle)
	t0 := time.Now()
	err := c.call(protocol.MethodKernelInterrupt, protocol.KernelIDParams{KernelID: id}, nil)
	s.call = time.Since(t0)
	if err != nil {
		return s, fmt.Errorf("interrupt: %w", err)
	}
	var o outcome
	select {
	case o = <-done:
	case <-time.After(lostAfter):
		// Lost: interrupt again until the loop stops, and say so.
		for range 10 {
			_ = c.call(protocol.MethodKernelInterrupt, protocol.KernelIDParams{KernelID: id}, nil)
			select {
			case o = <-done:
				return s, fmt.Errorf("%w: `while True: pass` still ran %v after kernel/interrupt (busy status seen: %v); another interrupt ended it %s",
					errLost, lostAfter, s.busySeen, o.res.Status)
			case <-time.After(time.Second):
			}
		}
		return s, fmt.Errorf("%w: `while True: pass` still runs after 10 more interrupts", errLost)
	}
	if o.err != nil {
		return s, fmt.Errorf("while True: pass: %w", o.err)
	}
	if o.res.Status != protocol.ExecutionStatusInterrupted {
		return s, fmt.Errorf("while True: pass ended %s after kernel/interrupt, want interrupted", o.res.Status)
	}
	s.total = o.at.Sub(t0)
	return s, nil
}

// lostAfter is how long after an interrupt a loop that still runs counts
// as a lost interrupt.
const lostAfter = 5 * time.Second

var errLost = errors.New("interrupt lost")
