package workspace

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/moby/sys/mountinfo"

	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// cleanup finds what a crashed daemon left: sandbox inits of this user
// that lost their daemon (normally they end on their own when its socket
// closes), and mounts below the state dir (cellbox makes none on the host;
// one found there is stale; the state dir may itself be a mount point).
func (m *Manager) cleanup() {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.HasPrefix(string(cmdline), "cellbox-sandbox:init") {
			continue
		}
		ppid, ok := sandbox.ParentPID(e.Name())
		if !ok {
			continue
		}
		if ppid == os.Getpid() {
			continue
		}
		// An init's parent is the daemon that made it; it dies with it
		// (Pdeathsig, and EOF on its socket). One reparented to the host's
		// init lost its daemon without dying.
		if ppid == 1 || !alive(ppid) {
			m.log.Warn("killing an orphaned sandbox", "pid", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(m.opts.StateDir))
	if err != nil {
		return
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		mp := mounts[i].Mountpoint
		if filepath.Clean(mp) == filepath.Clean(m.opts.StateDir) {
			// The state dir on a filesystem of its own: that mount is
			// the state, not something a crashed daemon left.
			continue
		}
		m.log.Warn("unmounting a stale mount in the state dir", "mountpoint", mp)
		_ = syscall.Unmount(mp, syscall.MNT_DETACH)
	}
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }
