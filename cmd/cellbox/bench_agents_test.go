package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// BenchmarkExecuteAgents: the round trip of a python kernel/execute as an
// agent's `run` makes it (PROTOCOL.md §10), against the real binary: plain
// (every execution's changed files are tracked), with checkpoint: true
// when nothing changed (the automatic checkpoint is reused), and with
// checkpoint: true when each execution writes a file (one is taken,
// copying only what changed). The project holds FILES files (default 1000)
// of which the workspace changed CHANGED (default 100). Run with
// bench/agents.sh; CELLBOX_BENCH_BIN measures another build of cellbox
// (an earlier one, for a before and after). Figures: p50-µs and p99-µs.
func BenchmarkExecuteAgents(b *testing.B) {
	testLogLevel = "warn"
	bin := cellboxBin
	if o := os.Getenv("CELLBOX_BENCH_BIN"); o != "" {
		bin = o
	}
	files, changed := envInt("FILES", 1000), envInt("CHANGED", 100)
	project := b.TempDir()
	for i := 0; i < files; i++ {
		p := filepath.Join(project, fmt.Sprintf("d%d/f%d.txt", i%20, i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("line\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	saved := cellboxBin
	cellboxBin = bin
	p := startStdio(b)
	cellboxBin = saved
	c := p.client()
	c.initialize(b)
	var ws protocol.WorkspaceInfo
	c.mustCall(b, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: project}, &ws)
	kid := startKernel(b, c, protocol.KernelStartParams{Language: "python", WorkspaceID: ws.WorkspaceID}).KernelID
	res, outs := execute(b, c, kid, fmt.Sprintf("for i in range(%d): open(f'd{i%%20}/f{i}.txt', 'a').write('x')", changed))
	wantOK(b, res, outs)

	run := func(b *testing.B, code func(i int) string, checkpoint bool) {
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			var r protocol.ExecuteResult
			if err := c.call(b, protocol.MethodKernelExecute, protocol.KernelExecuteParams{KernelID: kid, Code: code(i), Checkpoint: checkpoint}, &r); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
			if r.Status != protocol.ExecutionStatusOK {
				b.Fatalf("%+v", r)
			}
		}
		b.StopTimer()
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
	same := func(int) string { return "1+1" }
	b.Run("plain", func(b *testing.B) { run(b, same, false) })
	b.Run("checkpoint-unchanged", func(b *testing.B) { run(b, same, true) })
	b.Run("checkpoint-one-write", func(b *testing.B) {
		run(b, func(i int) string { return fmt.Sprintf("open('w.txt', 'w').write('%d')", i) }, true)
	})
}

// envInt is the integer in the variable name, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
