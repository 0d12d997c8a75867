package godriver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// kernel is the driver's state.
type kernel struct {
	goPath  string
	version string
	ev      *events
	// dir holds the cell program (go.mod, main.go, cellbox.go, the binary).
	dir string
	// cache is GOCACHE: in the sandbox's /tmp, so the kernels of a
	// workspace and their restarts share it while the sandbox lives.
	cache string
	// cwd is the kernel's working directory.
	cwd string
	// shared is the user's shared build cache, bound read-only, and layer
	// the workspace's writable layer over it (shared.go); "" without.
	shared, layer string

	warmed chan struct{} // closed when the warm-up build ended
	mu     sync.Mutex
	prog   *program
	// modDir and modPath are the Go module that holds cwd (its go.mod's
	// directory and module path), if any, as of the last cell.
	modDir, modPath string
	running         bool // an execution runs
	intr            bool // it was interrupted
	silentN         int
	toolchain       string // "1.26.8"
	goroot          string
}

func newKernel(goPath, shared string, ev *events) (*kernel, error) {
	k := &kernel{goPath: goPath, ev: ev, prog: &program{}, warmed: make(chan struct{})}
	tmp := filepath.Join(os.TempDir(), "cellbox-go")
	k.cache = filepath.Join(tmp, "cache")
	if fi, err := os.Stat(shared); shared != "" && err == nil && fi.IsDir() {
		k.shared, k.layer = shared, filepath.Join(tmp, "layer")
	}
	if err := os.MkdirAll(k.cache, 0o700); err != nil {
		return nil, fmt.Errorf("make the build cache %s: %w", k.cache, err)
	}
	removeStale(tmp)
	dir := filepath.Join(tmp, "kernel-"+strconv.Itoa(os.Getpid()))
	_ = os.RemoveAll(dir) // a dead driver's of the same pid
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("make the program's directory: %w", err)
	}
	k.dir = dir
	out, err := k.goCmd(context.Background(), "env", "GOVERSION", "GOROOT").Output()
	if err != nil {
		return nil, fmt.Errorf("%s env GOVERSION GOROOT: %w", goPath, err)
	}
	v, goroot, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	k.goroot = strings.TrimSpace(goroot)
	k.version = strings.TrimPrefix(v, "go")
	k.toolchain = k.version
	if i := strings.IndexAny(k.toolchain, " -"); i > 0 {
		k.toolchain = k.toolchain[:i]
	}
	k.cwd, _ = os.Getwd()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module cellbox.cell\n\ngo "+k.toolchain+"\n"), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "cellbox.go"), []byte(helperSource), 0o600); err != nil {
		return nil, err
	}
	return k, nil
}

func (k *kernel) close() { os.RemoveAll(k.dir) }

// removeStale removes the program directories of drivers that are gone
// (killed by a restart or a shutdown before they could).
func removeStale(tmp string) {
	entries, _ := os.ReadDir(tmp)
	for _, e := range entries {
		pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "kernel-"))
		if err != nil || !strings.HasPrefix(e.Name(), "kernel-") || pid <= 0 {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.RemoveAll(filepath.Join(tmp, e.Name()))
		}
	}
}

// goEnv is the go command's environment: the kernel's, with the build
// cache and module cache in /tmp, no network (GOPROXY=off), no toolchain
// download, no cgo (a sandbox has no C compiler to count on).
func (k *kernel) goEnv() []string {
	tmp := filepath.Dir(k.cache)
	// go doc runs "go env GOROOT": the go command's directory comes first
	// on PATH (the sandbox's PATH does not name /usr/local/go/bin).
	path := filepath.Dir(k.goPath)
	if p := os.Getenv("PATH"); p != "" {
		path += string(filepath.ListSeparator) + p
	}
	set := map[string]string{"GOCACHE": k.cache, "GOPATH": filepath.Join(tmp, "gopath"), "PATH": path, "GOROOT": k.goroot}
	if _, err := os.Stat(filepath.Join(k.dir, "go.work")); err == nil {
		set["GOWORK"] = filepath.Join(k.dir, "go.work")
	}
	if prog := cacheProg(sandbox.SelfPath, k.shared, k.layer); prog != "" {
		set["GOCACHEPROG"] = prog
		set[sandbox.ReexecEnv] = CacheEntry
	}
	return buildEnv(os.Environ(), set)
}

