//go:build linux

// Command kernel is issue 5's benchmark: cellbox's python kernel side by
// side with Jupyter's (Debian's ipykernel through jupyter_client), both on
// this machine in one run, interleaved. It measures, for each side: cold
// start to the first result; the round trip of `1+1` (p50/p99 over 1,000);
// the time to deliver all output of a 100,000-line print (with Python's
// own print-to-pipe time as the floor); the interrupt latency of
// `while True: pass`; the RSS of an idle kernel; and, for cellbox, 100 idle
// kernels and the daemon's own RSS with them.
//
// The cellbox side is the real binary, `cellbox serve --stdio`, with a
// state dir of its own, spoken to over JSON-RPC as an editor does. The
// Jupyter side is jupyter_side.py (embedded), run by /usr/bin/python3. It
// prints one table (figure, cellbox, jupyter, ratio, aim, met?) and the
// raw numbers. bench/kernel.sh builds it and runs it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cellbox-dev/cellbox/bench/internal/benchutil"
	"github.com/cellbox-dev/cellbox/protocol"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kernel-bench:", err)
		os.Exit(1)
	}
}

type options struct {
	cellbox, python, label string
	language               string // python, or jupyter:NAME (hosted.go)
	n, warmup, rtt         int
	interrupts, kernels    int
	settle                 time.Duration
	shared                 bool
}

const (
	floodLines = 100000
	floodCode  = "for i in range(100000): print(i)"
	// floorCode is the same loop by python itself, timing itself.
	floorCode = "import sys, time\nt = time.perf_counter_ns()\nfor i in range(100000): print(i)\nsys.stdout.flush()\nsys.stderr.write('%d\\n' % (time.perf_counter_ns() - t))\n"
)

func run(args []string, stdout io.Writer) error {
	var o options
	fs := flag.NewFlagSet("kernel-bench", flag.ContinueOnError)
	fs.StringVar(&o.cellbox, "cellbox", "", "the cellbox `binary` (built with CGO_ENABLED=0; required)")
	fs.StringVar(&o.python, "python", "/usr/bin/python3", "the python `binary` with Debian's jupyter_client and ipykernel, and the floor's")
	fs.IntVar(&o.n, "n", 20, "measured cold starts and floods, per case")
	fs.IntVar(&o.warmup, "warmup", 3, "unmeasured cold starts and floods first (and 100 round trips)")
	fs.IntVar(&o.rtt, "rtt", 1000, "measured round trips of 1+1, per side")
	fs.IntVar(&o.interrupts, "interrupts", 30, "measured interrupts, per side")
	fs.IntVar(&o.kernels, "kernels", 100, "idle python kernels started at once")
	fs.DurationVar(&o.settle, "settle", 10*time.Millisecond, "how long `while True: pass` runs after its busy status before the interrupt")
	fs.BoolVar(&o.shared, "shared", true, "also start -kernels kernels in one workspace")
	fs.StringVar(&o.label, "label", "", "`text` naming this run in the output")
	fs.StringVar(&o.language, "language", "python", "the cellbox `language` measured: python, or jupyter:NAME, a Python kernelspec NAME hosted in a cellbox sandbox, measured against the same kernel bare (hosted.go)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.cellbox == "" || o.n < 1 || o.rtt < 10 || o.interrupts < 1 || o.kernels < 1 {
		return errors.New("need -cellbox, and -n, -interrupts, -kernels >= 1, -rtt >= 10")
	}

	base, err := os.MkdirTemp("", "cellbox-kernel-bench-")
	if err != nil {
		return err
	}
	defer benchutil.RemoveAll(base)
	b := &bench{o: o, base: base, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5)), expect: floodText()}
	b.project = filepath.Join(base, "project")
	if err := os.MkdirAll(b.project, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(b.project, "hello.py"), []byte("print('hello')\n"), 0o644); err != nil {
		return err
	}
	if b.d, err = startDaemon(o.cellbox, base); err != nil {
		return fmt.Errorf("start cellbox: %w", err)
	}
	defer func() { b.d.close() }() // the memory step replaces b.d
	b.d.c.language = o.language
	if err := b.checkLanguage(); err != nil {
		return err
	}
	if b.j, err = benchutil.StartJupyter(o.python, jupyterSide, filepath.Join(base, "jupyter")); err != nil {
		return fmt.Errorf("start the jupyter side: %w", err)
	}
	defer b.j.Close()
	b.j.Kernel = b.bareKernel()
	if err := b.j.Do(map[string]any{"op": "versions"}, &b.jv); err != nil {
		return err
	}

	b.loadStart = loadAvg()
	if b.hosted() {
		return b.runHosted(stdout)
	}
	steps := []struct {
		what string
		f    func() error
	}{
		{fmt.Sprintf("cold starts: %d+%d of each case", o.warmup, o.n), b.coldStarts},
		{fmt.Sprintf("round trips: 100+%d of each side", o.rtt), b.roundTrips},
		{fmt.Sprintf("floods: %d+%d of each case", o.warmup, o.n), b.floods},
		{fmt.Sprintf("interrupts: %d of each side", o.interrupts), b.interrupts},
		{fmt.Sprintf("memory: an idle kernel of each side, then %d idle cellbox kernels", o.kernels), b.memory},
	}
	for _, s := range steps {
		fmt.Fprintf(os.Stderr, "kernel-bench: %s...\n", s.what)
		t0 := time.Now()
		if err := s.f(); err != nil {
			return fmt.Errorf("%s: %w%s", s.what, err, b.d.stderr.Show())
		}
		fmt.Fprintf(os.Stderr, "kernel-bench:   %.1f s\n", time.Since(t0).Seconds())
	}
	b.report(stdout)
	return nil
}

