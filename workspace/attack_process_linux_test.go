package workspace

// Attacks on the sandbox's processes: system calls, terminals, signals,
// leaving a program's tree, and the network (the suite:
// attack_linux_test.go).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

func TestAttackSyscalls(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "syscalls")
	cases := []attackCase{
		{name: "ptrace attach pid 1", script: `sc(101, 16, 1, 0, 0)`, want: []string{"errno=EPERM"}, defence: "seccomp; the nested user namespace too"},
		{name: "ptrace attach own child", control: true, script: `
pid = os.fork()
if pid == 0:
    import time; time.sleep(10); os._exit(0)
sc(101, 16, pid, 0, 0)
os.kill(pid, 9)`, want: []string{"errno=EPERM"}, defence: "seccomp (without it: ok 0, same uid)"},
		{name: "process_vm_readv pid 1", script: `sc(310, 1, 0, 0, 0, 0, 0)`, want: []string{"errno=EPERM"}, defence: "seccomp; the nested user namespace too"},
		{name: "process_vm_readv own child", control: true, script: `
pid = os.fork()
if pid == 0:
    import time; time.sleep(10); os._exit(0)
sc(310, pid, 0, 0, 0, 0, 0)
os.kill(pid, 9)`, want: []string{"errno=EPERM"}, defence: "seccomp (without it: ok 0, same uid)"},
		{name: "mount tmpfs", script: `sc(165, b"none", b"/tmp", b"tmpfs", 0, 0)`, want: []string{"errno=EPERM"}, defence: "seccomp; no capabilities"},
		{name: "umount /workspace", script: `sc(166, b"/workspace", 2)`, want: []string{"errno=EPERM"}, defence: "seccomp; no capabilities"},
		{name: "fsopen", script: `sc(430, b"tmpfs", 0)`, want: []string{"errno=EPERM"}, defence: "seccomp; no capabilities"},
		{name: "open_tree clone", script: `sc(428, -100, b"/workspace", 1)`, want: []string{"errno=EPERM"}, defence: "seccomp; no capabilities"},
		{name: "pivot_root", script: `sc(155, b"/tmp", b"/tmp")`, want: []string{"errno=EPERM"}, defence: "seccomp; no capabilities"},
		{name: "unshare user", script: `sc(272, 0x10000000)`, want: []string{"errno=EPERM", "errno=ENOSPC"},
			defence: "seccomp (EPERM); max_user_namespaces=0 in the nested user namespace (ENOSPC)"},
		{name: "unshare mount", script: `sc(272, 0x00020000)`, want: []string{"errno=EPERM"}, defence: "seccomp; no capabilities"},
		{name: "unshare net", script: `sc(272, 0x40000000)`, want: []string{"errno=EPERM"}, defence: "seccomp; no capabilities"},
		{name: "unshare command", script: `
import subprocess
r = subprocess.run(["unshare", "-Ur", "true"], capture_output=True, text=True)
print("exit", r.returncode, "EPERM" if "Operation not permitted" in r.stderr else "ENOSPC" if "No space left" in r.stderr else r.stderr.strip())`,
			want: []string{"exit 1 EPERM", "exit 1 ENOSPC"}, defence: "seccomp; max_user_namespaces=0"},
		{name: "clone new user namespace", script: `sc(56, 0x10000000 | 17, 0, 0, 0, 0)`, want: []string{"errno=EPERM", "errno=ENOSPC"},
			defence: "seccomp's clone flag test (EPERM); max_user_namespaces=0 (ENOSPC)"},
		{name: "clone3", control: true, script: `sc(435, 0, 0)`, want: []string{"errno=ENOSYS"}, defence: "seccomp answers ENOSYS (without it: EINVAL)"},
		{name: "setns own user namespace", control: true, script: `sc(308, os.open("/proc/self/ns/user", os.O_RDONLY), 0)`, want: []string{"errno=EPERM"},
			defence: "seccomp (without it: EINVAL)"},
		{name: "open the init's mount namespace", script: `try_(os.open, "/proc/1/ns/mnt", os.O_RDONLY)`, want: []string{"errno=EACCES"},
			defence: "no ptrace-mode access to the init"},
		{name: "keyctl", control: true, script: `sc(250, 0, -3, 0)`, want: []string{"errno=EPERM"}, defence: "seccomp (without it: the session keyring's id)"},
		{name: "add_key", control: true, script: `sc(248, b"user", b"cellbox-attack", b"x", 1, -2)`, want: []string{"errno=EPERM"}, defence: "seccomp (without it: a key id)"},
		{name: "request_key", control: true, script: `sc(249, b"user", b"cellbox-attack", 0, 0)`, want: []string{"errno=EPERM"}, defence: "seccomp (without it: a key id, or ENOKEY)"},
		{name: "bpf", control: true, script: `sc(321, 9999, 0, 0)`, want: []string{"errno=EPERM"}, defence: "seccomp (without it: EINVAL)"},
		{name: "perf_event_open", control: true, script: `sc(298, 0, 0, -1, -1, 0)`, want: []string{"errno=EPERM"}, defence: "seccomp (without it: EFAULT)"},
		{name: "io_uring_setup", control: true, script: `sc(425, 1, 0)`, want: []string{"errno=EPERM"}, defence: "seccomp (without it: EFAULT)"},
		{name: "io_uring_enter", control: true, script: `sc(426, 9999, 0, 0, 0, 0, 0)`, want: []string{"errno=EPERM"}, defence: "seccomp (without it: EBADF)"},
		{name: "userfaultfd", control: true, script: `sc(323, 1)`, want: []string{"errno=EPERM"}, defence: "seccomp (without it: a descriptor, UFFD_USER_MODE_ONLY)"},
		{name: "kexec_load", script: `sc(246, 0, 0, 0, 0)`, want: []string{"errno=EPERM"}, defence: "seccomp; no capabilities"},
		{name: "init_module", script: `sc(175, 0, 0, b"")`, want: []string{"errno=EPERM"}, defence: "seccomp; no capabilities"},
		{name: "name_to_handle_at", control: true, script: `sc(303, -100, b"/", 0, 0, 0)`, want: []string{"errno=EPERM"}, defence: "seccomp (without it: EFAULT)"},
		{name: "personality ADDR_NO_RANDOMIZE", control: true, script: `sc(135, 0x0040000)`, want: []string{"errno=EPERM"}, defence: "seccomp (without it: ok)"},
		{name: "socket AF_VSOCK", control: true, script: `try_(socket.socket, 40, socket.SOCK_STREAM)`, want: []string{"errno=EAFNOSUPPORT"},
			defence: "seccomp (without it: a socket, where the host has vsock)"},
		{name: "socketpair AF_VSOCK", control: true, script: `try_(socket.socketpair, 40, socket.SOCK_STREAM)`, want: []string{"errno=EAFNOSUPPORT"}, defence: "seccomp (without it: EOPNOTSUPP)"},
		{name: "int 0x80 getpid", i386: true, script: int80Script(20),
			defence: "seccomp kills non-x86_64 architectures with SIGSYS (without it: the pid; SIGSEGV where the host has no 32-bit emulation)"},
		{name: "int 0x80 keyctl", i386: true, script: int80Script(288),
			defence: "seccomp kills non-x86_64 architectures with SIGSYS (keyctl's i386 number is not on the x86_64 list)"},
		{name: "x32 getpid", control: true, script: `sc(0x40000000 | 39)`, signal: syscall.SIGSYS, defence: "seccomp kills x32 numbers (without it: ENOSYS, or the pid where x32 is on)"},
	}
	runCases(t, w, cases)
}