func (k *kernel) goCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, k.goPath, args...)
	cmd.Dir = k.dir
	cmd.Env = k.goEnv()
	return cmd
}

// warmSource is built once when the kernel starts, with the helper
// (fmt, os, runtime/debug, strconv, syscall), so that the packages every
// cell needs are in the build cache before the first cell: no more, so
// that a first cell waits no longer than it must.
const warmSource = `package main

func main() {}
`

// warm builds warmSource with the program's helper, in the background.
func (k *kernel) warm() {
	defer close(k.warmed)
	waitShared(k.shared, 5*time.Minute)
	dir := filepath.Join(k.dir, "warm")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return
	}
	defer os.RemoveAll(dir)
	for name, text := range map[string]string{"go.mod": "module cellbox.warm\n\ngo " + k.toolchain + "\n", "main.go": warmSource, "cellbox.go": helperSource} {
		if os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600) != nil {
			return
		}
	}
	cmd := k.goCmd(context.Background(), "build", "-o", os.DevNull, ".")
	cmd.Dir = dir
	_ = cmd.Run()
}

// findModule finds the go.mod of dir or its parents up to /workspace:
// its directory and module path.
func findModule(dir string) (string, string) {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && len(b) < 1<<20 {
			if m := moduleLine.FindSubmatch(b); m != nil {
				return d, strings.Trim(string(m[1]), `"`+"`")
			}
			return "", ""
		}
		if d == "/workspace" || d == "/" || d == "." {
			return "", ""
		}
	}
}

var moduleLine = regexp.MustCompile(`(?m)^\s*module\s+(\S+)`)

// interrupt is a SIGINT: the program or build of the running execution
// got it too (same process group); it ends interrupted.
func (k *kernel) interrupt() {
	k.mu.Lock()
	if k.running {
		k.intr = true
	}
	k.mu.Unlock()
}

func (k *kernel) interrupted() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.intr
}

// cellFile names a cell's positions: the editor's file when the request
// has a source, else <cell-N>.
func (k *kernel) cellFile(req request) (string, int) {
	if req.Source != nil && req.Source.Path != "" {
		p := strings.Map(func(r rune) rune {
			if r == '\n' || r == '\r' || r == '*' || r == 0 {
				return '_'
			}
			return r
		}, req.Source.Path)
		return p, max(1, req.Source.Line)
	}
	if req.Count > 0 {
		return fmt.Sprintf("<cell-%d>", req.Count), 1
	}
	k.silentN++
	return fmt.Sprintf("<silent-%d>", k.silentN), 1
}

// failure is how an execution failed.
type failure struct {
	ename, evalue string
	traceback     []string
	status        string // "error" or "interrupted"
}

// execute runs one execute request and sends its events, done last.
func (k *kernel) execute(req request) {
	k.mu.Lock()
	k.running, k.intr = true, false
	k.mu.Unlock()
	done := map[string]any{"ev": "done", "id": req.ID, "status": "ok"}
	f, cpu := k.run(req)
	if f == nil && k.interrupted() {
		f = &failure{ename: "Interrupted", evalue: "SIGINT", status: "interrupted"}
	}
	if f != nil {
		if f.status == "" {
			f.status = "error"
		}
		if f.traceback == nil {
			f.traceback = []string{f.ename + ": " + f.evalue}
		}
		info := map[string]any{"ename": f.ename, "evalue": f.evalue, "traceback": f.traceback}
		ev := map[string]any{"ev": "error", "id": req.ID}
		for n, v := range info {
			ev[n] = v
		}
		k.ev.send(ev)
		done["status"], done["error"] = f.status, info
	}
	if cpu > 0 {
		done["cpuMs"] = float64(cpu.Microseconds()) / 1000
	}
	k.mu.Lock()
	k.running = false
	k.mu.Unlock()
	k.ev.send(done)
}

// maxBuildOutput bounds what the go command's output is read of.
const maxBuildOutput = 1 << 20

