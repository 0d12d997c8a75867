//go:build linux

// Command soak is cellbox's soak and leak check. It starts the real binary
// as `cellbox serve --listen 127.0.0.1:0` with a state dir and an
// XDG_RUNTIME_DIR of its own, and runs 16 websocket clients against it for
// -duration. Each client is an editor with its own workspace (an overlay on
// a project dir of its own), a python, a javascript and a bash kernel, a
// terminal and an fs/watch, and loops: the kernels print numbered lines and
// write a file each while fs/write writes a fourth and the terminal runs a
// command; every kernel/output must arrive before its execution's response,
// in seq order without a gap, its stdout exactly what was printed; every
// file's fs/didChange must arrive; workspace/changes must list the four
// files, workspace/commit of two must put them in the project and
// workspace/discard of the other two must drop them. Every request must be
// answered, none with an error.
//
// Before the clients start (after one warm-up client has run a round and
// left, so that one-time initialisation is not counted) and after they have
// shut their kernels, closed their terminals and workspaces and
// disconnected, it measures the daemon: open descriptors, goroutines (from
// GET /metrics), RSS, processes descended from it, the lines of its own
// mountinfo, and the files under its state dir. The after figures are
// polled until they are back within the limits (or -settle passes). It
// prints the counts and a before/after table, and exits non-zero when a
// request went unanswered or was answered with an error, an output was
// lost or out of order, a check failed, or a figure crossed its limit:
//
//	descriptors    +0        goroutines   +5
//	processes      +0        mounts       +0
//	workspace files under the state dir   +0
//	Go heap live   +16 MiB   RSS          +256 MiB (-rss-limit)
//
// Last it stops the daemon with SIGTERM, which must exit 0, remove its
// runtime file and leave none of its processes behind. bench/soak.sh runs
// it; `make test` runs it for 60 s (soak_test.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cellbox-dev/cellbox/bench/internal/benchutil"
	"github.com/cellbox-dev/cellbox/protocol"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var o options
	fs := flag.NewFlagSet("soak", flag.ExitOnError)
	fs.StringVar(&o.cellbox, "cellbox", "", "the cellbox `binary` (default: build ./cmd/cellbox with CGO_ENABLED=0 into a temp dir)")
	fs.DurationVar(&o.duration, "duration", 10*time.Minute, "how long the clients loop")
	fs.IntVar(&o.clients, "clients", 16, "websocket clients, each with a workspace, three kernels and a terminal")
	fs.DurationVar(&o.settle, "settle", 30*time.Second, "how long the after figures may take to come back within their limits")
	fs.Int64Var(&o.rssLimitMiB, "rss-limit", 256, "the daemon's RSS growth allowed, in `MiB`")
	fs.BoolVar(&o.keep, "keep", false, "keep the temp dir (state dir, projects) for a look")
	_ = fs.Parse(os.Args[1:])
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

type options struct {
	cellbox     string
	duration    time.Duration
	clients     int
	settle      time.Duration
	rssLimitMiB int64
	keep        bool
}

// Limits of the leak check, after minus before.
const (
	fdSlack        = 0
	goroutineSlack = 5
	procSlack      = 0
	mountSlack     = 0
	wsFileSlack    = 0
	heapSlackMiB   = 16
)

// errFailed is the soak's verdict when the daemon ran but a check failed;
// the report says which.
var errFailed = errors.New("FAIL")

// errUnavailable: the host lacks an interpreter the soak needs.
var errUnavailable = errors.New("unavailable")

type methodCount struct{ sent, answered, errors, unanswered int64 }

// soak is one run and its counters.
type soak struct {
	o    options
	d    *benchutil.Daemon
	base string

	mu       sync.Mutex
	methods  map[string]*methodCount
	failures []string
	nfail    int

	wsTx, wsRx                                   atomic.Int64
	rounds, executions, lines, outputs           atomic.Int64
	stdoutBytes, misordered, lostOutput          atomic.Int64
	fsWrites, watchEvents, overflows, lostEvents atomic.Int64
	ptyRounds, ptyBytes, ptyGaps, lostPty        atomic.Int64
	committed, discarded                         atomic.Int64
	setUpFailed                                  atomic.Int64
	padBytes                                     atomic.Int64 // of the notifications that make the daemon collect
}

func (s *soak) count(method string, f func(*methodCount)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.methods[method]
	if m == nil {
		m = &methodCount{}
		s.methods[method] = m
	}
	f(m)
}