// TestAttackTIOCSTI: a program on the sandbox's terminal cannot push
// input into it (nor into any terminal outside: it has its own session).
func TestAttackTIOCSTI(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "tiocsti")
	script := pyPrelude + `
import fcntl, termios
print("tty", os.isatty(0), "sid==pid", os.getsid(0) == os.getpid(), flush=True)
try_(fcntl.ioctl, 0, termios.TIOCSTI, b"x")
c = ctypes.c_char(b"y")
ctypes.set_errno(0)
r = libc.ioctl(0, ctypes.c_ulong(termios.TIOCSTI | (1 << 32)), ctypes.byref(c))
print("high", res(r, ctypes.get_errno()), flush=True)
`
	p, err := w.Spawn(context.Background(), ProcSpec{Argv: []string{"python3", "-c", script}, PTY: &sandbox.WinSize{Cols: 200, Rows: 24}, Limits: limits(t, protocol.Limits{})})
	if err != nil {
		t.Fatal(err)
	}
	if p.PTY == nil {
		t.Fatal("no terminal master")
	}
	defer p.PTY.Close()
	outc := make(chan string, 1)
	go func() { b, _ := io.ReadAll(p.PTY); outc <- string(b) }()
	st, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	var out string
	select {
	case out = <-outc:
	case <-time.After(5 * time.Second):
		t.Fatal("terminal output not closed")
	}
	out = strings.ReplaceAll(out, "\r", "")
	t.Logf("%v:\n%s", st, out)
	for _, want := range []string{"tty True sid==pid True\n", "\nerrno=EPERM\n", "high errno=EPERM\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q: seccomp refuses TIOCSTI", want)
		}
	}

	// Control: on a terminal of the host, outside the sandbox, the same
	// script is not refused with EPERM (it succeeds where
	// dev.tty.legacy_tiocsti is 1, else EIO).
	if _, err := os.Stat(hostPython); err != nil {
		t.Logf("no host control: %v", err)
		return
	}
	cmd := exec.Command(hostPython, "-c", script)
	ptmx, err := pty.Start(cmd)
	if err != nil {
		t.Fatalf("host control: %v", err)
	}
	defer ptmx.Close()
	hostc := make(chan string, 1)
	go func() { b, _ := io.ReadAll(ptmx); hostc <- string(b) }()
	_ = cmd.Wait()
	var host string
	select {
	case host = <-hostc:
	case <-time.After(5 * time.Second):
		t.Fatal("host control: terminal output not closed")
	}
	host = strings.ReplaceAll(host, "\r", "")
	t.Logf("host control (no sandbox):\n%s", host)
	if !strings.Contains(host, "tty True") || strings.Contains(host, "errno=EPERM") {
		t.Errorf("host control: %q; the case cannot tell whether seccomp's TIOCSTI rule holds", host)
	}
}