// run builds and runs a cell; nil is success.
func (k *kernel) run(req request) (*failure, time.Duration) {
	file, line := k.cellFile(req)
	p, errs := parseCell(req.Code, file, line)
	if errs != nil {
		return &failure{ename: "SyntaxError", evalue: firstMessage(errs), traceback: errs}, 0
	}
	if p.userMain == nil && len(p.stmts) == 0 && len(p.decls) == 0 {
		return nil, 0
	}
	k.mu.Lock()
	next := k.prog.merged(p)
	k.mu.Unlock()
	if err := k.writeWork(next, p); err != nil {
		return &failure{ename: "Error", evalue: err.Error()}, 0
	}
	select {
	case <-k.warmed:
	default:
		fmt.Fprintln(os.Stderr, "(compiling the Go standard library's packages for this workspace: the first cell takes a while)")
		<-k.warmed
		if k.interrupted() { // the SIGINT ended the warm-up's build
			return &failure{ename: "Interrupted", evalue: "SIGINT", status: "interrupted"}, 0
		}
	}
	o := genOptions{show: !req.Silent, drop: map[string]bool{}}
	for attempt := 0; ; attempt++ {
		src := next.source(p, file, o)
		if err := os.WriteFile(filepath.Join(k.dir, "main.go"), []byte(src), 0o600); err != nil {
			return &failure{ename: "Error", evalue: fmt.Sprintf("write the cell's program: %v", err)}, 0
		}
		out, err := k.build()
		if err == nil {
			break
		}
		if k.interrupted() {
			return &failure{ename: "Interrupted", evalue: "SIGINT", status: "interrupted"}, 0
		}
		lines := compileErrors(out)
		retry := false
		if attempt < 3 {
			for _, l := range lines {
				if m := unusedImport.FindStringSubmatch(l); m != nil && !o.drop[m[1]] {
					o.drop[m[1]], retry = true, true
				}
				if o.show && strings.Contains(l, "used as value") {
					o.show, retry = false, true
				}
			}
		}
		if retry {
			continue
		}
		if len(lines) == 0 {
			lines = []string{strings.TrimSpace(string(out))}
			if lines[0] == "" {
				lines[0] = err.Error()
			}
		}
		return &failure{ename: "CompileError", evalue: firstMessage(lines), traceback: lines}, 0
	}
	k.mu.Lock()
	k.prog = next
	k.mu.Unlock()
	if p.userMain == nil && len(p.stmts) == 0 {
		return nil, 0
	}
	return k.exec(req)
}

var unusedImport = regexp.MustCompile(`^[^:]*:\d+:\d+: "([^"]+)" imported (?:as \S+ )?and not used`)

// writeWork writes go.mod (and go.work when the cells import a package of
// the kernel's module: the program is then built in a workspace with it).
func (k *kernel) writeWork(pr *program, p *parsed) error {
	work := filepath.Join(k.dir, "go.work")
	// The module is looked for at each cell: a cell may have made it.
	modDir, modPath := findModule(k.cwd)
	k.mu.Lock()
	k.modDir, k.modPath = modDir, modPath
	k.mu.Unlock()
	uses := false
	if k.modPath != "" {
		for _, d := range pr.decls {
			if d.importPath == k.modPath || strings.HasPrefix(d.importPath, k.modPath+"/") {
				uses = true
			}
		}
	}
	if !uses {
		if err := os.Remove(work); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	text := fmt.Sprintf("go %s\n\nuse (\n\t.\n\t%s\n)\n", k.toolchain, strconv.Quote(k.modDir))
	return os.WriteFile(work, []byte(text), 0o600)
}

// build runs go build; its output is the compiler's.
func (k *kernel) build() ([]byte, error) {
	cmd := k.goCmd(context.Background(), "build", "-o", filepath.Join(k.dir, "cell"), "-ldflags=-s -w", ".")
	var out limitedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// compileErrors are the go command's error lines, without its "# pkg"
// headers.
func compileErrors(out []byte) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l == "" || strings.HasPrefix(l, "# ") {
			continue
		}
		lines = append(lines, strings.TrimRight(l, "\r"))
	}
	return lines
}

// firstMessage is the first error without its position.
func firstMessage(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	l := lines[0]
	if m := position.FindStringIndex(l); m != nil {
		return l[m[1]:]
	}
	return l
}

var position = regexp.MustCompile(`^.*?:\d+(?::\d+)?: `)

