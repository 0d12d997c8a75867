//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// proc is a process seen in the host's /proc (a sandbox's processes are
// there too, under their host pids).
type proc struct {
	pid, ppid int
	argv      []string
}

// procs is a snapshot of every process.
type procs map[int]*proc

func scanProcs() procs {
	ps := procs{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		argv := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		ps[pid] = &proc{pid: pid, ppid: ppid, argv: argv}
	}
	return ps
}

// under lists root's descendants (not root).
func (ps procs) under(root int) []*proc {
	kids := map[int][]*proc{}
	for _, p := range ps {
		kids[p.ppid] = append(kids[p.ppid], p)
	}
	var out []*proc
	var walk func(int)
	walk = func(pid int) {
		for _, k := range kids[pid] {
			out = append(out, k)
			walk(k.pid)
		}
	}
	walk(root)
	return out
}

// isPython: a kernel's driver, `python3 -c SRC` (kernel/drivers.go).
func (p *proc) isPython() bool {
	return len(p.argv) >= 2 && strings.HasPrefix(filepath.Base(p.argv[0]), "python") &&
		(p.argv[1] == "-c" || len(p.argv) >= 3 && p.argv[2] == "-c")
}

// isHelper: a sandbox's init or spawner, the re-executed cellbox binary
// (workspace/sandbox, argv0Prefix).
func (p *proc) isHelper() bool {
	return len(p.argv) > 0 && strings.HasPrefix(p.argv[0], "cellbox-sandbox:")
}

func (p *proc) name() string {
	if len(p.argv) == 0 || p.argv[0] == "" {
		return "?"
	}
	if p.isPython() {
		return filepath.Base(p.argv[0]) + " -c DRIVER"
	}
	return p.argv[0]
}

// sandboxInit is the helper at the top of p's sandbox: the ancestor of p
// whose parent is the daemon (0 when there is none).
func (ps procs) sandboxInit(p *proc, daemon int) int {
	for q := p; q != nil; q = ps[q.ppid] {
		if q.ppid == daemon {
			return q.pid
		}
	}
	return 0
}

// mem is the memory of some processes, in KiB.
type mem struct {
	n                      int
	rss, anon, file, shmem int64 // VmRSS and its parts, /proc/PID/status
	pss                    int64 // /proc/PID/smaps_rollup
	pssMissing             int   // processes whose smaps_rollup was not readable
}

func (m *mem) add(o mem) {
	m.n += o.n
	m.rss += o.rss
	m.anon += o.anon
	m.file += o.file
	m.shmem += o.shmem
	m.pss += o.pss
	m.pssMissing += o.pssMissing
}

func (m mem) div(k int) mem {
	if k <= 0 {
		return m
	}
	d := int64(k)
	return mem{n: m.n, rss: m.rss / d, anon: m.anon / d, file: m.file / d, shmem: m.shmem / d, pss: m.pss / d, pssMissing: m.pssMissing}
}

func (m mem) sub(o mem) mem {
	return mem{n: m.n - o.n, rss: m.rss - o.rss, anon: m.anon - o.anon, file: m.file - o.file, shmem: m.shmem - o.shmem, pss: m.pss - o.pss}
}

// memOf reads one process's memory.
func memOf(pid int) mem {
	m := mem{n: 1}
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
				dst = &m.rss
			case "RssAnon":
				dst = &m.anon
			case "RssFile":
				dst = &m.file
			case "RssShmem":
				dst = &m.shmem
			default:
				continue
			}
			*dst = kib(v)
		}
	}
	m.pssMissing = 1
	if b, err := os.ReadFile(filepath.Join(dir, "smaps_rollup")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Pss:"); ok {
				m.pss, m.pssMissing = kib(v), 0
			}
		}
	}
	return m
}

func memOfAll(ps []*proc) mem {
	var m mem
	for _, p := range ps {
		m.add(memOf(p.pid))
	}
	return m
}

func kib(v string) int64 {
	f := strings.Fields(v)
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.ParseInt(f[0], 10, 64)
	return n
}

func mib(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

// pssText is the PSS, or why it is missing.
func (m mem) pssText() string {
	if m.pssMissing > 0 {
		return fmt.Sprintf("PSS n/a (%d unreadable)", m.pssMissing)
	}
	return "PSS " + mib(m.pss)
}

func (m mem) String() string {
	return fmt.Sprintf("RSS %s (anon %s, file %s, shmem %s), %s", mib(m.rss), mib(m.anon), mib(m.file), mib(m.shmem), m.pssText())
}

// cpuTime is the CPU time all of pid's threads have used
// (/proc/PID/task/*/schedstat, in ns; 0 when unreadable).
func cpuTime(pid int) time.Duration {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	ents, _ := os.ReadDir(dir)
	var ns int64
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "schedstat"))
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			ns += n
		}
	}
	return time.Duration(ns)
}
