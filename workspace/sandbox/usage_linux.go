package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// userHZ is the unit of the times in /proc/PID/stat (USER_HZ, which Linux
// fixes at 100 for user space on every architecture it runs on).
const userHZ = 100

// maxTree bounds the processes a measure walks.
const maxTree = 1 << 14

// Usage measures the program and its descendants from /proc, when it is
// asked (nothing polls): a few small reads per process.
func (p *Process) Usage() (Usage, error) {
	select {
	case <-p.exited:
		return Usage{}, errors.New("usage: the program has ended")
	default:
	}
	pid, err := p.hostPID()
	if err != nil {
		return Usage{}, err
	}
	var u Usage
	for _, q := range tree(pid) {
		cpu, ok := cpuTicks(q)
		if !ok {
			continue // ended meanwhile
		}
		u.CPU += time.Duration(cpu) * time.Second / userHZ
		u.RSSBytes += residentBytes(q)
		u.Processes++
	}
	if u.Processes == 0 {
		return Usage{}, errors.New("usage: the program has ended")
	}
	return u, nil
}

// hostPID is the program's pid as the daemon's /proc sees it: the process
// below the sandbox's init whose innermost pid (the last of NSpid in
// /proc/PID/status) is Pid. Found once, then checked again at each use
// (cheap; a pid is not reused before the spawner waits for the program).
func (p *Process) hostPID() (int, error) {
	if h := int(p.hostPid.Load()); h > 0 {
		if nsPid(h) == p.Pid {
			return h, nil
		}
	}
	if p.Pid <= 0 {
		return 0, errors.New("usage: the program has no pid yet")
	}
	for _, q := range tree(p.s.InitPID()) {
		if nsPid(q) == p.Pid {
			p.hostPid.Store(int64(q))
			return q, nil
		}
	}
	return 0, fmt.Errorf("usage: no process of the sandbox (init %d) has pid %d in it", p.s.InitPID(), p.Pid)
}

// nsPid is a process's pid in its innermost pid namespace, or -1.
func nsPid(pid int) int {
	var buf [4096]byte
	b, err := readProc("/proc/"+strconv.Itoa(pid)+"/status", buf[:])
	if err != nil {
		return -1
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("NSpid:")); ok {
			f := bytes.Fields(v)
			if len(f) == 0 {
				return -1
			}
			n, err := strconv.Atoi(string(f[len(f)-1]))
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}

// tree lists pid and every process below it (at most maxTree), from the
// kernel's children lists.
func tree(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out) && len(out) < maxTree; i++ {
		out = append(out, Children(out[i])...)
	}
	return out
}

// Children are the direct children of pid (every thread's
// /proc/PID/task/TID/children); none when pid is gone.
func Children(pid int) []int {
	var out []int
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	var buf [4096]byte
	for _, tid := range procDir(dir) {
		b, err := readProc(dir+tid+"/children", buf[:])
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// readProc reads a /proc file with plain system calls: the os package's
// files register with the runtime's poller (which /proc refuses), tripling
// the calls of a walk that runs for every sandbox. It reads into buf and,
// when the file is longer (a children list of hundreds of pids, which
// sandboxed code decides), into a larger buffer: never a part of the file
// as if it were the whole. At most maxProcFile bytes.
func readProc(path string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	n := 0
	for {
		if n == len(buf) {
			if len(buf) >= maxProcFile {
				return nil, fmt.Errorf("%s is longer than %d bytes", path, maxProcFile)
			}
			buf = append(buf[:n], make([]byte, max(len(buf), 4096))...)
		}
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			return buf[:n], nil
		}
		n += m
	}
}

// maxProcFile bounds what readProc reads of one file: a children list of
// every pid a sandbox may have (pids are at most 7 digits).
const maxProcFile = 8 << 20

// procDir lists the names in a /proc directory with plain system calls
// (see readProc); none when it is gone.
func procDir(dir string) []string {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	names, _ := direntNames(fd)
	return names
}

// cpuTicks is utime+stime+cutime+cstime of /proc/PID/stat, in USER_HZ
// ticks; ok is false when the process is gone.
func cpuTicks(pid int) (int64, bool) {
	var buf [1024]byte
	b, err := readProc("/proc/"+strconv.Itoa(pid)+"/stat", buf[:])
	if err != nil {
		return 0, false
	}
	return statCPU(b)
}

// SandboxActivity sums what the programs of the sandbox whose init is
// initPid have run, exactly: the nanoseconds every thread of every program
// has spent on a CPU (/proc/PID/task/TID/schedstat, which any system call
// moves; /proc/PID/stat's times move only in 10 ms steps, and a burst of
// fallocate calls that allocates gigabytes may not move them at all), and
// how many programs and threads there are (a reaped one leaves the count).
// The programs are listed from the sandbox's own /proc (its init's pid
// namespace, which holds every process of the sandbox, the nested ones
// too): one directory read, not a walk of every thread's children. The
// init and the spawner (the init's one child) are not programs. ok is
// false when the sandbox's /proc cannot be read.
func SandboxActivity(initPid int) (runNs int64, threads int, ok bool) {
	dir, err := unix.Open("/proc/"+strconv.Itoa(initPid)+"/root/proc", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, false
	}
	defer unix.Close(dir)
	names, ok := direntNames(dir)
	if !ok {
		return 0, 0, false
	}
	var buf [1024]byte
	for _, name := range names {
		if name[0] < '1' || name[0] > '9' || name == "1" {
			continue // not a process, or the init
		}
		b, err := readAt(dir, name+"/stat", buf[:])
		if err != nil {
			continue // ended meanwhile
		}
		if ppid, ok := statPPID(b); !ok || ppid == 1 {
			continue // the spawner
		}
		tdir, err := unix.Openat(dir, name+"/task", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		tids, _ := direntNames(tdir)
		for _, tid := range tids {
			b, err := readAt(tdir, tid+"/schedstat", buf[:])
			if err != nil {
				continue
			}
			f := bytes.Fields(b)
			if len(f) == 0 {
				continue
			}
			if ns, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
				runNs += ns
				threads++
			}
		}
		unix.Close(tdir)
	}
	return runNs, threads, true
}

// direntNames lists an open directory's names.
func direntNames(fd int) ([]string, bool) {
	var names []string
	var buf [8192]byte
	for {
		n, err := unix.ReadDirent(fd, buf[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, false
		}
		if n <= 0 {
			return names, true
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// readAt reads a small /proc file below dir (its first len(buf) bytes).
func readAt(dir int, name string, buf []byte) ([]byte, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// statPPID is the parent pid in a /proc/PID/stat line.
func statPPID(b []byte) (int, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	n, err := strconv.Atoi(string(f[1]))
	return n, err == nil
}

// statCPU is utime+stime+cutime+cstime of a /proc/PID/stat line.
func statCPU(b []byte) (int64, bool) {
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	// After comm: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14).
	if len(f) < 15 {
		return 0, false
	}
	var total int64
	for _, s := range f[11:15] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, false
		}
		total += max(n, 0)
	}
	return total, true
}

// residentBytes is a process's resident set (the second field of
// /proc/PID/statm, in pages), or 0.
func residentBytes(pid int) int64 {
	var buf [256]byte
	b, err := readProc("/proc/"+strconv.Itoa(pid)+"/statm", buf[:])
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return n * int64(os.Getpagesize())
}
