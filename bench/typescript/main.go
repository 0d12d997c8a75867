//go:build linux

// Command typescript measures cellbox's typescript kernel side by side with
// tsx's REPL (npm's tsx@4: node running tsx's repl module, which
// transpiles each line with esbuild and evaluates it in node's REPL), on
// this machine in one run, interleaved: cold start to the first result,
// and the round trip of a one-line TypeScript cell (p50/p99). It prints one
// table with the ratio cellbox/tsx, and, for reference, the round trip of
// the same cell without types on cellbox's javascript kernel (what the
// daemon's transpile adds). bench/typescript.sh installs tsx,
// builds this and runs it.
//
// The cellbox side is the real binary, `cellbox serve --stdio` with a state
// dir of its own, spoken to over JSON-RPC as an editor does; its kernels
// start in an open workspace (a project directory of the run). The tsx side
// talks to the REPL over pipes and waits for the printed value.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/cellbox-dev/cellbox/protocol"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "typescript bench:", err)
		os.Exit(1)
	}
}

type options struct {
	cellbox, node, tsx, label string
	n, warmup, rtt            int
}

func run(args []string) error {
	var o options
	fs := flag.NewFlagSet("typescript", flag.ContinueOnError)
	fs.StringVar(&o.cellbox, "cellbox", "", "the cellbox binary")
	fs.StringVar(&o.node, "node", "node", "node, for tsx")
	fs.StringVar(&o.tsx, "tsx", "", "tsx's package directory (node_modules/tsx)")
	fs.StringVar(&o.label, "label", "", "what the run is, for the heading")
	fs.IntVar(&o.n, "n", 20, "measured cold starts per side")
	fs.IntVar(&o.warmup, "warmup", 3, "unmeasured cold starts per side first")
	fs.IntVar(&o.rtt, "rtt", 500, "measured round trips per side")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.cellbox == "" || o.tsx == "" {
		return errors.New("-cellbox and -tsx are required")
	}
	base, err := os.MkdirTemp("", "cellbox-ts-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	project := filepath.Join(base, "project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		return err
	}
	d, err := startDaemon(o.cellbox, base)
	if err != nil {
		return err
	}
	defer d.close()
	var ws protocol.WorkspaceInfo
	if err := d.c.call(protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: project, Name: "ts-bench"}, &ws); err != nil {
		return err
	}
	tsxRepl := filepath.Join(o.tsx, "dist", "repl.mjs")
	if _, err := os.Stat(tsxRepl); err != nil {
		return fmt.Errorf("tsx's REPL: %w", err)
	}
	version := func(args ...string) string {
		out, _ := exec.Command(args[0], args[1:]...).Output()
		return strings.TrimSpace(string(out))
	}
	var tsxPkg struct{ Version string }
	if b, err := os.ReadFile(filepath.Join(o.tsx, "package.json")); err == nil {
		_ = json.Unmarshal(b, &tsxPkg)
	}
	fmt.Printf("== cellbox typescript vs tsx %s REPL (node %s), %s\n", tsxPkg.Version, version(o.node, "--version"), o.label)

	var cbCold, tsxCold, cbRTT, tsxRTT series
	for i := range o.warmup + o.n {
		record := i >= o.warmup
		t0 := time.Now()
		id, err := d.c.startKernel(ws.WorkspaceID, "typescript")
		if err != nil {
			return err
		}
		if err := d.c.cell(id, 1, false); err != nil {
			return err
		}
		if record {
			cbCold.add(time.Since(t0))
		}
		if err := d.c.call(protocol.MethodKernelShutdown, protocol.KernelIDParams{KernelID: id}, nil); err != nil {
			return err
		}

		t0 = time.Now()
		r, err := startRepl(o.node, tsxRepl, project)
		if err != nil {
			return err
		}
		if err := r.cell(1); err != nil {
			r.close()
			return err
		}
		if record {
			tsxCold.add(time.Since(t0))
		}
		r.close()
	}

	id, err := d.c.startKernel(ws.WorkspaceID, "typescript")
	if err != nil {
		return err
	}
	js, err := d.c.startKernel(ws.WorkspaceID, "javascript")
	if err != nil {
		return err
	}
	var jsRTT series
	r, err := startRepl(o.node, tsxRepl, project)
	if err != nil {
		return err
	}
	defer r.close()
	for i := range o.rtt + 20 { // the first 20 warm up
		t0 := time.Now()
		if err := d.c.cell(id, i, false); err != nil {
			return err
		}
		if i >= 20 {
			cbRTT.add(time.Since(t0))
		}
		t0 = time.Now()
		if err := d.c.cell(js, i, true); err != nil {
			return err
		}
		if i >= 20 {
			jsRTT.add(time.Since(t0))
		}
		t0 = time.Now()
		if err := r.cell(i); err != nil {
			return err
		}
		if i >= 20 {
			tsxRTT.add(time.Since(t0))
		}
	}

	fmt.Printf("%-44s %12s %12s %8s\n", "figure", "cellbox", "tsx", "ratio")
	row := func(name string, a, b time.Duration) {
		fmt.Printf("%-44s %12s %12s %7.2fx\n", name, ms(a), ms(b), float64(a)/float64(b))
	}
	row(fmt.Sprintf("cold start to first result, p50 (n=%d)", o.n), cbCold.q(0.5), tsxCold.q(0.5))
	row("cold start to first result, p90", cbCold.q(0.9), tsxCold.q(0.9))
	row(fmt.Sprintf("round trip of a cell, p50 (n=%d)", o.rtt), cbRTT.q(0.5), tsxRTT.q(0.5))
	row("round trip of a cell, p99", cbRTT.q(0.99), tsxRTT.q(0.99))
	fmt.Printf("(the cell: %s; ratio cellbox/tsx, below 1 is cellbox faster)\n", cellCode(7))
	fmt.Printf("for reference, cellbox javascript, the cell without types: round trip p50 %s, p99 %s\n", ms(jsRTT.q(0.5)), ms(jsRTT.q(0.99)))
	return nil
}