// TestAttackSpawnerSignals: code cannot stop or kill the sandbox's
// spawner, which starts, signals and reports every program of the
// workspace: the signal is refused or has no effect, and the workspace
// goes on working.
func TestAttackSpawnerSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGSTOP, syscall.SIGKILL} {
		t.Run(unix.SignalName(sig), func(t *testing.T) {
			e := newAttackEnv(t)
			w := e.open(t, "spawner")
			if r := runIn(t, w, protocol.Limits{}, "true"); r.Status.Code != 0 {
				t.Fatal(outcome(r))
			}
			initPID := w.Sandbox().InitPID()
			done := make(chan *RunResult, 1)
			l := limits(t, protocol.Limits{TimeoutMs: 2000})
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				r, _ := Run(ctx, w, ProcSpec{Argv: []string{"python3", "-c", pyPrelude + spawnerPIDScript + fmt.Sprintf("try_(os.kill, spawner, %d)", int(sig))},
					Limits: l}, nil, 4096)
				done <- r
			}()
			var r *RunResult
			select {
			case r = <-done:
			case <-time.After(8 * time.Second):
				// Unwedge it for the cleanup.
				_ = e.m.CloseWorkspace(context.Background(), w.ID(), false)
				t.Fatalf("signalling the spawner with %s wedged the workspace: Run did not return despite its timeout and context", unix.SignalName(sig))
			}
			if r == nil {
				t.Fatal("the program did not start")
			}
			t.Logf("kill(spawner, %s): %s", unix.SignalName(sig), outcome(r))
			if sb := w.Sandbox(); sb == nil || sb.InitPID() != initPID {
				t.Fatalf("kill(spawner, %s) ended the sandbox", unix.SignalName(sig))
			}
			after := make(chan *RunResult, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				r, _ := Run(ctx, w, ProcSpec{Argv: []string{"/bin/echo", "ok"}, Limits: l}, nil, 4096)
				after <- r
			}()
			select {
			case r = <-after:
				if r == nil || string(r.Stdout) != "ok\n" {
					t.Fatalf("the workspace after kill(spawner, %s): %v", unix.SignalName(sig), r)
				}
			case <-time.After(8 * time.Second):
				_ = e.m.CloseWorkspace(context.Background(), w.ID(), false)
				t.Fatalf("the workspace is wedged after kill(spawner, %s)", unix.SignalName(sig))
			}
		})
	}
}

