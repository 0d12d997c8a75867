package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Terminal benchmarks against the real binary (bench/pty.sh runs them):
//
//	BenchmarkPtyThroughput  `cat` of a file (200 MB, CELLBOX_BENCH_PTY_MB)
//	                        through a terminal to a stdio and to a websocket
//	                        client that acks as it goes, side by side with
//	                        reading a terminal directly in-process (creack/pty
//	                        on the host, the same `cat`: the physical limit).
//	                        Each run does all three, interleaved
//	                        (CELLBOX_BENCH_PTY_RUNS runs per iteration).
//	BenchmarkPtyEcho        one keystroke (pty/write of one char) to its echo
//	                        (the pty/output that carries it), with `cat` in
//	                        raw mode as the program: p50 and p99.

// ptyBenchCmd is the program all three throughput runs use: the terminal
// passes the file's bytes through as they are.
const ptyBenchCmd = "stty -onlcr -echo; exec cat big.txt"

func BenchmarkPtyThroughput(b *testing.B) {
	testLogLevel = "warn"
	mb, runs := 200, 1
	if v, err := strconv.Atoi(os.Getenv("CELLBOX_BENCH_PTY_MB")); err == nil && v > 0 {
		mb = v
	}
	if v, err := strconv.Atoi(os.Getenv("CELLBOX_BENCH_PTY_RUNS")); err == nil && v > 0 {
		runs = v
	}
	size := mb * 1_000_000
	project := b.TempDir()
	bigFile(b, filepath.Join(project, "big.txt"), size)

	stdio := startStdio(b)
	sc := stdioPtyClient(b, stdio)
	listen := startListen(b)
	wc := wsPtyClient(b, listen)
	for _, c := range []*ptyClient{sc, wc} {
		c.keep, c.noHash = false, true
	}
	sws := sc.openWorkspace(b, project, "bench")
	wws := wc.openWorkspace(b, project, "bench")

	// Wall-clock time of each way, and the CPU time the daemon and the
	// client (this process) spent on the cellbox ones.
	var direct, overStdio, overWS, stdioCPU, wsCPU, stdioClient, wsClient time.Duration
	b.ResetTimer()
	for range b.N * runs {
		direct += directPty(b, project, size)
		c0, d0 := cpuSelf(), cpuOf(stdio.cmd.Process.Pid)
		overStdio += throughCellbox(b, sc, sws, size)
		c1, d1, w0 := cpuSelf(), cpuOf(stdio.cmd.Process.Pid), cpuOf(listen.cmd.Process.Pid)
		overWS += throughCellbox(b, wc, wws, size)
		c2, w1 := cpuSelf(), cpuOf(listen.cmd.Process.Pid)
		stdioCPU, stdioClient, wsCPU, wsClient = stdioCPU+d1-d0, stdioClient+c1-c0, wsCPU+w1-w0, wsClient+c2-c1
	}
	b.StopTimer()
	total := float64(size) * float64(b.N*runs) / 1e6
	rate := func(d time.Duration) float64 { return total / d.Seconds() }
	perGB := func(d time.Duration) float64 { return d.Seconds() / total * 1000 }
	b.ReportMetric(rate(direct), "direct-MB/s")
	b.ReportMetric(rate(overStdio), "stdio-MB/s")
	b.ReportMetric(rate(overWS), "ws-MB/s")
	b.ReportMetric(rate(overStdio)/rate(direct), "stdio/direct")
	b.ReportMetric(rate(overWS)/rate(direct), "ws/direct")
	b.Logf("cat of %d MB through a terminal, %d run(s) of each: direct read %.0f MB/s; stdio client %.0f MB/s (%.0f%% of direct); websocket client %.0f MB/s (%.0f%% of direct)",
		mb, b.N*runs, rate(direct), rate(overStdio), 100*rate(overStdio)/rate(direct), rate(overWS), 100*rate(overWS)/rate(direct))
	b.Logf("CPU seconds per GB: stdio daemon %.1f, client %.1f; websocket daemon %.1f, client %.1f",
		perGB(stdioCPU), perGB(stdioClient), perGB(wsCPU), perGB(wsClient))
}