// cellCode is the one-line cell of round i, and what it prints.
func cellCode(i int) string {
	return fmt.Sprintf("const v%d: number = %d + 1; 'r' + (v%d as number)", i, i, i)
}

func jsCode(i int) string   { return fmt.Sprintf("const v%d = %d + 1; 'r' + v%d", i, i, i) }
func cellWant(i int) string { return fmt.Sprintf("'r%d'", i+1) }

type series struct{ d []time.Duration }

func (s *series) add(d time.Duration) { s.d = append(s.d, d) }

// q is the nearest-rank q-quantile.
func (s *series) q(q float64) time.Duration {
	if len(s.d) == 0 {
		return 0
	}
	d := slices.Clone(s.d)
	slices.Sort(d)
	i := int(float64(len(d))*q+0.999999) - 1
	return d[min(max(i, 0), len(d)-1)]
}

func ms(d time.Duration) string {
	f := float64(d) / float64(time.Millisecond)
	if f < 10 {
		return fmt.Sprintf("%.3f ms", f)
	}
	return fmt.Sprintf("%.1f ms", f)
}

// repl is tsx's REPL over pipes.
type repl struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startRepl(node, script, dir string) (*repl, error) {
	cmd := exec.Command(node, script)
	cmd.Dir = dir
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("tsx: %w", err)
	}
	return &repl{cmd: cmd, in: in, out: bufio.NewReader(out)}, nil
}

// cell sends round i's cell and reads until its value is printed.
func (r *repl) cell(i int) error {
	if _, err := io.WriteString(r.in, cellCode(i)+"\n"); err != nil {
		return fmt.Errorf("tsx: %w", err)
	}
	want := []byte(cellWant(i) + "\n")
	var seen []byte
	for {
		line, err := r.out.ReadBytes('\n')
		seen = append(seen, line...)
		if bytes.HasSuffix(line, want) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tsx: %w; it printed %q", err, seen)
		}
	}
}