// fail records a failed check; the first 20 are reported.
func (s *soak) fail(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nfail++
	if len(s.failures) < 20 {
		s.failures = append(s.failures, msg)
	}
}

func run(ctx context.Context, o options, w io.Writer) (err error) {
	if o.clients < 1 || o.duration <= 0 {
		return errors.New("need -clients >= 1 and -duration > 0")
	}
	base, err := os.MkdirTemp("", "cellbox-soak-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintf(os.Stderr, "soak: keeping %s\n", base)
	} else {
		defer benchutil.RemoveAll(base)
	}
	if o.cellbox == "" {
		if o.cellbox, err = buildCellbox(filepath.Join(base, "bin")); err != nil {
			return err
		}
	}
	s := &soak{o: o, base: base, methods: map[string]*methodCount{}}
	if s.d, err = benchutil.Start(benchutil.Options{Bin: o.cellbox, Dir: filepath.Join(base, "daemon")}); err != nil {
		return fmt.Errorf("start cellbox: %w", err)
	}
	stopped := false
	defer func() {
		if !stopped {
			s.d.Kill()
		}
	}()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "soak: "+format+"\n", args...) }

	// Warm-up: one client, one round, gone.
	logf("warm-up round...")
	if err := s.warmUp(); err != nil {
		return err
	}
	if _, err := s.collect(ctx); err != nil {
		return err
	}
	statsBefore, err := s.stats()
	if err != nil {
		return err
	}
	before, err := s.baseline(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	warmFailures := s.nfail
	s.mu.Unlock()
	if warmFailures > 0 {
		s.report(w, before, before, statsBefore, statsBefore, 0, 0, 0, nil)
		return fmt.Errorf("%w: the warm-up round failed", errFailed)
	}

	logf("%d clients for %v...", o.clients, o.duration)
	t0 := time.Now()
	deadline := t0.Add(o.duration)
	var wg sync.WaitGroup
	for n := 1; n <= o.clients; n++ {
		wg.Go(func() { s.client(ctx, n, deadline) })
	}
	wg.Wait()
	elapsed := time.Since(t0)
	logf("clients done after %.1f s; settling...", elapsed.Seconds())

	gcSent, err := s.collect(ctx)
	if err != nil {
		return err
	}
	after, settled, leaks, err := s.settle(ctx, before)
	if err != nil {
		return err
	}
	// The daemon's own count, polled as the figures were: a client's
	// websocket close may still be on its way on a busy machine.
	clean := func(st protocol.DaemonStats) bool {
		return st.Kernels == 0 && st.Ptys == 0 && st.Watches == 0 && st.Workspaces == statsBefore.Workspaces && st.Connections == 1
	}
	var statsAfter protocol.DaemonStats
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if statsAfter, err = s.stats(); err != nil {
			return err
		}
		if clean(statsAfter) || time.Now().After(deadline) {
			break
		}
	}
	if !clean(statsAfter) {
		leaks = append(leaks, fmt.Sprintf("daemon/stats after: %d kernels, %d ptys, %d watches, %d workspaces (before %d), %d connections (the one asking)",
			statsAfter.Kernels, statsAfter.Ptys, statsAfter.Watches, statsAfter.Workspaces, statsBefore.Workspaces, statsAfter.Connections))
	}

	// The daemon's exit: status 0, its runtime file removed, none of its
	// processes left.
	tree := benchutil.Scan().Under(s.d.PID())
	stopped = true
	if err := stop(s.d); err != nil {
		leaks = append(leaks, err.Error())
	}
	if left := leftover(tree, 30*time.Second); len(left) > 0 {
		leaks = append(leaks, fmt.Sprintf("%d of the daemon's processes outlived it: %s", len(left), strings.Join(left, "; ")))
	}
	s.report(w, before, after, statsBefore, statsAfter, elapsed, settled, gcSent, leaks)
	s.mu.Lock()
	nfail := s.nfail
	s.mu.Unlock()
	if nfail > 0 || len(leaks) > 0 {
		return fmt.Errorf("%w: %d failed checks, %d leaks (see the report)", errFailed, nfail, len(leaks))
	}
	return nil
}

// client runs one client until deadline. A client whose setup failed
// still tears down what it got.
func (s *soak) client(ctx context.Context, n int, deadline time.Time) {
	project, err := s.project(fmt.Sprintf("c%02d", n))
	if err != nil {
		s.fail(err.Error())
		return
	}
	c, err := newClient(s, n, project)
	if err != nil {
		s.fail(fmt.Sprintf("client %d: %v", n, err))
		return
	}
	if err := c.setUp(); err != nil {
		s.setUpFailed.Add(1)
	} else {
		for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
			c.round(i)
		}
	}
	c.tearDown()
}

