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

// TestSandboxCPU: the sandbox's own /proc lists every process of it (the
// nested pid namespace's too), and their CPU time grows when one runs.
func TestSandboxCPU(t *testing.T) {
	s, _, _ := testSandbox(t, ModeOverlay)
	p, err := s.Spawn(context.Background(), Spec{Argv: []string{"sh", "-c", "sleep 600 & sleep 600"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.SignalTree(syscall.SIGKILL) })
	want := 0
	var before int64
	deadline := time.Now().Add(20 * time.Second)
	for {
		// init, spawner, sh and its two sleeps
		want = len(tree(s.InitPID()))
		cpu, n, ok := SandboxCPU(s.InitPID())
		if !ok {
			t.Fatal("the sandbox's /proc could not be read")
		}
		if n == 5 && want == 5 {
			before = cpu
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("SandboxCPU counts %d processes, the tree %d; want 5", n, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	busy, err := s.Spawn(context.Background(), Spec{Argv: []string{"sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := busy.Wait(); err != nil {
		t.Fatal(err)
	}
	// The ended program's time went to its parent's cutime (the spawner).
	if cpu, _, _ := SandboxCPU(s.InitPID()); cpu <= before {
		t.Fatalf("CPU time %d after a busy program, %d before", cpu, before)
	}
}
