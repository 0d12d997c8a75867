//go:build linux

// Command preview measures what a preview (workspace/exposePort) costs a
// web app's client, side by side with its peer in one run, interleaved:
// the same python server (cmd/cellbox/testdata/preview_app.py, http.server.ThreadingHTTPServer) run by
// a python kernel in a workspace's sandbox and reached through the
// preview's URL, against the same code run by a plain python3 on the host
// and reached directly. Through the preview, each connection to the app is
// opened by the sandbox's init in the sandbox's network namespace and
// passed to the daemon (workspace/sandbox/dial_linux.go), which proxies
// HTTP and websockets (workspace/preview). The figures:
//
//   - GET of 1 KiB on one keep-alive connection: p50, p99;
//   - GET of 1 KiB on a new connection each, the app closing it after the
//     response, so that the preview dials the sandbox for each (its init's
//     dial included); and on a new client connection each while the app
//     keeps its connection, which the preview then reuses;
//   - the throughput of a 1 MiB body on one keep-alive connection;
//   - a websocket echo's round trip: p50, p99;
//
// and the CPU each process used per request. The daemon is the real
// binary, `cellbox serve --listen 127.0.0.1:0` (bench/internal/benchutil),
// spoken to over its websocket. bench/preview.sh builds it and runs it.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cellbox-dev/cellbox/bench/internal/benchutil"
	"github.com/cellbox-dev/cellbox/protocol"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "preview-bench:", err)
		os.Exit(1)
	}
}

type options struct {
	cellbox, python, label, app string
	appCode                     string // the app's code, read from app
	n, nNew, mib, nWS           int
	rounds, warmup, port        int
}

func run(args []string) error {
	var o options
	fs := flag.NewFlagSet("preview-bench", flag.ContinueOnError)
	fs.StringVar(&o.cellbox, "cellbox", "", "the cellbox `binary` (built with CGO_ENABLED=0; required)")
	fs.StringVar(&o.app, "app", "cmd/cellbox/testdata/preview_app.py", "the web `app` both sides run (the preview tests' own)")
	fs.StringVar(&o.python, "python", "", "the host's python `binary` (empty: the kernel's own, its sys.executable)")
	fs.IntVar(&o.n, "n", 2000, "measured GETs of 1 KiB on one keep-alive connection, per side")
	fs.IntVar(&o.nNew, "n-new", 300, "measured GETs of 1 KiB on a new connection each, per side and kind")
	fs.IntVar(&o.mib, "mib", 200, "MiB fetched as 1 MiB bodies for the throughput, per side")
	fs.IntVar(&o.nWS, "n-ws", 2000, "measured websocket echoes, per side")
	fs.IntVar(&o.rounds, "rounds", 10, "rounds each figure is cut into, the sides alternating")
	fs.IntVar(&o.warmup, "warmup", 20, "unmeasured operations per side before each figure")
	fs.IntVar(&o.port, "port", 8000, "the app's port in the sandbox")
	fs.StringVar(&o.label, "label", "", "`text` naming this run in the output")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.cellbox == "" || o.n < 1 || o.nNew < 1 || o.mib < 1 || o.nWS < 1 || o.rounds < 1 || o.warmup < 0 {
		return errors.New("need -cellbox, and -n, -n-new, -mib, -n-ws, -rounds >= 1")
	}
	var err error
	if o.cellbox, err = filepath.Abs(o.cellbox); err != nil {
		return err
	}
	app, err := os.ReadFile(o.app)
	if err != nil {
		return fmt.Errorf("the app: %w", err)
	}
	o.appCode = string(app)
	base, err := os.MkdirTemp("", "cellbox-preview-bench-")
	if err != nil {
		return err
	}
	defer benchutil.RemoveAll(base)
	b := &bench{o: o, base: base}
	defer b.kill() // an error: leave no process behind
	t0 := time.Now()
	if err := b.setUp(); err != nil {
		return err
	}
	if err := b.measure(); err != nil {
		if b.d != nil {
			err = fmt.Errorf("%w%s", err, b.d.Stderr.Show())
		}
		return err
	}
	if err := b.tearDown(); err != nil {
		return err
	}
	b.elapsed = time.Since(t0)
	b.report(os.Stdout)
	return nil
}

type bench struct {
	o    options
	base string

	d         *benchutil.Daemon
	c         *benchutil.Conn
	kernelID  string
	sandbox   protocol.SandboxInfo
	kernelExe string // the kernel's sys.executable
	kernelPy  string // its version
	hostPy    string // the host app's version
	previewTo string // the preview's URL, token cut

	host   *exec.Cmd
	hostIn io.WriteCloser

	sides   [2]*side // preview, direct
	figs    []*figure
	elapsed time.Duration

	mu     sync.Mutex
	stdout strings.Builder // the kernel's stdout
	errs   strings.Builder // and its errors
}

const (
	preview = 0
	direct  = 1
)

// note collects the kernel's output.
func (b *bench) note(method string, params json.RawMessage) {
	if method != protocol.MethodKernelOutput {
		return
	}
	var p protocol.KernelOutputParams
	if json.Unmarshal(params, &p) != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case p.Kind == protocol.OutputKindStream && p.Name == protocol.StreamStdout:
		b.stdout.WriteString(p.Text)
	case p.Kind == protocol.OutputKindStream, p.Kind == protocol.OutputKindError:
		b.errs.WriteString(p.Text)
	}
}

