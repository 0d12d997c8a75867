package workspace

// The attack and fault suite of issue 3: each test tries an attack for
// real, from inside a workspace's sandbox, and checks the outcome the
// defence promises, precisely enough that the test fails if that defence
// is removed (each case's defence field says which defence it checks and
// what removing it would show instead; cases marked control also run on
// the host, outside any sandbox, to prove it).
//
// Run as root and as an unprivileged user:
//
//	CGO_ENABLED=0 go test ./workspace/ -run Attack -v
//	CELLBOX_TEST_USER=cellboxtest CGO_ENABLED=0 go test ./workspace/ -run Attack -v   # as root

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
	"github.com/cellbox-dev/cellbox/workspace/sandbox/sandboxtest"
)

func TestAttackIdentityAndLayers(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "identity")
	r := runIn(t, w, protocol.Limits{}, "/bin/sh", "-c", `id; hostname; grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status`)
	out := string(r.Stdout)
	t.Logf("%s", out)
	if r.Status.Code != 0 {
		t.Fatalf("%s\n%s", outcome(r), stderrTail(r))
	}
	for _, want := range []string{
		"uid=1000(cellbox) gid=1000(cellbox) groups=1000(cellbox)", "\ncellbox\n",
		"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
		"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000",
		"NoNewPrivs:\t1", "Seccomp:\t2",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the sandbox user's identity lacks %q", want)
		}
	}
	sb := w.Sandbox()
	if sb == nil {
		t.Fatal("no sandbox after a run")
	}
	l := sb.Layers()
	t.Logf("layers: %+v", l)
	if !l.UserNamespaces || !l.Overlay || !l.PidNamespace || !l.NetworkNamespace || !l.Seccomp || !l.Landlock || l.Network != sandbox.NetworkNone {
		t.Errorf("layers in force = %+v; want user, pid and network namespaces, overlay, seccomp and landlock", l)
	}
}

func TestAttackFilesystem(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "fs")
	home, _ := os.UserHomeDir()
	cwd, _ := os.Getwd()
	probe := func(p string) string {
		return fmt.Sprintf(`
p = %q
try:
    ents = os.listdir(p) if os.path.isdir(p) else None
    if not os.path.lexists(p):
        print("absent")
    elif ents == []:
        print("empty")
    else:
        print("present", ents)
except OSError as e:
    print("errno=" + errno.errorcode[e.errno])
`, p)
	}
	cases := []attackCase{
		{name: "read /etc/shadow", script: `try_(lambda: open("/etc/shadow").read())`, want: []string{"errno=ENOENT"},
			defence: "the sandbox's /etc is generated and holds no shadow; EACCES would mean the host's /etc is bound, guarded only by file modes"},
		{name: "read /etc/shadow through /proc/1/root", script: `try_(lambda: open("/proc/1/root/etc/shadow").read())`, want: []string{"errno=EACCES", "errno=ENOENT"},
			defence: "the init's root is not the host's, and code is not privileged over the init"},
		{name: "list /proc/1/root", script: `try_(os.listdir, "/proc/1/root")`, want: []string{"errno=EACCES"},
			defence: "code runs in a user namespace nested below the init's, so ptrace-mode access to pid 1 is refused"},
		{name: "read /proc/1/cwd", script: `try_(os.listdir, "/proc/1/cwd")`, want: []string{"errno=EACCES"},
			defence: "as /proc/1/root"},
		{name: "state dir absent", script: probe(e.state), want: []string{"absent"}, defence: "pivot_root into a minimal root"},
		{name: "workspace dir absent", script: probe(w.dir), want: []string{"absent"}, defence: "the overlay's layers are unmounted after the overlay is built"},
		{name: "project host path absent", script: probe(e.project), want: []string{"absent"}, defence: "pivot_root into a minimal root"},
		{name: "host home absent or empty", script: probe(home), want: []string{"absent", "empty"}, defence: "pivot_root into a minimal root"},
		{name: "/root empty", script: probe("/root"), want: []string{"absent", "empty"}, defence: "pivot_root into a minimal root"},
		{name: "mountinfo names no host path", script: fmt.Sprintf(`
info = open("/proc/self/mountinfo").read()
print("leaks" if any(p in info for p in (%q, %q, %q)) else "clean")`, e.state, e.project, w.dir), want: []string{"clean"},
			defence: "the overlay's layers are staged inside the sandbox root, never named by host path"},
		{name: "no inherited descriptors", script: `
open_fds = []
for f in os.listdir("/proc/self/fd"):
    try:
        open_fds.append((int(f), os.readlink("/proc/self/fd/" + f)))
    except FileNotFoundError:  # listdir's own, closed since
        pass
print(sorted(x for x in open_fds if x[0] > 2))`,
			want: []string{"[]"}, defence: "the spawner marks every descriptor beyond stdio close-on-exec"},
		{name: "/home holds only the sandbox user", script: `print(sorted(os.listdir("/home")))`, want: []string{"['cellbox']"}, defence: "pivot_root into a minimal root"},
		{name: "create in /usr", script: `try_(lambda: open("/usr/cellbox-attack", "w"))`, want: []string{"errno=EROFS"},
			defence: "/usr is a read-only bind (without it: EACCES from file modes or landlock)"},
		{name: "mkdir in /usr/lib", script: `try_(os.mkdir, "/usr/lib/cellbox-attack")`, want: []string{"errno=EROFS"}, defence: "/usr is a read-only bind"},
		{name: "create in /etc", script: `try_(lambda: open("/etc/cellbox-attack", "w"))`, want: []string{"errno=EROFS"},
			defence: "the sandbox root (owned by the sandbox user) is remounted read-only"},
		{name: "append to /etc/passwd", script: `try_(lambda: open("/etc/passwd", "a").write("evil::0:0::/:/bin/sh\n"))`, want: []string{"errno=EROFS"},
			defence: "the generated /etc/passwd belongs to the sandbox user; only the read-only root stops the write"},
		{name: "create in /", script: `try_(lambda: open("/cellbox-attack", "w"))`, want: []string{"errno=EROFS"}, defence: "the sandbox root is read-only"},
		{name: "open /proc/1/exe", script: `try_(lambda: open("/proc/1/exe", "rb").read(4))`, want: []string{"errno=EACCES"},
			defence: "no ptrace-mode access to the init (without it: the host's cellbox binary)"},
		{name: "write /proc/1/exe", script: `try_(lambda: open("/proc/1/exe", "r+b"))`, want: []string{"errno=EACCES"},
			defence: "no ptrace-mode access to the init (without it: ETXTBSY, or the daemon's binary overwritten)"},
		{name: "readlink /proc/1/exe", script: `try_(os.readlink, "/proc/1/exe")`, want: []string{"errno=EACCES"}, defence: "as /proc/1/exe"},
		{name: "read /proc/1/environ", script: `try_(lambda: open("/proc/1/environ", "rb").read())`, want: []string{"errno=EACCES"}, defence: "as /proc/1/exe"},
	}
	// The test's directory (the package's, under go test), unless it is
	// one the sandbox has too.
	if cwd != "/" && !strings.HasPrefix(cwd+"/", "/usr/") {
		cases = append(cases, attackCase{name: "test cwd absent or empty", script: probe(cwd), want: []string{"absent", "empty"}, defence: "pivot_root into a minimal root"})
	}
	runCases(t, w, cases)
}

