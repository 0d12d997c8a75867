// Command gokernel measures cellbox's go kernel (bench/go.sh) side by side
// with `go run` of the same programs on the host: cold start to the first
// result (the kernel's sandbox starts with an empty build cache; go run's
// peer runs with an empty GOCACHE too), the first cell after that, and the
// round trip of later cells (each a new program: compile main and link),
// against `go run` with its cache warm. Prints the figures and the ratios.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/cellbox-dev/cellbox/protocol"
)

func main() {
	bin := flag.String("cellbox", "cellbox", "the cellbox `binary`")
	goCmd := flag.String("go", "go", "the `go` command of the peer")
	n := flag.Int("n", 20, "measured later cells per side")
	flag.Parse()
	if err := run(*bin, *goCmd, *n); err != nil {
		fmt.Fprintln(os.Stderr, "gokernel:", err)
		os.Exit(1)
	}
}

// client is a JSON-RPC client of `cellbox serve --stdio` that counts the
// results and stdout of executions.
type client struct {
	conn jsonrpc2.Conn
	mu   sync.Mutex
	out  map[string]string // execution id: stdout and results
}

func startDaemon(bin, base, cacheHome string) (*client, *exec.Cmd, error) {
	cmd := exec.Command(bin, "serve", "--stdio")
	cmd.Env = append(os.Environ(), "CELLBOX_STATE_DIR="+filepath.Join(base, "state"), "XDG_RUNTIME_DIR="+filepath.Join(base, "run"),
		"XDG_CACHE_HOME="+cacheHome, "CELLBOX_LOG_LEVEL=warn")
	for _, d := range []string{"state", "run"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o700); err != nil {
			return nil, nil, err
		}
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	c := &client{out: map[string]string{}}
	c.conn = jsonrpc2.NewConn(jsonrpc2.NewHeaderStream(struct {
		io.Reader
		io.Writer
		io.Closer
	}{stdout, stdin, stdin}))
	c.conn.Go(context.Background(), func(ctx context.Context, req *jsonrpc2.Request) (any, error) {
		if req.Method() == protocol.MethodKernelOutput {
			var p protocol.KernelOutputParams
			if json.Unmarshal(req.Params(), &p) == nil {
				c.mu.Lock()
				switch p.Kind {
				case protocol.OutputKindStream:
					if p.Name == protocol.StreamStdout {
						c.out[p.ExecutionID] += p.Text
					}
				case protocol.OutputKindResult:
					c.out[p.ExecutionID] += fmt.Sprint(p.Data["text/plain"])
				}
				c.mu.Unlock()
			}
		}
		return nil, nil
	})
	var res protocol.InitializeResult
	if err := c.call(protocol.MethodInitialize, protocol.InitializeParams{ProtocolVersion: 1, ClientInfo: &protocol.ClientInfo{Name: "gokernel-bench", Version: "1"}}, &res); err != nil {
		return nil, nil, fmt.Errorf("initialize: %w", err)
	}
	for _, l := range res.Capabilities.Languages {
		if l.ID == "go" && !l.Available {
			return nil, nil, fmt.Errorf("go is not available: %s", l.Reason)
		}
	}
	return c, cmd, nil
}

func (c *client) call(method string, params, result any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_, err := c.conn.Call(ctx, method, params, result)
	return err
}

var seq int

// execute runs code and returns its stdout and results.
func (c *client) execute(kid, code string) (string, error) {
	seq++
	id := fmt.Sprintf("b-%d", seq)
	var res protocol.ExecuteResult
	if err := c.call(protocol.MethodKernelExecute, protocol.KernelExecuteParams{KernelID: kid, Code: code, ExecutionID: id}, &res); err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if res.Status != protocol.ExecutionStatusOK {
		return "", fmt.Errorf("%q: %s %+v", code, res.Status, res.Error)
	}
	return c.out[id], nil
}

// goRun runs `go run` of src in dir with cache as GOCACHE; its stdout.
func goRun(goCmd, dir, cache, src string) (string, error) {
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o600); err != nil {
		return "", err
	}
	cmd := exec.Command(goCmd, "run", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOCACHE="+cache, "GOFLAGS=-buildvcs=false", "GOPROXY=off", "CGO_ENABLED=0", "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go run: %w", err)
	}
	return string(out), nil
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d.Microseconds())/1000) }

// side is one daemon's figures: kernel/start to the first cell's result,
// the cell after it, and later cells.
type side struct {
	cold, first time.Duration
	later       []time.Duration
}