// setUp starts the daemon, a workspace, a python kernel running the app
// on o.port in its sandbox and the preview of that port; then the same app
// on the host, with the kernel's python.
func (b *bench) setUp() (err error) {
	fmt.Fprintf(os.Stderr, "preview-bench: starting the daemon, a workspace, a python kernel and the app in it...\n")
	b.d, err = benchutil.Start(benchutil.Options{Bin: b.o.cellbox, Dir: filepath.Join(b.base, "daemon")})
	if err != nil {
		return fmt.Errorf("start cellbox: %w", err)
	}
	if b.c, err = b.d.Dial("cellbox-preview-bench", b.note); err != nil {
		return err
	}
	var ws protocol.WorkspaceInfo
	if err := b.c.Call(protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Mode: protocol.WorkspaceModeScratch}, &ws); err != nil {
		return err
	}
	var k protocol.KernelStartResult
	if err := b.c.Call(protocol.MethodKernelStart, protocol.KernelStartParams{Language: "python", WorkspaceID: ws.WorkspaceID}, &k); err != nil {
		return err
	}
	b.kernelID, b.sandbox = k.KernelID, k.Sandbox
	code := b.o.appCode + fmt.Sprintf("\nimport sys\nsrv = start(%d)\nprint(sys.executable, sys.version.split()[0])\n", b.o.port)
	var res protocol.ExecuteResult
	if err := b.c.Call(protocol.MethodKernelExecute, protocol.KernelExecuteParams{KernelID: b.kernelID, Code: code}, &res); err != nil {
		return err
	}
	b.mu.Lock()
	out, errs := b.stdout.String(), b.errs.String()
	b.mu.Unlock()
	if res.Status != protocol.ExecutionStatusOK {
		return fmt.Errorf("the app in the kernel: %s: %s", res.Status, errs)
	}
	if f := strings.Fields(out); len(f) == 2 {
		b.kernelExe, b.kernelPy = f[0], f[1]
	}
	var pv protocol.Preview
	if err := b.c.Call(protocol.MethodWorkspaceExposePort, protocol.WorkspaceExposePortParams{WorkspaceID: ws.WorkspaceID, Port: b.o.port}, &pv); err != nil {
		return err
	}
	b.previewTo, _, _ = strings.Cut(pv.URL, "=")
	pside, err := newPreviewSide(pv.URL)
	if err != nil {
		return err
	}
	if pside.appPID, err = b.kernelPID(); err != nil {
		return err
	}

	py := b.o.python
	if py == "" {
		py = "python3"
		if b.kernelExe != "" {
			if _, err := os.Stat(b.kernelExe); err == nil {
				py = b.kernelExe
			}
		}
	}
	b.host = exec.Command(py, "-c", b.o.appCode+"\nimport sys\nsrv = start(0)\nprint(srv.server_address[1], sys.version.split()[0], flush=True)\nsys.stdin.read()\n")
	b.host.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	b.host.Stderr = os.Stderr
	if b.hostIn, err = b.host.StdinPipe(); err != nil {
		return err
	}
	hostOut, err := b.host.StdoutPipe()
	if err != nil {
		return err
	}
	if err := b.host.Start(); err != nil {
		return fmt.Errorf("the app on the host: %w", err)
	}
	var port int
	if _, err := fmt.Fscanln(hostOut, &port, &b.hostPy); err != nil {
		return fmt.Errorf("the app on the host (%s): %w", py, err)
	}
	if b.kernelExe == "" || b.kernelExe != py {
		b.hostPy += " (" + py + ")"
	}
	dside := newSide("direct", "http://127.0.0.1:"+strconv.Itoa(port), "")
	dside.appPID = b.host.Process.Pid
	b.sides = [2]*side{pside, dside}
	return nil
}

// kernelPID is the kernel's python process, below the daemon.
func (b *bench) kernelPID() (int, error) {
	pys := benchutil.Filter(benchutil.Scan().Under(b.d.PID()), (*benchutil.Proc).IsPython)
	if len(pys) != 1 {
		return 0, fmt.Errorf("%d python drivers below the daemon, not 1", len(pys))
	}
	return pys[0].PID, nil
}

// tearDown ends the host's app, then the daemon, and waits until nothing
// of them runs.
func (b *bench) tearDown() error {
	for _, s := range b.sides {
		s.close()
	}
	_ = b.hostIn.Close()
	done := make(chan error, 1)
	go func() { done <- b.host.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = b.host.Process.Kill()
		<-done
	}
	b.host = nil
	b.c.Close()
	err := b.d.Stop()
	b.d = nil
	return err
}

// kill ends whatever still runs (after an error).
func (b *bench) kill() {
	if b.host != nil && b.host.Process != nil {
		_ = b.host.Process.Kill()
		_ = b.host.Wait()
	}
	if b.d != nil {
		below := benchutil.Scan().Under(b.d.PID())
		b.d.Kill()
		_ = benchutil.WaitGone(below, 10*time.Second)
	}
}