func (s *soak) warmUp() error {
	project, err := s.project("warmup")
	if err != nil {
		return err
	}
	c, err := newClient(s, 0, project)
	if err != nil {
		return err
	}
	var init protocol.InitializeResult
	if err := c.call(protocol.MethodInitialize, protocol.InitializeParams{ProtocolVersion: 1}, &init); err != nil {
		c.conn.Close()
		return err
	}
	if sb := init.Capabilities.Sandbox; !sb.UserNamespaces || !sb.Overlay {
		c.conn.Close()
		return fmt.Errorf("%w: the sandbox: %s", errUnavailable, sb.Reason)
	}
	for _, l := range init.Capabilities.Languages {
		for _, want := range languages {
			if l.ID == want && !l.Available {
				c.conn.Close()
				return fmt.Errorf("%w: %s: %s", errUnavailable, l.ID, l.Reason)
			}
		}
	}
	c.conn.Close()
	if c, err = newClient(s, 0, project); err != nil {
		return err
	}
	if err := c.setUp(); err == nil {
		c.round(0)
	}
	c.tearDown()
	return nil
}

// project makes a project dir with the dirs the rounds write into.
func (s *soak) project(name string) (string, error) {
	p := filepath.Join(s.base, "projects", name)
	for _, d := range []string{"k", "fsw"} {
		if err := os.MkdirAll(filepath.Join(p, d), 0o755); err != nil {
			return "", err
		}
	}
	return p, os.WriteFile(filepath.Join(p, "README"), []byte("a soak project\n"), 0o644)
}

// stats asks daemon/stats on a connection of its own, closed after.
func (s *soak) stats() (protocol.DaemonStats, error) {
	var st protocol.DaemonStats
	c, err := newClient(s, -1, "")
	if err != nil {
		return st, err
	}
	defer c.tearDown()
	if err := c.call(protocol.MethodInitialize, protocol.InitializeParams{ProtocolVersion: 1}, nil); err != nil {
		return st, err
	}
	return st, c.call(protocol.MethodDaemonStats, protocol.DaemonStatsParams{}, &st)
}

// baseline polls the daemon until five samples 100 ms apart agree (the
// pre-launched sandbox is back, the warm-up connection gone).
func (s *soak) baseline(ctx context.Context) (sample, error) {
	var last sample
	same := 0
	deadline := time.Now().Add(s.o.settle)
	for {
		cur, err := measure(ctx, s.d)
		if err != nil {
			return cur, err
		}
		if cur.fds == last.fds && cur.goroutines == last.goroutines && cur.procs == last.procs && cur.mounts == last.mounts {
			same++
		} else {
			same = 0
		}
		last = cur
		if same >= 4 || time.Now().After(deadline) {
			return cur, nil
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return cur, err
		}
	}
}

// collect makes the daemon run a garbage collection, so that its heap
// goal says what its heap holds live (the goal is twice the heap live at
// the last collection): it sends 512 KiB notifications of a method nobody
// handles ($/ notifications are ignored) until /metrics counts one more
// cycle. The Go runtime collects on its own only when the heap grows, or
// after 2 minutes.
func (s *soak) collect(ctx context.Context) (int, error) {
	m0, err := s.d.Metrics(ctx)
	if err != nil {
		return 0, err
	}
	c, err := newClient(s, -1, "")
	if err != nil {
		return 0, err
	}
	defer c.tearDown()
	if err := c.call(protocol.MethodInitialize, protocol.InitializeParams{ProtocolVersion: 1}, nil); err != nil {
		return 0, err
	}
	pad := struct {
		Pad string `json:"pad"`
	}{strings.Repeat("x", 512<<10)}
	for n := 1; n <= 4000; n++ {
		if err := c.conn.Notify(ctx, "$/cellboxSoakGarbage", pad); err != nil {
			return n, err
		}
		s.padBytes.Add(int64(len(pad.Pad)))
		m, err := s.d.Metrics(ctx)
		if err != nil {
			return n, err
		}
		if m["go_gc_duration_seconds_count"] > m0["go_gc_duration_seconds_count"] {
			return n, nil
		}
	}
	return 0, errors.New("the daemon ran no garbage collection after 2 GiB of notifications")
}