// TestAttackKillAll: `kill -9 -1` in the sandbox reaches only the
// sandbox's processes.
func TestAttackKillAll(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "killall")
	other := e.open(t, "bystander")
	if r := runIn(t, other, protocol.Limits{}, "true"); r.Status.Code != 0 {
		t.Fatalf("bystander: %s", outcome(r))
	}
	otherInit := other.Sandbox().InitPID()
	host := exec.Command("sleep", "300")
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	hostDone := make(chan struct{})
	go func() { _ = host.Wait(); close(hostDone) }()
	t.Cleanup(func() { _ = host.Process.Kill(); <-hostDone })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := Run(ctx, w, ProcSpec{Argv: []string{"/bin/sh", "-c", "kill -9 -1; echo signalled; sleep 0.2"}, Limits: limits(t, protocol.Limits{})}, nil, 4096)
	if r == nil || (err != nil && !errors.Is(err, sandbox.ErrClosed)) {
		t.Fatalf("kill -9 -1: %v", err)
	}
	t.Logf("kill -9 -1: %s, %v", outcome(r), err)
	// A window for a SIGKILL that reached the host's sleep to end it:
	// nothing must happen, which no condition can show.
	time.Sleep(200 * time.Millisecond)
	select {
	case <-hostDone:
		t.Fatalf("the host's sleep died: %v", host.ProcessState)
	default:
	}
	if !aliveNotZombie(host.Process.Pid) {
		t.Fatal("the host's sleep is gone")
	}
	if sb := other.Sandbox(); sb == nil || sb.InitPID() != otherInit {
		t.Error("another workspace's sandbox died")
	}
	if r := runIn(t, other, protocol.Limits{}, "/bin/echo", "ok"); r.Status.Code != 0 {
		t.Errorf("another workspace after kill -9 -1: %s", outcome(r))
	}
	// The killing workspace itself works again (its sandbox may have been
	// restarted: the spawner runs as the same user as the code).
	if sb := w.Sandbox(); sb == nil {
		t.Logf("finding: kill -9 -1 ended the workspace's own sandbox (the spawner is killable by the code it runs)")
	}
	if r := runIn(t, w, protocol.Limits{}, "/bin/echo", "ok"); r.Status.Code != 0 {
		t.Errorf("the workspace after kill -9 -1: %s %s", outcome(r), stderrTail(r))
	}
	if _, err := e.m.Get(w.ID()); err != nil {
		t.Errorf("Manager.Get: %v", err)
	}
}

