package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// The spawner starts every program of a sandbox. It runs as the sandbox
// user in a user namespace nested in the sandbox's, and before it starts
// anything it locks itself down exactly as the programs will be, since they
// inherit it: no namespaces can be created below it, no capabilities,
// no_new_privs, landlock, seccomp, not dumpable. The one exception is its
// own: the thread that forks programs keeps CAP_SYS_ADMIN, which exec takes
// from every program, to give each program a mount namespace of its own
// (programNamespace), the mark of its tree. Programs get their own session,
// their stdio, and per-program rlimits (through prlimit(1), as Go cannot
// set a child's rlimits between fork and exec).

// Paths inside the sandbox, for Landlock: everything the mount namespace
// shows may be read and run, and only the sandbox's writable places written
// (even were a read-only mount made writable).
var (
	landlockRO = []string{"/"}
	landlockRW = []string{"/workspace", EnvPath, "/tmp", "/var/tmp", "/dev/shm", SandboxHome, "/dev/pts", "/dev/ptmx", "/dev/null", "/dev/zero", "/dev/full", "/dev/tty"}
)

// prlimitPath is util-linux's prlimit inside the sandbox.
const prlimitPath = "/usr/bin/prlimit"

type spawner struct {
	conn *msgConn

	mu     sync.Mutex        // guards the fields below
	procs  map[uint64]int    // id -> pid of the programs it started
	byPid  map[int]uint64    // and back
	ns     map[uint64]string // id -> the program's mount namespace (programNamespace)
	kicked chan struct{}     // a program was started (wakes the reaper)
}

func spawnerMain([]string) int {
	// Pid 1 of its namespace gets only the signals it handles; the Go
	// runtime handles many, so ignore them (SIGKILL and SIGSTOP from inside
	// the namespace never reach a pid 1).
	ignoreSignals()
	// Programs inherit the credentials, no_new_privs and Landlock domain of
	// the thread that forks them, so this goroutine keeps one thread, locks
	// it down, and starts every program from it (serve runs here too).
	runtime.LockOSThread()
	conn, err := newMsgConn(os.NewFile(spawnerSocketFD, "spawner"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox spawner:", err)
		return 1
	}
	// Wait for the init to finish the root (EOF on the go pipe).
	goR := os.NewFile(spawnerGoFD, "go")
	_, _ = io.Copy(io.Discard, io.LimitReader(goR, 64))
	goR.Close()

	if err := innerProc(); err != nil {
		_ = conn.send(&msg{Op: "error", Err: err.Error()})
		return 1
	}
	layers, err := lockDown()
	if err != nil {
		_ = conn.send(&msg{Op: "error", Err: err.Error()})
		return 1
	}
	if err := unix.Chdir("/workspace"); err != nil {
		_ = conn.send(&msg{Op: "error", Err: "chdir /workspace: " + err.Error()})
		return 1
	}
	if err := conn.send(&msg{Op: "ready", Layers: layers}); err != nil {
		return 1
	}
	s := &spawner{conn: conn, procs: make(map[uint64]int), byPid: make(map[int]uint64), ns: make(map[uint64]string), kicked: make(chan struct{}, 1)}
	go s.reap()
	return s.serve()
}

// innerProc gives this thread (the one that starts programs) a mount
// namespace of its own with a proc of the spawner's pid namespace, so that
// programs see their own pids. The spawner is that namespace's pid 1: code
// in the sandbox cannot SIGKILL or SIGSTOP it, and orphans come to it.
func innerProc() error {
	if err := unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare the programs' mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the programs' mounts private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount the programs' proc: %w", err)
	}
	return nil
}

// Inotify instances and watches are counted per user across user
// namespaces: what the sandbox's programs take is taken from the daemon's
// user, whose own fs/watch needs them too. Each sandbox gets a share of the
// host user's budget, set in its own user namespace (below which nothing
// can raise it): an eighth, at most InotifyInstances and InotifyWatches.
const (
	InotifyInstances = 16
	InotifyWatches   = 65536
)