type bench struct {
	o       options
	base    string
	project string
	rng     *rand.Rand
	d       *daemon
	j       *benchutil.Jupyter
	jv      struct{ Python, Ipykernel, Jupyter_client, Zmq, Pyzmq string }
	expect  string

	cbVersion string
	cbSandbox protocol.SandboxInfo
	jVersion  string
	wsID      string
	poolTaken time.Time
	mainID    string // the cellbox kernel of the round trips, floods and interrupts

	// cold starts
	cbCold, cbColdStart, cbShutdown       benchutil.Series
	cbColdWS, cbColdWSStart, cbShutdownWS benchutil.Series
	jCold, jInfo, jIopub                  benchutil.Series
	jNudges                               int
	cbFirstInt, jFirstInt                 benchutil.Series
	// round trips
	cbRTT, jRTT, jRaw benchutil.Series
	// floods
	cbFlood, cbFloodDaemon, jFlood, floorWhole, floorLoop, pyPass benchutil.Series
	cbFloodInside, jFloodInside                                   benchutil.Series
	cbFloodDaemonCPU, cbFloodClientCPU, cbFloodKernelCPU          benchutil.Series
	cbFloodNotes, jFloodMsgs                                      int
	// interrupts
	cbInt, cbIntCall, jInt, jIntSignal benchutil.Series
	cbIntNoBusy, jIntNoBusy            int
	cbLost, jLost                      int // lost interrupts, counted as lostAfter
	cbFirstLost, jFirstLost            int
	// memory
	mm memResults

	cases     []*bcase // every case run, for their failures
	loadStart string
	daemons   int // started after the first
}

// A bcase is run once per iteration of its step.
type bcase struct {
	name  string
	run   func(record bool) error
	errs  int // failed runs, not measured
	first error
}

// each runs the cases once per iteration, in a new random order, warmup
// iterations unrecorded first. A run that fails is counted, reported and
// not measured; the step goes on unless a case fails often.
func (b *bench) each(iters int, cases ...*bcase) error {
	order := make([]int, len(cases))
	for i := range order {
		order[i] = i
	}
	b.cases = append(b.cases, cases...)
	for it := -b.o.warmup; it < iters; it++ {
		b.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, k := range order {
			c := cases[k]
			if err := c.run(it >= 0); err != nil {
				c.errs++
				if c.first == nil {
					c.first = err
				}
				fmt.Fprintf(os.Stderr, "kernel-bench:   %s failed: %v\n", c.name, err)
				if c.errs > iters/10+2 {
					return fmt.Errorf("%s: %d failures, the first: %w", c.name, c.errs, c.first)
				}
			}
		}
	}
	return nil
}