// TestAttackWorkspaceWrites: writes to /workspace land in the upper layer;
// the project is unchanged.
func TestAttackWorkspaceWrites(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "writes")
	r := runIn(t, w, protocol.Limits{}, "/bin/sh", "-c",
		`set -e; echo changed >> hello.txt; echo new > new.txt; rm gone.txt; mkdir -p deep/er; echo x > deep/er/f; echo more >> sub/data.txt`)
	if r.Status.Code != 0 {
		t.Fatalf("%s\n%s", outcome(r), stderrTail(r))
	}
	for name, content := range projectFiles {
		b, err := os.ReadFile(filepath.Join(e.project, name))
		if err != nil || string(b) != content {
			t.Errorf("project file %s changed: %q, %v", name, b, err)
		}
	}
	for _, name := range []string{"new.txt", "deep"} {
		if _, err := os.Lstat(filepath.Join(e.project, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s appeared in the project: %v", name, err)
		}
	}
	upper := w.UpperDir()
	for name, want := range map[string]string{"hello.txt": "hello\nchanged\n", "new.txt": "new\n", "deep/er/f": "x\n", "sub/data.txt": "data\nmore\n"} {
		b, err := os.ReadFile(filepath.Join(upper, name))
		if err != nil || string(b) != want {
			t.Errorf("upper layer %s = %q, %v; want %q", name, b, err, want)
		}
	}
	// The deletion is a whiteout in the upper layer.
	fi, err := os.Lstat(filepath.Join(upper, "gone.txt"))
	if err != nil || fi.Mode()&fs.ModeCharDevice == 0 {
		t.Errorf("upper layer gone.txt = %v, %v; want a whiteout (character device 0/0)", fi, err)
	}
	// And the daemon's view agrees.
	if b, err := w.ReadFile("hello.txt"); err != nil || string(b) != "hello\nchanged\n" {
		t.Errorf("ReadFile hello.txt = %q, %v", b, err)
	}
	if _, err := w.ReadFile("gone.txt"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile of the deleted gone.txt: %v, want not exist", err)
	}
}

// TestAttackSymlinkDaemonRead: symlinks made in the sandbox cannot make
// the daemon's file access read a host file.
func TestAttackSymlinkDaemonRead(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "symlinks")
	r := runIn(t, w, protocol.Limits{}, "/bin/sh", "-c", strings.Join([]string{
		"set -e",
		"ln -s /etc/shadow shadow",
		"ln -s /etc/passwd passwd",
		"ln -s ../../../../etc/passwd up-passwd",
		"ln -s ../../../../etc/shadow up-shadow",
		"ln -s / rootlink",
		"ln -s /proc/self/root/etc/shadow magic",
		"ln -s " + e.project + "/hello.txt hostpath",
		"mkdir -p etc && echo sandbox-made > etc/passwd",
		"mkfifo fifo",
	}, "; "))
	if r.Status.Code != 0 {
		t.Fatalf("%s\n%s", outcome(r), stderrTail(r))
	}
	hostShadow, _ := os.ReadFile("/etc/shadow")
	hostPasswd, _ := os.ReadFile("/etc/passwd")
	isHost := func(b []byte) bool {
		return len(b) > 0 && (bytes.Equal(b, hostShadow) || bytes.Equal(b, hostPasswd))
	}
	tests := []struct {
		path string
		// want: the error it must fail with (nil: must read wantBody).
		want     error
		wantBody string
	}{
		{"shadow", fs.ErrNotExist, ""},              // resolved in /workspace: no etc/shadow there
		{"up-shadow", fs.ErrNotExist, ""},           // ".." stops at /workspace
		{"magic", fs.ErrNotExist, ""},               // /proc/self/root is /workspace/proc/..., absent
		{"rootlink/etc/shadow", fs.ErrNotExist, ""}, // a link to / is /workspace
		{"hostpath", fs.ErrNotExist, ""},            // the host path of the project, inside /workspace
		{"passwd", nil, "sandbox-made\n"},           // /etc/passwd is /workspace/etc/passwd
		{"up-passwd", nil, "sandbox-made\n"},
		{"fifo", ErrInvalid, ""}, // not read (would block the daemon)
		{"/etc/passwd", ErrPathOutside, ""},
		{"/etc/shadow", ErrPathOutside, ""},
		{"../../../../etc/passwd", ErrPathOutside, ""},
		{"sub/../../etc/passwd", ErrPathOutside, ""},
		{"..", ErrPathOutside, ""},
		{"hello.txt", nil, "hello\n"}, // control: an ordinary read works
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			done := make(chan struct{})
			var b []byte
			var err error
			go func() { b, err = w.ReadFile(tt.path); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("ReadFile(%q) blocked", tt.path)
			}
			t.Logf("ReadFile(%q) = %q, %v", tt.path, b, err)
			if isHost(b) {
				t.Fatalf("ReadFile(%q) read the host's file", tt.path)
			}
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("ReadFile(%q) = %q, %v; want an error wrapping %v", tt.path, b, err, tt.want)
				}
				return
			}
			if err != nil || string(b) != tt.wantBody {
				t.Fatalf("ReadFile(%q) = %q, %v; want %q", tt.path, b, err, tt.wantBody)
			}
		})
	}
}

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

func TestAttackForkBomb(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "forkbomb")
	other := e.open(t, "bystander")
	if r := runIn(t, other, protocol.Limits{}, "true"); r.Status.Code != 0 {
		t.Fatalf("bystander: %s", outcome(r))
	}
	const pids = 64
	bombDone := make(chan *RunResult, 1)
	bombLimits := limits(t, protocol.Limits{Pids: pids, TimeoutMs: 3000})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		r, err := Run(ctx, w, ProcSpec{Argv: []string{"bash", "-c", `:(){ :|:& };:; sleep 60`}, Limits: bombLimits}, nil, 4096)
		if err != nil {
			t.Errorf("fork bomb: %v", err)
		}
		bombDone <- r
	}()
	initPID := 0
	for deadline := time.Now().Add(5 * time.Second); initPID == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if sb := w.Sandbox(); sb != nil {
			initPID = sb.InitPID()
		}
	}
	if initPID == 0 {
		t.Fatal("the fork bomb's sandbox did not start")
	}
	// Sample the bomb's sandbox until the bomb ends (its timeout kills
	// it); once it has filled its pids, use the other workspace, three
	// times, while it lasts.
	peak := 0
	var bystander []time.Duration
	var r *RunResult
	for ended := false; !ended; {
		select {
		case r = <-bombDone:
			ended = true
			continue
		case <-time.After(50 * time.Millisecond):
		}
		peak = max(peak, len(sandboxProcs(initPID)))
		if peak >= pids/2 && len(bystander) < 3 {
			start := time.Now()
			out := runIn(t, other, protocol.Limits{}, "/bin/echo", "still here")
			bystander = append(bystander, time.Since(start))
			if out.Status.Code != 0 || string(out.Stdout) != "still here\n" {
				t.Errorf("another workspace during the bomb: %s", outcome(out))
			}
			if _, err := e.m.Get(w.ID()); err != nil {
				t.Errorf("Manager.Get during the bomb: %v", err)
			}
		}
	}
	t.Logf("bomb: %s; peak %d processes in its sandbox (limit %d); other workspace's runs took %v", outcome(r), peak, pids, bystander)
	// The init, the spawner and at most pids processes of the sandbox user.
	if peak > pids+2 {
		t.Errorf("the bomb's sandbox held %d processes, over the limit of %d", peak, pids)
	}
	if peak < pids/2 {
		t.Errorf("the bomb reached only %d processes; it did not run", peak)
	}
	for _, d := range bystander {
		if d > 5*time.Second {
			t.Errorf("a run in another workspace took %v during the bomb", d)
		}
	}
	if r.Status.Reason != "killed: timeout" {
		t.Errorf("the bomb ended with %s, want killed: timeout", outcome(r))
	}
	// Its whole tree is gone, and the workspace works again.
	var left []hostProc
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if left = sandboxProcs(initPID); len(left) <= 2 {
			break
		}
	}
	if len(left) > 2 {
		t.Errorf("%d processes left in the bomb's sandbox after the kill: %v", len(left), left)
	}
	if r := runIn(t, w, protocol.Limits{Pids: pids}, "/bin/echo", "recovered"); r.Status.Code != 0 {
		t.Errorf("the bombed workspace after the bomb: %s %s", outcome(r), stderrTail(r))
	}
}

func TestAttackMemoryBomb(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "membomb")
	tests := []struct {
		name    string
		argv    []string
		limit   int64
		wantErr string
	}{
		{"python", []string{"python3", "-c", `
a = []
for i in range(200):
    a.append(bytearray(16 << 20))
print("survived")`}, 512 << 20, "MemoryError"},
		// node reserves far more address space than python (it dies with
		// SIGTRAP under 512 MiB before running anything), so 2 GiB; its
		// buffers live outside the JS heap, so only RLIMIT_AS bounds them.
		{"node", []string{"node", "-e", `
const a = [];
for (let i = 0; i < 400; i++) a.push(Buffer.alloc(64 << 20));
console.log("survived");`}, 2 << 30, "Array buffer allocation failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runIn(t, w, protocol.Limits{MemoryBytes: tt.limit, TimeoutMs: 30000}, tt.argv...)
			t.Logf("%s; peak RSS %d MiB; stderr: %.300s", outcome(r), r.Status.MaxRSSBytes>>20, stderrTail(r))
			if strings.Contains(string(r.Stdout), "survived") || (r.Status.Code == 0 && r.Status.Signal == 0) {
				t.Fatalf("the memory bomb was not stopped: %s", outcome(r))
			}
			if r.Status.Reason != "" {
				t.Fatalf("stopped by the daemon (%s), not by the memory limit", r.Status.Reason)
			}
			if !strings.Contains(string(r.Stderr), tt.wantErr) {
				t.Fatalf("stderr lacks %q: %s", tt.wantErr, stderrTail(r))
			}
			if r.Status.MaxRSSBytes > tt.limit {
				t.Errorf("peak RSS %d over the limit %d", r.Status.MaxRSSBytes, tt.limit)
			}
		})
	}
}

func TestAttackDiskQuota(t *testing.T) {
	tests := []struct {
		name   string
		quota  int64
		script string
		// maxFiles: fewer files than the program writes unstopped.
		maxFiles int
	}{
		// 1 MiB files, 400 of them if nothing stops it.
		{"disk fill", 64 << 20, `
import time
for i in range(400):
    with open("/workspace/fill%d" % i, "wb") as f:
        f.write(b"x" * (1 << 20))
    time.sleep(0.002)
print("survived", flush=True)
time.sleep(60)`, 400},
		// Empty files, each charged 4 KiB: the quota is 4096 of them.
		{"inode fill", 16 << 20, `
import time
for i in range(60000):
    open("/workspace/inode%d" % i, "w").close()
print("survived", flush=True)
time.sleep(60)`, 60000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newAttackEnv(t)
			w := e.open(t, "quota")
			r := runIn(t, w, protocol.Limits{DiskBytes: tt.quota, TimeoutMs: 30000}, "python3", "-c", tt.script)
			files, _ := os.ReadDir(w.UpperDir())
			used := diskUsage(w.UpperDir(), 1<<40)
			t.Logf("%s after %v; upper layer: %d files, %d MiB charged", outcome(r), r.Duration.Round(time.Millisecond), len(files), used>>20)
			if r.Status.Reason != "killed: disk quota exceeded" || r.Status.Signal != syscall.SIGKILL {
				t.Fatalf("%s: %s; want killed: disk quota exceeded", tt.name, outcome(r))
			}
			if strings.Contains(string(r.Stdout), "survived") || len(files) >= tt.maxFiles {
				t.Fatalf("the program wrote everything (%d files) before it was stopped", len(files))
			}
			if used > 4*tt.quota {
				t.Errorf("stopped at %d MiB, far past the %d MiB quota", used>>20, tt.quota>>20)
			}
			if r.Duration > 10*time.Second {
				t.Errorf("stopped after %v", r.Duration)
			}
			// The daemon and the workspace still work, with the default
			// quota: a program that runs past a few quota ticks is held to
			// its own quota, not to the one before it.
			if r := runIn(t, w, protocol.Limits{}, "/bin/sh", "-c", "sleep 1; echo ok"); r.Status.Code != 0 {
				t.Errorf("after the quota kill: %s", outcome(r))
			}
		})
	}
}

func TestAttackHugeFile(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "hugefile")
	const limit = 8 << 20
	l := protocol.Limits{FileSizeBytes: limit}
	t.Run("python", func(t *testing.T) {
		r := py(t, w, l, `
fd = os.open("/workspace/big", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
n = 0
try:
    while n < 16 << 20:
        n += os.write(fd, b"x" * (1 << 20))
    print("ok", n)
except OSError as e:
    print("errno=" + errno.errorcode[e.errno], n)`)
		t.Logf("%s", outcome(r))
		if got := strings.TrimSpace(string(r.Stdout)); got != fmt.Sprintf("errno=EFBIG %d", limit) {
			t.Fatalf("writing 16 MiB: %q, want EFBIG after %d bytes (RLIMIT_FSIZE)\n%s", got, limit, stderrTail(r))
		}
		if fi, err := os.Stat(filepath.Join(w.UpperDir(), "big")); err != nil || fi.Size() != limit {
			t.Fatalf("big in the upper layer: %v, %v; want %d bytes", fi, err, limit)
		}
	})
	t.Run("dd", func(t *testing.T) {
		r := runIn(t, w, l, "dd", "if=/dev/zero", "of=/workspace/big2", "bs=1M", "count=16")
		t.Logf("%s; %s", outcome(r), stderrTail(r))
		if r.Status.Signal != syscall.SIGXFSZ && !(r.Status.Code != 0 && strings.Contains(string(r.Stderr), "File too large")) {
			t.Fatalf("dd of 16 MiB: %s; want SIGXFSZ or EFBIG", outcome(r))
		}
		if fi, err := os.Stat(filepath.Join(w.UpperDir(), "big2")); err != nil || fi.Size() > limit {
			t.Fatalf("big2 in the upper layer: %v, %v; want at most %d bytes", fi, err, limit)
		}
	})
}

