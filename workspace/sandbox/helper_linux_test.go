package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/workspace/sandbox/helper"
)

// TestSandboxRunsTheLeanHelper: a sandbox's init and spawner run the
// helper the binary carries, from a sealed memfd, not this binary; and the
// helper maps a fraction of what this binary would.
func TestSandboxRunsTheLeanHelper(t *testing.T) {
	if lean, reason := HelperInfo(); !lean {
		t.Fatalf("sandboxes do not run the lean helper: %s", reason)
	}
	s, _, _ := testSandbox(t, ModeOverlay)
	pid := s.InitPID()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(exe, "/memfd:cellbox-sandbox") {
		t.Fatalf("the init runs %q, not the helper's memfd", exe)
	}
	kids := Children(pid)
	if len(kids) != 1 {
		t.Fatalf("the init's children: %v", kids)
	}
	if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", kids[0])); !strings.HasPrefix(exe, "/memfd:cellbox-sandbox") {
		t.Fatalf("the spawner runs %q, not the helper's memfd", exe)
	}
	// The memfd is sealed: not even the daemon can change it.
	lean.mu.Lock()
	f := lean.file
	lean.mu.Unlock()
	if _, err := f.WriteAt([]byte("x"), 0); err == nil {
		t.Fatal("the helper's memfd could be written")
	}
	// Both helpers map the small binary: their resident size stays a few
	// MiB (the daemon's binary alone is tens of MiB).
	for _, p := range []int{pid, kids[0]} {
		rss := statusKiB(t, p, "VmRSS")
		t.Logf("pid %d: VmRSS %d KiB", p, rss)
		if rss > 12<<10 {
			t.Errorf("pid %d (%s) has %d KiB resident", p, exe, rss)
		}
	}
}

// TestSandboxWithoutTheHelper: with no helper (a build that carries none,
// or CELLBOX_SANDBOX_HELPER=self), this binary is re-executed and the
// sandbox works the same.
func TestSandboxWithoutTheHelper(t *testing.T) {
	t.Setenv(HelperEnv, "self")
	if lean, reason := HelperInfo(); lean || reason != HelperEnv+"=self" {
		t.Fatalf("HelperInfo with %s=self: %v %q", HelperEnv, lean, reason)
	}
	s, _, _ := testSandbox(t, ModeOverlay)
	self, _ := os.Readlink(selfExe)
	if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", s.InitPID())); exe != self {
		t.Fatalf("the init runs %q, not this binary %q", exe, self)
	}
	if out, st := sh(t, s, "echo hi > /workspace/x && cat /workspace/x"); st.Code != 0 || out != "hi\n" {
		t.Fatalf("a program in the sandbox: %v %q", st, out)
	}
}

// TestHelperRefusesToRunByHand: the helper is run by the daemon; started
// by hand it says what it is and exits 2.
func TestHelperRefusesToRunByHand(t *testing.T) {
	bin := helper.Binary
	path := filepath.Join(t.TempDir(), "cellbox-sandbox")
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !bytes.Contains(out, []byte("not run by hand")) {
		t.Fatalf("run by hand: %v %q", err, out)
	}
	cmd := exec.Command(path)
	cmd.Env = []string{ReexecEnv + "=no-such-entry"}
	out, err = cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !bytes.Contains(out, []byte(`unknown helper entry "no-such-entry"`)) {
		t.Fatalf("an unknown entry: %v %q", err, out)
	}
}

// statusKiB reads a "Name:  N kB" line of /proc/PID/status.
func statusKiB(t *testing.T, pid int, name string) int {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var n int
		if _, err := fmt.Sscanf(sc.Text(), name+": %d kB", &n); err == nil {
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", name, pid)
	return 0
}

// TestSandboxWhenTheHelperMayNotRun: where the kernel refuses to execute
// the helper (an LSM's policy on memfds, say), the sandbox starts from this
// binary instead, and HelperInfo says why from then on.
func TestSandboxWhenTheHelperMayNotRun(t *testing.T) {
	helperPath()
	noexec := filepath.Join(t.TempDir(), "cellbox-sandbox")
	if err := os.WriteFile(noexec, helper.Binary, 0o644); err != nil { // no x bit: EACCES
		t.Fatal(err)
	}
	lean.mu.Lock()
	path := lean.path
	lean.path = noexec
	lean.mu.Unlock()
	t.Cleanup(func() {
		lean.mu.Lock()
		lean.path, lean.refused = path, ""
		lean.mu.Unlock()
	})

	s, _, _ := testSandbox(t, ModeOverlay)
	self, _ := os.Readlink(selfExe)
	if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", s.InitPID())); exe != self {
		t.Fatalf("the init runs %q, not this binary %q", exe, self)
	}
	if out, st := sh(t, s, "echo ok"); st.Code != 0 || out != "ok\n" {
		t.Fatalf("a program in the sandbox: %v %q", st, out)
	}
	if lean, reason := HelperInfo(); lean || !strings.Contains(reason, "refused to execute") {
		t.Fatalf("HelperInfo after the refusal: %v %q", lean, reason)
	}
}

// TestSandboxActivity: the sandbox's own /proc lists its programs (the
// nested pid namespace's too, not its init and spawner); their run time
// and thread count hold still while they sleep and move when one runs.
func TestSandboxActivity(t *testing.T) {
	s, _, _ := testSandbox(t, ModeOverlay)
	p, err := s.Spawn(context.Background(), Spec{Argv: []string{"sh", "-c", "sleep 600 & sleep 600"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.SignalTree(syscall.SIGKILL) })
	read := func() (int64, int) {
		t.Helper()
		ns, n, ok := SandboxActivity(s.InitPID())
		if !ok {
			t.Fatal("the sandbox's /proc could not be read")
		}
		return ns, n
	}
	// sh and its two sleeps, one thread each, settled.
	deadline := time.Now().Add(20 * time.Second)
	var idle int64
	for {
		ns, n := read()
		if n == 3 {
			if ns2, n2 := read(); ns2 == ns && n2 == n {
				idle = ns
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d threads, run time not settling; want 3 sleeping", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	busy, err := s.Spawn(context.Background(), Spec{Argv: []string{"sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; sleep 600"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = busy.SignalTree(syscall.SIGKILL) })
	for {
		if ns, n := read(); n == 4 && ns > idle+int64(time.Millisecond) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a busy program did not move the sandbox's run time")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReadProcWholeFile: a /proc file longer than the buffer given (a
// children list of hundreds of pids) is read whole, never cut at the
// buffer's end, where a pid cut in two would read as another pid.
func TestReadProcWholeFile(t *testing.T) {
	want, err := os.ReadFile("/proc/self/maps") // thousands of bytes
	if err != nil {
		t.Fatal(err)
	}
	var small [64]byte
	got, err := readProc("/proc/self/maps", small[:])
	if err != nil {
		t.Fatal(err)
	}
	// Both reads see this process's maps; they match but for mappings made
	// between the two reads, so compare the first lines.
	first := func(b []byte) string { return strings.SplitN(string(b), "\n", 2)[0] }
	if len(got) < 1024 || first(got) != first(want) || !strings.HasSuffix(string(got), "\n") {
		t.Fatalf("readProc read %d bytes (os.ReadFile %d), ending %q", len(got), len(want), got[max(0, len(got)-20):])
	}
}