// coldStarts: a new kernel to its first `1+1` result, then one interrupt
// (the kernel's first) and shutdown; cellbox in a fresh scratch workspace
// (the default) and in an already-open workspace, Jupyter from launch.
func (b *bench) coldStarts() error {
	var ws protocol.WorkspaceInfo
	if err := b.d.c.call(protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: b.project, Name: "bench"}, &ws); err != nil {
		return err
	}
	b.wsID = ws.WorkspaceID
	b.cbColdStart.Name = "  of which kernel/start"
	b.cbColdWSStart.Name = "  of which kernel/start"
	err := b.each(b.o.n,
		&bcase{name: "cellbox cold start, scratch workspace", run: func(record bool) error {
			// A scratch workspace's sandbox comes from the daemon's pool,
			// which launches the next one 250 ms after one is taken;
			// kernels start at a person's pace, so give it time (untimed).
			time.Sleep(time.Until(b.poolTaken.Add(400 * time.Millisecond)))
			b.poolTaken = time.Now()
			return b.cbColdOnce("", record, &b.cbCold, &b.cbColdStart, &b.cbShutdown)
		}},
		&bcase{name: "cellbox cold start, open workspace", run: func(record bool) error {
			return b.cbColdOnce(b.wsID, record, &b.cbColdWS, &b.cbColdWSStart, &b.cbShutdownWS)
		}},
		&bcase{name: "jupyter cold start", run: func(record bool) error {
			var a struct {
				KernelInfoMs, IopubMs, FirstResultMs float64
				Nudges                               int
				Version                              string
			}
			if err := b.j.Do(map[string]any{"op": "cold", "k": "cold"}, &a); err != nil {
				return err
			}
			b.jVersion = a.Version
			var ia jInterrupt
			err := b.j.Do(map[string]any{"op": "interrupt", "k": "cold", "settleMs": b.settleMs()}, &ia)
			if err == nil {
				err = ia.check()
			}
			lost := isLost(err)
			if lost {
				err = nil
			}
			if err2 := b.j.Do(map[string]any{"op": "shutdown", "k": "cold"}, nil); err == nil {
				err = err2
			}
			if err != nil {
				return err
			}
			if record {
				b.jInfo.Add(msDur(a.KernelInfoMs))
				b.jIopub.Add(msDur(a.IopubMs))
				b.jCold.Add(msDur(a.FirstResultMs))
				b.jNudges += a.Nudges
				if lost {
					b.jFirstLost++
					b.jFirstInt.Add(lostAfter)
				} else {
					b.jFirstInt.Add(msDur(ia.Ms))
				}
			}
			return nil
		}})
	if err != nil {
		return err
	}
	// Close it: the memory figures start from a daemon with no workspace.
	return b.d.c.call(protocol.MethodWorkspaceClose, protocol.WorkspaceCloseParams{WorkspaceID: b.wsID}, nil)
}

func (b *bench) cbColdOnce(ws string, record bool, first, start, shutdown *benchutil.Series) error {
	c := b.d.c
	t0 := time.Now()
	res, err := c.startKernel(ws)
	if err != nil {
		return err
	}
	t1 := time.Now()
	err = c.onePlusOne(res.KernelID)
	t2 := time.Now()
	var s interruptSample
	lost := false
	if err == nil {
		s, err = c.interrupt(res.KernelID, b.o.settle)
		if lost = isLost(err); lost {
			fmt.Fprintf(os.Stderr, "kernel-bench:   the first interrupt of a new cellbox kernel: %v\n", err)
			err = nil
		}
	}
	t3 := time.Now()
	if err2 := c.shutdownKernel(res.KernelID); err == nil {
		err = err2
	}
	if err != nil {
		return err
	}
	if record {
		first.Add(t2.Sub(t0))
		start.Add(t1.Sub(t0))
		shutdown.Add(time.Since(t3))
		if lost {
			b.cbFirstLost++
			b.cbFirstInt.Add(lostAfter)
		} else {
			b.cbFirstInt.Add(s.total)
		}
	}
	b.cbVersion = res.LanguageInfo.Version
	if ws == "" {
		b.cbSandbox = res.Sandbox // the default: a scratch workspace's
	}
	return nil
}