func capInotify() error {
	for _, c := range []struct {
		name, host string
		most, min  int
	}{
		{"max_inotify_instances", "max_user_instances", InotifyInstances, 2},
		{"max_inotify_watches", "max_user_watches", InotifyWatches, 1024},
	} {
		path := "/proc/sys/user/" + c.name
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			continue // a kernel without per-namespace inotify limits
		}
		// A new user namespace's own limits start unlimited; the host
		// user's budget is the global sysctl.
		hostPath := "/proc/sys/fs/inotify/" + c.host
		b, err := os.ReadFile(hostPath)
		if err != nil {
			return fmt.Errorf("read %s: %w", hostPath, err)
		}
		host, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || host < 1 {
			return fmt.Errorf("read %s: %q is not a positive number", hostPath, b)
		}
		n := min(max(host/8, c.min), c.most, host)
		if err := os.WriteFile(path, []byte(strconv.Itoa(n)), 0); err != nil {
			return fmt.Errorf("limit %s in the nested user namespace: %w", c.name, err)
		}
	}
	return nil
}

// programNamespaces bounds the mount namespaces of a sandbox's programs
// alive at once (one each, programNamespace), the only namespaces that can
// be created below the spawner.
const programNamespaces = 65536

// lockDown applies to the spawner itself what every program must have.
func lockDown() (*Layers, error) {
	layers := &Layers{}
	// No namespace of any kind can be created below this point, but for
	// the spawner's own mount namespace per program.
	for _, ns := range []string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup", "time"} {
		path := "/proc/sys/user/max_" + ns + "_namespaces"
		n := "0"
		if ns == "mnt" {
			n = strconv.Itoa(programNamespaces)
		}
		if err := os.WriteFile(path, []byte(n), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("limit %s namespaces in the nested user namespace: %w", ns, err)
		}
	}
	if err := capInotify(); err != nil {
		return nil, err
	}
	// Every inherited descriptor beyond stdio and our socket: close on exec.
	if err := unix.CloseRange(spawnerSocketFD+1, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return nil, fmt.Errorf("close_range: %w", err)
	}
	if err := dropCapabilities(); err != nil {
		return nil, err
	}
	if err := thisThread(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); err != nil {
		return nil, fmt.Errorf("set no_new_privs: %w", err)
	}
	// TCP is the network namespace's to confine, not Landlock's: a sandbox
	// of its own network has only its loopback (where its servers listen,
	// its programs reach them, and the daemon reaches them for previews
	// through the init) and the daemon's listeners; Landlock's port rules
	// cannot tell that loopback from anything else. With the host's network
	// TCP is the host's. So the spawner never hands Landlock TCP.
	if err := installLandlock(existing(landlockRO), existing(landlockRW), true); err != nil {
		layers.Reason = err.Error()
	} else {
		layers.Landlock = true
	}
	if err := installSeccomp(); err != nil {
		return nil, &LayerError{Layer: "seccomp", Reason: err.Error()}
	}
	layers.Seccomp = true
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("set not dumpable: %w", err)
	}
	return layers, nil
}

