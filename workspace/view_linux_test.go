package workspace

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
	"github.com/cellbox-dev/cellbox/workspace/sandbox/sandboxtest"
	"golang.org/x/sys/unix"
)

// TestInView: a file created and a project file modified through inView
// belong to the sandbox's root (code in the sandbox can rewrite and
// remove them), land in the upper layer, and the project is untouched;
// the daemon's own ids are back afterwards.
func TestInView(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "inview")
	err := w.inView(func(root int) error {
		fd, err := unix.Openat2(root, "made.txt", &unix.OpenHow{
			Flags: unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_CLOEXEC, Mode: 0o644,
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err != nil {
			return err
		}
		if _, err := unix.Write(fd, []byte("made\n")); err != nil {
			unix.Close(fd)
			return err
		}
		unix.Close(fd)
		fd, err = unix.Openat2(root, "hello.txt", &unix.OpenHow{
			Flags: unix.O_WRONLY | unix.O_TRUNC | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT,
		})
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		_, err = unix.Write(fd, []byte("changed\n"))
		return err
	})
	if err != nil {
		t.Fatalf("inView: %v", err)
	}
	if got, _ := unix.SetfsuidRetUid(-1); got != os.Geteuid() {
		t.Errorf("fsuid after inView = %d, want %d", got, os.Geteuid())
	}
	uid, gid := sandbox.SandboxRootHostIDs()
	var st syscall.Stat_t
	if err := syscall.Lstat(w.UpperDir()+"/made.txt", &st); err != nil {
		t.Fatalf("the new file is not in the upper layer: %v", err)
	}
	if int(st.Uid) != uid || int(st.Gid) != gid {
		t.Errorf("upper/made.txt owned by %d:%d, want the sandbox's root %d:%d", st.Uid, st.Gid, uid, gid)
	}
	if b, _ := os.ReadFile(e.project + "/hello.txt"); string(b) != "hello\n" {
		t.Errorf("project hello.txt = %q, want it untouched", b)
	}
	r := runIn(t, w, protocol.Limits{}, "sh", "-c", "cat hello.txt && echo more >> made.txt && cat made.txt && rm made.txt && ls -n /workspace/hello.txt")
	out := string(r.Stdout)
	if r.Status.Code != 0 || !strings.Contains(out, "changed\nmade\nmore\n") {
		t.Fatalf("the sandbox cannot use the files inView made: exit %d, out %q, err %q", r.Status.Code, out, r.Stderr)
	}
	if !strings.Contains(out, " 1000 1000 ") && !strings.Contains(out, " 0 0 ") {
		t.Errorf("hello.txt is not owned by a sandbox user: %q", out)
	}
}

// TestInViewAsUnprivilegedUser re-runs TestInView as CELLBOX_TEST_USER.
func TestInViewAsUnprivilegedUser(t *testing.T) {
	if sandboxtest.AsTestUser() {
		t.Skip("this is the re-run as the unprivileged user")
	}
	sandboxtest.RunAsTestUser(t, "^TestInView$")
}