// isLost: err says an interrupt was lost (the loop ran on; a later one
// stopped it). Such an interrupt counts as lostAfter, a lower bound.
func isLost(err error) bool {
	return err != nil && (errors.Is(err, errLost) || strings.Contains(err.Error(), "interrupt lost"))
}

func (b *bench) settleMs() float64 { return float64(b.o.settle) / float64(time.Millisecond) }

// jInterrupt is the jupyter side's answer to interrupt.
type jInterrupt struct {
	Ms, SignalMs  float64
	BusySeen      bool
	Status, Ename string
}

func (a jInterrupt) check() error {
	if a.Status != "error" || a.Ename != "KeyboardInterrupt" {
		return fmt.Errorf("while True: pass ended %s %s after the interrupt, want a KeyboardInterrupt", a.Status, a.Ename)
	}
	return nil
}

// roundTrips: `1+1` on one kernel of each side, in blocks of 100, the
// blocks interleaved.
func (b *bench) roundTrips() error {
	res, err := b.d.c.startKernel("")
	if err != nil {
		return err
	}
	b.mainID = res.KernelID
	if err := b.j.Do(map[string]any{"op": "start", "k": "main"}, nil); err != nil {
		return err
	}
	cb := func(n int, s *benchutil.Series) error {
		for range n {
			t0 := time.Now()
			if err := b.d.c.onePlusOne(b.mainID); err != nil {
				return err
			}
			if s != nil {
				s.Add(time.Since(t0))
			}
		}
		return nil
	}
	jup := func(op string, n int, s *benchutil.Series) error {
		var a struct{ Ms []float64 }
		if err := b.j.Do(map[string]any{"op": op, "k": "main", "n": n}, &a); err != nil {
			return err
		}
		for _, x := range a.Ms {
			if s != nil {
				s.Add(msDur(x))
			}
		}
		return nil
	}
	// Warm-up: 100 of each, unrecorded.
	for _, f := range []func() error{
		func() error { return cb(100, nil) }, func() error { return jup("rtt", 100, nil) }, func() error { return jup("rttraw", 100, nil) },
	} {
		if err := f(); err != nil {
			return err
		}
	}
	block := 100
	saved := b.o.warmup
	b.o.warmup = 0
	defer func() { b.o.warmup = saved }()
	return b.each((b.o.rtt+block-1)/block,
		&bcase{name: "cellbox round trips", run: func(bool) error { return cb(min(block, b.o.rtt-len(b.cbRTT.D)), &b.cbRTT) }},
		&bcase{name: "jupyter round trips", run: func(bool) error { return jup("rtt", min(block, b.o.rtt-len(b.jRTT.D)), &b.jRTT) }},
		&bcase{name: "jupyter round trips over pyzmq", run: func(bool) error { return jup("rttraw", min(block, b.o.rtt-len(b.jRaw.D)), &b.jRaw) }},
	)
}

func floodText() string {
	var sb strings.Builder
	for i := range floodLines {
		sb.WriteString(strconv.Itoa(i))
		sb.WriteByte('\n')
	}
	return sb.String()
}