func TestAttackInfiniteLoop(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "loop")
	t.Run("cpu limit", func(t *testing.T) {
		r := runIn(t, w, protocol.Limits{CPUSeconds: 1, TimeoutMs: 20000}, "python3", "-c", "while True: pass")
		t.Logf("%s; cpu %v, after %v", outcome(r), r.Status.CPU, r.Duration.Round(time.Millisecond))
		if r.Status.Signal != syscall.SIGXCPU && r.Status.Signal != syscall.SIGKILL {
			t.Fatalf("%s; want SIGXCPU or SIGKILL from RLIMIT_CPU", outcome(r))
		}
		if r.Status.Reason != "" {
			t.Fatalf("killed by the daemon (%s), not by RLIMIT_CPU", r.Status.Reason)
		}
		if r.Status.CPU < 500*time.Millisecond || r.Status.CPU > 3*time.Second {
			t.Errorf("CPU time %v, want about 1 s", r.Status.CPU)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		r := runIn(t, w, protocol.Limits{TimeoutMs: 500}, "/bin/sh", "-c", "sleep 30 & while :; do :; done")
		t.Logf("%s after %v", outcome(r), r.Duration.Round(time.Millisecond))
		if r.Status.Reason != "killed: timeout" || r.Status.Signal != syscall.SIGKILL {
			t.Fatalf("%s; want killed: timeout", outcome(r))
		}
		// Unstopped, it runs for ever; the upper bound leaves room for a
		// loaded machine.
		if r.Duration < 500*time.Millisecond || r.Duration > 10*time.Second {
			t.Errorf("stopped after %v, want about 500 ms", r.Duration)
		}
		// The background sleep went with it.
		initPID := w.Sandbox().InitPID()
		var left []hostProc
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if left = sandboxProcs(initPID); len(left) <= 2 {
				break
			}
		}
		if len(left) > 2 {
			t.Errorf("left in the sandbox after the timeout: %v", left)
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
		// Landlock refuses TCP connect first (EACCES); the namespace's own
		// loopback would refuse it otherwise.
		{name: "tcp to the host's loopback", script: fmt.Sprintf(`
s = socket.socket(); s.settimeout(5)
try_(s.connect, ("127.0.0.1", %d))`, port), want: []string{"errno=EACCES", "errno=ECONNREFUSED", "errno=ENETUNREACH"},
			defence: "landlock's TCP rules (EACCES) and the network namespace (ECONNREFUSED); without both: ok"},
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

func TestAttackProcVisibility(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "proc")
	r := py(t, w, protocol.Limits{}, `
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
for p in pids:
    try:
        cmd = open("/proc/%d/cmdline" % p, "rb").read().split(b"\0")[0].decode()
    except OSError as e:
        cmd = "errno=" + errno.errorcode[e.errno]
    print(p, cmd)`)
	out := strings.TrimSpace(string(r.Stdout))
	t.Logf("%s\n%s", outcome(r), out)
	if r.Status.Code != 0 {
		t.Fatal(stderrTail(r))
	}
	lines := strings.Split(out, "\n")
	if len(lines) > 4 {
		t.Errorf("the sandbox sees %d processes, want its init, its spawner and this one", len(lines))
	}
	if !strings.HasPrefix(lines[0], "1 cellbox-sandbox:") {
		t.Errorf("pid 1 is %q, want the sandbox's own init or spawner", lines[0])
	}
	for _, l := range lines {
		_, cmd, _ := strings.Cut(l, " ")
		if !strings.HasPrefix(cmd, "cellbox-sandbox:") && filepath.Base(cmd) != "python3" {
			t.Errorf("the sandbox sees a foreign process: %q", l)
		}
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
	in := sandboxProcs(initPID)
	t.Logf("before close: %v", in)
	found := false
	for _, p := range in {
		found = found || p.cmdline == "sleep "+mark
	}
	if !found || len(in) < 3 {
		t.Fatalf("the marker sleep is not running in the sandbox: %v", in)
	}
	if err := e.m.Close(context.Background(), w.ID(), false); err != nil {
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

// TestAttackTmpIsFresh: /tmp, /dev/shm and the home of a new sandbox are
// empty; /workspace keeps its files.
func TestAttackTmpIsFresh(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "tmp")
	r := runIn(t, w, protocol.Limits{}, "/bin/sh", "-c",
		"set -e; echo x > /tmp/leak; mkdir /tmp/d; echo y > /dev/shm/leak; echo z > ~/.leak; echo kept > /workspace/kept; ls -A /tmp /dev/shm ~")
	if r.Status.Code != 0 {
		t.Fatalf("%s %s", outcome(r), stderrTail(r))
	}
	if err := e.m.Close(context.Background(), w.ID(), false); err != nil {
		t.Fatal(err)
	}
	w2 := e.open(t, "tmp")
	if w2.ID() != w.ID() {
		t.Fatalf("reopened as %s, want %s", w2.ID(), w.ID())
	}
	r = runIn(t, w2, protocol.Limits{}, "/bin/sh", "-c", `for d in /tmp /dev/shm ~; do echo "$d:" $(ls -A $d); done; cat /workspace/kept`)
	got := string(r.Stdout)
	t.Logf("after reopening: %q", got)
	if got != "/tmp:\n/dev/shm:\n/home/cellbox:\nkept\n" {
		t.Errorf("the new sandbox shows %q; want empty /tmp, /dev/shm and home, and /workspace/kept", got)
	}
}

// TestAttackTwoWorkspaces: two workspaces over the same project see
// neither each other's files nor processes.
func TestAttackTwoWorkspaces(t *testing.T) {
	e := newAttackEnv(t)
	a := e.open(t, "a")
	b := e.open(t, "b")
	mark := marker(t)
	r := runIn(t, a, protocol.Limits{}, "/bin/sh", "-c", "echo secret > /workspace/secretA; echo tmp > /tmp/secretA; setsid sleep "+mark+" </dev/null >/dev/null 2>&1 & sleep 0.1")
	if r.Status.Code != 0 {
		t.Fatalf("%s %s", outcome(r), stderrTail(r))
	}
	look := `
found = []
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            if open("/proc/%s/cmdline" % p, "rb").read().split(b"\0")[1:2] == [b"` + mark + `"]:
                found.append(p)
        except (OSError, IndexError):
            pass
print("marker", "seen" if found else "unseen")
print("file", "seen" if os.path.exists("/workspace/secretA") else "unseen")
print("tmp", "seen" if os.path.exists("/tmp/secretA") else "unseen")`
	ra := py(t, a, protocol.Limits{}, look)
	rb := py(t, b, protocol.Limits{}, look)
	t.Logf("A sees: %s; B sees: %s", outcome(ra), outcome(rb))
	if got := string(ra.Stdout); got != "marker seen\nfile seen\ntmp seen\n" {
		t.Fatalf("control: workspace A sees %q of its own", got)
	}
	if got := string(rb.Stdout); got != "marker unseen\nfile unseen\ntmp unseen\n" {
		t.Errorf("workspace B sees A's: %q", got)
	}
	if _, err := b.ReadFile("secretA"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("B's ReadFile(secretA): %v, want not exist", err)
	}
}

// TestAttackSuiteAsUnprivilegedUser re-runs the attack suite as the user
// CELLBOX_TEST_USER names (CI creates one). Run as root:
//
//	CELLBOX_TEST_USER=cellboxtest CGO_ENABLED=0 go test ./workspace/ -run Attack -v
func TestAttackSuiteAsUnprivilegedUser(t *testing.T) {
	if sandboxtest.AsTestUser() {
		t.Skip("this is the re-run as the unprivileged user")
	}
	sandboxtest.RunAsTestUser(t, "^TestAttack")
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
				_ = e.m.Close(context.Background(), w.ID(), false)
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
				_ = e.m.Close(context.Background(), w.ID(), false)
				t.Fatalf("the workspace is wedged after kill(spawner, %s)", unix.SignalName(sig))
			}
		})
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

// TestAttackSystemRoots: a workspace over "/" or a system directory lets
// code read it (/etc/shadow for a root daemon) and a commit write into it
// (as root). Such roots are refused, also through a symlink and as the
// default root, unless the daemon was started to allow them.
func TestAttackSystemRoots(t *testing.T) {
	link := filepath.Join(t.TempDir(), "etc-link")
	if err := os.Symlink("/etc", link); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	m, err := NewManager(Options{StateDir: state, DefaultRoot: "/", NoPool: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Shutdown)
	for _, root := range []string{"", "/", "/etc", "/usr/share", "/var/lib", "/home", "/tmp", link, "/etc/../etc/"} {
		w, err := m.Open(context.Background(), protocol.WorkspaceOpenParams{Root: root})
		if err == nil {
			_ = m.Close(context.Background(), w.ID(), true)
			t.Errorf("root %q was opened as %s", root, w.Info().Root)
			continue
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "--allow-system-root") {
			t.Errorf("root %q: %v, want ErrInvalid naming --allow-system-root", root, err)
		}
	}
	// A project below /tmp or /home is a project.
	if _, err := m.Open(context.Background(), protocol.WorkspaceOpenParams{Root: t.TempDir()}); err != nil {
		t.Errorf("a project in a temporary directory: %v", err)
	}
	allowed, err := NewManager(Options{StateDir: t.TempDir(), AllowSystemRoots: true, NoPool: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(allowed.Shutdown)
	w, err := allowed.Open(context.Background(), protocol.WorkspaceOpenParams{Root: "/etc"})
	if err != nil {
		t.Fatalf("/etc with AllowSystemRoots: %v", err)
	}
	_ = allowed.Close(context.Background(), w.ID(), true)
}

// TestAttackInotifyBudget: inotify instances are counted per host user
// across user namespaces, so code that takes every instance it can would
// leave the daemon's user (root, for a root daemon) none, and fs/watch
// would fail everywhere. The sandbox gets a share: it runs out while the
// daemon's user can still watch.
func TestAttackInotifyBudget(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "inotify")
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	script := pyPrelude + `
fds = []
while True:
    fd = libc.inotify_init1(0)
    if fd < 0:
        print("instances", len(fds), errno.errorcode.get(ctypes.get_errno(), "?"), flush=True)
        break
    fds.append(fd)
    if len(fds) > 100000:
        print("instances", len(fds), "unbounded", flush=True)
        break
watches, why, wds = 0, "ran out of files", set()
if fds:
    for top, dirs, files in os.walk("/usr"):
        for f in files + dirs:
            # IN_MODIFY|IN_DONT_FOLLOW; a second name of one inode gives the same wd
            wd = libc.inotify_add_watch(fds[0], os.path.join(top, f).encode(), 0x02000002)
            if wd >= 0:
                wds.add(wd)
                watches = len(wds)
            elif ctypes.get_errno() == errno.ENOSPC:
                why = "ENOSPC"
                break
        if why == "ENOSPC":
            break
print("watches", watches, why, flush=True)
sys.stdin.read()  # hold them until the test has looked
`
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := w.Spawn(ctx, ProcSpec{Argv: []string{"python3", "-c", script}, Stdin: inR, Stdout: outW, Stderr: outW, Limits: limits(t, protocol.Limits{})})
	inR.Close()
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	sc := bufio.NewScanner(outR)
	var lines []string
	for len(lines) < 2 && sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) < 2 {
		t.Fatalf("the program said %q", lines)
	}
	t.Logf("in the sandbox: %s; %s", lines[0], lines[1])
	var inst, watches int
	var why string
	if _, err := fmt.Sscanf(lines[0], "instances %d %s", &inst, &why); err != nil || why != "EMFILE" || inst > sandbox.InotifyInstances || inst < 1 {
		t.Errorf("the sandbox took %q inotify instances; want at most %d, then EMFILE", lines[0], sandbox.InotifyInstances)
	}
	hostWatches := readInt(t, "/proc/sys/fs/inotify/max_user_watches")
	if _, err := fmt.Sscanf(lines[1], "watches %d %s", &watches, &why); err != nil || watches > min(sandbox.InotifyWatches, max(hostWatches/8, 1024)) || watches < 100 {
		t.Errorf("the sandbox placed %q watches; want at most %d (an eighth of the host user's %d)", lines[1], min(sandbox.InotifyWatches, max(hostWatches/8, 1024)), hostWatches)
	}
	// While the sandbox holds all it may, the daemon's user still watches.
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Fatalf("the daemon's user cannot make an inotify instance while the sandbox holds its share: %v", err)
	}
	if _, err := unix.InotifyAddWatch(fd, e.project, unix.IN_CREATE); err != nil {
		t.Errorf("the daemon's user cannot add a watch: %v", err)
	}
	unix.Close(fd)
	inW.Close()
}

func readInt(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return n
}

// TestAttackStateDirInProject: a daemon started in the home directory with
// the default state dir (~/.local/state/cellbox) opens the home as a
// project: its sandboxes must not read other workspaces' uncommitted files
// or checkpoints in the state dir, nor the token in the runtime dir, also
// when the state dir is named through a symlink.
func TestAttackStateDirInProject(t *testing.T) {
	for _, viaLink := range []bool{false, true} {
		t.Run(fmt.Sprintf("symlink=%v", viaLink), func(t *testing.T) {
			project := t.TempDir()
			if err := os.Chmod(project, 0o755); err != nil {
				t.Fatal(err)
			}
			state := filepath.Join(project, ".local", "state", "cellbox")
			if err := os.MkdirAll(state, 0o700); err != nil {
				t.Fatal(err)
			}
			stateArg := state
			if viaLink {
				stateArg = filepath.Join(t.TempDir(), "state-link")
				if err := os.Symlink(state, stateArg); err != nil {
					t.Fatal(err)
				}
			}
			run := filepath.Join(project, "run", "cellbox")
			if err := os.MkdirAll(run, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(run, "server-1.json"), []byte(`{"token":"TOKEN-SECRET"}`), 0o600); err != nil {
				t.Fatal(err)
			}
			m, err := NewManager(Options{StateDir: stateArg, Hidden: []string{run}, NoPool: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				for _, info := range m.List() {
					_ = m.Close(context.Background(), info.WorkspaceID, true)
				}
				m.Shutdown()
			})
			other, err := m.Open(context.Background(), protocol.WorkspaceOpenParams{Root: project, Name: "other"})
			if err != nil {
				t.Fatal(err)
			}
			if r := runIn(t, other, protocol.Limits{}, "sh", "-c", "echo UNCOMMITTED-SECRET > secret.txt"); r.Status.Code != 0 {
				t.Fatalf("write in the other workspace: %+v", r)
			}
			w, err := m.Open(context.Background(), protocol.WorkspaceOpenParams{Root: project, Name: "attacker"})
			if err != nil {
				t.Fatal(err)
			}
			r := runIn(t, w, protocol.Limits{}, "sh", "-c", `
ls -laR /workspace/.local /workspace/run 2>&1
cat /workspace/.local/state/cellbox/workspaces/*/upper/secret.txt 2>&1
cat /workspace/run/cellbox/server-1.json 2>&1
grep -r SECRET /workspace 2>/dev/null
touch /workspace/.local/state/cellbox/planted 2>&1 || echo write refused`)
			out := string(r.Stdout) + string(r.Stderr)
			t.Logf("in the sandbox (%+v):\n%s", r.Status, out)
			if strings.Contains(out, "UNCOMMITTED-SECRET") || strings.Contains(out, "TOKEN-SECRET") {
				t.Fatal("the sandbox read another workspace's file or the token through the state or runtime dir")
			}
			if strings.Contains(out, "cellbox/workspaces:") || strings.Contains(out, " server-1.json\n") || !strings.Contains(out, "write refused") {
				t.Fatal("the state dir is visible or writable in the sandbox")
			}
			// The project's own files are still there.
			if r := runIn(t, w, protocol.Limits{}, "sh", "-c", "ls /workspace"); !strings.Contains(string(r.Stdout), "run") {
				t.Fatalf("the project's listing: %q", r.Stdout)
			}
		})
	}
}

// TestAttackDiskQuotaHidden: disk space no walk of names finds still
// counts toward the quota: a file unlinked while it is written, an
// O_TMPFILE file, and a file 2,100 directories deep (past PATH_MAX, where a
// walk by paths fails and used to skip the subtree).
func TestAttackDiskQuotaHidden(t *testing.T) {
	const quota = 64 << 20
	// Each file stays under the per-file limit (RLIMIT_FSIZE is the
	// quota): 300 MiB in files of 32 MiB, each made by newfile().
	write := `
import os, time
def fill(newfile):
    held = []
    for i in range(300):
        if i % 32 == 0:
            held.append(newfile(i))
        os.write(held[-1], b"x" * (1 << 20))
        time.sleep(0.002)
    print("survived", flush=True)
    time.sleep(60)
`
	for _, tt := range []struct{ name, script string }{
		{"unlinked while written", write + `
def unlinked(i):
    fd = os.open("/workspace/hidden%d" % i, os.O_CREAT | os.O_WRONLY, 0o644)
    os.unlink("/workspace/hidden%d" % i)
    return fd
fill(unlinked)`},
		{"O_TMPFILE", write + `
fill(lambda i: os.open("/workspace", os.O_TMPFILE | os.O_WRONLY, 0o644))`},
		{"2100 levels deep", write + `
d = os.open("/workspace", os.O_RDONLY | os.O_DIRECTORY)
for i in range(2100):
    os.mkdir("d", dir_fd=d)
    n = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=d)
    os.close(d)
    d = n
fill(lambda i: os.open("big%d" % i, os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=d))`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newAttackEnv(t)
			w := e.open(t, "quota-hidden")
			r := runIn(t, w, protocol.Limits{DiskBytes: quota, TimeoutMs: 60000}, "python3", "-c", tt.script)
			t.Logf("%s after %v; stderr %s", outcome(r), r.Duration.Round(time.Millisecond), r.Stderr)
			if r.Status.Reason != "killed: disk quota exceeded" || r.Status.Signal != syscall.SIGKILL {
				t.Fatalf("%s; want killed: disk quota exceeded", outcome(r))
			}
			if strings.Contains(string(r.Stdout), "survived") {
				t.Fatal("the program wrote all 300 MiB before it was stopped")
			}
			if used := diskUsage(w.UpperDir(), 1<<40); used > 4*quota {
				t.Errorf("%d MiB left in the upper layer, far past the %d MiB quota", used>>20, quota>>20)
			}
			if r := runIn(t, w, protocol.Limits{}, "/bin/echo", "ok"); r.Status.Code != 0 {
				t.Errorf("after the quota kill: %s", outcome(r))
			}
		})
	}
}

// TestWalkUsageDeepAndBounded: the quota's walk counts a tree deeper than
// PATH_MAX whole, with a bounded number of descriptors.
func TestWalkUsageDeepAndBounded(t *testing.T) {
	dir := t.TempDir()
	d, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	const depth = 3000
	for range depth {
		if err := unix.Mkdirat(d, "dddddddddd", 0o755); err != nil {
			t.Fatal(err)
		}
		n, err := unix.Openat(d, "dddddddddd", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(d)
		d = n
	}
	f, err := unix.Openat(d, "data", unix.O_CREAT|unix.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(f, make([]byte, 8<<20)); err != nil {
		t.Fatal(err)
	}
	unix.Close(f)
	unix.Close(d)
	fdsBefore, _ := os.ReadDir("/proc/self/fd")
	used, err := walkUsage(dir, 1<<40)
	if err != nil {
		t.Fatalf("walk: %v", err)
	}
	if used < 8<<20+depth*minFileCharge {
		t.Fatalf("counted %d bytes; the tree holds an 8 MiB file under %d directories", used, depth)
	}
	fdsAfter, _ := os.ReadDir("/proc/self/fd")
	if len(fdsAfter) != len(fdsBefore) {
		t.Errorf("descriptors: %d before the walk, %d after", len(fdsBefore), len(fdsAfter))
	}
	// Cleaning up needs descriptors too: os.RemoveAll handles long paths.
}

// TestAttackFifoSwap: code swaps a changed file with a FIFO it holds open,
// in a loop (renameat2 RENAME_EXCHANGE), so that the daemon opens the FIFO
// where it expects the file. Changes, diff, checkpoint, commit and discard
// each answer (the file as a conflict, or skipped), and the workspace is
// not left locked.
func TestAttackFifoSwap(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "fifo-swap")
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	script := pyPrelude + `
import threading
N = 100
for i in range(N):
    open("/workspace/f%d.txt" % i, "w").write("changed %d\n" % i)
    os.mkfifo("/workspace/p%d" % i)
    os.open("/workspace/p%d" % i, os.O_RDWR)  # held open: a reader would wait forever
stop = False
def swap():
    while not stop:
        for i in range(N):
            libc.syscall(316, -100, ("/workspace/f%d.txt" % i).encode(), -100, ("/workspace/p%d" % i).encode(), 2)
threading.Thread(target=swap, daemon=True).start()
print("swapping", flush=True)
sys.stdin.read()
`
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := w.Spawn(ctx, ProcSpec{Argv: []string{"python3", "-c", script}, Stdin: inR, Stdout: outW, Stderr: outW, Limits: limits(t, protocol.Limits{})})
	inR.Close()
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	sc := bufio.NewScanner(outR)
	if !sc.Scan() || sc.Text() != "swapping" {
		t.Fatalf("the swapper said %q", sc.Text())
	}
	ops := []struct {
		name string
		f    func(context.Context) error
	}{
		{"changes", func(ctx context.Context) error { _, err := w.Changes(ctx); return err }},
		{"diff", func(ctx context.Context) error { _, err := w.Diff(ctx, nil); return err }},
		{"checkpoint", func(ctx context.Context) error { _, err := w.Checkpoint(ctx, "swap", nil); return err }},
		{"commit", func(ctx context.Context) error { _, err := w.Commit(ctx, nil, nil); return err }},
		{"discard", func(ctx context.Context) error { _, err := w.Discard(ctx, nil); return err }},
	}
	for round := range 40 {
		for _, op := range ops {
			if round < 39 && op.name != "diff" && op.name != "changes" {
				continue // the reads many times; the writes once, last
			}
			octx, ocancel := context.WithTimeout(context.Background(), 30*time.Second)
			start := time.Now()
			done := make(chan error, 1)
			go func() { done <- op.f(octx) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				// Still reading the FIFO, cancelled or not: end the swapper
				// (its end of the FIFO closes) so the operation returns.
				_ = p.Kill()
				<-done
				ocancel()
				t.Fatalf("%s hung on the swapped FIFO and ignored its cancellation", op.name)
			}
			ocancel()
			if round == 39 {
				t.Logf("%s under the swap: %v after %v", op.name, err, time.Since(start).Round(time.Millisecond))
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s hung on the swapped FIFO until its deadline", op.name)
			}
		}
	}
	inW.Close()
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

// TestAttackMemoryTogether: memoryBytes holds for the sandbox's programs
// together, not only per process (RLIMIT_AS): memory written into memfd
// files, which is in no address space, and six processes each under the
// per-process limit are both stopped; a program under its limit is not.
func TestAttackMemoryTogether(t *testing.T) {
	const limit = 256 << 20
	for _, tt := range []struct {
		name, script string
		killed       bool
	}{
		{"memfd", `
import os, time
fd = None
for i in range(800):
    if i % 64 == 0:
        fd = os.memfd_create("m%d" % i)
    os.write(fd, b"x" * (1 << 20))
print("holding 800 MiB", flush=True)
time.sleep(60)`, true},
		{"six processes", `
import os, time
kids = []
for i in range(6):
    pid = os.fork()
    if pid == 0:
        b = bytearray(90 << 20)
        for j in range(0, len(b), 4096):
            b[j] = 1
        time.sleep(60)
        os._exit(0)
    kids.append(pid)
time.sleep(5)
print("holding 540 MiB", flush=True)
for k in kids:
    os.waitpid(k, 0)`, true},
		{"under the limit", `
b = bytearray(100 << 20)
for j in range(0, len(b), 4096):
    b[j] = 1
import time
time.sleep(1.5)
print("done", flush=True)`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newAttackEnv(t)
			w := e.open(t, "memory")
			r := runIn(t, w, protocol.Limits{MemoryBytes: limit, TimeoutMs: 60000}, "python3", "-c", tt.script)
			w.mu.Lock()
			path := "the daemon's per-process measurement (no delegated cgroups)"
			if w.cg != nil {
				path = "the sandbox's cgroup " + w.cg.Dir()
			}
			w.mu.Unlock()
			t.Logf("%s after %v, counted by %s: %s", outcome(r), r.Duration.Round(time.Millisecond), path, r.Stdout)
			if !tt.killed {
				if r.Status.Code != 0 || !strings.Contains(string(r.Stdout), "done") {
					t.Fatalf("a program under its limit: %s", outcome(r))
				}
				return
			}
			if !strings.HasPrefix(r.Status.Reason, "killed: memory limit") {
				t.Fatalf("%s; want killed: memory limit", outcome(r))
			}
			if r.Duration > 30*time.Second {
				t.Errorf("stopped after %v", r.Duration)
			}
			if r := runIn(t, w, protocol.Limits{}, "/bin/echo", "ok"); r.Status.Code != 0 {
				t.Errorf("after the memory kill: %s", outcome(r))
			}
		})
	}
}

// deepTreeDepth is how deep TestAttackDeepTree's tree goes: its bottom is
// 10,000 bytes below /workspace, more than twice PATH_MAX.
const deepTreeDepth = 5000

// makeDeepTree has code in w make deepTreeDepth nested directories "d"
// (mkdirat and openat from the previous descriptor, so no path it uses is
// long), with bottom.txt at the bottom when withFile.
func makeDeepTree(t *testing.T, w *Workspace, withFile bool) {
	t.Helper()
	file := "False"
	if withFile {
		file = "True"
	}
	r := py(t, w, protocol.Limits{TimeoutMs: 60000}, fmt.Sprintf(`
fd = os.open("/workspace", os.O_RDONLY | os.O_DIRECTORY)
for i in range(%d):
    os.mkdir("d", dir_fd=fd)
    nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    fd = nfd
if %s:
    f = os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(f, b"bottom\n")
    os.close(f)
print("made")
`, deepTreeDepth, file))
	if r.Status.Code != 0 || !strings.Contains(string(r.Stdout), "made") {
		t.Fatalf("making the deep tree: %s %s", outcome(r), stderrTail(r))
	}
}

// openFDs counts the test process's (the daemon's) open descriptors.
func openFDs() int {
	es, _ := os.ReadDir("/proc/self/fd")
	return len(es)
}

// peakDuring runs fn and returns how far the process's open descriptors
// and its heap and stacks grew at most while it ran, sampled every 2 ms.
func peakDuring(fn func()) (fds int, mem uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseMem, baseFDs := ms.HeapAlloc+ms.StackInuse, openFDs()
	peakMem, peakFDs := baseMem, baseFDs
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peakMem = max(peakMem, ms.HeapAlloc+ms.StackInuse)
		peakFDs = max(peakFDs, openFDs())
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			sample()
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	fn()
	close(stop)
	<-done
	sample()
	return peakFDs - baseFDs, peakMem - baseMem
}

// TestAttackDeepTree: code makes a tree 5,000 directories deep with a file
// at the bottom, far below PATH_MAX. changes walks it with a bounded number
// of descriptors and bounded memory; diff, checkpoint and restore handle
// the file; discard (by the top directory's path, and of everything)
// removes the whole tree, so the user can always roll back.
func TestAttackDeepTree(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "deep")
	ctx := context.Background()
	upperHasTree := func() bool {
		_, err := os.Lstat(filepath.Join(w.UpperDir(), "d"))
		return err == nil
	}
	cpEmpty, err := w.Checkpoint(ctx, "empty", nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	makeDeepTree(t, w, true)
	t.Logf("code made %d nested directories in %v", deepTreeDepth, time.Since(start).Round(time.Millisecond))
	deep := strings.Repeat("d/", deepTreeDepth) + "bottom.txt"

	var cs []protocol.Change
	start = time.Now()
	fds, mem := peakDuring(func() { cs, err = w.Changes(ctx) })
	t.Logf("changes of the deep tree: %v, descriptors +%d at most, heap and stacks +%.1f MiB at most", time.Since(start).Round(time.Millisecond), fds, float64(mem)/(1<<20))
	if err != nil {
		t.Fatalf("Changes: %v", err)
	}
	if len(cs) != 1 || cs[0].Path != deep || cs[0].Kind != protocol.ChangeKindAdded {
		t.Fatalf("changes: %d, want the one file at the bottom", len(cs))
	}
	if fds >= 200 {
		t.Errorf("changes opened %d descriptors at once, want fewer than 200", fds)
	}
	if mem >= 16<<20 {
		t.Errorf("changes grew the heap and stacks by %d MiB, want less than 16", mem>>20)
	}

	diffs, err := w.Diff(ctx, nil)
	if err != nil || len(diffs) != 1 || !strings.Contains(diffs[0].Diff, "+bottom") {
		t.Fatalf("Diff: %v, %d diffs", err, len(diffs))
	}
	cpDeep, err := w.Checkpoint(ctx, "deep", nil)
	if err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	if cpDeep.Files != 1 {
		t.Fatalf("the checkpoint holds %d files, want 1", cpDeep.Files)
	}
	// Back to before the tree: the file and every directory above it go.
	if err := w.Restore(ctx, cpEmpty.CheckpointID, nil); err != nil {
		t.Fatalf("Restore (empty): %v", err)
	}
	if cs := mustChanges(t, w); len(cs) != 0 || upperHasTree() {
		t.Fatalf("after restoring the empty checkpoint: %d changes, tree left: %v", len(cs), upperHasTree())
	}
	// And forward again.
	if err := w.Restore(ctx, cpDeep.CheckpointID, nil); err != nil {
		t.Fatalf("Restore (deep): %v", err)
	}
	if cs := mustChanges(t, w); len(cs) != 1 || cs[0].Path != deep {
		t.Fatalf("after restoring the deep checkpoint: %d changes", len(cs))
	}
	r := py(t, w, protocol.Limits{}, fmt.Sprintf(`
fd = os.open("/workspace", os.O_RDONLY | os.O_DIRECTORY)
for i in range(%d):
    nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    fd = nfd
f = os.open("bottom.txt", os.O_RDONLY, dir_fd=fd)
print(os.read(f, 100).decode(), end="")
`, deepTreeDepth))
	if string(r.Stdout) != "bottom\n" {
		t.Fatalf("the restored file reads %q (%s)", r.Stdout, stderrTail(r))
	}

	// Discard by the top directory's path.
	start = time.Now()
	done, err := w.Discard(ctx, []string{"d"})
	if err != nil {
		t.Fatalf("Discard d: %v", err)
	}
	t.Logf("discard of the deep tree: %v", time.Since(start).Round(time.Millisecond))
	if len(done) != 1 || done[0] != deep || upperHasTree() {
		t.Fatalf("discard d: %d paths, tree left: %v", len(done), upperHasTree())
	}
	// Only directories, no change to list: discard of everything still
	// removes them.
	makeDeepTree(t, w, false)
	if cs := mustChanges(t, w); len(cs) != 0 {
		t.Fatalf("empty directories listed as %d changes", len(cs))
	}
	if _, err := w.Discard(ctx, nil); err != nil {
		t.Fatalf("Discard: %v", err)
	}
	if upperHasTree() {
		t.Fatal("discard of everything left the deep tree")
	}
	if r := runIn(t, w, protocol.Limits{}, "true"); r.Status.Code != 0 {
		t.Fatalf("the workspace no longer runs code: %s", outcome(r))
	}
}

// TestAttackRenameOverUserEdit: code appends to notes.txt (a copy-up), the
// user edits the project's notes.txt, then code rewrites the file by a
// rename over it, as sed -i or an editor's save do. The rename's new upper
// entry is born after the user's edit, so the birth-time rule alone would
// take the edited file as what the workspace saw, and commit would
// overwrite the edit. The baseline follows the path from the first time
// the workspace touched it: commit reports a conflict and leaves the edit.
// Without the user's edit, the same steps commit cleanly.
func TestAttackRenameOverUserEdit(t *testing.T) {
	for _, userEdit := range []bool{true, false} {
		t.Run(fmt.Sprintf("userEdit=%v", userEdit), func(t *testing.T) {
			e := newAttackEnv(t)
			notes := filepath.Join(e.project, "notes.txt")
			if err := os.WriteFile(notes, []byte("line 1\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			w := e.open(t, "notes")
			sh(t, w, "echo sandbox >> notes.txt")
			time.Sleep(3 * quotaInterval) // the sandbox still runs
			const edited = "line 1\nthe user's edit\n"
			if userEdit {
				if err := os.WriteFile(notes, []byte(edited), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r := py(t, w, protocol.Limits{}, `
old = open("notes.txt").read()
with open(".notes.txt.tmp", "w") as f:
    f.write(old.replace("sandbox", "sandbox rewrote"))
os.rename(".notes.txt.tmp", "notes.txt")
print("renamed")
`)
			if !strings.Contains(string(r.Stdout), "renamed") {
				t.Fatalf("rename: %s %s", outcome(r), stderrTail(r))
			}
			res, err := w.Commit(context.Background(), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(notes)
			t.Logf("applied %v, conflicts %v; project: %q", res.Applied, res.Conflicts, got)
			if userEdit {
				if len(res.Conflicts) != 1 || res.Conflicts[0].Path != "notes.txt" || len(res.Applied) != 0 {
					t.Fatalf("commit applied %v, conflicts %v: want notes.txt a conflict", res.Applied, res.Conflicts)
				}
				if string(got) != edited {
					t.Fatalf("the user's edit was overwritten: %q", got)
				}
				return
			}
			if len(res.Conflicts) != 0 || len(res.Applied) != 1 {
				t.Fatalf("commit applied %v, conflicts %v: want notes.txt applied", res.Applied, res.Conflicts)
			}
			if string(got) != "line 1\nsandbox rewrote\n" {
				t.Fatalf("the project holds %q", got)
			}
		})
	}
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
