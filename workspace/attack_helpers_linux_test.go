package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/sandbox/sandboxtest"
)

// Helpers of the attack suite (attack_linux_test.go and attack_*_linux_test.go).

// attackEnv is a Manager over a temporary state dir and a project holding
// a few files.
type attackEnv struct {
	m       *Manager
	state   string
	project string
}

// projectFiles are the project's files and their contents.
var projectFiles = map[string]string{
	"hello.txt":    "hello\n",
	"sub/data.txt": "data\n",
	"gone.txt":     "to be deleted in the sandbox\n",
}

func newAttackEnv(t testing.TB) *attackEnv {
	t.Helper()
	state := t.TempDir()
	project := t.TempDir()
	for name, content := range projectFiles {
		p := filepath.Join(project, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := NewManager(Options{StateDir: state, DefaultRoot: project})
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	// Registered after TempDir, so it runs first: an unprivileged user
	// cannot remove the overlay's work/work (mode 000) without Close's
	// discard opening it.
	t.Cleanup(func() {
		for _, info := range m.List() {
			_ = m.CloseWorkspace(context.Background(), info.WorkspaceID, true)
		}
		m.Close()
	})
	return &attackEnv{m: m, state: state, project: project}
}

// open opens an overlay workspace over the project named name.
func (e *attackEnv) open(t testing.TB, name string) *Workspace {
	t.Helper()
	w, err := e.m.Open(context.Background(), protocol.WorkspaceOpenParams{Root: e.project, Name: name})
	if err != nil {
		t.Fatalf("open workspace %q: %v", name, err)
	}
	return w
}

// limits resolves l against the defaults, as the daemon does.
func limits(t testing.TB, l protocol.Limits) protocol.Limits {
	t.Helper()
	r, err := ResolveLimits(&l, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// runIn runs argv in w with limits l (resolved) and returns the result.
func runIn(t testing.TB, w *Workspace, l protocol.Limits, argv ...string) *RunResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Run(ctx, w, ProcSpec{Argv: argv, Limits: limits(t, l)}, nil, 1<<20)
	if err != nil {
		t.Fatalf("run %q: %v", argv, err)
	}
	return res
}

// pyPrelude gives the scripts raw system calls and errno names:
//
//	sc(nr, *args)   prints and returns "ok N" or "errno=NAME"
//	try_(f, *args)  calls f, printing "ok" or "errno=NAME" of its OSError
var pyPrelude = `
import ctypes, errno, os, sys, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def _arg(a):
    if isinstance(a, bytes):
        return ctypes.c_char_p(a)
    return ctypes.c_long(a)
def res(r, e):
    if r == -1:
        return "errno=" + errno.errorcode.get(e, str(e))
    return "ok %d" % r
def sc(nr, *a):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[_arg(x) for x in a])
    out = res(r, ctypes.get_errno())
    print(out, flush=True)
    return out
def try_(f, *a):
    try:
        r = f(*a)
        print("ok", flush=True)
        return r
    except OSError as e:
        print("errno=" + errno.errorcode.get(e.errno, str(e.errno)), flush=True)
`

// py runs a python3 script, with pyPrelude, in w.
func py(t *testing.T, w *Workspace, l protocol.Limits, script string) *RunResult {
	t.Helper()
	return runIn(t, w, l, "python3", "-c", pyPrelude+script)
}

// outcome is a run as the table prints it.
func outcome(r *RunResult) string {
	s := fmt.Sprintf("%v", r.Status.ExitStatus)
	if r.Status.Reason != "" {
		s += " (" + r.Status.Reason + ")"
	}
	out := strings.TrimSpace(string(r.Stdout))
	if out != "" {
		s += ": " + strings.Join(strings.Fields(out), " ")
	}
	return s
}

// stderrTail is the end of a run's stderr, for messages.
func stderrTail(r *RunResult) string {
	s := strings.TrimSpace(string(r.Stderr))
	if len(s) > 600 {
		s = "..." + s[len(s)-600:]
	}
	return s
}

// pidNS is the host's name ("pid:[N]") of the pid namespace of the
// sandbox whose init is pid.
func pidNS(t *testing.T, initPID int) string {
	t.Helper()
	ns, err := os.Readlink("/proc/" + strconv.Itoa(initPID) + "/ns/pid")
	if err != nil {
		t.Fatalf("pid namespace of the sandbox init %d: %v", initPID, err)
	}
	return ns
}

// hostProc is a process seen in the host's /proc.
type hostProc struct {
	pid     int
	ppid    int
	cmdline string // NULs as spaces
	pidNS   string
}

// hostProcs lists the host's processes (those readable).
func hostProcs() []hostProc {
	entries, _ := os.ReadDir("/proc")
	var out []hostProc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(st), ')')
		f := strings.Fields(string(st[i+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		ns, _ := os.Readlink("/proc/" + e.Name() + "/ns/pid")
		out = append(out, hostProc{pid: pid, ppid: ppid, cmdline: strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " ")), pidNS: ns})
	}
	return out
}

// sandboxProcs are the host processes of the sandbox whose init is
// initPID: the init and everything below it (an orphan in the sandbox is
// reparented to a pid 1 of the sandbox, so it stays below the init).
func sandboxProcs(initPID int) []hostProc {
	all := hostProcs()
	children := map[int][]hostProc{}
	var out []hostProc
	for _, p := range all {
		children[p.ppid] = append(children[p.ppid], p)
		if p.pid == initPID {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil
	}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i].pid]...)
	}
	return out
}

