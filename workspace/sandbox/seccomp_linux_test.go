package sandbox

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The seccomp tests re-execute the test binary as a helper that installs
// the filter on itself and then really makes each refused call, reporting
// one "name<TAB>result" line per call to stdout. The helper runs in a new
// user namespace, so that a call the filter failed to refuse still has no
// power over the host, and so that the calls which need privilege (unshare,
// clone with namespace flags) would succeed there without the filter.

const entryTestSeccomp = "test-seccomp"

func init() {
	register(entryTestSeccomp, seccompTestEntry)
}

// seccompMarker is the errno rule i returns in the "marked" variant of the
// policy. The kernel never returns errnos this large, so seeing one proves
// that the call was refused by that very rule. clone3 keeps ENOSYS, the
// only answer on which glibc's pthread_create and posix_spawn fall back to
// clone (with a marker, a cgo binary cannot start threads); an
// unfiltered clone3 of the attempts answers EINVAL or succeeds, never ENOSYS.
func seccompMarker(i int) syscall.Errno {
	if seccompPolicy[i].Syscall == "clone3" {
		return unix.ENOSYS
	}
	return syscall.Errno(3000 + i)
}

func markedSeccompPolicy() []seccompRule {
	rules := slices.Clone(seccompPolicy)
	for i := range rules {
		rules[i].Errno = seccompMarker(i)
	}
	return rules
}

func seccompRuleIndex(t *testing.T, name string) int {
	t.Helper()
	i := slices.IndexFunc(seccompPolicy, func(r seccompRule) bool { return r.Syscall == name })
	if i < 0 {
		t.Fatalf("no seccomp rule for %s", name)
	}
	return i
}

func needSeccompArch(t *testing.T) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skipf("the seccomp policy is for amd64; this is %s", runtime.GOARCH)
	}
}

// sysCall makes system call nr with args (missing ones are 0).
func sysCall(nr uintptr, args ...uintptr) error {
	var a [6]uintptr
	copy(a[:], args)
	_, _, e := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
	if e != 0 {
		return e
	}
	return nil
}

// onOwnThread runs f on a goroutine locked to its OS thread and lets that
// thread die with it, so that whatever f changes about its thread (a new
// namespace, if the filter failed) goes away.
func onOwnThread(f func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		ch <- f()
	}()
	return <-ch
}

// startWith starts /bin/true with clone flags and waits for it.
func startWith(flags uintptr) error {
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags}
	return cmd.Run()
}

// seccompAttempt is a call the filter must refuse, and the rule that must
// refuse it.
type seccompAttempt struct {
	name string
	rule string
	try  func() error
}

