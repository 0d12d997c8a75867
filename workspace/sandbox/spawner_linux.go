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
// no_new_privs, landlock, seccomp, not dumpable. Programs get their own
// session, their stdio, and per-program rlimits (through prlimit(1), as Go
// cannot set a child's rlimits between fork and exec).

// Paths inside the sandbox, for Landlock: everything the mount namespace
// shows may be read and run, and only the sandbox's writable places written
// (even were a read-only mount made writable).
var (
	landlockRO = []string{"/"}
	landlockRW = []string{"/workspace", "/tmp", "/var/tmp", "/dev/shm", SandboxHome, "/dev/pts", "/dev/ptmx", "/dev/null", "/dev/zero", "/dev/full", "/dev/tty"}
)

// prlimitPath is util-linux's prlimit inside the sandbox.
const prlimitPath = "/usr/bin/prlimit"

type spawner struct {
	conn *msgConn

	mu     sync.Mutex     // guards the fields below
	procs  map[uint64]int // id -> pid of the programs it started
	byPid  map[int]uint64 // and back
	kicked chan struct{}  // a program was started (wakes the reaper)
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
	// Wait for the init to finish the root (EOF on the go pipe); it writes
	// "host" first when the sandbox has the host's network.
	goR := os.NewFile(spawnerGoFD, "go")
	said, _ := io.ReadAll(io.LimitReader(goR, 64))
	goR.Close()
	hostNetwork := string(said) == string(NetworkHost)

	if err := innerProc(); err != nil {
		_ = conn.send(&msg{Op: "error", Err: err.Error()})
		return 1
	}
	layers, err := lockDown(hostNetwork)
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
	s := &spawner{conn: conn, procs: make(map[uint64]int), byPid: make(map[int]uint64), kicked: make(chan struct{}, 1)}
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

// lockDown applies to the spawner itself what every program must have.
func lockDown(hostNetwork bool) (*Layers, error) {
	layers := &Layers{}
	// No namespace of any kind can be created below this point.
	for _, ns := range []string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup", "time"} {
		path := "/proc/sys/user/max_" + ns + "_namespaces"
		if err := os.WriteFile(path, []byte("0"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
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
	// Landlock's TCP rules would leave "host" half a network (UDP only):
	// with the host's network, TCP is the host's too.
	if err := installLandlock(existing(landlockRO), existing(landlockRW), hostNetwork); err != nil {
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

// dropCapabilities empties the bounding, ambient, inheritable, permitted and
// effective sets of this thread, the one that forks every program.
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
	if err := setTag(m.ID); err != nil {
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

// Every process a program starts carries the program's tag: the soft
// RLIMIT_LOCKS, which the kernel no longer enforces, which fork, exec,
// setsid and daemonizing all keep, and which the spawner sets on itself
// just before it forks the program (spawns are serialized on its thread).
// So "kill the program's tree" finds a double-forked child that left its
// session and was reparented to the spawner. Code could change its own
// soft limit to leave the tree; it would only escape a kill in its own
// sandbox, which killall still reaches.
const tagBase = 1 << 40

func setTag(id uint64) error {
	lim := unix.Rlimit{Cur: tagBase + id, Max: unix.RLIM_INFINITY}
	if err := unix.Setrlimit(unix.RLIMIT_LOCKS, &lim); err != nil {
		return fmt.Errorf("tag the program (RLIMIT_LOCKS): %w", err)
	}
	return nil
}

// tagged lists the processes carrying program id's tag, from the sandbox's
// /proc/PID/limits.
func tagged(id uint64) []int {
	want := strconv.FormatUint(tagBase+id, 10)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == 1 {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/limits")
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			if strings.HasPrefix(line, "Max file locks") {
				if f := strings.Fields(line[len("Max file locks"):]); len(f) > 0 && f[0] == want {
					out = append(out, pid)
				}
				break
			}
		}
	}
	return out
}

// signal sends a signal to a program, or with Tree to its whole session,
// every process descended from it, and every process carrying its tag.
func (s *spawner) signal(m *msg) {
	s.mu.Lock()
	pid, ok := s.procs[m.ID]
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
	// Find the tree first (the program's children lose it as their parent
	// when it dies), then signal the program itself first, so that it ends
	// by the signal and not by seeing its children end.
	tree := append(descendants(pid), tagged(m.ID)...)
	_ = syscall.Kill(pid, sig)
	_ = syscall.Kill(-pid, sig) // its process group (= session, from Setsid)
	for _, p := range tree {
		_ = syscall.Kill(p, sig)
	}
}

// descendants lists the processes below pid, from the sandbox's /proc.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, ok := ParentPID(e.Name())
		if !ok {
			continue
		}
		children[ppid] = append(children[ppid], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
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