// cellbox measures a new daemon whose user cache directory is cacheHome.
func cellbox(bin, base, cacheHome string, n int) (side, error) {
	var s side
	t0 := time.Now()
	c, cmd, err := startDaemon(bin, base, cacheHome)
	if err != nil {
		return s, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var start protocol.KernelStartResult
	if err := c.call(protocol.MethodKernelStart, protocol.KernelStartParams{Language: "go"}, &start); err != nil {
		return s, fmt.Errorf("kernel/start: %w", err)
	}
	if out, err := c.execute(start.KernelID, "import \"fmt\"\nfmt.Println(1)"); err != nil || out != "1\n" {
		return s, fmt.Errorf("first cell: %q %v", out, err)
	}
	s.cold = time.Since(t0)
	t1 := time.Now()
	if _, err := c.execute(start.KernelID, "func sq(x int) int { return x * x }\nfmt.Println(sq(3))"); err != nil {
		return s, err
	}
	s.first = time.Since(t1)
	for i := range n {
		t := time.Now()
		out, err := c.execute(start.KernelID, fmt.Sprintf("fmt.Println(sq(%d))", i))
		if err != nil {
			return s, err
		}
		if out != fmt.Sprintf("%d\n", i*i) {
			return s, fmt.Errorf("cell %d printed %q", i, out)
		}
		s.later = append(s.later, time.Since(t))
	}
	return s, nil
}

// goRunSide measures go run with the build cache cache.
func goRunSide(goCmd, base, cache string, n int) (side, error) {
	var s side
	dir := filepath.Join(base, "prog")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return s, err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module bench\n\ngo 1.22\n"), 0o600); err != nil {
		return s, err
	}
	t0 := time.Now()
	if _, err := goRun(goCmd, dir, cache, fmt.Sprintf("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(1) } // %d\n", time.Now().UnixNano())); err != nil {
		return s, err
	}
	s.cold = time.Since(t0)
	prog := func(i int) string {
		return fmt.Sprintf("package main\n\nimport \"fmt\"\n\nfunc sq(x int) int { return x * x }\n\nfunc main() { fmt.Println(sq(%d)) } // %d\n", i, time.Now().UnixNano())
	}
	t1 := time.Now()
	if _, err := goRun(goCmd, dir, cache, prog(3)); err != nil {
		return s, err
	}
	s.first = time.Since(t1)
	for i := range n {
		t := time.Now()
		if _, err := goRun(goCmd, dir, cache, prog(i)); err != nil {
			return s, err
		}
		s.later = append(s.later, time.Since(t))
	}
	return s, nil
}

func run(bin, goCmd string, n int) error {
	base, err := os.MkdirTemp("", "cellbox-go-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	// The user's cache directory, for the daemons: a new one below the
	// user's own (a sandbox cannot be shown a directory below /tmp).
	userCache, err := os.UserCacheDir()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(userCache, 0o700); err != nil {
		return err
	}
	cacheHome, err := os.MkdirTemp(userCache, "cellbox-go-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cacheHome)
	gocache := filepath.Join(base, "gocache")
	// The first go kernel of a user: the shared build cache is empty.
	cbFirst, err := cellbox(bin, filepath.Join(base, "d1"), cacheHome, n)
	if err != nil {
		return err
	}
	// A new daemon (and workspace) of the same user: the shared layer is warm.
	cbWarm, err := cellbox(bin, filepath.Join(base, "d2"), cacheHome, n)
	if err != nil {
		return err
	}
	grFirst, err := goRunSide(goCmd, base, gocache, n) // empty GOCACHE
	if err != nil {
		return err
	}
	grWarm, err := goRunSide(goCmd, base, gocache, n) // GOCACHE warm
	if err != nil {
		return err
	}

	fmt.Printf("go kernel: cellbox (kernel/start {language: go} in a new daemon) vs `go run` of the same programs on the host\n")
	fmt.Printf("%-58s %10s %10s %8s\n", "", "cellbox", "go run", "ratio")
	row := func(name string, a, b time.Duration) {
		fmt.Printf("%-58s %10s %10s %7.2fx\n", name, ms(a), ms(b), float64(a)/float64(b))
	}
	row("first ever: start to the first result (caches empty)", cbFirst.cold, grFirst.cold)
	row("warm user cache: start to the first result", cbWarm.cold, grWarm.cold)
	row("the cell after it (a new func)", cbWarm.first, grWarm.first)
	row(fmt.Sprintf("later cells, median of %d (new main each)", n), median(append(cbFirst.later, cbWarm.later...)), median(append(grFirst.later, grWarm.later...)))
	fmt.Printf("(cellbox's start includes the daemon, the sandbox and the kernel; go run's programs differ by a comment each run, so each is compiled and linked)\n")
	return nil
}