// aliveNotZombie: pid exists and is not a zombie.
func aliveNotZombie(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// marker is a unique `sleep` argument, so a test can find its own process.
func marker(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("%d.%06d", 4000+os.Getpid()%1000, time.Now().Nanosecond()/1000)
}

// attackCase is one attack run as a python3 script (with pyPrelude) in a
// sandbox with default limits. The last line of its stdout must be one of
// want, or the script must die by signal.
type attackCase struct {
	name   string
	script string
	want   []string
	signal syscall.Signal
	// defence says what stops it and what its absence would show.
	defence string
	// control: also run the script on the host, outside any sandbox, as
	// the test's user, where it must NOT give a wanted outcome: proof that
	// the case tells a working defence from a missing one. Only for calls
	// harmless on the host.
	control bool
	// i386: the script is an int80Script, checked by i386Case.
	i386 bool
}

// runCases runs each case in w as a subtest.
func runCases(t *testing.T, w *Workspace, cases []attackCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.i386 {
				i386Case(t, w, c)
				return
			}
			r := py(t, w, protocol.Limits{}, c.script)
			t.Logf("outcome: %s", outcome(r))
			if c.signal != 0 {
				if r.Status.Signal != c.signal {
					t.Fatalf("%s: %s; want killed by %v (%s)\nstderr: %s", c.name, outcome(r), c.signal, c.defence, stderrTail(r))
				}
				if c.control {
					hostControl(t, c)
				}
				return
			}
			if r.Status.Code != 0 || r.Status.Signal != 0 {
				t.Fatalf("%s: the script failed: %s\nstderr: %s", c.name, outcome(r), stderrTail(r))
			}
			if last := lastLine(r.Stdout); !slices.Contains(c.want, last) {
				t.Fatalf("%s: got %q, want one of %q (%s)", c.name, last, c.want, c.defence)
			}
			if c.control {
				hostControl(t, c)
			}
		})
	}
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// hostPython is the interpreter the sandbox runs as python3.
const hostPython = "/usr/bin/python3"

