//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/cellbox-dev/cellbox/bench/internal/benchutil"
	"github.com/cellbox-dev/cellbox/protocol"
)

type bench struct {
	o         options
	base      string
	loadStart string

	d            *benchutil.Daemon
	c            *benchutil.Conn
	nofileDaemon string // the daemon's RLIMIT_NOFILE, from /proc
	helperExe    string // what a sandbox helper of the curve's daemon runs
	pyVersion    string
	sandbox      protocol.SandboxInfo

	// mu guards results: the text/plain of the last kernel/output result,
	// by kernel, written on the connection's read loop.
	mu      sync.Mutex
	results map[string]string

	wsIDs, kernels, ptys []string
	points               []*point
	burstConc, burstSeq  benchutil.Series
	teardown             time.Duration

	lean, self *side
	jup        *benchutil.Mem // ipykernels, with -jupyter-side
	jupVersion string
}

// point is what was measured with k kernels.
type point struct {
	k, w, t    int
	grow       time.Duration // from the previous point to this one
	starts     benchutil.Series
	daemon     benchutil.Mem
	fds        int
	goroutines int
	threads    int
	// Everything below the daemon, and its parts.
	below, pythons, helpers, others benchutil.Mem
	otherNames                      []string
	sandboxes                       int // helpers that are a sandbox's init
	// CPU used in the quiet window, by the daemon and by what is below it.
	window                               time.Duration
	cpuDaemon, cpuPy, cpuHelpers, cpuEls time.Duration // utime+stime
	run                                  time.Duration // the same in all, from schedstat
	exec, list, stats                    benchutil.Series
}

func (p *point) cpu() time.Duration { return p.cpuDaemon + p.cpuPy + p.cpuHelpers + p.cpuEls }

// curve starts the daemon, grows it through the points, measuring each,
// runs the burst, and takes everything down again.
func (b *bench) curve() (err error) {
	b.d, err = benchutil.Start(benchutil.Options{Bin: b.o.cellbox, Dir: filepath.Join(b.base, "curve"), Args: serveArgs})
	if err != nil {
		return fmt.Errorf("start cellbox: %w", err)
	}
	defer func() {
		if b.d != nil { // an error: leave no process behind
			b.d.Kill()
		}
	}()
	b.nofileDaemon = procLimit(b.d.PID(), "Max open files")
	if b.c, err = b.d.Dial("cellbox-scale-bench", b.note); err != nil {
		return err
	}
	for i, k := range b.o.points {
		window := b.o.quiet
		if i == len(b.o.points)-1 {
			window = b.o.quietLast
		}
		fmt.Fprintf(os.Stderr, "scale-bench: K=%d: growing...\n", k)
		p, err := b.grow(k)
		if err != nil {
			return fmt.Errorf("grow to %d kernels: %w%s", k, err, b.d.Stderr.Show())
		}
		fmt.Fprintf(os.Stderr, "scale-bench:   %.1f s; measuring, quiet for %v...\n", p.grow.Seconds(), window)
		if err := b.measure(p); err != nil {
			return fmt.Errorf("at %d kernels: %w", k, err)
		}
		b.quietCPU(p, window)
		if err := b.roundTrips(p); err != nil {
			return fmt.Errorf("at %d kernels: round trips: %w%s", k, err, b.d.Stderr.Show())
		}
		b.points = append(b.points, p)
	}
	if b.o.burst > 0 {
		fmt.Fprintf(os.Stderr, "scale-bench: burst of %d kernel starts, at once and back to back...\n", b.o.burst)
		if err := b.burst(); err != nil {
			return fmt.Errorf("burst: %w%s", err, b.d.Stderr.Show())
		}
	}
	fmt.Fprintf(os.Stderr, "scale-bench: taking everything down...\n")
	t0 := time.Now()
	if err := b.takeDown(); err != nil {
		return err
	}
	b.teardown = time.Since(t0)
	b.c.Close()
	err = b.d.Stop()
	b.d = nil
	return err
}

