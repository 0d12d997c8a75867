package workspace

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// TestCleanupStaleMounts: a mount left below the state dir (as a crashed
// daemon of an older design could leave) is gone after NewManager. Mounting
// on the host needs root; an unprivileged daemon cannot leave one.
func TestCleanupStaleMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root can leave a mount on the host")
	}
	state := t.TempDir()
	stale := filepath.Join(state, "workspaces", "ws-stale", "mnt")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", stale, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(stale, unix.MNT_DETACH) })
	if m, _ := mountinfo.Mounted(stale); !m {
		t.Fatal("setup: not mounted")
	}
	if _, err := NewManager(Options{StateDir: state}); err != nil {
		t.Fatal(err)
	}
	if m, _ := mountinfo.Mounted(stale); m {
		t.Fatal("the stale mount below the state dir is still there")
	}
}