// seccompAttempts are the refused calls the helper makes: specific calls
// for the rules that test an argument, each other rule's call with zero
// arguments. Each is harmless if the filter let it through (the helper
// runs as root of its own user namespace, without host capabilities).
func seccompAttempts() []seccompAttempt {
	a := []seccompAttempt{
		{"clone3", "clone3", func() error { return sysCall(unix.SYS_CLONE3, 0, 0) }},
		// Go asks for a new time namespace with clone3.
		{"clone_newtime_via_clone3", "clone3", func() error { return startWith(unix.CLONE_NEWTIME) }},
	}
	for _, ns := range []struct {
		name string
		flag uintptr
	}{
		{"newuser", unix.CLONE_NEWUSER}, {"newns", unix.CLONE_NEWNS}, {"newpid", unix.CLONE_NEWPID},
		{"newnet", unix.CLONE_NEWNET}, {"newipc", unix.CLONE_NEWIPC}, {"newuts", unix.CLONE_NEWUTS},
		{"newcgroup", unix.CLONE_NEWCGROUP},
	} {
		a = append(a, seccompAttempt{"clone_" + ns.name, "clone", func() error { return startWith(ns.flag) }})
	}
	a = append(a,
		// CLONE_NEWNS alone is let through (the spawner's); with any other
		// flag it is refused.
		seccompAttempt{"unshare_newns_newuts", "unshare", func() error {
			return onOwnThread(func() error { return unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_NEWUTS) })
		}},
		seccompAttempt{"unshare_fs", "unshare", func() error {
			return onOwnThread(func() error { return unix.Unshare(unix.CLONE_FS) })
		}},
		seccompAttempt{"unshare_newuser", "unshare", func() error {
			return onOwnThread(func() error { return unix.Unshare(unix.CLONE_NEWUSER) })
		}},
		seccompAttempt{"setns", "setns", func() error {
			return onOwnThread(func() error {
				fd, err := unix.Open("/proc/self/ns/uts", unix.O_RDONLY|unix.O_CLOEXEC, 0)
				if err != nil {
					return fmt.Errorf("open own uts namespace: %w", err)
				}
				defer unix.Close(fd)
				return unix.Setns(fd, unix.CLONE_NEWUTS)
			})
		}},
		seccompAttempt{"socket_vsock", "socket", func() error {
			fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}},
		// The kernel reads family as an int: 1<<32|AF_VSOCK is AF_VSOCK.
		seccompAttempt{"socket_vsock_high_word", "socket", func() error {
			r, _, e := unix.Syscall(unix.SYS_SOCKET, 1<<32|unix.AF_VSOCK, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if e != 0 {
				return e
			}
			unix.Close(int(r))
			return nil
		}},
		seccompAttempt{"socketpair_vsock", "socketpair", func() error {
			fds, err := unix.Socketpair(unix.AF_VSOCK, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err == nil {
				unix.Close(fds[0])
				unix.Close(fds[1])
			}
			return err
		}},
		// fd 0 is /dev/null: without the filter these are ENOTTY.
		seccompAttempt{"ioctl_tiocsti", "ioctl", func() error { return tiocsti(unix.TIOCSTI) }},
		// The kernel reads cmd as an unsigned int: this is TIOCSTI too.
		seccompAttempt{"ioctl_tiocsti_high_word", "ioctl", func() error { return tiocsti(1<<32 | unix.TIOCSTI) }},
		seccompAttempt{"ioctl_tioclinux", "ioctl", func() error {
			b := byte(0)
			return sysCall(unix.SYS_IOCTL, 0, unix.TIOCLINUX, uintptr(unsafe.Pointer(&b)))
		}},
		seccompAttempt{"ioctl_tiocsetd", "ioctl", func() error {
			ldisc := int32(0)
			return sysCall(unix.SYS_IOCTL, 0, unix.TIOCSETD, uintptr(unsafe.Pointer(&ldisc)))
		}},
		seccompAttempt{"personality_addr_no_randomize", "personality", func() error {
			return sysCall(unix.SYS_PERSONALITY, addrNoRandomize)
		}},
		seccompAttempt{"personality_linux32", "personality", func() error {
			return sysCall(unix.SYS_PERSONALITY, perLinux32)
		}},
		// Zero arguments would be PTRACE_TRACEME; peek at a pid that cannot exist.
		seccompAttempt{"ptrace", "ptrace", func() error {
			return sysCall(unix.SYS_PTRACE, unix.PTRACE_PEEKDATA, 0x7fffffff, 0, 0)
		}},
	)
	covered := make(map[string]bool)
	for _, x := range a {
		covered[x.rule] = true
	}
	for _, r := range seccompPolicy {
		if !covered[r.Syscall] {
			nr := uintptr(r.Nr)
			a = append(a, seccompAttempt{r.Syscall, r.Syscall, func() error { return sysCall(nr) }})
		}
	}
	return a
}

func tiocsti(cmd uintptr) error {
	b := byte('x')
	return sysCall(unix.SYS_IOCTL, 0, cmd, uintptr(unsafe.Pointer(&b)))
}

// seccompAllowed are calls and programs that must keep working under the
// filter, run by the helper in the "real" mode. A check returns
// errSkipCheck-wrapped errors when what it needs is missing.
var seccompAllowed = []struct {
	name string
	run  func(dir string) error
}{
	{"fork_exec_true", func(string) error { return exec.Command("/bin/true").Run() }},
	{"threads", checkNewThreads},
	{"socket_unix_and_inet", func(string) error {
		for _, family := range []int{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6} {
			fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				if family == unix.AF_INET6 && err == unix.EAFNOSUPPORT {
					continue
				}
				return fmt.Errorf("socket(%d): %w", family, err)
			}
			unix.Close(fd)
		}
		return nil
	}},
	{"ioctl_other", func(string) error {
		// TCGETS on /dev/null: the kernel's answer, not the filter's.
		if _, err := unix.IoctlGetTermios(0, unix.TCGETS); err != unix.ENOTTY {
			return fmt.Errorf("TCGETS on /dev/null: got %v, want ENOTTY", err)
		}
		return nil
	}},
	{"personality_query_and_reset", func(string) error {
		if err := sysCall(unix.SYS_PERSONALITY, personalityQuery); err != nil {
			return fmt.Errorf("personality(0xffffffff): %w", err)
		}
		if err := sysCall(unix.SYS_PERSONALITY, 0); err != nil {
			return fmt.Errorf("personality(PER_LINUX): %w", err)
		}
		return nil
	}},
	{"unshare_newns_alone", func(string) error {
		// Let through to the kernel, which grants it to this helper (root
		// of its own user namespace) and refuses it to programs (no
		// CAP_SYS_ADMIN); a high bit, which the filter does not read,
		// makes it EINVAL.
		if err := onOwnThread(func() error { return unix.Unshare(unix.CLONE_NEWNS) }); err != nil {
			return fmt.Errorf("unshare(CLONE_NEWNS): %w", err)
		}
		if err := onOwnThread(func() error { return sysCall(unix.SYS_UNSHARE, 1<<32|unix.CLONE_NEWNS) }); err != unix.EINVAL {
			return fmt.Errorf("unshare(1<<32|CLONE_NEWNS): got %v, want EINVAL", err)
		}
		return nil
	}},
	{"syscall_minus_one", func(string) error {
		// Not a system call: the kernel says ENOSYS, the filter must not kill.
		if err := sysCall(^uintptr(0)); err != unix.ENOSYS {
			return fmt.Errorf("syscall(-1): got %v, want ENOSYS", err)
		}
		return nil
	}},
	{"bash_coreutils", func(dir string) error {
		return runProgram(dir, "bash", "-c", `set -e; x=$(echo hi | cat); [ "$x" = hi ]; ls / | sort | head -n 1 >/dev/null; (exit 0) & wait`)
	}},
	{"python3", func(dir string) error {
		return runProgram(dir, "python3", "-c", `
import os, subprocess, threading
out = []
t = threading.Thread(target=out.append, args=(1,)); t.start(); t.join()
assert out == [1]
subprocess.run(["true"], check=True)
pid = os.fork()
if pid == 0:
    os._exit(7)
assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7
# The filter came along through exec: keyctl (250) is refused.
status = open("/proc/self/status").read()
assert "\nSeccomp:\t2\n" in status and "\nNoNewPrivs:\t1\n" in status, status
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
assert libc.syscall(250, 0) == -1 and ctypes.get_errno() == 1, ctypes.get_errno()
print("ok")
`)
	}},
	{"node", func(dir string) error {
		return runProgram(dir, "node", "-e", `
const { execSync } = require("child_process");
const { Worker } = require("worker_threads");
execSync("true");
new Worker("require('worker_threads').parentPort.postMessage(1)", { eval: true })
  .on("message", (m) => { if (m !== 1) process.exit(3); console.log("ok"); process.exit(0); })
  .on("error", (e) => { console.error(e); process.exit(4); });
`)
	}},
	{"git", func(dir string) error {
		return runProgram(dir, "bash", "-c", `set -e; git init -q repo; cd repo; echo x > f; git add f
git -c user.name=t -c user.email=t@example.com commit -q -m x; git log --oneline | grep -q x`)
	}},
}

