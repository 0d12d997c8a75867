//go:build linux

package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/cellbox-dev/cellbox/bench/internal/benchutil"
)

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// idleAim is the idle CPU, daemon and everything below it, that counts as
// none: 1 ms per second, a tenth of a percent of one core.
const idleAim = time.Millisecond

// perSecond is CPU time over a window as CPU per second of it.
func perSecond(cpu, window time.Duration) time.Duration {
	if window <= 0 {
		return 0
	}
	return time.Duration(float64(cpu) / window.Seconds())
}

func msPerS(d time.Duration) string {
	return fmt.Sprintf("%.2f ms/s", float64(d)/float64(time.Millisecond))
}

func (b *bench) report(w io.Writer) {
	b.printEnv(w)
	ps := b.points
	first, last := ps[0], ps[len(ps)-1]
	cols := len(ps)
	f := "  %-50s" + strings.Repeat(" %12s", cols) + " %8s  %-12s %s\n"
	line := func(figure string, cell func(p *point) string, ratio, aim, met string) {
		args := []any{figure}
		for _, p := range ps {
			args = append(args, cell(p))
		}
		fmt.Fprintf(w, f, append(args, ratio, aim, met)...)
	}
	hdr := []any{"figure"}
	rule := []any{strings.Repeat("-", 50)}
	for _, p := range ps {
		hdr = append(hdr, fmt.Sprintf("K=%d", p.k))
		rule = append(rule, strings.Repeat("-", 12))
	}
	fmt.Fprintf(w, "\n")
	fmt.Fprintf(w, f, append(hdr, fmt.Sprintf("%d/%d", last.k, first.k), "aim", "met?")...)
	fmt.Fprintf(w, f, append(rule, strings.Repeat("-", 8), strings.Repeat("-", 12), "----")...)

	mem := func(figure string, get func(p *point) int64) {
		line(figure, func(p *point) string { return benchutil.MiB(get(p)) }, "", "", "")
	}
	perK := func(figure string, get func(p *point) int64) {
		line(figure, func(p *point) string { return benchutil.MiB(get(p) / int64(p.k)) }, "", "", "")
	}
	count := func(figure string, get func(p *point) int) {
		line(figure, func(p *point) string { return strconv.Itoa(get(p)) }, "", "", "")
	}
	line("workspaces / terminals", func(p *point) string { return fmt.Sprintf("%d / %d", p.w, p.t) }, "", "", "")
	line("time to grow from the previous point", func(p *point) string { return fmt.Sprintf("%.1f s", p.grow.Seconds()) }, "", "", "")
	line("  kernel/start p50 while growing (open workspace)", func(p *point) string { return benchutil.Ms(p.starts.Summary().P50) }, "", "", "")
	mem("daemon: RSS (VmRSS)", func(p *point) int64 { return p.daemon.RSS })
	count("daemon: open descriptors", func(p *point) int { return p.fds })
	count("daemon: goroutines (go_goroutines of /metrics)", func(p *point) int { return p.goroutines })
	count("daemon: OS threads (go_threads)", func(p *point) int { return p.threads })
	line("below the daemon: processes (sandboxes)", func(p *point) string { return fmt.Sprintf("%d (%d)", p.below.N, p.sandboxes) }, "", "", "")
	mem("below the daemon: RSS, summed", func(p *point) int64 { return p.below.RSS })
	mem("below the daemon: PSS, summed", func(p *point) int64 { return p.below.PSS })
	perK("per kernel: RSS below the daemon / K", func(p *point) int64 { return p.below.RSS })
	perK("per kernel: PSS below the daemon / K", func(p *point) int64 { return p.below.PSS })
	perK("  python drivers' PSS / K", func(p *point) int64 { return p.pythons.PSS })
	perK("  sandbox helpers' PSS / K", func(p *point) int64 { return p.helpers.PSS })
	perK("  terminals' shells (and any other) PSS / K", func(p *point) int64 { return p.others.PSS })

	lastIdle := perSecond(last.cpu(), last.window)
	line("idle CPU, daemon + below: ms of CPU per second", func(p *point) string { return msPerS(perSecond(p.cpu(), p.window)) },
		"", "< 1 ms/s", verdict(lastIdle < idleAim))
	line("idle CPU: % of one core", func(p *point) string {
		return fmt.Sprintf("%.3f%%", 100*float64(p.cpu())/float64(p.window))
	}, "", "< 0.1%", "")
	line("  the same from schedstat (exact run time)", func(p *point) string { return msPerS(perSecond(p.run, p.window)) }, "", "", "")
	line("  the daemon itself", func(p *point) string { return msPerS(perSecond(p.cpuDaemon, p.window)) }, "", "", "")
	line("  python drivers", func(p *point) string { return msPerS(perSecond(p.cpuPy, p.window)) }, "", "", "")
	line("  sandbox helpers", func(p *point) string { return msPerS(perSecond(p.cpuHelpers, p.window)) }, "", "", "")
	line("  terminals' shells (and any other)", func(p *point) string { return msPerS(perSecond(p.cpuEls, p.window)) }, "", "", "")
	line("  over a quiet window of", func(p *point) string { return p.window.String() }, "", "", "")

	rtt := func(figure string, s func(p *point) *benchutil.Series, q func(benchutil.Summary) time.Duration) {
		r := ratio(q(s(last).Summary()), q(s(first).Summary()))
		line(figure, func(p *point) string { return benchutil.Ms(q(s(p).Summary())) }, fmt.Sprintf("%.2fx", r), "<= 1.5x", verdict(r <= 1.5))
	}
	p50 := func(m benchutil.Summary) time.Duration { return m.P50 }
	p99 := func(m benchutil.Summary) time.Duration { return m.P99 }
	rtt("kernel/execute `1+1` (one kernel), p50", func(p *point) *benchutil.Series { return &p.exec }, p50)
	rtt("kernel/execute `1+1` (one kernel), p99", func(p *point) *benchutil.Series { return &p.exec }, p99)
	rtt("kernel/list (all K kernels), p50", func(p *point) *benchutil.Series { return &p.list }, p50)
	rtt("kernel/list (all K kernels), p99", func(p *point) *benchutil.Series { return &p.list }, p99)
	rtt("daemon/stats, p50", func(p *point) *benchutil.Series { return &p.stats }, p50)
	rtt("daemon/stats, p99", func(p *point) *benchutil.Series { return &p.stats }, p99)
	fmt.Fprintf(w, "  %d/%d: the largest point's figure over the smallest's. Idle CPU: utime+stime of /proc/PID/stat (10 ms ticks) of the daemon\n", last.k, first.k)
	fmt.Fprintf(w, "  and every process below it over a window with no request (and /proc/PID/task/*/schedstat, in ns); its aim (< 1 ms/s at\n")
	fmt.Fprintf(w, "  the largest point, utime+stime) stands for \"none\".\n")
	fmt.Fprintf(w, "  Memory: VmRSS of /proc/PID/status, PSS of smaps_rollup; \"below the daemon\" is every process under it: kernels' pythons,\n")
	fmt.Fprintf(w, "  sandbox helpers (an init and a spawner per sandbox, the pool's ready sandbox included), terminals' shells.\n")
	fmt.Fprintf(w, "  kernel/start while growing: into an open workspace; a workspace's first kernel also launches its sandbox.\n")
	if o := last.otherNames; len(o) > 0 {
		fmt.Fprintf(w, "  Other processes below the daemon at K=%d: %s.\n", last.k, strings.Join(o, ", "))
	}

	b.printLinearity(w)
	b.printBurst(w)
	b.printCompare(w)

	fmt.Fprintf(w, "\nraw round trips and starts (timed in this Go client, JSON-RPC over the daemon's websocket)\n")
	fmt.Fprintf(w, "  %-56s %5s %10s %10s %10s %10s %10s %10s\n", "", "n", "p50", "p90", "p99", "min", "mean", "max")
	for _, p := range ps {
		for _, s := range []*benchutil.Series{&p.starts, &p.exec, &p.list, &p.stats} {
			printSeries(w, s)
		}
	}
	printSeries(w, &b.burstConc)
	printSeries(w, &b.burstSeq)
	fmt.Fprintf(w, "everything shut down in %.1f s (kernel/shutdown, pty/close, workspace/close, one at a time); no process left behind\n", b.teardown.Seconds())
	fmt.Fprintf(w, "load average (1, 5, 15 min): %s at the start, %s at the end\n", b.loadStart, loadAvg())
}

