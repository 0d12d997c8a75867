//go:build linux

package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/cellbox-dev/cellbox/bench/internal/benchutil"
)

// With -language jupyter:NAME the benchmark measures the bridge's cost: the
// Jupyter kernel of kernelspec NAME hosted in a cellbox sandbox (kernel/start
// {language: "jupyter:NAME"}, the bridge driving the kernel inside the
// sandbox), spoken to over cellbox's protocol, against the same kernelspec
// bare, through jupyter_client, as a Jupyter client runs it. The code is
// Python's: NAME must be a Python kernelspec (python3, ipykernel). Cold
// start to the first `1+1` result, the `1+1` round trip, the 100,000-line
// print and the interrupt are taken as for cellbox's own python, in one run,
// interleaved; the ratio is hosted over bare, aim below 1.2.

// hostedAim is the most the hosted kernel may take, as a multiple of the
// bare kernel's figure.
const hostedAim = 1.2

func (b *bench) hosted() bool { return strings.HasPrefix(b.o.language, "jupyter:") }

// bareKernel is the kernelspec the jupyter side starts: NAME of
// jupyter:NAME, or empty (python3) when cellbox's own python is measured.
func (b *bench) bareKernel() string {
	if b.hosted() {
		return strings.TrimPrefix(b.o.language, "jupyter:")
	}
	return ""
}

// checkLanguage: the daemon offers the language measured, available.
func (b *bench) checkLanguage() error {
	var ids []string
	for _, l := range b.d.caps.Languages {
		if l.ID == b.o.language {
			if !l.Available {
				return fmt.Errorf("cellbox has no %s: %s", l.ID, l.Reason)
			}
			return nil
		}
		ids = append(ids, l.ID)
	}
	return fmt.Errorf("cellbox does not offer the language %s (it offers %s)", b.o.language, strings.Join(ids, ", "))
}

func (b *bench) runHosted(stdout io.Writer) error {
	o := b.o
	steps := []struct {
		what string
		f    func() error
	}{
		{fmt.Sprintf("cold starts: %d+%d of each case", o.warmup, o.n), b.coldStarts},
		{fmt.Sprintf("round trips: 100+%d of each side", o.rtt), b.roundTrips},
		{fmt.Sprintf("floods: %d+%d of each case", o.warmup, o.n), b.floods},
		{fmt.Sprintf("interrupts: %d of each side", o.interrupts), b.interrupts},
	}
	for _, s := range steps {
		fmt.Fprintf(os.Stderr, "kernel-bench: %s...\n", s.what)
		t0 := time.Now()
		if err := s.f(); err != nil {
			return fmt.Errorf("%s: %w%s", s.what, err, b.d.stderr.Show())
		}
		fmt.Fprintf(os.Stderr, "kernel-bench:   %.1f s\n", time.Since(t0).Seconds())
	}
	b.reportHosted(stdout)
	return nil
}