// floods: the 100,000-line print on each side's kernel, and python by
// itself printing the same to a pipe this program reads (the floor).
func (b *bench) floods() error {
	return b.each(b.o.n,
		&bcase{name: "cellbox flood", run: func(record bool) error {
			c := b.d.c
			t := c.track(b.mainID)
			t.reset(true)
			me, dm := cpuTime(os.Getpid()), cpuTime(b.d.pid())
			t0 := time.Now()
			res, err := c.execute(b.mainID, floodCode)
			d := time.Since(t0)
			me, dm = cpuTime(os.Getpid())-me, cpuTime(b.d.pid())-dm
			if err != nil {
				return err
			}
			t.mu.Lock()
			got, notes := t.out.String(), t.notes
			t.capture = false
			t.out.Reset()
			t.mu.Unlock()
			if res.Status != protocol.ExecutionStatusOK || res.OutputTruncated || got != b.expect {
				return fmt.Errorf("flood: status %s, truncated %v, %d bytes and %d lines of stdout, want %d and %d",
					res.Status, res.OutputTruncated, len(got), strings.Count(got, "\n"), len(b.expect), floodLines)
			}
			if record {
				b.cbFlood.Add(d)
				b.cbFloodDaemon.Add(time.Duration(res.DurationMs) * time.Millisecond)
				b.cbFloodDaemonCPU.Add(dm)
				b.cbFloodClientCPU.Add(me)
				if res.CPUMs != nil {
					b.cbFloodKernelCPU.Add(time.Duration(*res.CPUMs) * time.Millisecond)
				}
				b.cbFloodNotes = notes
			}
			return nil
		}},
		&bcase{name: "jupyter flood", run: func(record bool) error {
			var a struct {
				Ms           float64
				Bytes, Lines int
				Exact        bool
				Messages     int
				Status       string
			}
			if err := b.j.Do(map[string]any{"op": "flood", "k": "main", "code": floodCode, "expect": b.expect}, &a); err != nil {
				return err
			}
			if !a.Exact || a.Status != "ok" {
				return fmt.Errorf("jupyter flood: status %s, %d bytes and %d lines of stdout, want %d and %d", a.Status, a.Bytes, a.Lines, len(b.expect), floodLines)
			}
			if record {
				b.jFlood.Add(msDur(a.Ms))
				b.jFloodMsgs = a.Messages
			}
			return nil
		}},
		&bcase{name: "cellbox flood, timed inside", run: func(record bool) error {
			c := b.d.c
			t := c.track(b.mainID)
			t.reset(true)
			res, err := c.execute(b.mainID, floorCode)
			if err != nil {
				return err
			}
			t.mu.Lock()
			got, errText := t.out.String(), t.errOut.String()
			t.capture = false
			t.out.Reset()
			t.errOut.Reset()
			t.mu.Unlock()
			d, err := insideTime(res.Status == protocol.ExecutionStatusOK && got == b.expect, errText)
			if err == nil && record {
				b.cbFloodInside.Add(d)
			}
			return err
		}},
		&bcase{name: "jupyter flood, timed inside", run: func(record bool) error {
			var a struct {
				Exact  bool
				Status string
				Stderr string
			}
			if err := b.j.Do(map[string]any{"op": "flood", "k": "main", "code": floorCode, "expect": b.expect}, &a); err != nil {
				return err
			}
			d, err := insideTime(a.Status == "ok" && a.Exact, a.Stderr)
			if err == nil && record {
				b.jFloodInside.Add(d)
			}
			return err
		}},
		&bcase{name: "python floor", run: func(record bool) error {
			whole, loop, err := b.floor()
			if err == nil && record {
				b.floorWhole.Add(whole)
				b.floorLoop.Add(loop)
			}
			return err
		}},
		&bcase{name: "python3 -c pass", run: func(record bool) error {
			cmd := exec.Command(b.o.python, "-c", "pass")
			cmd.Env = pythonEnv()
			t0 := time.Now()
			err := cmd.Run()
			if err == nil && record {
				b.pyPass.Add(time.Since(t0))
			}
			return err
		}})
}

// insideTime is the loop's time as floorCode run in a kernel reported it
// on stderr; ok says its stdout was all there.
func insideTime(ok bool, stderr string) (time.Duration, error) {
	if !ok {
		return 0, fmt.Errorf("the timed flood's stdout was not the %d lines (stderr %q)", floodLines, stderr)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(stderr), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("the timed flood's stderr %q", stderr)
	}
	return time.Duration(ns), nil
}

// pythonEnv is this program's environment without PYTHON* variables
// (PYTHONUNBUFFERED would make every print a write), as the kernels have.
func pythonEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PYTHON") {
			env = append(env, kv)
		}
	}
	return env
}