// note follows kernel/output results; the rest is not looked at.
func (b *bench) note(method string, params json.RawMessage) {
	if method != protocol.MethodKernelOutput {
		return
	}
	var p protocol.KernelOutputParams
	if json.Unmarshal(params, &p) != nil || p.Kind != protocol.OutputKindResult {
		return
	}
	s, _ := p.Data["text/plain"].(string)
	b.mu.Lock()
	b.results[p.KernelID] = s
	b.mu.Unlock()
}

// onePlusOne runs `1+1` and checks that it printed the result 2.
func (b *bench) onePlusOne(c *benchutil.Conn, id string) error {
	b.mu.Lock()
	delete(b.results, id)
	b.mu.Unlock()
	var res protocol.ExecuteResult
	if err := c.Call(protocol.MethodKernelExecute, protocol.KernelExecuteParams{KernelID: id, Code: "1+1"}, &res); err != nil {
		return err
	}
	b.mu.Lock()
	got, ok := b.results[id]
	b.mu.Unlock()
	if res.Status != protocol.ExecutionStatusOK || !ok || got != "2" {
		return fmt.Errorf("1+1 in kernel %s: status %s, result %q", id, res.Status, got)
	}
	return nil
}

func startKernel(c *benchutil.Conn, ws string) (protocol.KernelStartResult, error) {
	var res protocol.KernelStartResult
	err := c.Call(protocol.MethodKernelStart, protocol.KernelStartParams{Language: "python", WorkspaceID: ws}, &res)
	return res, err
}

// grow opens workspaces up to ceil(k/4), each on a project of its own,
// starts kernels up to k round-robin over them (each runs `1+1` once) and
// opens terminals up to k/2, round-robin too.
func (b *bench) grow(k int) (*point, error) {
	p := &point{k: k, w: (k + 3) / 4, t: k / 2}
	p.starts.Name = fmt.Sprintf("kernel/start, K=%d", k)
	t0 := time.Now()
	for len(b.wsIDs) < p.w {
		dir := filepath.Join(b.base, "projects", strconv.Itoa(len(b.wsIDs)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, "main.py"), []byte("print('hello')\n"), 0o644); err != nil {
			return nil, err
		}
		var ws protocol.WorkspaceInfo
		if err := b.c.Call(protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: dir, Mode: protocol.WorkspaceModeOverlay}, &ws); err != nil {
			return nil, fmt.Errorf("workspace %d: %w", len(b.wsIDs)+1, err)
		}
		b.wsIDs = append(b.wsIDs, ws.WorkspaceID)
	}
	for len(b.kernels) < k {
		i := len(b.kernels)
		t1 := time.Now()
		res, err := startKernel(b.c, b.wsIDs[i%p.w])
		if err != nil {
			return nil, fmt.Errorf("kernel %d: %w", i+1, err)
		}
		p.starts.Add(time.Since(t1))
		b.kernels = append(b.kernels, res.KernelID)
		if err := b.onePlusOne(b.c, res.KernelID); err != nil {
			return nil, fmt.Errorf("kernel %d: %w", i+1, err)
		}
		if i == 0 {
			b.pyVersion, b.sandbox = res.LanguageInfo.Version, res.Sandbox
		}
		if i%50 == 49 {
			fmt.Fprintf(os.Stderr, "scale-bench:   %d kernels\n", i+1)
		}
	}
	for len(b.ptys) < p.t {
		i := len(b.ptys)
		var res protocol.PtyOpenResult
		err := b.c.Call(protocol.MethodPtyOpen, protocol.PtyOpenParams{WorkspaceID: b.wsIDs[i%p.w],
			Command: []string{"bash", "--noprofile", "--norc"}, Env: map[string]string{"PS1": "$ "}, Cols: 120, Rows: 40}, &res)
		if err != nil {
			return nil, fmt.Errorf("terminal %d: %w", i+1, err)
		}
		b.ptys = append(b.ptys, res.PtyID)
	}
	p.grow = time.Since(t0)
	return p, nil
}