// hostControl runs c's script on the host and checks that it gets through
// there: what the sandbox would show without the defence.
func hostControl(t *testing.T, c attackCase) {
	t.Helper()
	if _, err := os.Stat(hostPython); err != nil {
		t.Logf("no host control: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, hostPython, "-c", pyPrelude+c.script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var sig syscall.Signal
	if cmd.ProcessState != nil {
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			sig = ws.Signal()
		}
	}
	last := lastLine(out)
	t.Logf("host control (no sandbox): %q, %v", last, err)
	switch {
	case c.signal != 0 && sig == c.signal:
		t.Fatalf("%s: killed by %v on the host too: this case cannot tell whether %s holds", c.name, sig, c.defence)
	case c.signal == 0 && slices.Contains(c.want, last):
		t.Fatalf("%s: %q on the host too: this case cannot tell whether %s holds", c.name, last, c.defence)
	case sig == 0 && err != nil:
		t.Fatalf("%s: the host control failed: %v\n%s", c.name, err, stderr.String())
	}
}

// int80Script runs `mov eax, nr; int 0x80; ret` from an executable
// mapping: an i386 system call from a 64-bit process. It prints
// int80Calling just before the call and "int 0x80 returned R pid P" after.
func int80Script(nr int) string {
	return fmt.Sprintf(`
import mmap
code = bytes([0xb8, %d, %d, 0, 0, 0xcd, 0x80, 0xc3])
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(code)
f = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
print(%q, flush=True)
r = f()
print("int 0x80 returned", r, "pid", os.getpid(), flush=True)
`, nr&0xff, nr>>8, int80Calling)
}

const int80Calling = "making the int 0x80 call"

// int80Outcome reads how an int80Script run ended.
func int80Outcome(sig syscall.Signal, code int, stdout []byte) sandboxtest.I386Outcome {
	return sandboxtest.I386Outcome{
		Signal:   sig,
		ExitCode: code,
		Reached:  bytes.Contains(stdout, []byte(int80Calling+"\n")),
		Returned: bytes.Contains(stdout, []byte("int 0x80 returned")),
	}
}

// i386Case runs an int80Script case: in the sandbox the call must not run.
// Whether the host runs 32-bit calls at all comes from the control, an
// int $0x80 getpid on the host: where it returns the pid, the sandbox's
// run must die of SIGSYS (the seccomp filter); where it faults with
// SIGSEGV (no 32-bit emulation), the call cannot reach any kernel, and the
// sandbox's run must die of SIGSYS or SIGSEGV without a result.
func i386Case(t *testing.T, w *Workspace, c attackCase) {
	r := py(t, w, protocol.Limits{}, c.script)
	t.Logf("outcome: %s", outcome(r))
	filtered := int80Outcome(r.Status.Signal, r.Status.Code, r.Stdout)

	if _, err := os.Stat(hostPython); err != nil {
		t.Fatalf("%s: the host control needs %s: %v", c.name, hostPython, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, hostPython, "-c", pyPrelude+int80Script(20))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%s: host control: %v", c.name, err)
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	var sig syscall.Signal
	if ws.Signaled() {
		sig = ws.Signal()
	}
	control := int80Outcome(sig, ws.ExitStatus(), out)
	t.Logf("host control (no sandbox), int 0x80 getpid: %v: %q", control, strings.TrimSpace(string(out)))
	if control.Returned {
		// The control's call is real: getpid's result is the pid.
		var ret, pid int
		if _, err := fmt.Sscanf(lastLine(out), "int 0x80 returned %d pid %d", &ret, &pid); err != nil || ret != pid {
			t.Fatalf("%s: host control: %q; want getpid's result to be the pid", c.name, lastLine(out))
		}
	}
	host := sandboxtest.HostI386Emulation()
	path, note, err := sandboxtest.CheckI386(control, filtered, host)
	if err != nil {
		t.Fatalf("%s: %v (%s; kernel configuration: %s)\nstderr: %s", c.name, err, c.defence, host.Why, stderrTail(r))
	}
	t.Logf("%s; in the sandbox the call did not run: %v", note, path)
}

// spawnerPIDScript finds the spawner's pid in the sandbox.
const spawnerPIDScript = `
spawner = [int(p) for p in os.listdir("/proc") if p.isdigit() and open("/proc/%s/cmdline" % p, "rb").read().startswith(b"cellbox-sandbox:spawner")][0]
`
