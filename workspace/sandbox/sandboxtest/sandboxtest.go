// Package sandboxtest helps cellbox's tests run as an unprivileged user,
// as users mostly run cellbox (CI runs as root).
package sandboxtest

import (
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// RunAsTestUser re-runs this test binary's tests matching pattern as the
// user CELLBOX_TEST_USER names, and fails if they fail.
func RunAsTestUser(t *testing.T, pattern string) {
	t.Helper()
	cmd := UserCommand(t, "-test.run", pattern, "-test.v", "-test.count=1")
	out, err := cmd.CombinedOutput()
	t.Logf("tests %s as %s:\n%s", pattern, os.Getenv("CELLBOX_TEST_USER"), out)
	if err != nil {
		t.Fatalf("tests %s as %s failed: %v", pattern, os.Getenv("CELLBOX_TEST_USER"), err)
	}
}

// UserCommand returns a command that runs a copy of this test binary with
// args as the user CELLBOX_TEST_USER names, in a clean environment. Without
// that user (or without root to switch to it) it skips, saying why, except
// under CI (the CI variable set), where a missing user is a failure.
func UserCommand(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	name := os.Getenv("CELLBOX_TEST_USER")
	skip := t.Skip
	if os.Getenv("CI") != "" {
		skip = t.Fatal
	}
	if name == "" {
		skip("set CELLBOX_TEST_USER to a throwaway user (useradd -m cellboxtest) and run as root to also run these tests as that user")
	}
	if os.Getuid() != 0 {
		skip("needs root to switch to CELLBOX_TEST_USER")
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatalf("look up CELLBOX_TEST_USER: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if uid == 0 {
		t.Fatalf("CELLBOX_TEST_USER %s is root", name)
	}
	dir, err := os.MkdirTemp("", "cellbox-as-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "test")
	if err := copyExe(bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + u.HomeDir, "USER=" + name, "PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=/tmp", "LANG=C.UTF-8", "CELLBOX_AS_TEST_USER=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	return cmd
}

// AsTestUser is true in the re-run RunAsTestUser starts, so that a test can
// avoid re-running itself.
func AsTestUser() bool { return os.Getenv("CELLBOX_AS_TEST_USER") != "" }

func copyExe(dst string) error {
	in, err := os.Open("/proc/self/exe")
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