func cpuSelf() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func cpuOf(pid int) time.Duration {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.Atoi(f[11])
	s, _ := strconv.Atoi(f[12])
	return time.Duration(u+s) * 10 * time.Millisecond
}

// directPty runs the benchmark's cat on a terminal of the host (creack/pty)
// and reads the master as fast as it can.
func directPty(b *testing.B, dir string, size int) time.Duration {
	b.Helper()
	cmd := exec.Command("sh", "-c", ptyBenchCmd)
	cmd.Dir = dir
	start := time.Now()
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 80, Rows: 24})
	if err != nil {
		b.Fatal(err)
	}
	defer ptmx.Close()
	buf := make([]byte, 64<<10)
	n := 0
	for {
		k, err := ptmx.Read(buf)
		n += k
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.EIO) {
				b.Fatal(err)
			}
			break
		}
	}
	_ = cmd.Wait()
	d := time.Since(start)
	if n != size {
		b.Fatalf("direct read got %d bytes, want %d", n, size)
	}
	return d
}

// throughCellbox runs the benchmark's cat in a cellbox terminal and waits
// for all of its output and pty/exit.
func throughCellbox(b testing.TB, c *ptyClient, ws string, size int) time.Duration {
	b.Helper()
	start := time.Now()
	id := c.open(b, protocol.PtyOpenParams{WorkspaceID: ws, Command: []string{"sh", "-c", ptyBenchCmd}})
	if got := c.waitExit(b, id); got.ExitCode != 0 {
		b.Fatalf("cat exit %+v", got)
	}
	d := time.Since(start)
	if st := c.state(id); st.bytes != int64(size) {
		b.Fatalf("got %d bytes, want %d", st.bytes, size)
	}
	c.mustCall(b, protocol.MethodPtyClose, protocol.PtyIDParams{PtyID: id}, nil)
	return d
}

func BenchmarkPtyEcho(b *testing.B) {
	testLogLevel = "warn"
	b.Run("stdio", func(b *testing.B) { echoLatency(b, stdioPtyClient(b, startStdio(b))) })
	b.Run("websocket", func(b *testing.B) { echoLatency(b, wsPtyClient(b, startListen(b))) })
}

// echoLatency types b.N characters, one at a time, each when the last
// one's echo came back, as a person typing does (much faster).
func echoLatency(b *testing.B, c *ptyClient) {
	c.outputs = make(chan string, 16)
	id := c.open(b, protocol.PtyOpenParams{Command: []string{"sh", "-c", "stty raw -echo; echo ready; exec cat"}})
	c.waitText(b, id, "ready")
	drain := func() {
		for {
			select {
			case <-c.outputs:
			default:
				return
			}
		}
	}
	time.Sleep(50 * time.Millisecond)
	drain()
	lat := make([]time.Duration, 0, b.N)
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		ch := string(rune('a' + i%26))
		answered := make(chan error, 1)
		t0 := time.Now()
		go func() {
			_, err := c.conn.Call(ctx, protocol.MethodPtyWrite, protocol.PtyWriteParams{PtyID: id, Data: ch}, nil)
			answered <- err
		}()
		timeout := time.After(5 * time.Second)
	wait:
		for {
			select {
			case got := <-c.outputs:
				if got == ch {
					lat = append(lat, time.Since(t0))
					break wait
				}
				b.Fatalf("typed %q, got %q", ch, got)
			case <-timeout:
				b.Fatalf("no echo of %q", ch)
			}
		}
		if err := <-answered; err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
	b.ReportMetric(float64(pct(0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(pct(0.99).Microseconds())/1000, "p99-ms")
	if b.N > 1 { // not the probe run
		b.Logf("keystroke echo over %d keystrokes: p50 %v, p99 %v, max %v", len(lat), pct(0.50), pct(0.99), lat[len(lat)-1])
	}
}
