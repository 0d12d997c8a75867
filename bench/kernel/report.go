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

type row struct{ figure, cb, jup, ratio, aim, vs, met string }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// speedup is jupyter's time over cellbox's.
func speedup(cb, jup time.Duration) float64 {
	if cb <= 0 {
		return 0
	}
	return float64(jup) / float64(cb)
}

func (b *bench) report(w io.Writer) {
	printEnv(w, b)
	var rows []row
	timeRow := func(figure string, cb, jup time.Duration, aim, vs, met string) {
		rows = append(rows, row{figure, benchutil.Ms(cb), benchutil.Ms(jup), fmt.Sprintf("%.1fx", speedup(cb, jup)), aim, vs, met})
	}

	// Cold start.
	for _, c := range []struct {
		figure string
		cb     *benchutil.Series
		jup    *benchutil.Series
	}{
		{"cold start to first `1+1` result, p50 (new scratch workspace)", &b.cbCold, &b.jCold},
		{"  the same, against ipykernel's launch to kernel_info reply", &b.cbCold, &b.jInfo},
		{"cold start to first result, p50 (already-open workspace)", &b.cbColdWS, &b.jCold},
	} {
		r := speedup(p50(c.cb), p50(c.jup))
		timeRow(c.figure, p50(c.cb), p50(c.jup), ">= 10x faster", fmt.Sprintf("%.1fx faster", r), verdict(r >= 10))
	}

	// Round trip.
	r := speedup(p50(&b.cbRTT), p50(&b.jRTT))
	timeRow("round trip of `1+1`, p50", p50(&b.cbRTT), p50(&b.jRTT), ">= 8x faster, <= 0.5 ms",
		fmt.Sprintf("%.1fx, %s", r, benchutil.Ms(p50(&b.cbRTT))), verdict(r >= 8 && p50(&b.cbRTT) <= 500*time.Microsecond))
	timeRow("round trip of `1+1`, p99", p99(&b.cbRTT), p99(&b.jRTT), "", "", "")
	timeRow("  p50 against ipykernel over plain pyzmq (no asyncio client)", p50(&b.cbRTT), p50(&b.jRaw), "", "", "")

	// Flood.
	fl := float64(p50(&b.cbFlood)) / float64(p50(&b.floorLoop))
	timeRow("100,000 printed lines, all delivered, p50", p50(&b.cbFlood), p50(&b.jFlood),
		"<= 1.3x python's own print", fmt.Sprintf("%.2fx of %s", fl, benchutil.Ms(p50(&b.floorLoop))), verdict(fl <= 1.3))

	// Interrupt.
	lost := func(n, of int) string {
		if n == 0 {
			return ""
		}
		return fmt.Sprintf(", %d of %d lost", n, of)
	}
	timeRow("interrupt of `while True: pass`, p50", p50(&b.cbInt), p50(&b.jInt), "< 5 ms",
		benchutil.Ms(p50(&b.cbInt))+lost(b.cbLost, len(b.cbInt.D)), verdict(p50(&b.cbInt) < 5*time.Millisecond))
	timeRow("interrupt, p99", p99(&b.cbInt), p99(&b.jInt), "< 20 ms",
		benchutil.Ms(p99(&b.cbInt))+lost(b.cbLost, len(b.cbInt.D)), verdict(p99(&b.cbInt) < 20*time.Millisecond))
	timeRow("first interrupt of a new kernel, p50", p50(&b.cbFirstInt), p50(&b.jFirstInt), "",
		strings.TrimPrefix(lost(b.cbFirstLost, len(b.cbFirstInt.D)), ", "), "")

	// Memory.
	if b.mm.scratch != nil {
		total, _ := b.idleFigure(1)
		j := b.mm.jIdle
		rows = append(rows, row{"idle python kernel, RSS: python + helpers + daemon share", benchutil.MiB(total.RSS), benchutil.MiB(j.RSS),
			fmt.Sprintf("%.1fx", float64(j.RSS)/float64(total.RSS)), "< 15 MiB", benchutil.MiB(total.RSS), verdict(total.RSS < 15*1024)})
		if total.PSSMissing == 0 && j.PSSMissing == 0 {
			rows = append(rows, row{"  the same as PSS (shared pages split among their users)", benchutil.MiB(total.PSS), benchutil.MiB(j.PSS),
				fmt.Sprintf("%.1fx", float64(j.PSS)/float64(total.PSS)), "< 15 MiB", benchutil.MiB(total.PSS), verdict(total.PSS < 15*1024)})
		}
		rows = append(rows, row{fmt.Sprintf("%d idle python kernels: the daemon's own RSS", b.mm.scratch.k), benchutil.MiB(b.mm.scratch.daemon.RSS), "-", "",
			"< 200 MiB", benchutil.MiB(b.mm.scratch.daemon.RSS), verdict(b.mm.scratch.daemon.RSS < 200*1024)})
	}

	fmt.Fprintf(w, "\n")
	f := "  %-62s %11s %11s %8s  %-24s %-20s %s\n"
	fmt.Fprintf(w, f, "figure", "cellbox", "jupyter", "ratio", "aim (cellbox)", "measured", "met?")
	fmt.Fprintf(w, f, strings.Repeat("-", 62), strings.Repeat("-", 11), strings.Repeat("-", 11), strings.Repeat("-", 8), strings.Repeat("-", 24), strings.Repeat("-", 20), "----")
	for _, r := range rows {
		fmt.Fprintf(w, f, r.figure, r.cb, r.jup, r.ratio, r.aim, r.vs, r.met)
	}
	fmt.Fprintf(w, "  ratio: jupyter's figure over cellbox's (above 1: cellbox is faster or smaller).\n")

	// The raw numbers.
	fmt.Fprintf(w, "\nraw numbers (cellbox timed in this Go client over JSON-RPC on the daemon's stdio; jupyter timed in its python client)\n")
	printSeriesHeader(w)
	name := func(s *benchutil.Series, n string) *benchutil.Series { s.Name = n; return s }
	group := func(title string, ss ...*benchutil.Series) {
		fmt.Fprintf(w, "%s\n", title)
		for _, s := range ss {
			printSeries(w, s)
		}
	}
	group("cold start: a new kernel to the `1+1` response with its result \"2\" (then one interrupt, then shutdown)",
		name(&b.cbCold, "cellbox, new scratch workspace (kernel/start without workspaceId)"),
		name(&b.cbColdStart, "  of which the kernel/start response"),
		name(&b.cbShutdown, "  kernel/shutdown afterwards"),
		name(&b.cbColdWS, "cellbox, already-open overlay workspace (kernel/start, workspaceId)"),
		name(&b.cbColdWSStart, "  of which the kernel/start response"),
		name(&b.cbShutdownWS, "  kernel/shutdown afterwards"),
		name(&b.jCold, "jupyter, KernelManager + start_kernel to the `1+1` reply and idle"),
		name(&b.jInfo, "  of which to the first kernel_info reply"),
		name(&b.jIopub, fmt.Sprintf("  of which to iopub connected (%d kernel_info nudges in all)", b.jNudges)))
	group("round trip of `1+1` (execute to response; jupyter: to the idle status and execute_reply)",
		name(&b.cbRTT, "cellbox kernel/execute"),
		name(&b.jRTT, "jupyter, BlockingKernelClient"),
		name(&b.jRaw, "jupyter, plain blocking pyzmq sockets + the kernel's Session"))
	group(fmt.Sprintf("%q: request to response, every line checked", floodCode),
		name(&b.cbFlood, "cellbox kernel/execute (all kernel/output before the response)"),
		name(&b.cbFloodDaemon, "  the daemon's durationMs of it (ms resolution)"),
		name(&b.cbFloodInside, "  the loop alone, timed by the kernel's python (a second, timed run)"),
		name(&b.cbFloodKernelCPU, "  CPU: the kernel's (the result's cpuMs)"),
		name(&b.cbFloodDaemonCPU, "  CPU: the daemon's, all threads (schedstat)"),
		name(&b.cbFloodClientCPU, "  CPU: this client's, all threads (schedstat)"),
		name(&b.jFlood, "jupyter, execute to idle, the iopub streams collected"),
		name(&b.jFloodInside, "  the loop alone, timed by the kernel's python (a second, timed run)"),
		name(&b.floorLoop, "floor: python's own loop to a pipe, self-timed (no PYTHON* in its env)"),
		name(&b.floorWhole, "  the whole command, fork to exit, this program reading the pipe"),
		name(&b.pyPass, "  python3 -c pass, fork to exit"))
	group(fmt.Sprintf("interrupt of `while True: pass`: kernel/interrupt (jupyter: km.interrupt_kernel()) sent %s after the busy status, to the response", b.o.settle),
		name(&b.cbInt, "cellbox, to the execute response (interrupted)"),
		name(&b.cbIntCall, "  the kernel/interrupt round trip itself"),
		name(&b.cbFirstInt, "cellbox, the first interrupt of a new kernel (cold-start kernels)"),
		name(&b.jInt, "jupyter, to the execute_reply (KeyboardInterrupt)"),
		name(&b.jIntSignal, "  km.interrupt_kernel() itself"),
		name(&b.jFirstInt, "jupyter, the first interrupt of a new kernel (cold-start kernels)"))
	fmt.Fprintf(w, "  flood: cellbox sent %d kernel/output notifications, jupyter %d iopub stream messages; cellbox p50 is %.2fx python's own loop and %.2fx the whole python command\n",
		b.cbFloodNotes, b.jFloodMsgs, fl, float64(p50(&b.cbFlood))/float64(p50(&b.floorWhole)))
	if n := b.cbLost + b.jLost + b.cbFirstLost + b.jFirstLost; n > 0 {
		fmt.Fprintf(w, "  LOST interrupts (the loop still ran %v later; another interrupt stopped it), counted as %v in the figures above:\n", lostAfter, lostAfter)
		fmt.Fprintf(w, "    cellbox %d of %d, and %d of %d first interrupts; jupyter %d of %d, and %d of %d first interrupts\n",
			b.cbLost, len(b.cbInt.D), b.cbFirstLost, len(b.cbFirstInt.D), b.jLost, len(b.jInt.D), b.jFirstLost, len(b.jFirstInt.D))
	}
	if b.cbIntNoBusy+b.jIntNoBusy > 0 {
		fmt.Fprintf(w, "  interrupt: the busy status was not seen within 50 ms %d times (cellbox) and %d times (jupyter)\n", b.cbIntNoBusy, b.jIntNoBusy)
	}
	b.reportMemory(w)
	for _, c := range b.cases {
		if c.errs > 0 {
			fmt.Fprintf(w, "FAILED %d runs of %q (not measured); the first: %v\n", c.errs, c.name, c.first)
		}
	}
	fmt.Fprintf(w, "load average (1, 5, 15 min): %s at the start, %s at the end\n", b.loadStart, loadAvg())
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

func (b *bench) reportMemory(w io.Writer) {
	m := b.mm
	if m.scratch == nil {
		return
	}
	h := m.scratch
	total, share := b.idleFigure(1)
	fmt.Fprintf(w, "\nmemory (KiB figures from /proc: VmRSS and its parts from status, PSS from smaps_rollup; PSS splits shared pages among their users)\n")
	fmt.Fprintf(w, "  An idle cellbox kernel is its python driver process, plus its share of the sandbox helpers (the sandbox's init and\n")
	fmt.Fprintf(w, "  spawner, two processes of the re-executed cellbox binary, shared by the kernels of one workspace; a kernel without\n")
	fmt.Fprintf(w, "  workspaceId has a scratch workspace and so a sandbox of its own), plus its share of the daemon: how much the\n")
	fmt.Fprintf(w, "  daemon's RSS grew from no kernel to %d kernels, over %d. Each kernel ran `1+1` and then idled 2 s.\n", h.k, h.k)
	fmt.Fprintf(w, "  Summing RSS counts the pages the helpers share with each other and the daemon (the binary's text) once per process;\n")
	fmt.Fprintf(w, "  the PSS sum does not.\n")
	fmt.Fprintf(w, "  %-58s %s\n", "python driver (python3 -c DRIVER)", memText(m.idlePy))
	fmt.Fprintf(w, "  %-58s %s\n", fmt.Sprintf("its sandbox's helpers (%d processes)", m.idleHelpers.N), memText(m.idleHelpers))
	if len(m.idleOthers) > 0 {
		fmt.Fprintf(w, "  %-58s %s (not counted above)\n", "other processes in its sandbox", joinOr(m.idleOthers, "none"))
	}
	fmt.Fprintf(w, "  %-58s RSS %s, PSS %s\n", fmt.Sprintf("its share of the daemon ((with %d − with none) / %d)", h.k, h.k), benchutil.MiB(share.RSS), benchutil.MiB(share.PSS))
	fmt.Fprintf(w, "  %-58s RSS %s, %s\n", "idle cellbox kernel, own scratch workspace (the figure)", benchutil.MiB(total.RSS), pssText(total))
	if s := m.shared; s != nil {
		t2, _ := b.idleFigure(s.k)
		fmt.Fprintf(w, "  %-58s RSS %s, %s\n", fmt.Sprintf("  the same with the helpers shared by %d kernels", s.k), benchutil.MiB(t2.RSS), pssText(t2))
	}
	fmt.Fprintf(w, "  %-58s %s\n", "idle ipykernel (its process; jupyter has no helpers)", memText(m.jIdle))
	for _, h := range []*hundred{m.scratch, m.shared} {
		if h == nil {
			continue
		}
		fmt.Fprintf(w, "  %d idle kernels, %s, in a new daemon: started in %.1f s, shut down in %.1f s; %d sandboxes\n",
			h.k, h.where, h.start.Seconds(), h.shutdown.Seconds(), h.sandboxes)
		fmt.Fprintf(w, "    %-56s %s\n", "before: the daemon with no kernel", memText(h.baseDaemon))
		fmt.Fprintf(w, "    %-56s %s\n", fmt.Sprintf("before: its pooled sandbox, launched ahead (%d helpers)", h.baseHelpers.N), memText(h.baseHelpers))
		fmt.Fprintf(w, "    %-56s %s\n", "the daemon itself", memText(h.daemon))
		fmt.Fprintf(w, "    %-56s %s\n", fmt.Sprintf("all python processes (%d)", h.pythons.N), memText(h.pythons))
		fmt.Fprintf(w, "    %-56s %s\n", fmt.Sprintf("all sandbox helpers (%d, the pool's included)", h.helper.N), memText(h.helper))
		if h.others.N > 0 {
			fmt.Fprintf(w, "    %-56s %s: %s\n", fmt.Sprintf("other processes (%d)", h.others.N), memText(h.others), joinOr(h.otherNames, ""))
		}
		mg := b.marginal(h)
		fmt.Fprintf(w, "    %-56s RSS %s, %s\n", "per kernel: everything's growth from the baseline / k", benchutil.MiB(mg.RSS), pssText(mg))
	}
}