// settle polls the daemon every 100 ms until every figure is within its
// limit (making it collect garbage again each second while its live heap
// is over), or -settle passes; it returns the last sample, how long it took
// and the figures over their limits.
func (s *soak) settle(ctx context.Context, before sample) (sample, time.Duration, []string, error) {
	t0 := time.Now()
	next, lastGC := time.Second, time.Now()
	for {
		cur, err := measure(ctx, s.d)
		if err != nil {
			return cur, 0, nil, err
		}
		leaks := s.judge(before, cur)
		if len(leaks) > 0 && time.Since(t0) >= next {
			fmt.Fprintf(os.Stderr, "soak: settling %.0f s: %s\n", time.Since(t0).Seconds(), strings.Join(leaks, "; "))
			next += 10 * time.Second
		}
		if len(leaks) == 0 || time.Since(t0) > s.o.settle {
			return cur, time.Since(t0), leaks, nil
		}
		// The heap goal changes only at a collection, and what the clients
		// held may be let go of after one: collect again.
		if cur.nextGC-before.nextGC > heapSlackMiB<<21 && time.Since(lastGC) >= time.Second {
			if _, err := s.collect(ctx); err != nil {
				return cur, 0, nil, err
			}
			lastGC = time.Now()
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return cur, 0, nil, err
		}
	}
}

// judge lists the figures of after over their limits.
func (s *soak) judge(before, after sample) []string {
	var out []string
	over := func(what string, d, limit int64) {
		if d > limit {
			out = append(out, fmt.Sprintf("%s grew by %d (limit +%d)", what, d, limit))
		}
	}
	over("descriptors", int64(after.fds-before.fds), fdSlack)
	over("goroutines", int64(after.goroutines-before.goroutines), goroutineSlack)
	over("processes", int64(after.procs-before.procs), procSlack)
	over("mounts", int64(after.mounts-before.mounts), mountSlack)
	over("workspace files under the state dir", int64(after.wsFiles-before.wsFiles), wsFileSlack)
	over("RSS (KiB)", after.rssKiB-before.rssKiB, s.o.rssLimitMiB<<10)
	over("Go heap live at the last GC (KiB)", (after.nextGC-before.nextGC)>>11, heapSlackMiB<<10)
	if after.procs != before.procs {
		out = append(out, "processes now: "+strings.Join(after.procNames, "; "))
	}
	return out
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// buildCellbox builds the daemon as releases are built (no cgo) into dir.
// Its name holds "cellbox": a sandbox init whose parent does not look like
// cellbox is killed (workspace/cleanup_linux.go).
func buildCellbox(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "cellbox")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/cellbox-dev/cellbox/cmd/cellbox")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build cellbox: %v\n%s", err, out)
	}
	return bin, nil
}