// TestAttackNoProcessLeftAfterClose: a process that daemonized itself in
// the sandbox is gone, with the init and the spawner, once Close returns.
func TestAttackNoProcessLeftAfterClose(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "leftover")
	mark := marker(t)
	r := runIn(t, w, protocol.Limits{}, "/bin/sh", "-c", "setsid sleep "+mark+" </dev/null >/dev/null 2>&1 & sleep 0.1")
	if r.Status.Code != 0 {
		t.Fatalf("%s %s", outcome(r), stderrTail(r))
	}
	initPID := w.Sandbox().InitPID()
	ns := pidNS(t, initPID)
	// The shell has ended; its setsid child may still be on its way to
	// exec the marker sleep (a loaded machine schedules it late).
	var in []hostProc
	found := false
	for deadline := time.Now().Add(20 * time.Second); !found && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		in = sandboxProcs(initPID)
		for _, p := range in {
			found = found || p.cmdline == "sleep "+mark
		}
	}
	t.Logf("before close: %v", in)
	if !found || len(in) < 3 {
		t.Fatalf("the marker sleep is not running in the sandbox: %v", in)
	}
	if err := e.m.CloseWorkspace(context.Background(), w.ID(), false); err != nil {
		t.Fatal(err)
	}
	for _, p := range hostProcs() {
		if p.pidNS == ns || p.cmdline == "sleep "+mark {
			t.Errorf("left after Close: pid %d %q", p.pid, p.cmdline)
		}
	}
	for _, p := range in {
		if aliveNotZombie(p.pid) {
			t.Errorf("pid %d (%q) of the sandbox still runs", p.pid, p.cmdline)
		}
	}
}

// TestAttackDaemonizedEscapesLimits: a process that leaves its program's
// tree (double fork, new session: reparented to the sandbox's init) is
// still held to the program's timeout and the workspace's disk quota.
func TestAttackDaemonizedEscapesLimits(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {

		e := newAttackEnv(t)
		w := e.open(t, "escape-timeout")
		mark := marker(t)
		r := runIn(t, w, protocol.Limits{TimeoutMs: 500}, "/bin/sh", "-c", "(setsid sleep "+mark+" </dev/null >/dev/null 2>&1 &); sleep 30")
		if r.Status.Reason != "killed: timeout" {
			t.Fatalf("%s", outcome(r))
		}
		// Killed, it may take a moment to be gone; unkilled, it would
		// sleep for more than an hour.
		initPID := w.Sandbox().InitPID()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			var pid int
			for _, p := range sandboxProcs(initPID) {
				if p.cmdline == "sleep "+mark {
					pid = p.pid
				}
			}
			if pid == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a double-forked child of the program outlived killed: timeout: pid %d", pid)
			}
		}
	})
	t.Run("disk quota", func(t *testing.T) {
		const quota = 64 << 20
		e := newAttackEnv(t)
		w := e.open(t, "escape-quota")
		r := runIn(t, w, protocol.Limits{DiskBytes: quota, TimeoutMs: 20000}, "/bin/sh", "-c", `setsid python3 -c '
import time
for i in range(300):
    open("/workspace/f%d" % i, "wb").write(b"x" * (1 << 20))
    time.sleep(0.005)
' </dev/null >/dev/null 2>&1 & echo started`)
		t.Logf("%s", outcome(r))
		// Wait until the writer has begun, then until it is gone: killed at
		// the quota, or, unstopped, done after writing 300 MiB.
		initPID := w.Sandbox().InitPID()
		writer := func() bool {
			for _, p := range sandboxProcs(initPID) {
				if strings.HasPrefix(p.cmdline, "python3 -c") {
					return true
				}
			}
			return false
		}
		deadline := time.Now().Add(20 * time.Second)
		for _, err := os.Stat(filepath.Join(w.UpperDir(), "f0")); err != nil; _, err = os.Stat(filepath.Join(w.UpperDir(), "f0")) {
			if time.Now().After(deadline) {
				t.Fatal("the background writer never wrote")
			}
			time.Sleep(10 * time.Millisecond)
		}
		for deadline := time.Now().Add(30 * time.Second); writer(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the background writer neither stopped nor ended")
			}
		}
		if used := diskUsage(w.UpperDir(), 1<<40); used > 2*quota {
			t.Fatalf("a background writer filled the upper layer to %d MiB, past the %d MiB quota", used>>20, quota>>20)
		}
	})
}