var errSkipCheck = errors.New("skip")

// Personas (include/uapi/linux/personality.h).
const (
	addrNoRandomize = 0x0040000
	readImpliesExec = 0x0400000
	perLinux32      = 0x0008
)

// runProgram runs name from the usual system directories in dir.
func runProgram(dir, name string, args ...string) error {
	path := ""
	for _, d := range []string{"/usr/local/bin", "/usr/bin", "/bin"} {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			path = filepath.Join(d, name)
			break
		}
	}
	if path == "" {
		return fmt.Errorf("%w: %s is not installed", errSkipCheck, name)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "LANG=C.UTF-8", "GIT_CONFIG_NOSYSTEM=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", name, err, oneLine(string(out)))
	}
	return nil
}

// checkNewThreads makes the Go runtime start new OS threads (each locked
// goroutine parks with its own thread) and checks they are there.
func checkNewThreads(string) error {
	const n = 8
	var started sync.WaitGroup
	release := make(chan struct{})
	defer close(release)
	started.Add(n)
	for range n {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			started.Done()
			<-release
		}()
	}
	started.Wait()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	if len(tasks) < n+1 {
		return fmt.Errorf("%d threads, want at least %d", len(tasks), n+1)
	}
	return nil
}

// threadStatus checks that every thread of this process is under a
// seccomp filter with no_new_privs.
func threadStatus() error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "status"))
		if err != nil {
			return err
		}
		s := string(b)
		if !strings.Contains(s, "\nSeccomp:\t2\n") || !strings.Contains(s, "\nNoNewPrivs:\t1\n") {
			return fmt.Errorf("thread %s is not filtered with no_new_privs", task.Name())
		}
	}
	return nil
}

