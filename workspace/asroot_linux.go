package workspace

import (
	"fmt"
	"os"
	"runtime"

	"github.com/cellbox-dev/cellbox/workspace/sandbox"
	"golang.org/x/sys/unix"
)

// inView runs fn with root, a descriptor (O_PATH) of /workspace as the
// workspace's sandbox sees it (the live mount, ARCHITECTURE.md constraint
// 1), starting the sandbox if it is not running. Every write through the
// view goes through inView.
//
// fn runs as the sandbox's root would write: a root daemon's uid 0 is not
// mapped in the sandbox's user namespace, so a file it created through the
// view would fail (EOVERFLOW) or belong to nobody the sandbox knows. So fn
// runs on an OS thread of its own whose fsuid and fsgid are the sandbox
// root's host ids (sandbox.SandboxRootHostIDs); a non-zero fsuid also drops
// the file-system capabilities (CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_CHOWN,
// ...) from the thread, so fn has no more power over the view than code in
// the sandbox. fsuid and fsgid are per thread: other goroutines are not
// affected. An ordinary user's daemon already is the sandbox's root and
// runs fn as is (on a locked thread all the same).
//
// fn must not start goroutines that touch the view (they would run on other
// threads, as the daemon). root is closed when fn returns.
func (w *Workspace) inView(fn func(root int) error) error {
	root, err := w.openView()
	if err != nil {
		return err
	}
	defer unix.Close(root)
	if os.Geteuid() != 0 {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		return fn(root)
	}
	uid, gid := sandbox.SandboxRootHostIDs()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restored := false
		defer func() {
			// A thread whose ids could not be set back dies with this
			// goroutine instead of going back to the scheduler.
			if restored {
				runtime.UnlockOSThread()
			}
		}()
		done <- func() (err error) {
			if err := setFSIDs(uid, gid); err != nil {
				restored = setFSIDs(0, 0) == nil
				return fmt.Errorf("workspace %s: act as the sandbox's root (%d:%d): %w", w.id, uid, gid, err)
			}
			defer func() {
				restored = setFSIDs(0, 0) == nil
				if r := recover(); r != nil {
					err = fmt.Errorf("workspace %s: panic in a view operation: %v", w.id, r)
				}
			}()
			return fn(root)
		}()
	}()
	return <-done
}

// setFSIDs sets the calling thread's fsuid and fsgid and checks that they
// took (setfsuid reports no error, only the previous value).
func setFSIDs(uid, gid int) error {
	_, _ = unix.SetfsgidRetGid(gid)
	_, _ = unix.SetfsuidRetUid(uid)
	// -1 is never valid: the call only returns the current value.
	cu, _ := unix.SetfsuidRetUid(-1)
	cg, _ := unix.SetfsgidRetGid(-1)
	if cu != uid || cg != gid {
		return fmt.Errorf("setfsuid/setfsgid: ids are %d:%d, want %d:%d", cu, cg, uid, gid)
	}
	return nil
}