// escapeTreeScript starts a child that leaves the program's session
// (setsid), is orphaned by a double fork, changes its own soft
// RLIMIT_LOCKS and its hard one, and becomes `sleep mark` on /dev/null; the
// program prints "escaped" with the grandchild's RLIMIT_LOCKS once the
// grandchild has exec'd (its end of the pipe, close-on-exec, is closed),
// then sleeps.
func escapeTreeScript(mark string) string {
	return fmt.Sprintf(`
import resource, time
RLIMIT_LOCKS = 10  # not named by python's resource module
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        resource.setrlimit(RLIMIT_LOCKS, (12345, 123456))
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.write(w, b"%%d %%d" %% resource.getrlimit(RLIMIT_LOCKS))
        os.execvp("sleep", ["sleep", %q])
    os._exit(0)
os.wait()
os.close(w)
got = b""
while True:
    b = os.read(r, 64)
    if not b:
        break
    got += b
print("escaped", got.decode(), flush=True)
time.sleep(600)
`, mark)
}

// sandboxSleep is the host pid of `sleep mark` in the sandbox whose init
// is initPID, 0 if there is none (a zombie does not count).
func sandboxSleep(initPID int, mark string) int {
	for _, p := range sandboxProcs(initPID) {
		if f := strings.Fields(p.cmdline); len(f) == 2 && filepath.Base(f[0]) == "sleep" && f[1] == mark && aliveNotZombie(p.pid) {
			return p.pid
		}
	}
	return 0
}

// waitSleepGone waits until `sleep mark` has left the sandbox: killed, it
// may take a moment to go; unkilled, it would sleep for over an hour.
func waitSleepGone(t *testing.T, initPID int, mark, after string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		pid := sandboxSleep(initPID, mark)
		if pid == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a child that left its program's tree (setsid, double fork, its own RLIMIT_LOCKS) outlived %s: pid %d", after, pid)
		}
	}
}