// seccompTestEntry is the helper: args are the mode ("real" or "marked").
func seccompTestEntry(args []string) int {
	if len(args) != 1 || (args[0] != "real" && args[0] != "marked") {
		fmt.Fprintln(os.Stderr, "usage: test-seccomp real|marked")
		return 2
	}
	// Refuse to make the calls with host power: only inside a user namespace.
	if m, err := os.ReadFile("/proc/self/uid_map"); err != nil || strings.Fields(string(m))[2] == "4294967295" {
		fmt.Fprintln(os.Stderr, "test-seccomp: not in a new user namespace; refusing to make the calls")
		return 2
	}
	dir, err := os.MkdirTemp("", "cellbox-seccomp-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)

	// Threads that exist before the filter: TSYNC must cover them.
	const preThreads = 3
	threads := startLockedThreads(preThreads)
	defer threads.stop()

	rules := seccompPolicy
	if args[0] == "marked" {
		rules = markedSeccompPolicy()
	}
	if err := installSeccompRules(rules); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, a := range seccompAttempts() {
		reportResult(a.name, a.try())
	}
	for i := range preThreads {
		reportResult(fmt.Sprintf("thread%d_keyctl", i), threads.run(i, func() error { return sysCall(unix.SYS_KEYCTL) }))
	}
	if args[0] == "real" {
		for _, c := range seccompAllowed {
			res := "ok"
			if err := c.run(dir); errors.Is(err, errSkipCheck) {
				res = "skip " + oneLine(err.Error())
			} else if err != nil {
				res = "fail " + oneLine(err.Error())
			}
			fmt.Printf("allow_%s\t%s\n", c.name, res)
		}
	}
	res := "ok"
	if err := threadStatus(); err != nil {
		res = "fail " + err.Error()
	}
	fmt.Printf("all_threads_filtered\t%s\n", res)
	return 0
}

// runSeccompHelper runs the helper in mode in a new user namespace and
// returns its lines by name.
func runSeccompHelper(t *testing.T, mode string) map[string]string {
	t.Helper()
	needSeccompArch(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res := runHelper(ctx, entryTestSeccomp, unix.CLONE_NEWUSER, mode)
	if !res.ran {
		t.Skipf("cannot start a helper in a new user namespace (the sandbox needs one anyway): %s", res.msg)
	}
	if !res.ok {
		t.Fatalf("seccomp helper failed: %s\nstdout:\n%s", res.msg, res.stdout)
	}
	return parseHelperLines(res.stdout)
}

// parseHelperLines parses a test helper's "name<TAB>result" lines.
func parseHelperLines(out string) map[string]string {
	lines := make(map[string]string)
	for line := range strings.Lines(out) {
		name, v, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
		if ok {
			lines[name] = v
		}
	}
	return lines
}

// reportResult writes a test helper's line for a call: 0 for success, the
// errno's number, or "error TEXT".
func reportResult(name string, err error) {
	var errno syscall.Errno
	switch {
	case err == nil:
		fmt.Printf("%s\t0\n", name)
	case errors.As(err, &errno):
		fmt.Printf("%s\t%d\n", name, int(errno))
	default:
		fmt.Printf("%s\terror %s\n", name, oneLine(err.Error()))
	}
}

// lockedThreads are OS threads started before a layer is installed, each
// running the functions sent to it, to check that the layer covers
// threads that already existed.
type lockedThreads []chan func()

func startLockedThreads(n int) lockedThreads {
	ts := make(lockedThreads, n)
	var ready sync.WaitGroup
	ready.Add(n)
	for i := range ts {
		ts[i] = make(chan func())
		go func(c chan func()) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			ready.Done()
			for f := range c {
				f()
			}
		}(ts[i])
	}
	ready.Wait()
	return ts
}

// run runs f on thread i and returns its error.
func (ts lockedThreads) run(i int, f func() error) error {
	res := make(chan error, 1)
	ts[i] <- func() { res <- f() }
	return <-res
}

func (ts lockedThreads) stop() {
	for _, c := range ts {
		close(c)
	}
}

func errnoText(v string) string {
	n, err := strconv.Atoi(v)
	if err != nil {
		return v
	}
	if n == 0 {
		return "success"
	}
	if name := unix.ErrnoName(syscall.Errno(n)); name != "" {
		return name
	}
	return "errno " + v
}

// TestSeccompBlocks makes every refused call under the real filter and
// checks the errno the policy promises, and that allowed programs run.
func TestSeccompBlocks(t *testing.T) {
	lines := runSeccompHelper(t, "real")
	for _, a := range seccompAttempts() {
		t.Run(a.name, func(t *testing.T) {
			want := seccompPolicy[seccompRuleIndex(t, a.rule)].Errno
			got, ok := lines[a.name]
			if !ok {
				t.Fatalf("the helper did not report %s", a.name)
			}
			if got != strconv.Itoa(int(want)) {
				t.Errorf("%s: got %s, want %s", a.name, errnoText(got), unix.ErrnoName(want))
			}
		})
	}
	for i := range 3 {
		name := fmt.Sprintf("thread%d_keyctl", i)
		if got := lines[name]; got != strconv.Itoa(int(unix.EPERM)) {
			t.Errorf("keyctl on a thread that existed before the filter: got %s, want EPERM", errnoText(got))
		}
	}
	if got := lines["all_threads_filtered"]; got != "ok" {
		t.Errorf("all threads filtered: %s", got)
	}
	for _, c := range seccompAllowed {
		t.Run("allow_"+c.name, func(t *testing.T) {
			got, ok := lines["allow_"+c.name]
			switch {
			case !ok:
				t.Fatal("not reported")
			case strings.HasPrefix(got, "skip "):
				t.Skip(strings.TrimPrefix(got, "skip "))
			case got != "ok":
				t.Error(got)
			}
		})
	}
}

// TestSeccompRulesHit runs the attempts under the marked policy: each must
// come back with its own rule's marker errno, which proves the call was
// refused by the filter (not by the kernel for some other reason) and by
// the rule meant to refuse it.
func TestSeccompRulesHit(t *testing.T) {
	lines := runSeccompHelper(t, "marked")
	for _, a := range seccompAttempts() {
		want := seccompMarker(seccompRuleIndex(t, a.rule))
		if got := lines[a.name]; got != strconv.Itoa(int(want)) {
			t.Errorf("%s: got %s, want the marker %d of rule %s", a.name, errnoText(got), want, a.rule)
		}
	}
}

// TestSeccompEveryRuleTried: a rule added to the policy gets a real attempt.
func TestSeccompEveryRuleTried(t *testing.T) {
	tried := make(map[string]bool)
	for _, a := range seccompAttempts() {
		tried[a.rule] = true
	}
	for _, r := range seccompPolicy {
		if !tried[r.Syscall] {
			t.Errorf("no attempt exercises the rule for %s", r.Syscall)
		}
		if r.Why == "" {
			t.Errorf("rule %s does not say why", r.Syscall)
		}
	}
}

// seccompInput is seccomp_data as the x/net/bpf VM reads it: its loads are
// big-endian, so each 32-bit word is stored big-endian at the offset the
// kernel reads it from (the low word of argument i at 16+8i, the high word
// at 20+8i, as on little-endian x86_64).
func seccompInput(arch, nr uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], nr)
	binary.BigEndian.PutUint32(b[4:], arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(b[16+8*i:], uint32(a))
		binary.BigEndian.PutUint32(b[20+8*i:], uint32(a>>32))
	}
	return b
}