// dropCapabilities empties the bounding, ambient and inheritable sets of
// this thread, the one that forks every program, and leaves only
// CAP_SYS_ADMIN in its permitted and effective sets: programNamespace needs
// it, and no program keeps it past exec (the sandbox user is not root in
// its namespace, and every set exec could draw from is empty).
func dropCapabilities() error {
	last := lastCap()
	for c := 0; c <= last; c++ {
		if err := thisThread(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	if err := thisThread(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	data[0].Permitted = 1 << unix.CAP_SYS_ADMIN
	data[0].Effective = 1 << unix.CAP_SYS_ADMIN
	if err := thisThread(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// thisThread makes a per-thread syscall on this thread: the locked one
// that forks every program (the others are the spawner's own runtime's).
func thisThread(trap, a1, a2, a3 uintptr) error {
	if _, _, e := unix.RawSyscall(trap, a1, a2, a3); e != 0 {
		return e
	}
	return nil
}

func lastCap() int {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return n
		}
	}
	return 63
}

func existing(paths []string) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func (s *spawner) serve() int {
	for {
		m, files, err := s.conn.recv()
		if err != nil {
			// The daemon is gone; the init will take everything down.
			return 0
		}
		switch m.Op {
		case "spawn":
			s.spawn(m, files)
		case "signal":
			closeAll(files)
			s.signal(m)
		case "killall":
			closeAll(files)
			// pid 1 killing -1: every process of the namespace but itself.
			_ = syscall.Kill(-1, syscall.SIGKILL)
		default:
			closeAll(files)
		}
	}
}

func (s *spawner) spawn(m *msg, files []*os.File) {
	defer closeAll(files)
	reply := func(err error) {
		_ = s.conn.send(&msg{Op: "started", ID: m.ID, Err: err.Error()})
	}
	if len(m.Argv) == 0 {
		reply(errors.New("empty argv"))
		return
	}
	env := m.Env
	if env == nil {
		env = DefaultEnv()
	}
	path, err := lookPath(m.Argv[0], env)
	if err != nil {
		reply(err)
		return
	}
	cmd := &exec.Cmd{Path: path, Args: m.Argv, Env: env, Dir: m.Dir}
	if cmd.Dir == "" {
		cmd.Dir = "/workspace"
	}
	if args := prlimitArgs(m.Limits); args != nil {
		cmd.Path = prlimitPath
		cmd.Args = append(append(args, "--"), append([]string{path}, m.Argv[1:]...)...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var master *os.File
	if m.PTY != nil {
		ptmx, tty, err := pty.Open()
		if err != nil {
			reply(fmt.Errorf("open a terminal: %w", err))
			return
		}
		defer tty.Close()
		if err := pty.Setsize(ptmx, &pty.Winsize{Cols: m.PTY.Cols, Rows: m.PTY.Rows}); err != nil {
			ptmx.Close()
			reply(fmt.Errorf("size the terminal: %w", err))
			return
		}
		master = ptmx
		defer master.Close()
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		cmd.SysProcAttr.Setctty = true
		cmd.SysProcAttr.Ctty = 0
	}
	next := 0
	if m.PTY == nil {
		for i, has := range m.Stdio {
			if !has {
				continue
			}
			if next >= len(files) {
				reply(errors.New("missing stdio descriptor"))
				return
			}
			switch i {
			case 0:
				cmd.Stdin = files[next]
			case 1:
				cmd.Stdout = files[next]
			case 2:
				cmd.Stderr = files[next]
			}
			next++
		}
	}
	if m.Extra > 0 {
		if next+m.Extra > len(files) {
			reply(errors.New("missing extra descriptors"))
			return
		}
		cmd.ExtraFiles = files[next : next+m.Extra]
	}
	// The reaper looks a pid up under mu: hold it across Start, so that a
	// program that ends at once is found.
	s.mu.Lock()
	ns, err := programNamespace()
	if err != nil {
		s.mu.Unlock()
		reply(err)
		return
	}
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		reply(err)
		return
	}
	pid := cmd.Process.Pid
	s.procs[m.ID] = pid
	s.byPid[pid] = m.ID
	s.ns[m.ID] = ns
	// "started" goes out before the reaper (waiting on mu) can say "exited".
	started := &msg{Op: "started", ID: m.ID, Pid: pid}
	if master != nil {
		_ = s.conn.send(started, int(master.Fd()))
	} else {
		_ = s.conn.send(started)
	}
	s.mu.Unlock()
	_ = cmd.Process.Release() // the reaper waits for it
	select {
	case s.kicked <- struct{}{}:
	default:
	}
}

// reap is the pid namespace's reaper: it waits for every process, reports
// the programs it started, and lets orphans go.
func (s *spawner) reap() {
	for {
		var ws unix.WaitStatus
		var ru unix.Rusage
		pid, err := unix.Wait4(-1, &ws, 0, &ru)
		if err == unix.EINTR {
			continue
		}
		if err != nil { // ECHILD: nothing to wait for until a program starts
			<-s.kicked
			continue
		}
		s.mu.Lock()
		id, ok := s.byPid[pid]
		if ok {
			delete(s.byPid, pid)
			delete(s.procs, id)
			delete(s.ns, id)
		}
		s.mu.Unlock()
		if !ok {
			continue // an orphan
		}
		out := &msg{Op: "exited", ID: id, Code: ws.ExitStatus(), CPUNs: unix.TimevalToNsec(ru.Utime) + unix.TimevalToNsec(ru.Stime), MaxRSS: ru.Maxrss * 1024}
		if ws.Signaled() {
			out.Code, out.Signal = -1, int(ws.Signal())
		}
		_ = s.conn.send(out)
	}
}

// Every program runs in a mount namespace of its own, and so does every
// process it starts: fork and exec keep it, and so do setsid, a double fork
// and anything else code can do to leave its session, its ancestry or a
// tag it can set, since code cannot leave a mount namespace (setns and
// unshare of anything else are refused by seccomp; clone with CLONE_NEWNS
// too; unshare(CLONE_NEWNS) alone needs CAP_SYS_ADMIN, which no program
// has). So "kill the program's tree" is "kill every process in its
// namespace".
//
// The spawner's thread moves into a copy of its mount namespace (the same
// mounts, all private) just before it forks a program, and the program
// keeps that copy. A namespace is named by the id of its root mount, the
// first field of /proc/PID/mountinfo: a copy's mounts get new ids, an id
// is not reused while its mount lives, and mountinfo, unlike
// /proc/PID/ns/mnt, can be read for a process that made itself not
// dumpable. Spawns are serialized on the spawner's thread.
func programNamespace() (string, error) {
	if err := thisThread(unix.SYS_UNSHARE, unix.CLONE_NEWNS, 0, 0); err != nil {
		return "", fmt.Errorf("a mount namespace for the program: %w", err)
	}
	ns, ok := mountNamespace("/proc/thread-self")
	if !ok {
		return "", errors.New("a mount namespace for the program: /proc/thread-self/mountinfo cannot be read")
	}
	return ns, nil
}

// mountNamespace names the mount namespace of the process or thread whose
// /proc directory is dir: the id of its root mount.
func mountNamespace(dir string) (string, bool) {
	f, err := os.Open(dir + "/mountinfo")
	if err != nil {
		return "", false
	}
	defer f.Close()
	var b [32]byte
	n, _ := io.ReadFull(f, b[:])
	id, _, ok := strings.Cut(string(b[:n]), " ")
	return id, ok && id != ""
}

// nsProc is a process of the sandbox: its pid and start time, which tell a
// pid reused by another process.
type nsProc struct {
	pid   int
	start string
}

// inNamespace lists the processes of the sandbox in mount namespace ns. A
// process whose first thread has ended (a zombie leader) is found through
// its other threads.
func inNamespace(ns string) []nsProc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []nsProc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == 1 {
			continue
		}
		dir := "/proc/" + e.Name()
		got, ok := mountNamespace(dir)
		if !ok {
			tasks, _ := os.ReadDir(dir + "/task")
			for _, t := range tasks {
				if got, ok = mountNamespace(dir + "/task/" + t.Name()); ok {
					break
				}
			}
		}
		if !ok || got != ns {
			continue
		}
		out = append(out, nsProc{pid: pid, start: startTime(dir)})
	}
	return out
}

// startTime is the start time field of dir/stat, "" if it cannot be read.
func startTime(dir string) string {
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return ""
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return ""
	}
	// After the command come state (field 3) ... starttime (field 22).
	if f := strings.Fields(string(b[i+1:])); len(f) > 19 {
		return f[19]
	}
	return ""
}

// signalNamespace sends sig once to every process in mount namespace ns
// but those in sent. Processes may fork while /proc is read; the scan is
// repeated until two in a row find no process not yet signalled (a killed
// process forks no more, and a child it forked before is found by the next
// scan).
func signalNamespace(ns string, sig syscall.Signal, sent map[nsProc]bool) {
	for round, quiet := 0, 0; quiet < 2 && round < 100; round++ {
		quiet++
		for _, p := range inNamespace(ns) {
			if sent[p] {
				continue
			}
			sent[p] = true
			quiet = 0
			_ = syscall.Kill(p.pid, sig)
		}
	}
}

// signal sends a signal to a program, or with Group to its process group,
// or with Tree to every process in its mount namespace: all it started,
// however they left its session and ancestry.
func (s *spawner) signal(m *msg) {
	s.mu.Lock()
	pid, ok := s.procs[m.ID]
	ns := s.ns[m.ID]
	s.mu.Unlock()
	if !ok {
		return
	}
	sig := syscall.Signal(m.Signal)
	if m.Group {
		_ = syscall.Kill(-pid, sig)
		return
	}
	if !m.Tree {
		_ = syscall.Kill(pid, sig)
		return
	}
	// The program itself first, so that it ends by the signal and not by
	// seeing its children end.
	first := nsProc{pid: pid, start: startTime("/proc/" + strconv.Itoa(pid))}
	_ = syscall.Kill(pid, sig)
	signalNamespace(ns, sig, map[nsProc]bool{first: true})
}

// lookPath finds file on the PATH of env.
func lookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w in the sandbox's PATH (%s)", file, exec.ErrNotFound, path)
}

// prlimitArgs is the prlimit(1) command line for limits, nil when none.
func prlimitArgs(l Limits) []string {
	var args []string
	add := func(flag string, v int64) {
		if v > 0 {
			n := strconv.FormatInt(v, 10)
			args = append(args, "--"+flag+"="+n+":"+n)
		}
	}
	add("as", l.MemoryBytes)
	add("cpu", l.CPUSeconds)
	add("nproc", l.Pids)
	add("fsize", l.FileSizeBytes)
	add("nofile", l.OpenFiles)
	if args == nil {
		return nil
	}
	return append([]string{"prlimit"}, args...)
}
