//go:build linux

// Command scale prints the daemon's scaling curve: one daemon grown
// through K = 1, 10, 50, 200 idle python kernels (over ceil(K/4) overlay
// workspaces, with K/2 terminals), and at each point the daemon's own RSS,
// descriptors and goroutines, the memory of everything below it, the
// round trips of kernel/execute, kernel/list and daemon/stats, and the CPU
// all of it uses while nothing is asked of it. Then a burst of kernel
// starts, concurrent and back to back; and, with -compare-self, idle
// kernels of a daemon whose sandboxes run the lean helper against one
// whose sandboxes re-execute the daemon's binary (CELLBOX_SANDBOX_HELPER=
// self), with ipykernel beside them. bench/scale.sh builds and runs it.
//
// The daemon is the real binary, `cellbox serve --listen 127.0.0.1:0`,
// spoken to over its websocket: --listen rather than --stdio because only
// then does it serve /metrics, and go_goroutines is a figure of the curve.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cellbox-dev/cellbox/bench/internal/benchutil"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "scale-bench:", err)
		os.Exit(1)
	}
}

type options struct {
	cellbox, label      string
	python, jupyterSide string
	points              []int
	quiet, quietLast    time.Duration
	idle                time.Duration
	rtt, warmup, calls  int
	burst               int
	compareSelf         bool
	compareKernels      int
}

// The limits of every daemon this program starts: room for the largest
// point and the burst (the defaults are 128 and 64).
const (
	maxKernels   = 256
	maxTerminals = 128
)

var serveArgs = []string{"--max-kernels", strconv.Itoa(maxKernels), "--max-terminals", strconv.Itoa(maxTerminals)}

func run(args []string) error {
	var o options
	var points string
	fs := flag.NewFlagSet("scale-bench", flag.ContinueOnError)
	fs.StringVar(&o.cellbox, "cellbox", "", "the cellbox `binary` (built with CGO_ENABLED=0; required)")
	fs.StringVar(&points, "points", "1,10,50,200", "the curve's `K`s: idle kernels at each point, increasing")
	fs.DurationVar(&o.quiet, "quiet", 10*time.Second, "the quiet window over which idle CPU is measured, at every point but the largest")
	fs.DurationVar(&o.quietLast, "quiet-last", 60*time.Second, "the quiet window at the largest point")
	fs.DurationVar(&o.idle, "idle", 2*time.Second, "how long the kernels idle before a point's memory is read")
	fs.IntVar(&o.rtt, "rtt", 300, "measured kernel/execute round trips of `1+1` per point")
	fs.IntVar(&o.warmup, "warmup", 20, "unmeasured round trips before them")
	fs.IntVar(&o.calls, "calls", 100, "measured kernel/list and daemon/stats round trips per point (after 5 unmeasured)")
	fs.IntVar(&o.burst, "burst", 20, "kernels of the burst, started at once and then back to back (0: none)")
	fs.BoolVar(&o.compareSelf, "compare-self", false, "also compare the sandboxes' lean helper with the daemon's binary re-executed (CELLBOX_SANDBOX_HELPER=self)")
	fs.IntVar(&o.compareKernels, "compare-kernels", 10, "idle kernels, each in its own scratch workspace, in each daemon of -compare-self")
	fs.StringVar(&o.jupyterSide, "jupyter-side", "", "bench/kernel/jupyter_side.py, to put ipykernel beside -compare-self (empty: no ipykernel)")
	fs.StringVar(&o.python, "python", "/usr/bin/python3", "the python `binary` with Debian's jupyter_client and ipykernel")
	fs.StringVar(&o.label, "label", "", "`text` naming this run in the output")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if o.points, err = parsePoints(points); err != nil {
		return err
	}
	if o.cellbox == "" || o.rtt < 1 || o.calls < 1 || o.burst < 0 || o.compareKernels < 1 {
		return errors.New("need -cellbox, and -rtt, -calls, -compare-kernels >= 1")
	}
	last := o.points[len(o.points)-1]
	if last+o.burst > maxKernels || last/2 > maxTerminals {
		return fmt.Errorf("-points up to %d with -burst %d: more than the daemon's %d kernels or %d terminals", last, o.burst, maxKernels, maxTerminals)
	}
	if o.cellbox, err = filepath.Abs(o.cellbox); err != nil {
		return err
	}
	if err := raiseNofile(); err != nil {
		return err
	}

	base, err := os.MkdirTemp("", "cellbox-scale-bench-")
	if err != nil {
		return err
	}
	defer benchutil.RemoveAll(base)
	b := &bench{o: o, base: base, loadStart: loadAvg(), results: map[string]string{}}
	if err := b.curve(); err != nil {
		return err
	}
	if o.compareSelf {
		fmt.Fprintf(os.Stderr, "scale-bench: lean helper against self, %d idle kernels each...\n", o.compareKernels)
		if err := b.compare(); err != nil {
			return err
		}
	}
	b.report(os.Stdout)
	return nil
}

func parsePoints(s string) ([]int, error) {
	var ks []int
	for _, f := range strings.Split(s, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 || len(ks) > 0 && k <= ks[len(ks)-1] {
			return nil, fmt.Errorf("-points %q: want increasing counts of kernels, at least 1", s)
		}
		ks = append(ks, k)
	}
	return ks, nil
}

// raiseNofile raises RLIMIT_NOFILE's soft limit to the hard one for the
// daemons this program starts. Go raises its own at start-up but gives
// children the limit it found; setting it explicitly makes children
// inherit it (the report shows the daemon's, from /proc).
func raiseNofile() error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("getrlimit(RLIMIT_NOFILE): %w", err)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("setrlimit(RLIMIT_NOFILE, %d): %w", lim.Max, err)
	}
	return nil
}

// loadAvg is /proc/loadavg's first three fields: other work on the machine
// shows in every figure.
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

// procLimit is the "Max open files" line of a process's limits.
func procLimit(pid int, name string) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "limits"))
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name); ok {
			f := strings.Fields(v)
			if len(f) >= 2 {
				return "soft " + f[0] + ", hard " + f[1]
			}
		}
	}
	return "?"
}

// sysctl reads a /proc/sys value, "?" when unreadable.
func sysctl(name string) string {
	b, err := os.ReadFile(filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/")))
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// ratio is a/b, 0 when b is 0.
func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}