// kind sorts the processes below a daemon.
func kind(p *benchutil.Proc) string {
	switch {
	case p.IsPython():
		return "python"
	case p.IsHelper():
		return "helper"
	}
	return "other"
}

// measure lets the kernels idle, then reads the daemon's /proc entries
// (before /metrics, whose connection would count as a descriptor) and
// go_goroutines, and the memory of everything below it.
func (b *bench) measure(p *point) error {
	time.Sleep(b.o.idle)
	pid := b.d.PID()
	var err error
	if p.fds, err = benchutil.FDs(pid); err != nil {
		return err
	}
	p.daemon = benchutil.MemOf(pid)
	under := benchutil.Scan().Under(pid)
	m, err := b.d.Metrics(context.Background())
	if err != nil {
		return err
	}
	g, ok1 := m["go_goroutines"]
	t, ok2 := m["go_threads"]
	if !ok1 || !ok2 {
		return errors.New("/metrics has no go_goroutines or go_threads")
	}
	p.goroutines, p.threads = int(g), int(t)
	names := map[string]int{}
	for _, q := range under {
		mem := benchutil.MemOf(q.PID)
		p.below.Add(mem)
		switch kind(q) {
		case "python":
			p.pythons.Add(mem)
		case "helper":
			p.helpers.Add(mem)
			if q.PPID == pid {
				p.sandboxes++
			}
			if b.helperExe == "" {
				b.helperExe, _ = os.Readlink(filepath.Join("/proc", strconv.Itoa(q.PID), "exe"))
			}
		default:
			p.others.Add(mem)
			names[q.Name()]++
		}
	}
	for n, k := range names {
		p.otherNames = append(p.otherNames, fmt.Sprintf("%d× %s", k, n))
	}
	sort.Strings(p.otherNames)
	if p.pythons.N != p.k {
		return fmt.Errorf("%d python processes below the daemon with %d kernels", p.pythons.N, p.k)
	}
	return nil
}

// quietCPU sends nothing for window and sums the CPU time the daemon and
// every process below it used meanwhile, from stat's utime+stime by kind
// of process and, exact to the nanosecond, from schedstat (a process new
// in the window counts whole; one that ended in it is missed).
func (b *bench) quietCPU(p *point, window time.Duration) {
	pid := b.d.PID()
	type key struct {
		pid   int
		start uint64
	}
	tree := func(ps benchutil.Procs) []*benchutil.Proc {
		if d := ps[pid]; d != nil {
			return append(ps.Under(pid), d)
		}
		return nil
	}
	before := benchutil.Scan()
	ran := map[key]time.Duration{}
	for _, q := range tree(before) {
		ran[key{q.PID, q.Start}], _ = benchutil.RunTime(q.PID)
	}
	time.Sleep(window)
	after := benchutil.Scan()
	p.window = window
	for _, q := range tree(after) {
		k := key{q.PID, q.Start}
		used := q.CPU
		if o := before[q.PID]; o != nil && o.Start == q.Start {
			used -= o.CPU
		}
		if r, ok := benchutil.RunTime(q.PID); ok {
			p.run += r - ran[k]
		}
		switch {
		case q.PID == pid:
			p.cpuDaemon += used
		case kind(q) == "python":
			p.cpuPy += used
		case kind(q) == "helper":
			p.cpuHelpers += used
		default:
			p.cpuEls += used
		}
	}
}