// TestAttackEscapeTheTree: code in a program escapes everything that used
// to find its tree (its session, its ancestry, a tag in its soft
// RLIMIT_LOCKS) to outlive the program's timeout and the kill of
// kernel/restart and kernel/shutdown. Each program runs in a mount
// namespace of its own, which code cannot leave, and killing the program
// kills every process in it; another program's processes are left alone.
func TestAttackEscapeTheTree(t *testing.T) {
	// bystander starts `sleep mark` as another program of w, which must
	// outlive the attacker's kill.
	bystander := func(t *testing.T, w *Workspace, initPID int) (string, *Proc) {
		t.Helper()
		mark := marker(t) + "1"
		p, err := w.Spawn(context.Background(), ProcSpec{Argv: []string{"sleep", mark}, Limits: limits(t, protocol.Limits{})})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Kill(); _, _ = p.Wait() })
		for deadline := time.Now().Add(10 * time.Second); sandboxSleep(initPID, mark) == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the bystander's sleep never started")
			}
		}
		return mark, p
	}
	checkBystander := func(t *testing.T, initPID int, mark string, p *Proc) {
		t.Helper()
		select {
		case <-p.Exited():
			st, _ := p.Wait()
			t.Fatalf("another program of the workspace died with the attacker's tree: %v", st)
		default:
		}
		if sandboxSleep(initPID, mark) == 0 {
			t.Fatal("another program's sleep died with the attacker's tree")
		}
	}

	t.Run("timeout", func(t *testing.T) {
		e := newAttackEnv(t)
		w := e.open(t, "escape-tree-timeout")
		if r := runIn(t, w, protocol.Limits{}, "true"); r.Status.Code != 0 {
			t.Fatal(outcome(r))
		}
		initPID := w.Sandbox().InitPID()
		other, op := bystander(t, w, initPID)
		mark := marker(t)
		r := py(t, w, protocol.Limits{TimeoutMs: 2000}, escapeTreeScript(mark))
		t.Logf("%s", outcome(r))
		if !strings.Contains(string(r.Stdout), "escaped 12345 123456") {
			t.Fatalf("the escape did not happen: %s %s", outcome(r), stderrTail(r))
		}
		if r.Status.Reason != "killed: timeout" {
			t.Fatalf("%s: want killed: timeout", outcome(r))
		}
		waitSleepGone(t, initPID, mark, "killed: timeout")
		checkBystander(t, initPID, other, op)
		if r := runIn(t, w, protocol.Limits{}, "/bin/echo", "ok"); string(r.Stdout) != "ok\n" {
			t.Errorf("the workspace after the kill: %s %s", outcome(r), stderrTail(r))
		}
	})

	// As kernel/restart and kernel/shutdown kill a kernel: Proc.Kill.
	t.Run("kill", func(t *testing.T) {
		e := newAttackEnv(t)
		w := e.open(t, "escape-tree-kill")
		if r := runIn(t, w, protocol.Limits{}, "true"); r.Status.Code != 0 {
			t.Fatal(outcome(r))
		}
		initPID := w.Sandbox().InitPID()
		other, op := bystander(t, w, initPID)
		mark := marker(t)
		outR, outW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer outR.Close()
		p, err := w.Spawn(context.Background(), ProcSpec{Argv: []string{"python3", "-c", pyPrelude + escapeTreeScript(mark)},
			Stdout: outW, Limits: limits(t, protocol.Limits{})})
		outW.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Kill(); _, _ = p.Wait() })
		line := make(chan string, 1)
		go func() {
			s, _ := bufio.NewReader(outR).ReadString('\n')
			line <- s
		}()
		select {
		case s := <-line:
			if !strings.HasPrefix(s, "escaped 12345 123456") {
				t.Fatalf("the escape did not happen: %q", s)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the program never escaped")
		}
		if sandboxSleep(initPID, mark) == 0 {
			t.Fatal("the escaped sleep is not running")
		}
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		st, err := p.Wait()
		t.Logf("killed: %v, %v", st, err)
		if st.Signal != syscall.SIGKILL {
			t.Errorf("the program ended with %v, want killed by SIGKILL", st)
		}
		waitSleepGone(t, initPID, mark, "the kill of its program")
		checkBystander(t, initPID, other, op)
		if r := runIn(t, w, protocol.Limits{}, "/bin/echo", "ok"); string(r.Stdout) != "ok\n" {
			t.Errorf("the workspace after the kill: %s %s", outcome(r), stderrTail(r))
		}
	})
}

