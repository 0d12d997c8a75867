package workspace

// Attacks on the limits: pids, memory, disk, CPU and inotify (the suite:
// attack_linux_test.go).

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

func TestAttackForkBomb(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "forkbomb")
	other := e.open(t, "bystander")
	if r := runIn(t, other, protocol.Limits{}, "true"); r.Status.Code != 0 {
		t.Fatalf("bystander: %s", outcome(r))
	}
	const pids = 64
	bombDone := make(chan *RunResult, 1)
	// 10 s: time enough to fill its pids on a loaded machine (under 1 s on
	// an idle one), and for the other workspace's runs meanwhile.
	bombLimits := limits(t, protocol.Limits{Pids: pids, TimeoutMs: 10000})
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
			// The quota is measured every 250 ms; on a loaded machine a tick
			// comes late while the program makes thousands of files a
			// second, so the bound is loose: it tells a quota in force from
			// none (the maxFiles check above), not the tick's precision.
			if used > 8*tt.quota {
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