func (r *repl) close() {
	r.in.Close()
	done := make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = r.cmd.Process.Kill()
		<-done
	}
}

// daemon is `cellbox serve --stdio` with its own state and runtime dirs.
type daemon struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	c     *client
}

func startDaemon(bin, base string) (*daemon, error) {
	state, rt := filepath.Join(base, "state"), filepath.Join(base, "run")
	for _, dir := range []string{state, rt} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(bin, "serve", "--stdio")
	cmd.Env = []string{"CELLBOX_STATE_DIR=" + state, "XDG_RUNTIME_DIR=" + rt, "CELLBOX_LOG_LEVEL=warn"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CELLBOX_") && !strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &daemon{cmd: cmd, stdin: stdin, c: newClient(jsonrpc2.NewHeaderStream(struct {
		io.Reader
		io.Writer
		io.Closer
	}{stdout, stdin, stdin}))}
	var res protocol.InitializeResult
	err = d.c.call(protocol.MethodInitialize, protocol.InitializeParams{
		ProtocolVersion: 1,
		ClientInfo:      &protocol.ClientInfo{Name: "cellbox-typescript-bench", Version: "1"},
	}, &res)
	if err == nil {
		err = d.c.conn.Notify(context.Background(), protocol.MethodInitialized, struct{}{})
	}
	if err != nil {
		d.close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	for _, l := range res.Capabilities.Languages {
		if l.ID == "typescript" && !l.Available {
			d.close()
			return nil, fmt.Errorf("this cellbox cannot run typescript: %s", l.Reason)
		}
	}
	return d, nil
}

func (d *daemon) close() {
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

// client speaks JSON-RPC to the daemon and keeps the result outputs. Its
// handler runs on the read loop, so an execution's outputs are all in when
// its response is read.
type client struct {
	conn    jsonrpc2.Conn
	mu      sync.Mutex
	results map[string][]string // kernel -> text/plain of its results
}

func newClient(stream jsonrpc2.Stream) *client {
	c := &client{conn: jsonrpc2.NewConn(stream), results: map[string][]string{}}
	c.conn.Go(context.Background(), func(ctx context.Context, req *jsonrpc2.Request) (any, error) {
		if req.IsCall() {
			return nil, jsonrpc2.ErrMethodNotFound
		}
		if req.Method() == protocol.MethodKernelOutput {
			var p protocol.KernelOutputParams
			if json.Unmarshal(req.Params(), &p) == nil && p.Kind == protocol.OutputKindResult {
				s, _ := p.Data["text/plain"].(string)
				c.mu.Lock()
				c.results[p.KernelID] = append(c.results[p.KernelID], s)
				c.mu.Unlock()
			}
		}
		return nil, nil
	})
	return c
}

func (c *client) call(method string, params, result any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.conn.Call(ctx, method, params, result); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	return nil
}

func (c *client) startKernel(ws, lang string) (string, error) {
	var res protocol.KernelStartResult
	err := c.call(protocol.MethodKernelStart, protocol.KernelStartParams{Language: lang, WorkspaceID: ws}, &res)
	return res.KernelID, err
}

// cell runs round i's cell (without types: js) and checks its result.
func (c *client) cell(id string, i int, js bool) error {
	c.mu.Lock()
	delete(c.results, id)
	c.mu.Unlock()
	var res protocol.ExecuteResult
	code := cellCode(i)
	if js {
		code = jsCode(i)
	}
	if err := c.call(protocol.MethodKernelExecute, protocol.KernelExecuteParams{KernelID: id, Code: code}, &res); err != nil {
		return err
	}
	c.mu.Lock()
	got := c.results[id]
	c.mu.Unlock()
	if res.Status != protocol.ExecutionStatusOK || len(got) != 1 || got[0] != cellWant(i) {
		return fmt.Errorf("cell %d: status %s, results %q (error %+v)", i, res.Status, got, res.Error)
	}
	return nil
}