func printSeries(w io.Writer, s *benchutil.Series) {
	if len(s.D) == 0 {
		return
	}
	m := s.Summary()
	fmt.Fprintf(w, "  %-56s %5d %10s %10s %10s %10s %10s %10s\n", s.Name, m.N, benchutil.Ms(m.P50), benchutil.Ms(m.P90),
		benchutil.Ms(m.P99), benchutil.Ms(m.Min), benchutil.Ms(m.Mean), benchutil.Ms(m.Max))
}

// printLinearity is the growth per added kernel between consecutive
// points.
func (b *bench) printLinearity(w io.Writer) {
	if len(b.points) < 2 {
		return
	}
	fmt.Fprintf(w, "\ngrowth per added kernel between consecutive points (each added kernel comes with 1/4 of a workspace and 1/2 of a terminal)\n")
	f := "  %-14s %18s %16s %16s %14s %18s\n"
	fmt.Fprintf(w, f, "K", "daemon RSS", "descriptors", "goroutines", "threads", "PSS below")
	for i := 1; i < len(b.points); i++ {
		a, z := b.points[i-1], b.points[i]
		dk := float64(z.k - a.k)
		per := func(d int) string { return fmt.Sprintf("%+.2f/kernel", float64(d)/dk) }
		perMiB := func(d int64) string { return fmt.Sprintf("%+.3f MiB/kernel", float64(d)/1024/dk) }
		fmt.Fprintf(w, f, fmt.Sprintf("%d → %d", a.k, z.k), perMiB(z.daemon.RSS-a.daemon.RSS), per(z.fds-a.fds),
			per(z.goroutines-a.goroutines), per(z.threads-a.threads), perMiB(z.below.PSS-a.below.PSS))
	}
	a, z := b.points[0], b.points[len(b.points)-1]
	fmt.Fprintf(w, "  (the daemon's RSS also moves with its Go heap's collections: a step that shrinks is the GC, not a kernel giving memory back;\n")
	fmt.Fprintf(w, "  over the whole curve, %d → %d: %+.3f MiB, %+.2f descriptors, %+.2f goroutines per kernel)\n", a.k, z.k,
		float64(z.daemon.RSS-a.daemon.RSS)/1024/float64(z.k-a.k), float64(z.fds-a.fds)/float64(z.k-a.k), float64(z.goroutines-a.goroutines)/float64(z.k-a.k))
}