// floor runs python printing the lines to a pipe this program reads to
// end of file: the whole command (fork to wait), and the loop as python
// timed it (first print to flushed).
func (b *bench) floor() (whole, loop time.Duration, err error) {
	cmd := exec.Command(b.o.python, "-c", floorCode)
	cmd.Env = pythonEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	buf := make([]byte, 64<<10)
	n := 0
	for {
		k, err := out.Read(buf)
		n += k
		if err != nil {
			break
		}
	}
	err = cmd.Wait()
	whole = time.Since(t0)
	if err != nil {
		return 0, 0, fmt.Errorf("python floor: %w: %s", err, stderr.String())
	}
	if n != len(b.expect) {
		return 0, 0, fmt.Errorf("python floor: %d bytes, want %d", n, len(b.expect))
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(stderr.String()), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("python floor: its timing %q", stderr.String())
	}
	return whole, time.Duration(ns), nil
}

// interrupts: `while True: pass` interrupted on each side's kernel,
// alternating in a random order.
func (b *bench) interrupts() error {
	saved := b.o.warmup
	b.o.warmup = 0
	defer func() { b.o.warmup = saved }()
	return b.each(b.o.interrupts,
		&bcase{name: "cellbox interrupt", run: func(bool) error {
			s, err := b.d.c.interrupt(b.mainID, b.o.settle)
			if isLost(err) {
				fmt.Fprintf(os.Stderr, "kernel-bench:   cellbox interrupt: %v\n", err)
				b.cbLost++
				b.cbInt.Add(lostAfter)
				return nil
			}
			if err != nil {
				return err
			}
			b.cbInt.Add(s.total)
			b.cbIntCall.Add(s.call)
			if !s.busySeen {
				b.cbIntNoBusy++
			}
			return nil
		}},
		&bcase{name: "jupyter interrupt", run: func(bool) error {
			var a jInterrupt
			err := b.j.Do(map[string]any{"op": "interrupt", "k": "main", "settleMs": b.settleMs()}, &a)
			if isLost(err) {
				fmt.Fprintf(os.Stderr, "kernel-bench:   jupyter interrupt: %v\n", err)
				b.jLost++
				b.jInt.Add(lostAfter)
				return nil
			}
			if err != nil {
				return err
			}
			if err := a.check(); err != nil {
				return err
			}
			b.jInt.Add(msDur(a.Ms))
			b.jIntSignal.Add(msDur(a.SignalMs))
			if !a.BusySeen {
				b.jIntNoBusy++
			}
			return nil
		}})
}

func printEnv(w io.Writer, b *bench) {
	o := b.o
	title := benchutil.Title("python kernels, cellbox side by side with Jupyter (issue 5)", o.label)
	fmt.Fprintf(w, "== %s\n", title)
	fmt.Fprintf(w, "   %s\n", benchutil.Host())
	fmt.Fprintf(w, "   cellbox: %s serve --stdio (%s), python %s in its sandbox (scratch workspace: %s; network %s)\n",
		o.cellbox, benchutil.FileSize(o.cellbox), b.cbVersion, benchutil.Layers(b.cbSandbox), b.cbSandbox.Network)
	fmt.Fprintf(w, "   jupyter: %s, jupyter_client %s, ipykernel %s (kernel python %s), pyzmq %s (libzmq %s); no sandbox\n",
		o.python, b.jv.Jupyter_client, b.jv.Ipykernel, b.jVersion, b.jv.Pyzmq, b.jv.Zmq)
	fmt.Fprintf(w, "   N=%d cold starts and floods per case after WARMUP=%d; %d round trips per side after 100, in blocks of 100;\n", o.n, o.warmup, o.rtt)
	fmt.Fprintf(w, "   %d interrupts per side; %d idle kernels. Cases interleave in a new random order each iteration.\n", o.interrupts, o.kernels)
}

// cpuTime is the CPU time all of pid's threads have used (schedstat, in
// ns; 0 when unreadable).
func cpuTime(pid int) time.Duration {
	d, _ := benchutil.RunTime(pid)
	return d
}
