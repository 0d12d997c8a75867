package workspace

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
)

// BenchmarkCheckpoint is what checkpoints and forks cost against the size
// of the upper layer: 1,000, 10,000 and 100,000 small files (100 a
// directory), and, with CELLBOX_BENCH_BIG=1 and room on the disk, one
// file of 1 GiB. For each:
//
//	first      a checkpoint with no checkpoint before it: every file copied
//	one        a checkpoint after one file changed: one copied, the rest linked
//	auto-same  an automatic checkpoint with nothing changed: reused, nothing taken
//	fork       workspace/fork
//
// Run it with a count of iterations, as the 100,000-file case takes
// seconds an iteration:
//
//	CGO_ENABLED=0 go test ./workspace/ -run '^$' -bench BenchmarkCheckpoint -benchtime 3x
func BenchmarkCheckpoint(b *testing.B) {
	type size struct {
		name  string
		files int   // small files
		big   int64 // bytes of one big file
	}
	sizes := []size{{"1k", 1000, 0}, {"10k", 10000, 0}, {"100k", 100000, 0}}
	if os.Getenv("CELLBOX_BENCH_BIG") == "1" {
		sizes = append(sizes, size{"1GiB", 0, 1 << 30})
	}
	for _, sz := range sizes {
		b.Run(sz.name, func(b *testing.B) {
			if sz.big > 0 {
				// The file, a checkpoint's copy and a fork's: three times
				// its size, and a margin.
				var fs unix.Statfs_t
				if err := unix.Statfs(os.TempDir(), &fs); err != nil || int64(fs.Bavail)*fs.Bsize < 4*sz.big {
					b.Skipf("%s needs %d GiB free in %s", sz.name, 4*sz.big>>30, os.TempDir())
				}
			}
			w, m := benchWorkspace(b, sz.files, sz.big)
			ctx := context.Background()
			clear := func() {
				cps, err := w.Checkpoints()
				if err != nil {
					b.Fatal(err)
				}
				for _, cp := range cps {
					if err := w.DeleteCheckpoint(ctx, cp.CheckpointID); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.Run("first", func(b *testing.B) {
				c, copied := newOpClock(b), 0
				for range b.N {
					clear()
					c.start()
					cp, err := w.Checkpoint(ctx, "", nil)
					c.stop()
					if err != nil {
						b.Fatal(err)
					}
					copied += cp.Copied
				}
				c.report(copied)
			})
			b.Run("one", func(b *testing.B) {
				if _, err := w.Checkpoint(ctx, "", nil); err != nil {
					b.Fatal(err)
				}
				c, copied := newOpClock(b), 0
				for i := range b.N {
					if _, err := w.FsWrite(protocol.FsWriteParams{Path: "small.txt", Content: fmt.Sprint("change ", i, " ", time.Now().UnixNano())}); err != nil {
						b.Fatal(err)
					}
					c.start()
					cp, err := w.Checkpoint(ctx, "", nil)
					c.stop()
					if err != nil {
						b.Fatal(err)
					}
					copied += cp.Copied
				}
				c.report(copied)
			})
			b.Run("auto-same", func(b *testing.B) {
				if _, err := w.AutoCheckpoint(ctx, ""); err != nil {
					b.Fatal(err)
				}
				c := newOpClock(b)
				for range b.N {
					c.start()
					cp, err := w.AutoCheckpoint(ctx, "")
					c.stop()
					if err != nil {
						b.Fatal(err)
					}
					if !cp.Reused {
						b.Fatalf("nothing changed, yet an automatic checkpoint was taken: %+v", cp)
					}
				}
				c.report(0)
			})
			b.Run("fork", func(b *testing.B) {
				c := newOpClock(b)
				for range b.N {
					c.start()
					f, err := m.Fork(ctx, w.ID(), "")
					c.stop()
					if err != nil {
						b.Fatal(err)
					}
					if err := m.CloseWorkspace(ctx, f.ID(), true); err != nil {
						b.Fatal(err)
					}
				}
				c.report(-1)
			})
		})
	}
}

// opClock times the operations of a sub-benchmark, and only them (not
// what prepares each): b's timer, and the CPU time of this process, which
// on a machine others load says what an operation costs better than the
// time it took (the quota tick of the workspace's sandbox runs meanwhile
// and counts).
type opClock struct {
	b       *testing.B
	cpu, at time.Duration
}

func newOpClock(b *testing.B) *opClock {
	b.StopTimer()
	b.ResetTimer()
	return &opClock{b: b}
}

func (c *opClock) start() {
	c.at = processCPU()
	c.b.StartTimer()
}

func (c *opClock) stop() {
	c.b.StopTimer()
	c.cpu += processCPU() - c.at
}

// report reports milliseconds an operation, of CPU too, and, when copied
// is not negative, the files copied an operation.
func (c *opClock) report(copied int) {
	n := float64(c.b.N)
	c.b.ReportMetric(float64(c.b.Elapsed().Microseconds())/1000/n, "ms/op")
	c.b.ReportMetric(float64(c.cpu.Microseconds())/1000/n, "cpu-ms/op")
	if copied >= 0 {
		c.b.ReportMetric(float64(copied)/n, "copied/op")
	}
}

// processCPU is the CPU time this process used, user and system.
func processCPU() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchWorkspace is an overlay workspace over a small project whose upper
// layer holds files small files (in directories of 100), or one file of
// big bytes, and small.txt, written by a program in its sandbox.
func benchWorkspace(b *testing.B, files int, big int64) (*Workspace, *Manager) {
	b.Helper()
	project := b.TempDir()
	if err := os.WriteFile(project+"/README", []byte("readme\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	m, err := NewManager(Options{StateDir: b.TempDir(), DefaultRoot: project})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		for _, info := range m.List() {
			_ = m.CloseWorkspace(context.Background(), info.WorkspaceID, true)
		}
		m.Close()
	})
	w, err := m.Open(context.Background(), protocol.WorkspaceOpenParams{Root: project, Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	script := fmt.Sprintf(`
import os
for d in range(%d // 100):
    os.makedirs("tree/d%%d" %% d)
    for j in range(100):
        with open("tree/d%%d/f%%d.txt" %% (d, j), "w") as f:
            f.write("file %%d %%d\n" %% (d, j) * 4)
if %d:
    chunk = os.urandom(1 << 20)
    with open("big.bin", "wb") as f:
        for _ in range(%d >> 20):
            f.write(chunk)
with open("small.txt", "w") as f:
    f.write("small\n")
`, files, big, big)
	l, err := ResolveLimits(&protocol.Limits{FileSizeBytes: 2 << 30, TimeoutMs: 600_000}, DefaultLimits)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	r, err := Run(ctx, w, ProcSpec{Argv: []string{"python3", "-c", script}, Limits: l}, nil, 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	if r.Status.Code != 0 {
		b.Fatalf("writing the files: exit %d: %s", r.Status.Code, strings.TrimSpace(string(r.Stderr)))
	}
	b.Logf("upper layer of %d files and %d bytes written in %v", files+1, big, time.Since(start).Round(time.Millisecond))
	return w, m
}