// exec runs the built program with the driver's stdout and stderr, the
// request's stdin, and fd 3 for its result or panic.
func (k *kernel) exec(req request) (*failure, time.Duration) {
	r, w, err := os.Pipe()
	if err != nil {
		return &failure{ename: "Error", evalue: fmt.Sprintf("pipe: %v", err)}, 0
	}
	cmd := exec.Command(filepath.Join(k.dir, "cell"))
	cmd.Dir = k.cwd
	cmd.Stdin = strings.NewReader(req.Stdin)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{w}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CELLBOX_SANDBOX") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return &failure{ename: "Error", evalue: fmt.Sprintf("start the cell's program: %v", err)}, 0
	}
	w.Close()
	msgs := make(chan []string, 1)
	go func() { msgs <- readMessages(r) }()
	err = cmd.Wait()
	var lines []string
	select {
	case lines = <-msgs:
	case <-time.After(2 * time.Second): // a child of the program holds the pipe
	}
	r.Close()
	var cpu time.Duration
	if cmd.ProcessState != nil {
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	var f *failure
	for _, l := range lines {
		kind, rest, _ := strings.Cut(l, " ")
		switch kind {
		case "result":
			if s, err := strconv.Unquote(rest); err == nil && !req.Silent && f == nil {
				k.ev.send(map[string]any{"ev": "result", "id": req.ID, "data": map[string]any{"text/plain": s}, "metadata": map[string]any{}})
			}
		case "panic":
			if f = panicFailure(rest); f == nil {
				f = &failure{ename: "panic", evalue: "(unreadable)"}
			}
		}
	}
	if f != nil {
		return f, cpu
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				if ws.Signal() == syscall.SIGINT || k.interrupted() {
					return &failure{ename: "Interrupted", evalue: "SIGINT", status: "interrupted"}, cpu
				}
				return &failure{ename: "Signal", evalue: ws.Signal().String()}, cpu
			}
			return &failure{ename: "ExitStatus", evalue: strconv.Itoa(ee.ExitCode()), traceback: []string{fmt.Sprintf("exit status %d", ee.ExitCode())}}, cpu
		}
		return &failure{ename: "Error", evalue: err.Error()}, cpu
	}
	return nil, cpu
}

// maxMessages bounds what a program may send the driver on fd 3.
const maxMessages = 8 << 20

// readMessages reads the program's lines on fd 3, bounded.
func readMessages(r *os.File) []string {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxMessages)
	var out []string
	total := 0
	for sc.Scan() {
		total += len(sc.Bytes())
		if total > maxMessages || len(out) > 1000 {
			break
		}
		out = append(out, sc.Text())
	}
	return out
}

// panicFailure reads "panic ENAME VALUE STACK" (quoted): the error with the
// stack's frames of the cells, "file:line in function".
func panicFailure(rest string) *failure {
	var parts []string
	for range 3 {
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return nil
		}
		s, err := strconv.Unquote(q)
		if err != nil {
			return nil
		}
		parts = append(parts, s)
		rest = strings.TrimPrefix(rest[len(q):], " ")
	}
	f := &failure{ename: parts[0], evalue: parts[1]}
	f.traceback = append(f.traceback, "panic: "+parts[1])
	stack := strings.Split(parts[2], "\n")
	for i := 0; i+1 < len(stack); i++ {
		fn := stack[i]
		loc := strings.TrimSpace(stack[i+1])
		if !strings.HasPrefix(stack[i+1], "\t") {
			continue
		}
		i++
		if strings.HasPrefix(loc, "/") && (strings.Contains(loc, "/src/runtime/") || strings.Contains(loc, "/cellbox-go/")) {
			continue
		}
		if strings.HasPrefix(loc, generated) || strings.HasPrefix(fn, "main.cellbox_") {
			continue
		}
		if j := strings.LastIndex(loc, " +0x"); j > 0 {
			loc = loc[:j]
		}
		if j := strings.LastIndex(fn, "("); j > 0 {
			fn = fn[:j]
		}
		f.traceback = append(f.traceback, loc+" in "+fn)
	}
	return f
}

// limitedBuffer keeps the first maxBuildOutput bytes written to it.
type limitedBuffer struct{ bytes.Buffer }

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := maxBuildOutput - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
