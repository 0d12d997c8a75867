package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// The view: /workspace as the workspace's sandbox sees it, reached through
// the live mount /proc/INITPID/root/workspace (ARCHITECTURE.md constraint
// 1). Every daemon-side operation on what code sees at /workspace (fs/*,
// ReadFile, diff, checkpoint, commit's reads, discard's and restore's
// writes) goes through it; nothing is ever written into the upper or lower
// directories behind the overlay (the scans, the quota and the watches
// only read them).
//
// Two ways in: openView and inView hand out a descriptor of /workspace for
// walks by descriptors (at_linux.go), readView and writeView a *view that
// resolves paths as code in the sandbox would. inView and writeView act as
// the sandbox's root.

// openView opens the workspace's /workspace as its sandbox sees it
// (/proc/INITPID/root/workspace), starting the sandbox if it is not running.
func (w *Workspace) openView() (int, error) {
	// Counted when the view is opened and again after each use (inView,
	// readView), so that a tick between the two still measures the write.
	w.fileOps.Add(1)
	w.mu.Lock()
	network := w.network
	w.mu.Unlock()
	sb, err := w.ensureSandbox(context.Background(), network, nil, nil)
	if err != nil {
		return -1, err
	}
	proc := "/proc/" + strconv.Itoa(sb.InitPID()) + "/root"
	root, err := unix.Open(proc, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the root of workspace %s's sandbox: %w", w.id, err)
	}
	defer unix.Close(root)
	// The init is not reaped while the sandbox runs, so its pid was not
	// reused if the sandbox still runs now.
	if sb.Err() != nil {
		return -1, fmt.Errorf("workspace %s: %w", w.id, ErrClosed)
	}
	// The sandbox's / is read-only: /workspace is its mount point, not a
	// link code could plant.
	fd, err := openDirBeneath(root, "workspace", unix.O_PATH)
	if err != nil {
		return -1, fmt.Errorf("open /workspace of workspace %s's sandbox: %w", w.id, err)
	}
	return fd, nil
}

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
	defer w.fileOps.Add(1)
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

// view is /workspace as the sandbox sees it, opened for one operation.
//
// Paths resolve as code in the sandbox would resolve /workspace/PATH:
// openat2 from the sandbox's / with RESOLVE_IN_ROOT, so a symlink is
// followed inside the sandbox's root (an absolute link to /workspace/x
// works, a link to /etc/passwd names the sandbox's /etc/passwd, never the
// host's) and /proc magic links are refused. The object reached must then
// be on the /workspace mount, else the path leaves the workspace
// (ErrPathOutside): `..` climbing out, absolute links to /etc or /tmp.
// Descriptors are O_PATH until the object is checked, so nothing outside
// is ever opened for reading or writing, and a FIFO never blocks.
type view struct {
	sb  int    // the sandbox's / (O_PATH)
	mnt uint64 // the mount id of /workspace
}

// readView runs fn with the view as the daemon (reads need no identity).
func (w *Workspace) readView(fn func(v *view) error) error {
	root, err := w.openView()
	if err != nil {
		return err
	}
	defer w.fileOps.Add(1)
	defer unix.Close(root)
	return w.withView(root, fn)
}

// writeView runs fn with the view as the sandbox's root (inView): what it
// creates belongs to the sandbox, and it has no more power than the
// sandbox's code.
func (w *Workspace) writeView(fn func(v *view) error) error {
	return w.inView(func(root int) error { return w.withView(root, fn) })
}

// withView runs fn with the view whose /workspace is root.
func (w *Workspace) withView(root int, fn func(v *view) error) error {
	// /workspace is a mount point on the sandbox's read-only /, so ".."
	// is that / and "workspace" below it is this mount again.
	sb, err := unix.Openat(root, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the root of workspace %s's sandbox: %w", w.id, err)
	}
	defer unix.Close(sb)
	mnt, err := mountID(root)
	if err != nil {
		return fmt.Errorf("workspace %s: %w", w.id, err)
	}
	return fn(&view{sb: sb, mnt: mnt})
}

// mountID is the id of the mount fd is on.
func mountID(fd int) (uint64, error) {
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &stx); err != nil {
		return 0, fmt.Errorf("statx: %w", err)
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 {
		return 0, errors.New("statx: the kernel reports no mount id")
	}
	return stx.Mnt_id, nil
}