// TestSeccompProgram runs the compiled filter in a BPF interpreter over
// every system call number and the argument edge cases.
func TestSeccompProgram(t *testing.T) {
	prog, err := seccompProgram(seccompPolicy)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d instructions", len(prog))
	if _, err := bpf.Assemble(prog); err != nil {
		t.Fatal(err)
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	run := func(in []byte) uint32 {
		t.Helper()
		v, err := vm.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		return uint32(v)
	}
	const (
		allow = unix.SECCOMP_RET_ALLOW
		kill  = unix.SECCOMP_RET_KILL_PROCESS
	)
	errno := func(e syscall.Errno) uint32 { return unix.SECCOMP_RET_ERRNO | uint32(e) }
	x86 := uint32(seccompArchX86_64)

	byNr := make(map[uint32]seccompRule)
	for _, r := range seccompPolicy {
		byNr[r.Nr] = r
	}
	for nr := uint32(0); nr < 600; nr++ {
		want := uint32(allow)
		if r, ok := byNr[nr]; ok && r.Arg == nil {
			want = errno(r.Errno)
		}
		if r, ok := byNr[nr]; ok && r.Arg != nil {
			continue // below
		}
		if got := run(seccompInput(x86, nr)); got != want {
			t.Errorf("nr %d: got %#x, want %#x", nr, got, want)
		}
		// Whatever the number, another architecture or x32 is killed.
		if got := run(seccompInput(unix.AUDIT_ARCH_I386, nr)); got != kill {
			t.Errorf("i386 nr %d: got %#x, want KILL_PROCESS", nr, got)
		}
		if got := run(seccompInput(x86, nr|x32SyscallBit)); got != kill {
			t.Errorf("x32 nr %d: got %#x, want KILL_PROCESS", nr, got)
		}
	}
	if got := run(seccompInput(x86, 0xffffffff)); got != allow {
		t.Errorf("nr -1: got %#x, want ALLOW (the kernel answers ENOSYS)", got)
	}

	const threadFlags = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND |
		unix.CLONE_SYSVSEM | unix.CLONE_THREAD | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID
	cases := []struct {
		name string
		nr   uint32
		args []uint64
		want uint32
	}{
		{"clone thread", unix.SYS_CLONE, []uint64{threadFlags}, allow},
		{"clone fork", unix.SYS_CLONE, []uint64{uint64(unix.SIGCHLD)}, allow},
		{"clone vfork posix_spawn", unix.SYS_CLONE, []uint64{unix.CLONE_VM | unix.CLONE_VFORK | uint64(unix.SIGCHLD)}, allow},
		{"clone pidfd", unix.SYS_CLONE, []uint64{unix.CLONE_PIDFD | uint64(unix.SIGCHLD)}, allow},
		{"clone high word only", unix.SYS_CLONE, []uint64{0xffffffff00000000 | uint64(unix.SIGCHLD)}, allow},
		{"clone newuser with thread flags", unix.SYS_CLONE, []uint64{threadFlags | unix.CLONE_NEWUSER}, errno(unix.EPERM)},
		{"unshare newns", unix.SYS_UNSHARE, []uint64{unix.CLONE_NEWNS}, allow},
		{"unshare newns high word", unix.SYS_UNSHARE, []uint64{1<<32 | unix.CLONE_NEWNS}, allow},
		{"unshare newns newuts", unix.SYS_UNSHARE, []uint64{unix.CLONE_NEWNS | unix.CLONE_NEWUTS}, errno(unix.EPERM)},
		{"unshare newns newuser", unix.SYS_UNSHARE, []uint64{unix.CLONE_NEWNS | unix.CLONE_NEWUSER}, errno(unix.EPERM)},
		{"unshare newuser", unix.SYS_UNSHARE, []uint64{unix.CLONE_NEWUSER}, errno(unix.EPERM)},
		{"unshare fs", unix.SYS_UNSHARE, []uint64{unix.CLONE_FS}, errno(unix.EPERM)},
		{"unshare nothing", unix.SYS_UNSHARE, []uint64{0}, errno(unix.EPERM)},
		{"socket unix", unix.SYS_SOCKET, []uint64{unix.AF_UNIX}, allow},
		{"socket inet", unix.SYS_SOCKET, []uint64{unix.AF_INET}, allow},
		{"socket netlink", unix.SYS_SOCKET, []uint64{unix.AF_NETLINK}, allow},
		{"socket vsock", unix.SYS_SOCKET, []uint64{unix.AF_VSOCK}, errno(unix.EAFNOSUPPORT)},
		{"socket vsock high word", unix.SYS_SOCKET, []uint64{1<<40 | unix.AF_VSOCK}, errno(unix.EAFNOSUPPORT)},
		{"socketpair unix", unix.SYS_SOCKETPAIR, []uint64{unix.AF_UNIX}, allow},
		{"socketpair vsock", unix.SYS_SOCKETPAIR, []uint64{unix.AF_VSOCK}, errno(unix.EAFNOSUPPORT)},
		{"ioctl TIOCSTI", unix.SYS_IOCTL, []uint64{0, unix.TIOCSTI}, errno(unix.EPERM)},
		{"ioctl TIOCSTI high word", unix.SYS_IOCTL, []uint64{0, 0xdead00000000 | unix.TIOCSTI}, errno(unix.EPERM)},
		{"ioctl TIOCLINUX", unix.SYS_IOCTL, []uint64{0, unix.TIOCLINUX}, errno(unix.EPERM)},
		{"ioctl TIOCSETD", unix.SYS_IOCTL, []uint64{0, unix.TIOCSETD}, errno(unix.EPERM)},
		{"ioctl fd is TIOCSTI", unix.SYS_IOCTL, []uint64{unix.TIOCSTI, unix.TCGETS}, allow},
		{"ioctl TCGETS", unix.SYS_IOCTL, []uint64{0, unix.TCGETS}, allow},
		{"ioctl TIOCGWINSZ", unix.SYS_IOCTL, []uint64{0, unix.TIOCGWINSZ}, allow},
		{"ioctl TIOCSWINSZ", unix.SYS_IOCTL, []uint64{0, unix.TIOCSWINSZ}, allow},
		{"personality query", unix.SYS_PERSONALITY, []uint64{0xffffffff}, allow},
		{"personality query high word", unix.SYS_PERSONALITY, []uint64{0xffffffffffffffff}, allow},
		{"personality linux", unix.SYS_PERSONALITY, []uint64{0}, allow},
		{"personality addr_no_randomize", unix.SYS_PERSONALITY, []uint64{addrNoRandomize}, errno(unix.EPERM)},
		{"personality read_implies_exec", unix.SYS_PERSONALITY, []uint64{readImpliesExec}, errno(unix.EPERM)},
	}
	for _, flag := range []uint64{unix.CLONE_NEWUSER, unix.CLONE_NEWNS, unix.CLONE_NEWPID, unix.CLONE_NEWNET,
		unix.CLONE_NEWIPC, unix.CLONE_NEWUTS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWTIME} {
		cases = append(cases, struct {
			name string
			nr   uint32
			args []uint64
			want uint32
		}{fmt.Sprintf("clone %#x", flag), unix.SYS_CLONE, []uint64{flag | uint64(unix.SIGCHLD)}, errno(unix.EPERM)})
	}
	for _, c := range cases {
		if got := run(seccompInput(x86, c.nr, c.args...)); got != c.want {
			t.Errorf("%s: got %#x, want %#x", c.name, got, c.want)
		}
	}
}

// TestSeccompPolicyText: what doctor prints names every rule.
func TestSeccompPolicyText(t *testing.T) {
	text := seccompPolicyText()
	for _, r := range seccompPolicy {
		if !strings.Contains(text, r.Syscall) {
			t.Errorf("policy text lacks %s", r.Syscall)
		}
	}
	if !strings.Contains(text, "KILL_PROCESS") || !strings.Contains(text, "clone(flags has CLONE_NEWUSER") {
		t.Errorf("policy text:\n%s", text)
	}
	t.Logf("\n%s", text)
}
