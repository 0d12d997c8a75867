//go:build linux

package main

import (
	"fmt"
	"io"
	"time"

	"github.com/cellbox-dev/cellbox/bench/internal/benchutil"
)

func (b *bench) report(w io.Writer) {
	o := b.o
	title := benchutil.Title("a preview (workspace/exposePort) against a direct connection to the same python server", o.label)
	size := benchutil.FileSize(o.cellbox)
	fmt.Fprintf(w, "== %s\n", title)
	fmt.Fprintf(w, "   %s\n", benchutil.Host())
	fmt.Fprintf(w, "   cellbox: %s serve --listen 127.0.0.1:0 (%s); sandbox layers: %s; network %s\n",
		o.cellbox, size, benchutil.Layers(b.sandbox), b.sandbox.Network)
	fmt.Fprintf(w, "   the app (cmd/cellbox/testdata/preview_app.py, http.server.ThreadingHTTPServer, HTTP/1.1 keep-alive, TCP_NODELAY):\n")
	fmt.Fprintf(w, "     preview: python %s in a kernel's sandbox on 127.0.0.1:%d, reached at %s=...\n", orUnknown(b.kernelPy), o.port, b.previewTo)
	fmt.Fprintf(w, "     direct:  python %s on the host, reached at %s\n", b.hostPy, b.sides[direct].base)
	fmt.Fprintf(w, "   the client: Go net/http and gorilla/websocket in this process; each figure cut into %d rounds, the sides alternating,\n", o.rounds)
	fmt.Fprintf(w, "   after %d unmeasured operations per side; %.0f s in all\n", o.warmup, b.elapsed.Seconds())
	fmt.Fprintln(w)

	const f = "%-58s %12s %12s %8s\n"
	fmt.Fprintf(w, f, "figure", "preview", "direct", "ratio")
	for _, g := range b.figs {
		if g.throughput {
			var mibs [2]float64
			for i := range 2 {
				if g.dur[i] > 0 {
					mibs[i] = float64(g.bytes[i]) / (1 << 20) / g.dur[i].Seconds()
				}
			}
			fmt.Fprintf(w, f, fmt.Sprintf("%s (%d MiB): MiB/s", g.name, g.bytes[preview]>>20),
				fmt.Sprintf("%.0f", mibs[preview]), fmt.Sprintf("%.0f", mibs[direct]), ratio(mibs[preview], mibs[direct]))
			continue
		}
		s := [2]benchutil.Summary{g.lat[preview].Summary(), g.lat[direct].Summary()}
		for _, q := range []struct {
			name string
			get  func(benchutil.Summary) time.Duration
		}{{"p50", func(s benchutil.Summary) time.Duration { return s.P50 }}, {"p99", func(s benchutil.Summary) time.Duration { return s.P99 }}} {
			p, d := q.get(s[preview]), q.get(s[direct])
			fmt.Fprintf(w, f, fmt.Sprintf("%s (N=%d): %s", g.name, s[preview].N, q.name), benchutil.Ms(p), benchutil.Ms(d), ratio(p.Seconds(), d.Seconds()))
		}
		if g.note != "" {
			fmt.Fprintf(w, "  (%s)\n", g.note)
		}
	}
	fmt.Fprintf(w, "ratio: preview ÷ direct (for MiB/s, below 1 is slower)\n")
	fmt.Fprintln(w)

	fmt.Fprintf(w, "CPU per operation, µs (utime+stime of each process over the figure's rounds, 10 ms ticks), and connections opened:\n")
	const g = "%-42s %8s %8s %8s %8s | %8s %8s | %s\n"
	fmt.Fprintf(w, g, "", "daemon", "helpers", "app", "client", "app", "client", "connections: client / app accepted")
	fmt.Fprintf(w, g, "", "preview", "", "", "", "direct", "", "preview; direct")
	for _, fig := range b.figs {
		p, d := fig.cpu[preview], fig.cpu[direct]
		np, nd := fig.ops[preview], fig.ops[direct]
		fmt.Fprintf(w, g, fig.name, us(p.daemon, np), us(p.helpers, np), us(p.app, np), us(p.client, np), us(d.app, nd), us(d.client, nd),
			fmt.Sprintf("%d/%d for %d; %d/%d for %d", fig.dials[preview], fig.conns[preview], np, fig.dials[direct], fig.conns[direct], nd))
	}
	fmt.Fprintf(w, "(daemon and helpers on the direct side, which should be idle: %s and %s µs per operation, summed over the figures)\n",
		us(sum(b.figs, func(c cpu) time.Duration { return c.daemon }), sumOps(b.figs)), us(sum(b.figs, func(c cpu) time.Duration { return c.helpers }), sumOps(b.figs)))
}

func sum(figs []*figure, get func(cpu) time.Duration) time.Duration {
	var d time.Duration
	for _, f := range figs {
		d += get(f.cpu[direct])
	}
	return d
}

func sumOps(figs []*figure) int {
	n := 0
	for _, f := range figs {
		n += f.ops[direct]
	}
	return n
}

func us(d time.Duration, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(d.Microseconds())/float64(n))
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}