func (b *bench) printBurst(w io.Writer) {
	if len(b.burstConc.D) == 0 {
		return
	}
	last := b.points[len(b.points)-1]
	fmt.Fprintf(w, "\nburst: kernel/start, each in a new scratch workspace (no workspaceId), in the daemon with its %d idle kernels, %d terminals\n", last.k, last.t)
	f := "  %-34s %5s %10s %10s %10s %9s  %-12s %s\n"
	fmt.Fprintf(w, f, "", "n", "p50", "p99", "max", "p99/p50", "aim", "met?")
	for _, s := range []*benchutil.Series{&b.burstConc, &b.burstSeq} {
		m := s.Summary()
		r := ratio(m.P99, m.P50)
		fmt.Fprintf(w, f, s.Name, strconv.Itoa(m.N), benchutil.Ms(m.P50), benchutil.Ms(m.P99), benchutil.Ms(m.Max),
			fmt.Sprintf("%.2fx", r), "p99 < 3x p50", verdict(r < 3))
	}
	fmt.Fprintf(w, "  (with %d samples the p99 is the slowest; the first start of each batch takes the pool's ready sandbox)\n", b.o.burst)
}

func (b *bench) printCompare(w io.Writer) {
	if b.lean == nil || b.self == nil {
		return
	}
	k := int64(b.o.compareKernels)
	fmt.Fprintf(w, "\nsandbox helper: lean against self (CELLBOX_SANDBOX_HELPER=self, the daemon's binary re-executed as init and spawner):\n")
	fmt.Fprintf(w, "%d idle python kernels, each in its own scratch workspace, in a fresh daemon of each kind (one at a time); per kernel:\n", k)
	fmt.Fprintf(w, "everything below the daemon / %d (the daemon's own excluded, its pool's ready sandbox included)\n", k)
	f := "  %-40s %14s %14s %10s %14s\n"
	fmt.Fprintf(w, f, "per kernel", "lean", "self", "self/lean", "ipykernel")
	jup := func(get func(m benchutil.Mem) int64) string {
		if b.jup == nil {
			return "-"
		}
		return benchutil.MiB(get(*b.jup) / k)
	}
	row := func(name string, get func(s *side) benchutil.Mem, val func(m benchutil.Mem) int64, withJup bool) {
		l, s := val(get(b.lean)), val(get(b.self))
		r := "-"
		if l > 0 {
			r = fmt.Sprintf("%.2fx", float64(s)/float64(l))
		}
		j := ""
		if withJup {
			j = jup(val)
		}
		fmt.Fprintf(w, f, name, benchutil.MiB(l/k), benchutil.MiB(s/k), r, j)
	}
	rss := func(m benchutil.Mem) int64 { return m.RSS }
	pss := func(m benchutil.Mem) int64 { return m.PSS }
	row("RSS, everything below the daemon", func(s *side) benchutil.Mem { return s.below }, rss, true)
	row("PSS, everything below the daemon", func(s *side) benchutil.Mem { return s.below }, pss, true)
	row("  RSS of the sandbox helpers", func(s *side) benchutil.Mem { return s.helpers }, rss, false)
	row("  PSS of the sandbox helpers", func(s *side) benchutil.Mem { return s.helpers }, pss, false)
	row("  RSS of the python drivers", func(s *side) benchutil.Mem { return s.pythons }, rss, false)
	row("  PSS of the python drivers", func(s *side) benchutil.Mem { return s.pythons }, pss, false)
	fmt.Fprintf(w, "  processes below the daemon: lean %d (%d helpers), self %d (%d helpers)\n", b.lean.below.N, b.lean.helpers.N, b.self.below.N, b.self.helpers.N)
	fmt.Fprintf(w, "  the helpers run: lean %s; self %s\n", orUnknown(b.lean.helperExe), orUnknown(b.self.helperExe))
	if b.jup != nil {
		fmt.Fprintf(w, "  ipykernel %s through jupyter_client (bench/kernel/jupyter_side.py), %d kernels, each process and its children (%d processes), no sandbox\n",
			b.jupVersion, k, b.jup.N)
	} else {
		fmt.Fprintf(w, "  (no ipykernel: run with -jupyter-side bench/kernel/jupyter_side.py)\n")
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "? (/proc/PID/exe unreadable)"
	}
	return s
}