func TestAttackNetwork(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "net")
	var accepted, received atomic.Int32
	serve := func(ln net.Listener) {
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				c.Close()
			}
		}()
	}
	tcp, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(tcp)
	name := fmt.Sprintf("cellbox-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	abstract, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatal(err)
	}
	serve(abstract)
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { udp.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			if _, _, err := udp.ReadFrom(buf); err != nil {
				return
			}
			received.Add(1)
		}
	}()
	// Controls: the servers answer on the host.
	for _, a := range []struct{ network, addr string }{{"tcp4", tcp.Addr().String()}, {"unix", "@" + name}, {"udp4", udp.LocalAddr().String()}} {
		c, err := net.DialTimeout(a.network, a.addr, 2*time.Second)
		if err != nil {
			t.Fatalf("control: dial %s on the host: %v", a.addr, err)
		}
		_, _ = c.Write([]byte("x"))
		c.Close()
	}
	for deadline := time.Now().Add(10 * time.Second); (accepted.Load() < 2 || received.Load() < 1) && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
	}
	acc0, rec0 := accepted.Load(), received.Load()
	if acc0 != 2 || rec0 != 1 {
		t.Fatalf("control: the host's servers got %d connections and %d datagrams, want 2 and 1", acc0, rec0)
	}
	port := tcp.Addr().(*net.TCPAddr).Port
	udpPort := udp.LocalAddr().(*net.UDPAddr).Port
	cases := []attackCase{
		// The connect reaches the sandbox's own loopback, where nothing
		// listens on that port.
		{name: "tcp to the host's loopback", script: fmt.Sprintf(`
s = socket.socket(); s.settimeout(5)
try_(s.connect, ("127.0.0.1", %d))`, port), want: []string{"errno=ECONNREFUSED", "errno=ENETUNREACH"},
			defence: "the network namespace (ECONNREFUSED); without it: ok"},
		// UDP is not landlock's: only the network namespace keeps the
		// datagram from the host's socket (checked below).
		{name: "udp to the host's loopback", script: fmt.Sprintf(`
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try_(s.sendto, b"x", ("127.0.0.1", %d))`, udpPort), want: []string{"ok", "errno=ECONNREFUSED"},
			defence: "the network namespace: the datagram goes to the sandbox's own loopback"},
		{name: "host's listening socket not in /proc/net/tcp", script: fmt.Sprintf(`
port = ":%%04X" %% %d
listed = any(l.split()[1].endswith(port) for l in open("/proc/net/tcp").read().splitlines()[1:])
print("listed" if listed else "not listed")`, port), want: []string{"not listed"},
			defence: "the network namespace (without it: listed)"},
		{name: "abstract unix socket on the host", script: fmt.Sprintf(`
s = socket.socket(socket.AF_UNIX); s.settimeout(5)
try_(s.connect, "\0%s")`, name), want: []string{"errno=ECONNREFUSED", "errno=EPERM"},
			defence: "abstract sockets belong to the network namespace (ECONNREFUSED); landlock scopes them too (EPERM); without both: ok"},
	}
	// A host address other than loopback, when there is one.
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
				ln, err := net.Listen("tcp4", net.JoinHostPort(ipn.IP.String(), "0"))
				if err != nil {
					break
				}
				serve(ln)
				cases = append(cases, attackCase{name: "tcp to the host's " + ipn.IP.String(), script: fmt.Sprintf(`
s = socket.socket(); s.settimeout(5)
try_(s.connect, (%q, %d))`, ipn.IP.String(), ln.Addr().(*net.TCPAddr).Port),
					want: []string{"errno=EACCES", "errno=ENETUNREACH"}, defence: "landlock (EACCES); the network namespace has only loopback (ENETUNREACH)"})
				break
			}
		}
	}
	runCases(t, w, cases)
	// A window for a connection or datagram that got through to reach the
	// host's servers: nothing must arrive, which no condition can show.
	time.Sleep(200 * time.Millisecond)
	if n := accepted.Load() - acc0; n != 0 {
		t.Errorf("the host's servers accepted %d connections from the sandbox", n)
	}
	if n := received.Load() - rec0; n != 0 {
		t.Errorf("the host's UDP socket received %d datagrams from the sandbox", n)
	}
}

// TestAttackNetworkHostIsTheHosts: network "host" is what it says (the
// user asked for it): TCP reaches a server on the host as UDP does; it was
// UDP only, Landlock refusing every TCP connect. "none" stays closed (see
// TestAttackNetwork).
func TestAttackNetworkHostIsTheHosts(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "net-host")
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b := make([]byte, 16)
		n, _ := c.Read(b)
		got <- string(b[:n])
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Run(ctx, w, ProcSpec{Argv: []string{"python3", "-c", fmt.Sprintf(`
import socket
s = socket.create_connection(("127.0.0.1", %d), timeout=10)
s.sendall(b"over tcp")
s.close()
print("sent")`, ln.Addr().(*net.TCPAddr).Port)}, Network: protocol.NetworkModeHost, Limits: limits(t, protocol.Limits{})}, nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status.Code != 0 || !strings.Contains(string(res.Stdout), "sent") {
		t.Fatalf("TCP to the host with network host: %s\n%s%s", outcome(res), res.Stdout, res.Stderr)
	}
	select {
	case s := <-got:
		if s != "over tcp" {
			t.Fatalf("the host's server read %q", s)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the host's server got nothing")
	}
}
