//go:build linux

// Command probe is bench/jupyter's look inside cellbox-python: it does
// what `cellbox jupyter-kernel` does with the user's daemon, without
// ZeroMQ and Jupyter's messages, and times it. rpc.Dial finds the daemon
// (its runtime file, /healthz, the websocket, initialize), workspace/open
// opens the project's overlay workspace and kernel/start starts a python
// kernel in it; then `1+1` and the 100,000-line print as kernel/execute.
// What cellbox-python takes beyond these is its own: the process, the
// ZeroMQ sockets and the Jupyter messages, and jupyter_client's.
//
// bench/jupyter/bench.py runs it with the run's environment
// (CELLBOX_STATE_DIR, XDG_RUNTIME_DIR) and sends it one JSON command a
// line on stdin; it answers one JSON line on stdout:
//
//	{"op":"start","root":DIR}   dial, open, start, `1+1`, shut down, close: each step's ms
//	{"op":"open","root":DIR}    the same, keeping the kernel for what follows
//	{"op":"rtt","n":N}          N `1+1` round trips: their ms
//	{"op":"flood","code":C}     kernel/execute of C: ms, bytes of stdout, notifications, ms to the first
//	{"op":"quit"}
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/rpc"
)

type probe struct {
	mu      sync.Mutex
	exec    string // the execution whose output is counted
	out     strings.Builder
	results []string
	notes   int
	first   time.Time

	c      *rpc.Client
	kernel string
	seq    int
}

type command struct {
	Op   string `json:"op"`
	Root string `json:"root"`
	N    int    `json:"n"`
	Code string `json:"code"`
}

func main() {
	p := &probe{}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		var cmd command
		var ans any
		err := json.Unmarshal(in.Bytes(), &cmd)
		if err == nil {
			if cmd.Op == "quit" {
				break
			}
			ans, err = p.do(cmd)
		}
		if err != nil {
			ans = map[string]string{"error": err.Error()}
		}
		b, _ := json.Marshal(ans)
		out.Write(append(b, '\n'))
		out.Flush()
	}
	p.close()
}

func (p *probe) do(cmd command) (any, error) {
	switch cmd.Op {
	case "start":
		t, err := p.open(cmd.Root)
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		err = p.close()
		t["shutdownMs"] = msSince(t0)
		return t, err
	case "open":
		if p.c != nil {
			return nil, errors.New("a kernel is open already")
		}
		return p.open(cmd.Root)
	case "rtt":
		if p.c == nil {
			return nil, errors.New("no kernel: open first")
		}
		ms := make([]float64, 0, cmd.N)
		for range cmd.N {
			t0 := time.Now()
			if err := p.onePlusOne(); err != nil {
				return nil, err
			}
			ms = append(ms, msSince(t0))
		}
		return map[string]any{"ms": ms}, nil
	case "flood":
		if p.c == nil {
			return nil, errors.New("no kernel: open first")
		}
		t0 := time.Now()
		res, err := p.execute(cmd.Code)
		d := msSince(t0)
		if err != nil {
			return nil, err
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		first := 0.0
		if !p.first.IsZero() {
			first = float64(p.first.Sub(t0)) / float64(time.Millisecond)
		}
		return map[string]any{"ms": d, "status": res.Status, "stdout": p.out.String(), "notifications": p.notes, "firstMs": first}, nil
	}
	return nil, fmt.Errorf("unknown op %q", cmd.Op)
}

// open does what cellbox jupyter-kernel does at its start, then `1+1`.
func (p *probe) open(root string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t := map[string]float64{}
	t0 := time.Now()
	c, err := rpc.Dial(ctx, rpc.ClientOptions{
		StateDir:     os.Getenv("CELLBOX_STATE_DIR"),
		ClientInfo:   protocol.ClientInfo{Name: "cellbox-jupyter-bench-probe", Version: "1"},
		Capabilities: protocol.ClientCapabilities{InputRequest: true},
		OnNotify:     p.notify,
	})
	if err != nil {
		return nil, fmt.Errorf("dial the daemon: %w", err)
	}
	p.c = c
	t["dialMs"] = msSince(t0)
	t1 := time.Now()
	var ws protocol.WorkspaceInfo
	if err := c.Call(ctx, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: root, Mode: protocol.WorkspaceModeOverlay}, &ws); err != nil {
		p.close()
		return nil, err
	}
	t["workspaceOpenMs"] = msSince(t1)
	t2 := time.Now()
	var started protocol.KernelStartResult
	if err := c.Call(ctx, protocol.MethodKernelStart, protocol.KernelStartParams{Language: "python", WorkspaceID: ws.WorkspaceID}, &started); err != nil {
		p.close()
		return nil, err
	}
	p.kernel = started.KernelID
	t["kernelStartMs"] = msSince(t2)
	t["readyMs"] = msSince(t0)
	t3 := time.Now()
	if err := p.onePlusOne(); err != nil {
		p.close()
		return nil, err
	}
	t["firstResultMs"] = msSince(t3)
	return t, nil
}

func (p *probe) close() error {
	if p.c == nil {
		return nil
	}
	var err error
	if p.kernel != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = p.c.Call(ctx, protocol.MethodKernelShutdown, protocol.KernelIDParams{KernelID: p.kernel}, nil)
		cancel()
	}
	p.c.Close()
	p.c, p.kernel = nil, ""
	return err
}

// notify counts the running execution's kernel/output; it runs on the
// client's read goroutine, so all of an execution's output has been
// counted when its response is read.
func (p *probe) notify(method string, params json.RawMessage) {
	if method != protocol.MethodKernelOutput {
		return
	}
	var o protocol.KernelOutputParams
	if json.Unmarshal(params, &o) != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if o.ExecutionID != p.exec {
		return
	}
	if p.notes == 0 {
		p.first = time.Now()
	}
	p.notes++
	switch o.Kind {
	case protocol.OutputKindStream:
		if o.Name == protocol.StreamStdout {
			p.out.WriteString(o.Text)
		}
	case protocol.OutputKindResult:
		s, _ := o.Data["text/plain"].(string)
		p.results = append(p.results, s)
	}
}

// execute runs code as cellbox jupyter-kernel does (an executionId of its
// own, storeHistory, stopOnError false).
func (p *probe) execute(code string) (protocol.ExecuteResult, error) {
	p.seq++
	id := fmt.Sprintf("probe-%d", p.seq)
	p.mu.Lock()
	p.exec, p.notes, p.first, p.results = id, 0, time.Time{}, nil
	p.out.Reset()
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	store, noStop := true, false
	var res protocol.ExecuteResult
	err := p.c.Call(ctx, protocol.MethodKernelExecute, protocol.KernelExecuteParams{
		KernelID: p.kernel, Code: code, ExecutionID: id, StoreHistory: &store, AllowStdin: true, StopOnError: &noStop,
	}, &res)
	return res, err
}

func (p *probe) onePlusOne() error {
	res, err := p.execute("1+1")
	if err != nil {
		return fmt.Errorf("1+1: %w", err)
	}
	p.mu.Lock()
	results := p.results
	p.mu.Unlock()
	if res.Status != protocol.ExecutionStatusOK || len(results) != 1 || results[0] != "2" {
		return fmt.Errorf("1+1: status %s, results %q", res.Status, results)
	}
	return nil
}

func msSince(t time.Time) float64 { return float64(time.Since(t)) / float64(time.Millisecond) }