// roundTrips: `1+1` on the first kernel, kernel/list and daemon/stats,
// one at a time.
func (b *bench) roundTrips(p *point) error {
	p.exec.Name = fmt.Sprintf("kernel/execute `1+1`, K=%d", p.k)
	p.list.Name = fmt.Sprintf("kernel/list (%d kernels), K=%d", p.k, p.k)
	p.stats.Name = fmt.Sprintf("daemon/stats, K=%d", p.k)
	id := b.kernels[0]
	for i := range b.o.warmup + b.o.rtt {
		t0 := time.Now()
		if err := b.onePlusOne(b.c, id); err != nil {
			return err
		}
		if i >= b.o.warmup {
			p.exec.Add(time.Since(t0))
		}
	}
	for i := range 5 + b.o.calls {
		var res protocol.KernelListResult
		t0 := time.Now()
		if err := b.c.Call(protocol.MethodKernelList, protocol.KernelListParams{}, &res); err != nil {
			return err
		}
		if i >= 5 {
			p.list.Add(time.Since(t0))
		}
		if len(res.Kernels) != p.k {
			return fmt.Errorf("kernel/list: %d kernels, want %d", len(res.Kernels), p.k)
		}
	}
	for i := range 5 + b.o.calls {
		var res protocol.DaemonStats
		t0 := time.Now()
		if err := b.c.Call(protocol.MethodDaemonStats, protocol.DaemonStatsParams{}, &res); err != nil {
			return err
		}
		if i >= 5 {
			p.stats.Add(time.Since(t0))
		}
		if res.Kernels != p.k || res.Ptys != p.t {
			return fmt.Errorf("daemon/stats: %d kernels and %d terminals, want %d and %d", res.Kernels, res.Ptys, p.k, p.t)
		}
	}
	return nil
}

// burst starts o.burst kernels at once, each in a new scratch workspace,
// then as many back to back, timing each kernel/start; each batch runs
// `1+1` in every kernel (untimed) and is shut down before the next.
func (b *bench) burst() error {
	n := b.o.burst
	b.burstConc.Name = fmt.Sprintf("%d at once", n)
	b.burstSeq.Name = fmt.Sprintf("%d back to back", n)
	finish := func(ids []string) error {
		var errs []error
		for _, id := range ids {
			if id == "" {
				continue
			}
			if err := b.onePlusOne(b.c, id); err != nil {
				errs = append(errs, err)
			}
			errs = append(errs, b.c.Call(protocol.MethodKernelShutdown, protocol.KernelIDParams{KernelID: id}, nil))
		}
		return errors.Join(errs...)
	}

	// The scratch workspaces' sandbox pool launches its next sandbox once
	// starts are quiet: let it, before each batch.
	time.Sleep(2 * time.Second)
	ids := make([]string, n)
	durs := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-gate
			t0 := time.Now()
			res, err := startKernel(b.c, "")
			durs[i], ids[i], errs[i] = time.Since(t0), res.KernelID, err
		})
	}
	close(gate)
	wg.Wait()
	err := errors.Join(errs...)
	if err2 := finish(ids); err == nil {
		err = err2
	}
	if err != nil {
		return fmt.Errorf("%d at once: %w", n, err)
	}
	for _, d := range durs {
		b.burstConc.Add(d)
	}

	time.Sleep(2 * time.Second)
	ids = ids[:0]
	for i := range n {
		t0 := time.Now()
		res, err := startKernel(b.c, "")
		if err != nil {
			_ = finish(ids)
			return fmt.Errorf("back to back, kernel %d: %w", i+1, err)
		}
		b.burstSeq.Add(time.Since(t0))
		ids = append(ids, res.KernelID)
	}
	if err := finish(ids); err != nil {
		return fmt.Errorf("back to back: %w", err)
	}
	return nil
}

// takeDown shuts every kernel down, closes every terminal and workspace.
func (b *bench) takeDown() error {
	var errs []error
	for _, id := range b.kernels {
		errs = append(errs, b.c.Call(protocol.MethodKernelShutdown, protocol.KernelIDParams{KernelID: id}, nil))
	}
	for _, id := range b.ptys {
		errs = append(errs, b.c.Call(protocol.MethodPtyClose, protocol.PtyIDParams{PtyID: id}, nil))
	}
	for _, id := range b.wsIDs {
		errs = append(errs, b.c.Call(protocol.MethodWorkspaceClose, protocol.WorkspaceCloseParams{WorkspaceID: id, Discard: true}, nil))
	}
	b.kernels, b.ptys, b.wsIDs = nil, nil, nil
	return errors.Join(errs...)
}
