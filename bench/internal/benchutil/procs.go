//go:build linux

package benchutil

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Proc is a process seen in the host's /proc (a sandbox's processes are
// there too, under their host pids).
type Proc struct {
	PID, PPID int
	Argv      []string
	// CPU is the user and system time of all its threads (utime+stime of
	// /proc/PID/stat), at the scan.
	CPU time.Duration
	// Start is its start time in clock ticks since boot: with the pid, it
	// names one process even if the pid is reused.
	Start uint64
}

// Procs is a snapshot of every process, by pid.
type Procs map[int]*Proc

// clockTick is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go runs on (sysconf is out of reach without cgo).
const clockTick = 10 * time.Millisecond

// Scan reads every process's stat and cmdline.
func Scan() Procs {
	ps := Procs{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone since ReadDir
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 20 {
			continue
		}
		p := &Proc{PID: pid}
		p.PPID, _ = strconv.Atoi(f[1])
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		p.CPU = time.Duration(utime+stime) * clockTick
		p.Start, _ = strconv.ParseUint(f[19], 10, 64)
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		p.Argv = strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		ps[pid] = p
	}
	return ps
}

// Under lists root's descendants (not root).
func (ps Procs) Under(root int) []*Proc {
	kids := map[int][]*Proc{}
	for _, p := range ps {
		kids[p.PPID] = append(kids[p.PPID], p)
	}
	var out []*Proc
	var walk func(int)
	walk = func(pid int) {
		for _, k := range kids[pid] {
			out = append(out, k)
			walk(k.PID)
		}
	}
	walk(root)
	return out
}

// WaitGone waits until none of ps runs any more, and says which still do.
func WaitGone(ps []*Proc, timeout time.Duration) error {
	left := StillRunning(ps, timeout)
	if len(left) == 0 {
		return nil
	}
	names := make([]string, len(left))
	for i, p := range left {
		names[i] = fmt.Sprintf("%d %s", p.PID, p.Name())
	}
	return fmt.Errorf("%d processes still run %v after their daemon: %s", len(left), timeout, strings.Join(names, "; "))
}

// StillRunning polls every 100 ms until none of ps runs any more (a reused
// pid with another start time does not count) or timeout passes, and
// returns those that still run.
func StillRunning(ps []*Proc, timeout time.Duration) []*Proc {
	deadline := time.Now().Add(timeout)
	for {
		now := Scan()
		var left []*Proc
		for _, p := range ps {
			if q := now[p.PID]; q != nil && q.Start == p.Start {
				left = append(left, p)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// IsPython: a kernel's driver, `python3 -c SRC` (kernel/drivers.go).
func (p *Proc) IsPython() bool {
	return len(p.Argv) >= 2 && strings.HasPrefix(filepath.Base(p.Argv[0]), "python") &&
		(p.Argv[1] == "-c" || len(p.Argv) >= 3 && p.Argv[2] == "-c")
}

// IsHelper: a sandbox's init or spawner, the lean helper or the
// re-executed daemon binary (workspace/sandbox, argv0Prefix).
func (p *Proc) IsHelper() bool {
	return len(p.Argv) > 0 && strings.HasPrefix(p.Argv[0], "cellbox-sandbox:")
}

// Name is the process's argv[0], short for a kernel's driver.
func (p *Proc) Name() string {
	if len(p.Argv) == 0 || p.Argv[0] == "" {
		return "?"
	}
	if p.IsPython() {
		return filepath.Base(p.Argv[0]) + " -c DRIVER"
	}
	return p.Argv[0]
}

// Mem is the memory of some processes, in KiB.
type Mem struct {
	N                 int   // processes
	RSS               int64 // VmRSS, /proc/PID/status
	Anon, File, Shmem int64 // RSS's parts: RssAnon, RssFile, RssShmem
	PSS               int64 // /proc/PID/smaps_rollup
	PSSMissing        int   // processes whose smaps_rollup was not readable
}

// Add adds o's processes to m.
func (m *Mem) Add(o Mem) {
	m.N += o.N
	m.RSS += o.RSS
	m.Anon += o.Anon
	m.File += o.File
	m.Shmem += o.Shmem
	m.PSS += o.PSS
	m.PSSMissing += o.PSSMissing
}

// MemOf reads one process's memory.
func MemOf(pid int) Mem {
	m := Mem{N: 1, PSSMissing: 1}
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	if b, err := os.ReadFile(filepath.Join(dir, "status")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			var dst *int64
			switch k {
			case "VmRSS":
				dst = &m.RSS
			case "RssAnon":
				dst = &m.Anon
			case "RssFile":
				dst = &m.File
			case "RssShmem":
				dst = &m.Shmem
			default:
				continue
			}
			*dst = firstInt(v)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "smaps_rollup")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Pss:"); ok {
				m.PSS, m.PSSMissing = firstInt(v), 0
			}
		}
	}
	return m
}

// MemOfAll sums MemOf over ps.
func MemOfAll(ps []*Proc) Mem {
	var m Mem
	for _, p := range ps {
		m.Add(MemOf(p.PID))
	}
	return m
}

// Filter keeps the processes keep says yes to.
func Filter(ps []*Proc, keep func(*Proc) bool) []*Proc {
	var out []*Proc
	for _, p := range ps {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

// FDs counts pid's open descriptors.
func FDs(pid int) (int, error) {
	ents, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	if err != nil {
		return 0, fmt.Errorf("read the descriptors of %d: %w", pid, err)
	}
	return len(ents), nil
}

// RunTime is the time pid's threads have run on a CPU, in ns, summed
// over /proc/PID/task/*/schedstat: exact, where stat's utime+stime come
// in 10 ms ticks. ok is false when none was readable.
func RunTime(pid int) (d time.Duration, ok bool) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "schedstat"))
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			d += time.Duration(ns)
			ok = true
		}
	}
	return d, ok
}

// MiB formats KiB as MiB.
func MiB(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

func firstInt(s string) int64 {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.ParseInt(f[0], 10, 64)
	return n
}
