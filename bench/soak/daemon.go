//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cellbox-dev/cellbox/bench/internal/benchutil"
)

// sample is what the leak check measures of the daemon.
type sample struct {
	fds, goroutines, threads int
	rssKiB                   int64
	procs, mounts            int
	stateFiles, wsFiles      int
	stateBytes               int64
	heapInuse, heapFree      int64    // Go heap in use, and free but not returned to the OS
	nextGC, gcs              int64    // the heap goal (twice the heap live at the last GC), GC cycles
	procNames                []string // the descendants, for the report when they differ
}

// measure reads the daemon's /proc entries (before /metrics, whose
// connection would count as a descriptor), walks its state dir and reads
// its /metrics.
func measure(ctx context.Context, d *benchutil.Daemon) (sample, error) {
	var s sample
	pid := d.PID()
	var err error
	if s.fds, err = benchutil.FDs(pid); err != nil {
		return s, err
	}
	s.rssKiB = benchutil.MemOf(pid).RSS
	mi, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "mountinfo"))
	if err != nil {
		return s, fmt.Errorf("read the daemon's mountinfo: %w", err)
	}
	s.mounts = bytes.Count(mi, []byte("\n"))
	for _, p := range benchutil.Scan().Under(pid) {
		s.procs++
		s.procNames = append(s.procNames, fmt.Sprintf("%d %s", p.PID, strings.Join(p.Argv, " ")))
	}
	wsDir := filepath.Join(d.State, "workspaces") + string(filepath.Separator)
	_ = filepath.WalkDir(d.State, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		s.stateFiles++
		if strings.HasPrefix(p, wsDir) {
			s.wsFiles++
		}
		if info, err := e.Info(); err == nil {
			s.stateBytes += info.Size()
		}
		return nil
	})
	m, err := d.Metrics(ctx)
	if err != nil {
		return s, err
	}
	g, ok1 := m["go_goroutines"]
	t, ok2 := m["go_threads"]
	s.goroutines, s.threads = int(g), int(t)
	s.heapInuse = int64(m["go_memstats_heap_inuse_bytes"])
	s.heapFree = int64(m["go_memstats_heap_idle_bytes"] - m["go_memstats_heap_released_bytes"])
	s.nextGC = int64(m["go_memstats_next_gc_bytes"])
	s.gcs = int64(m["go_gc_duration_seconds_count"])
	if !ok1 || !ok2 {
		return s, errors.New("/metrics has no go_goroutines or go_threads")
	}
	return s, nil
}

// stop ends the daemon with SIGTERM, as a service manager does, and checks
// that it exits 0 and removes its runtime file.
func stop(d *benchutil.Daemon) error {
	if err := d.Terminate(); err != nil {
		return err
	}
	if _, err := os.Stat(d.RuntimeFile()); err == nil {
		return fmt.Errorf("the daemon left its runtime file %s", d.RuntimeFile())
	}
	return nil
}

// leftover lists the processes of tree still there after the daemon
// exited, polling until none is or timeout passes.
func leftover(tree []*benchutil.Proc, timeout time.Duration) []string {
	var left []string
	for _, p := range benchutil.StillRunning(tree, timeout) {
		left = append(left, fmt.Sprintf("%d %s", p.PID, strings.Join(p.Argv, " ")))
	}
	return left
}