// open resolves rel (clean, relative; "." is /workspace) and returns an
// O_PATH descriptor of what it names, checked to be inside the workspace.
// flags may add O_NOFOLLOW (the last component is not followed) and
// O_DIRECTORY.
func (v *view) open(rel string, flags int) (int, error) {
	p := "workspace"
	if rel != "." {
		p += "/" + rel
	}
	// O_DIRECTORY is checked after the mount: what lies outside is
	// outside, whatever its type. EAGAIN: a rename raced with the
	// resolution; openat2 tries again itself, and a view path gets 16
	// rounds of that, as fs/* has had since before openat2 did.
	var fd int
	var err error
	for range 16 {
		if fd, err = openat2(v.sb, p, unix.O_PATH|flags&^unix.O_DIRECTORY, inRoot); err != unix.EAGAIN {
			break
		}
	}
	if err != nil {
		if (err == unix.ENOENT || err == unix.ENOTDIR) && v.leadsOut(path.Dir(rel)) {
			return -1, fmt.Errorf("%w: %q leads out of /workspace through a symlink", ErrPathOutside, rel)
		}
		return -1, err
	}
	if !v.inside(fd) {
		unix.Close(fd)
		return -1, fmt.Errorf("%w: %q leads out of /workspace through a symlink", ErrPathOutside, rel)
	}
	if flags&unix.O_DIRECTORY != 0 {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			unix.Close(fd)
			if err == nil {
				err = unix.ENOTDIR
			}
			return -1, err
		}
	}
	return fd, nil
}

// inside: fd is on the /workspace mount.
func (v *view) inside(fd int) bool {
	mnt, err := mountID(fd)
	return err == nil && mnt == v.mnt
}

// leadsOut: for a path that does not resolve, whether its longest prefix
// that does is outside the workspace (a link to /tmp, then a missing
// name), so that such a path is outside rather than missing.
func (v *view) leadsOut(dir string) bool {
	for ; dir != "." && dir != "/"; dir = path.Dir(dir) {
		fd, err := openat2(v.sb, "workspace/"+dir, unix.O_PATH, inRoot)
		if err != nil {
			continue
		}
		in := v.inside(fd)
		unix.Close(fd)
		return !in
	}
	return false
}

// parent opens the directory holding rel (as open does) and returns it
// with rel's last component, which the caller acts on without following.
func (v *view) parent(rel string) (int, string, error) {
	if rel == "." {
		return -1, "", fmt.Errorf("%w: the path names the workspace itself", ErrInvalid)
	}
	fd, err := v.open(path.Dir(rel), unix.O_DIRECTORY)
	if err != nil {
		return -1, "", err
	}
	return fd, path.Base(rel), nil
}

// viewPut writes p at rel in the view (as the sandbox's root, creating the
// missing parents with the modes of proj's directories there, 0755 where
// it has none), through a temporary file renamed into place, so code in
// the sandbox sees the old file or the new one.
func (w *Workspace) viewPut(rel string, p filePut, proj int) error {
	err := w.inView(func(root int) error {
		dir, name, err := mkdirAllBeneath(root, rel, proj, 0, nil, true)
		if err != nil {
			return err
		}
		defer unix.Close(dir)
		var st unix.Stat_t
		if unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			// A directory the code made where the file goes: only an
			// empty one is removed.
			if err := unix.Unlinkat(dir, name, unix.AT_REMOVEDIR); err != nil {
				return &os.PathError{Op: "rmdir", Path: shortForm(rel), Err: err}
			}
		}
		return putAt(dir, name, p)
	})
	if err != nil {
		return fmt.Errorf("write %s in workspace %s: %w", shortForm(rel), w.id, err)
	}
	return nil
}

// viewRemove removes the file or symlink at rel from the view (nothing
// there is fine; tree: a directory too, with all below it), then the
// parents left empty that the project (proj) has no directory at. All by
// descriptors: a path of any length, a tree of any depth.
func (w *Workspace) viewRemove(rel string, proj int, tree bool) error {
	d := path.Dir(rel)
	if d == "." {
		d = ""
	}
	comps := 0
	if d != "" {
		comps = strings.Count(d, "/") + 1
	}
	keep := dirDepth(proj, d)
	err := w.inView(func(root int) error {
		dir, name, err := openParent(root, rel)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
				return nil
			}
			return err
		}
		var st unix.Stat_t
		err = unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		switch {
		case err != nil:
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			err = unix.Unlinkat(dir, name, 0)
		case tree:
			err = removeTreeAt(dir, name)
		}
		if err != nil && !errors.Is(err, unix.ENOENT) {
			unix.Close(dir)
			return &os.PathError{Op: "remove", Path: shortForm(rel), Err: err}
		}
		pruneUp(root, dir, d, comps-keep)
		return nil
	})
	if err != nil {
		return fmt.Errorf("remove %s from workspace %s: %w", shortForm(rel), w.id, err)
	}
	return nil
}