func (s *soak) report(w io.Writer, before, after sample, sb, sa protocol.DaemonStats, elapsed, settled time.Duration, gcSent int, leaks []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(w, "== cellbox soak: %d clients (a python, a javascript and a bash kernel, a terminal, a watch each) for %v, %d cores, load %s\n",
		s.o.clients, s.o.duration, runtime.NumCPU(), loadAvg())
	var tot methodCount
	names := make([]string, 0, len(s.methods))
	for m, c := range s.methods {
		names = append(names, m)
		tot.sent += c.sent
		tot.answered += c.answered
		tot.errors += c.errors
		tot.unanswered += c.unanswered
	}
	sort.Strings(names)
	secs := elapsed.Seconds()
	if secs <= 0 {
		secs = 1
	}
	fmt.Fprintf(w, "requests      %d sent, %d answered, %d error answers, %d unanswered (%.0f/s during the loop)\n",
		tot.sent, tot.answered, tot.errors, tot.unanswered, float64(tot.sent)/secs)
	fmt.Fprintf(w, "rounds        %d (%.1f/s); clients whose setup failed %d\n", s.rounds.Load(), float64(s.rounds.Load())/secs, s.setUpFailed.Load())
	fmt.Fprintf(w, "executions    %d, %d numbered lines in %d kernel/output (%s of stdout); lost or altered %d, out of order %d\n",
		s.executions.Load(), s.lines.Load(), s.outputs.Load(), size(s.stdoutBytes.Load()), s.lostOutput.Load(), s.misordered.Load())
	fmt.Fprintf(w, "files         %d fs/write, %d kernel writes; %d fs/didChange, %d overflows, %d writes without an event\n",
		s.fsWrites.Load(), s.executions.Load(), s.watchEvents.Load(), s.overflows.Load(), s.lostEvents.Load())
	fmt.Fprintf(w, "workspace     %d paths committed, %d discarded\n", s.committed.Load(), s.discarded.Load())
	fmt.Fprintf(w, "terminals     %d commands read back (%s of pty/output); gaps %d, lost %d\n",
		s.ptyRounds.Load(), size(s.ptyBytes.Load()), s.ptyGaps.Load(), s.lostPty.Load())
	fmt.Fprintf(w, "websocket     %s sent (and %s of padding that made the daemon collect garbage), %s received\n",
		size(s.wsTx.Load()-s.padBytes.Load()), size(s.padBytes.Load()), size(s.wsRx.Load()))
	fmt.Fprintf(w, "failed checks %d\n\n", s.nfail)

	fmt.Fprintf(w, "%-22s %9s %9s %9s %11s\n", "method", "sent", "answered", "errors", "unanswered")
	for _, m := range names {
		c := s.methods[m]
		fmt.Fprintf(w, "%-22s %9d %9d %9d %11d\n", m, c.sent, c.answered, c.errors, c.unanswered)
	}
	fmt.Fprintln(w)

	fmt.Fprintf(w, "%-34s %10s %10s %10s %10s\n", "the daemon", "before", "after", "delta", "limit")
	row := func(what string, b, a int64, limit string) {
		fmt.Fprintf(w, "%-34s %10d %10d %+10d %10s\n", what, b, a, a-b, limit)
	}
	row("open descriptors", int64(before.fds), int64(after.fds), fmt.Sprintf("+%d", fdSlack))
	row("goroutines", int64(before.goroutines), int64(after.goroutines), fmt.Sprintf("+%d", goroutineSlack))
	row("OS threads", int64(before.threads), int64(after.threads), "")
	row("RSS (KiB)", before.rssKiB, after.rssKiB, fmt.Sprintf("+%d MiB", s.o.rssLimitMiB))
	row("Go heap in use (KiB)", before.heapInuse>>10, after.heapInuse>>10, "")
	row("Go heap free, not released (KiB)", before.heapFree>>10, after.heapFree>>10, "")
	row("Go heap live at the last GC (KiB)", before.nextGC>>11, after.nextGC>>11, fmt.Sprintf("+%d MiB", heapSlackMiB))
	row("GC cycles", before.gcs, after.gcs, "")
	row("processes descended from it", int64(before.procs), int64(after.procs), fmt.Sprintf("+%d", procSlack))
	row("mounts (its own mountinfo)", int64(before.mounts), int64(after.mounts), fmt.Sprintf("+%d", mountSlack))
	row("files under the state dir", int64(before.stateFiles), int64(after.stateFiles), "")
	row("  of them under workspaces/", int64(before.wsFiles), int64(after.wsFiles), fmt.Sprintf("+%d", wsFileSlack))
	row("bytes under the state dir", before.stateBytes, after.stateBytes, "")
	row("daemon/stats kernels", int64(sb.Kernels), int64(sa.Kernels), "0")
	row("daemon/stats ptys", int64(sb.Ptys), int64(sa.Ptys), "0")
	row("daemon/stats watches", int64(sb.Watches), int64(sa.Watches), "0")
	row("daemon/stats workspaces", int64(sb.Workspaces), int64(sa.Workspaces), "+0")
	fmt.Fprintf(w, "settled in %.1f s (polled every 100 ms); a GC after %d notifications of 512 KiB\n", settled.Seconds(), gcSent)
	fmt.Fprintf(w, "daemon/stats after: %d executions (%d ok, %d error), latency p50 %.2f ms, p99 %.2f ms\n",
		sa.Executions.Total, sa.Executions.Ok, sa.Executions.Error, sa.LatencyMs.P50, sa.LatencyMs.P99)

	for _, l := range leaks {
		fmt.Fprintln(w, "LEAK:", l)
	}
	for _, f := range s.failures {
		fmt.Fprintln(w, "FAILED:", f)
	}
	if s.nfail > len(s.failures) {
		fmt.Fprintf(w, "FAILED: ... and %d more\n", s.nfail-len(s.failures))
	}
	if s.nfail == 0 && len(leaks) == 0 && tot.sent == tot.answered {
		fmt.Fprintln(w, "PASS")
	} else {
		fmt.Fprintln(w, "FAIL")
	}
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