func (b *bench) reportHosted(w io.Writer) {
	o := b.o
	name := b.bareKernel()
	title := benchutil.Title(fmt.Sprintf("the Jupyter kernel %s hosted in a cellbox sandbox (%s) against the same kernel bare", name, o.language), o.label)
	fmt.Fprintf(w, "== %s\n", title)
	printHostEnv(w, b)
	fmt.Fprintf(w, "   hosted: %s serve --stdio (%s), kernel/start {language: %q}: the kernelspec's kernel (python %s) in the\n",
		o.cellbox, benchutil.FileSize(o.cellbox), o.language, b.cbVersion)
	fmt.Fprintf(w, "     sandbox (%s), driven by cellbox's Jupyter bridge there, timed in this Go client over JSON-RPC\n", b.sandboxText())
	fmt.Fprintf(w, "   bare: kernelspec %s (kernel python %s), no sandbox, timed in a python client through jupyter_client %s\n",
		name, b.jVersion, b.jv.Jupyter_client)
	fmt.Fprintf(w, "     (%s, ipykernel %s, pyzmq %s, libzmq %s)\n", o.python, b.jv.Ipykernel, b.jv.Pyzmq, b.jv.Zmq)
	fmt.Fprintf(w, "   N=%d cold starts and floods per case after WARMUP=%d; %d round trips per side after 100, in blocks of 100;\n", o.n, o.warmup, o.rtt)
	fmt.Fprintf(w, "   %d interrupts per side. Cases interleave in a new random order each iteration.\n", o.interrupts)

	var rows []row
	add := func(figure string, h, j time.Duration, aim bool) {
		r := 0.0
		if j > 0 {
			r = float64(h) / float64(j)
		}
		a, met := "", ""
		if aim {
			a, met = fmt.Sprintf("< %.1fx", hostedAim), verdict(r < hostedAim)
		}
		rows = append(rows, row{figure, benchutil.Ms(h), benchutil.Ms(j), fmt.Sprintf("%.2fx", r), a, "", met})
	}
	add("cold start to the first `1+1` result, p50 (new scratch workspace)", p50(&b.cbCold), p50(&b.jCold), true)
	add("  the same, already-open workspace", p50(&b.cbColdWS), p50(&b.jCold), false)
	add("`1+1` round trip, p50", p50(&b.cbRTT), p50(&b.jRTT), true)
	add("`1+1` round trip, p99", p99(&b.cbRTT), p99(&b.jRTT), true)
	add("  p50 against bare over plain pyzmq (no jupyter_client)", p50(&b.cbRTT), p50(&b.jRaw), false)
	add("100,000 printed lines, all delivered, p50", p50(&b.cbFlood), p50(&b.jFlood), true)
	add("interrupt of `while True: pass`, p50", p50(&b.cbInt), p50(&b.jInt), false)
	add("interrupt, p99", p99(&b.cbInt), p99(&b.jInt), false)
	add("first interrupt of a new kernel, p50", p50(&b.cbFirstInt), p50(&b.jFirstInt), false)

	fmt.Fprintf(w, "\n")
	f := "  %-66s %11s %11s %8s  %-7s %s\n"
	fmt.Fprintf(w, f, "figure", "hosted", "bare", "ratio", "aim", "met?")
	fmt.Fprintf(w, f, strings.Repeat("-", 66), strings.Repeat("-", 11), strings.Repeat("-", 11), strings.Repeat("-", 8), strings.Repeat("-", 7), "----")
	for _, r := range rows {
		fmt.Fprintf(w, f, r.figure, r.cb, r.jup, r.ratio, r.aim, r.met)
	}
	fmt.Fprintf(w, "  ratio: hosted over bare (below 1: the hosted kernel is faster); the aim is below %.1fx.\n", hostedAim)
	fmt.Fprintf(w, "  flood: the hosted kernel's output came as %d kernel/output notifications, the bare one's as %d iopub stream messages\n",
		b.cbFloodNotes, b.jFloodMsgs)

	fmt.Fprintf(w, "\nraw numbers\n")
	printSeriesHeader(w)
	nm := func(s *benchutil.Series, n string) *benchutil.Series { s.Name = n; return s }
	group := func(title string, ss ...*benchutil.Series) {
		fmt.Fprintf(w, "%s\n", title)
		for _, s := range ss {
			printSeries(w, s)
		}
	}
	group("cold start: a new kernel to the `1+1` response with its result \"2\" (then one interrupt, then shutdown)",
		nm(&b.cbCold, "hosted, new scratch workspace (kernel/start without workspaceId)"),
		nm(&b.cbColdStart, "  of which the kernel/start response"),
		nm(&b.cbShutdown, "  kernel/shutdown afterwards"),
		nm(&b.cbColdWS, "hosted, already-open overlay workspace (kernel/start, workspaceId)"),
		nm(&b.cbColdWSStart, "  of which the kernel/start response"),
		nm(&b.cbShutdownWS, "  kernel/shutdown afterwards"),
		nm(&b.jCold, "bare, KernelManager + start_kernel to the `1+1` reply and idle"),
		nm(&b.jInfo, "  of which to the first kernel_info reply"),
		nm(&b.jIopub, fmt.Sprintf("  of which to iopub connected (%d kernel_info nudges in all)", b.jNudges)))
	group("round trip of `1+1` (hosted: kernel/execute to its response; bare: to the idle status and execute_reply)",
		nm(&b.cbRTT, "hosted, kernel/execute"),
		nm(&b.jRTT, "bare, BlockingKernelClient"),
		nm(&b.jRaw, "bare, plain blocking pyzmq sockets + the kernel's Session"))
	group(fmt.Sprintf("%q: request to response, every line checked", floodCode),
		nm(&b.cbFlood, "hosted, kernel/execute (all kernel/output before the response)"),
		nm(&b.cbFloodInside, "  the loop alone, timed by the kernel's python (a second, timed run)"),
		nm(&b.cbFloodDaemonCPU, "  CPU: the daemon's, all threads (schedstat)"),
		nm(&b.cbFloodClientCPU, "  CPU: this client's, all threads (schedstat)"),
		nm(&b.jFlood, "bare, execute to idle, the iopub streams collected"),
		nm(&b.jFloodInside, "  the loop alone, timed by the kernel's python (a second, timed run)"),
		nm(&b.floorLoop, "floor: python's own loop to a pipe, self-timed (no PYTHON* in its env)"))
	group(fmt.Sprintf("interrupt of `while True: pass`: kernel/interrupt (bare: km.interrupt_kernel()) sent %s after the busy status, to the response", o.settle),
		nm(&b.cbInt, "hosted, to the execute response (interrupted)"),
		nm(&b.cbIntCall, "  the kernel/interrupt round trip itself"),
		nm(&b.cbFirstInt, "hosted, the first interrupt of a new kernel (cold-start kernels)"),
		nm(&b.jInt, "bare, to the execute_reply (KeyboardInterrupt)"),
		nm(&b.jIntSignal, "  km.interrupt_kernel() itself"),
		nm(&b.jFirstInt, "bare, the first interrupt of a new kernel (cold-start kernels)"))
	if n := b.cbLost + b.jLost + b.cbFirstLost + b.jFirstLost; n > 0 {
		fmt.Fprintf(w, "  LOST interrupts (the loop still ran %v later; another interrupt stopped it), counted as %v in the figures above:\n", lostAfter, lostAfter)
		fmt.Fprintf(w, "    hosted %d of %d, and %d of %d first interrupts; bare %d of %d, and %d of %d first interrupts\n",
			b.cbLost, len(b.cbInt.D), b.cbFirstLost, len(b.cbFirstInt.D), b.jLost, len(b.jInt.D), b.jFirstLost, len(b.jFirstInt.D))
	}
	if b.cbIntNoBusy+b.jIntNoBusy > 0 {
		fmt.Fprintf(w, "  interrupt: the busy status was not seen within 50 ms %d times (hosted) and %d times (bare)\n", b.cbIntNoBusy, b.jIntNoBusy)
	}
	for _, c := range b.cases {
		if c.errs > 0 {
			fmt.Fprintf(w, "FAILED %d runs of %q (not measured); the first: %v\n", c.errs, c.name, c.first)
		}
	}
	fmt.Fprintf(w, "load average (1, 5, 15 min): %s at the start, %s at the end\n", b.loadStart, loadAvg())
}

// printHostEnv is who measures, where.
func printHostEnv(w io.Writer, b *bench) {
	fmt.Fprintf(w, "   %s; load average %s at the start\n", benchutil.Host(), b.loadStart)
}

// sandboxText is the layers of the scratch workspace's sandbox.
func (b *bench) sandboxText() string {
	return benchutil.Layers(b.cbSandbox) + "; network " + string(b.cbSandbox.Network)
}