func (b *bench) printEnv(w io.Writer) {
	o := b.o
	title := benchutil.Title("the daemon's scaling curve: idle python kernels, workspaces and terminals in one daemon", o.label)
	size := benchutil.FileSize(o.cellbox)
	fmt.Fprintf(w, "== %s\n", title)
	fmt.Fprintf(w, "   %s\n", benchutil.Host())
	fmt.Fprintf(w, "   cellbox: %s serve --listen 127.0.0.1:0 %s (%s); python %s; sandbox layers: %s\n",
		o.cellbox, strings.Join(serveArgs, " "), size, b.pyVersion, benchutil.Layers(b.sandbox))
	fmt.Fprintf(w, "   sandbox helpers run %s; the daemon's RLIMIT_NOFILE %s; inotify max_user_instances %s, max_user_watches %s\n",
		orUnknown(b.helperExe), b.nofileDaemon, sysctl("fs.inotify.max_user_instances"), sysctl("fs.inotify.max_user_watches"))
	fmt.Fprintf(w, "   Each point: K idle python kernels started one by one, round-robin over W = ceil(K/4) overlay workspaces (a project dir\n")
	fmt.Fprintf(w, "   each), and T = K/2 terminals (bash --noprofile --norc), round-robin too; one daemon grown from point to point. Each kernel\n")
	fmt.Fprintf(w, "   ran `1+1` once; figures read after %v idle. Round trips: %d+%d of `1+1` on the first kernel, 5+%d of kernel/list and of\n",
		o.idle, o.warmup, o.rtt, o.calls)
	fmt.Fprintf(w, "   daemon/stats, one at a time, after the quiet window.\n")
}
