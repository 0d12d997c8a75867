package workspace

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Discard is PROTOCOL.md §3 workspace/discard: each change (or each at or
// below paths) is made to match the project again, through the live mount
// (ARCHITECTURE.md constraint 1), so it works while kernels run: a path
// the project holds a file or symlink at gets the project's content, mode
// and mtime written back (a new file, renamed into place); one the project
// lacks is removed, and so are the directories left empty that the project
// does not have; a directory the project lacks (at or below paths, or
// holding them) is removed whole, empty directories too, by descriptors
// however deep. The upper layer then holds a copy equal to the project's,
// which is no change. It returns the discarded paths.
func (w *Workspace) Discard(ctx context.Context, paths []string) ([]string, error) {
	st, unlock, err := w.lockFiles(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	all, newDirs, err := w.scanDirs(ctx)
	if err != nil {
		return nil, err
	}
	sel, err := selectChanges(all, paths)
	if err != nil {
		return nil, err
	}
	trees, err := selectTrees(newDirs, paths)
	if err != nil {
		return nil, err
	}
	proj, err := w.openProject()
	if err != nil {
		return nil, err
	}
	defer unix.Close(proj)
	// A directory the project lacks goes whole (by descriptors, however
	// deep), and with it every change below it; the rest one by one.
	var done, rest []string
	for _, t := range trees {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := w.viewRemove(t, proj, true); err != nil {
			return nil, err
		}
	}
	for _, c := range sel {
		if c.kind != protocol.ChangeKindDeleted && underAny(c.path, trees) {
			done = append(done, c.path)
		} else {
			rest = append(rest, c.path)
		}
	}
	more, err := w.matchProject(ctx, proj, rest, nil)
	done = append(done, more...)
	for _, p := range done {
		delete(st.base, p) // the next scan records what it sees
	}
	if serr := w.saveBaselines(st.base); serr != nil && err == nil {
		err = serr
	}
	sort.Strings(done)
	return wireNames(done), err
}

// selectTrees is what discard removes whole for paths (none: all): the new
// directories at or below a path, and a path below a new directory.
func selectTrees(newDirs, paths []string) ([]string, error) {
	if len(paths) == 0 {
		return newDirs, nil
	}
	var out []string
	for _, p := range paths {
		rel, err := relPath(p)
		if err != nil {
			return nil, err
		}
		if rel == "." {
			return newDirs, nil
		}
		for _, d := range newDirs {
			switch {
			case d == rel || strings.HasPrefix(d, rel+"/"):
				out = append(out, d)
			case strings.HasPrefix(rel, d+"/"):
				out = append(out, rel)
			}
		}
	}
	sort.Strings(out)
	var kept []string
	for _, t := range out {
		if len(kept) == 0 || !underAny(t, kept[len(kept)-1:]) {
			kept = append(kept, t)
		}
	}
	return kept, nil
}

// underAny: p is one of roots or below one.
func underAny(p string, roots []string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// matchProject makes each path of the view match the project: removals
// first (deepest first, pruning directories the project lacks), then
// writes. It returns the paths done; progress (may be nil) is called after
// each.
func (w *Workspace) matchProject(ctx context.Context, proj int, paths []string, progress func()) ([]string, error) {
	type job struct {
		p   string
		src *projectFile
	}
	var removes, writes []job
	for _, p := range paths {
		src, err := openProjectFile(proj, p)
		if err != nil {
			return nil, fmt.Errorf("discard %s: read the project's file: %w", p, err)
		}
		if src == nil {
			removes = append(removes, job{p: p})
		} else {
			src.close()
			writes = append(writes, job{p: p})
		}
	}
	sort.Slice(removes, func(i, j int) bool { return removes[i].p > removes[j].p })
	var done []string
	for _, j := range removes {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		if err := w.viewRemove(j.p, proj, false); err != nil {
			return done, err
		}
		done = append(done, j.p)
		if progress != nil {
			progress()
		}
	}
	for _, j := range writes {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		src, err := openProjectFile(proj, j.p)
		if err != nil {
			return done, fmt.Errorf("discard %s: read the project's file: %w", j.p, err)
		}
		if src == nil { // gone since
			err = w.viewRemove(j.p, proj, false)
		} else {
			err = w.viewPut(j.p, src.put(), proj)
			src.close()
		}
		if err != nil {
			return done, err
		}
		done = append(done, j.p)
		if progress != nil {
			progress()
		}
	}
	return done, nil
}

// projectFile is a project file or symlink opened for copying.
type projectFile struct {
	st   unix.Stat_t
	f    *os.File // regular file
	link string   // symlink
}

// openProjectFile opens the project's regular file or symlink at rel, or
// returns nil when the project holds neither there (nothing, a directory,
// a special file, or a path through a symlink).
func openProjectFile(proj int, rel string) (*projectFile, error) {
	dir, name, err := openParent(proj, rel)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
			return nil, nil
		}
		return nil, err
	}
	defer unix.Close(dir)
	pf := &projectFile{}
	if err := unix.Fstatat(dir, name, &pf.st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, nil
		}
		return nil, err
	}
	switch pf.st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		f, err := openFileAt(dir, name)
		if err != nil {
			return nil, err
		}
		if err := unix.Fstat(int(f.Fd()), &pf.st); err != nil || pf.st.Mode&unix.S_IFMT != unix.S_IFREG {
			f.Close()
			return nil, fmt.Errorf("%s changed while opened", rel)
		}
		pf.f = f
	case unix.S_IFLNK:
		l, err := readlinkAt(dir, name)
		if err != nil {
			return nil, err
		}
		pf.link = l
	default:
		return nil, nil
	}
	return pf, nil
}

func (pf *projectFile) close() {
	if pf.f != nil {
		pf.f.Close()
	}
}

// put is what viewPut writes for this file: its content, mode and times.
func (pf *projectFile) put() filePut {
	p := filePut{perm: pf.st.Mode & 0o7777, mtime: pf.st.Mtim, atime: pf.st.Atim}
	if pf.f != nil {
		p.content = pf.f
	} else {
		p.symlink, p.isLink = pf.link, true
	}
	return p
}

// filePut is a file to write in place of another.
type filePut struct {
	content      io.Reader // regular file
	symlink      string
	isLink       bool
	perm         uint32
	atime, mtime unix.Timespec
	uid, gid     int  // with chown
	chown        bool // set the owner (a root daemon's project files)
	sync         bool // fsync the file before the rename
}

func (p *filePut) hasTimes() bool { return p.mtime.Sec != 0 || p.mtime.Nsec != 0 }

// projectHasDir: the project holds a real directory at rel.
func projectHasDir(proj int, rel string) bool {
	fd, err := openDirBeneath(proj, rel, unix.O_PATH)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// dirDepth is how many of the leading components of the directory path
// rel are real directories below root.
func dirDepth(root int, rel string) int {
	if rel == "" || rel == "." {
		return 0
	}
	n := strings.Count(rel, "/") + 1
	if projectHasDir(root, rel) {
		return n
	}
	fd, err := unix.Openat(root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	depth := 0
	for _, comp := range strings.Split(rel, "/") {
		next, err := openDirBeneath(fd, comp, unix.O_PATH)
		unix.Close(fd)
		if err != nil {
			return depth
		}
		fd = next
		depth++
	}
	unix.Close(fd)
	return depth
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

// pruneUp removes the directory cur (at path d below root) if it is empty,
// then its parent, n directories at most, stopping at the first that is
// not empty and never above root. Each parent is reached by ".." and
// checked to hold cur under the expected name. It closes cur.
func pruneUp(root, cur int, d string, n int) {
	defer func() { unix.Close(cur) }()
	var rst unix.Stat_t
	if unix.Fstat(root, &rst) != nil {
		return
	}
	for ; n > 0 && d != ""; n-- {
		var cst unix.Stat_t
		if unix.Fstat(cur, &cst) != nil || (cst.Dev == rst.Dev && cst.Ino == rst.Ino) {
			return
		}
		name := d
		if i := strings.LastIndexByte(d, '/'); i >= 0 {
			name, d = d[i+1:], d[:i]
		} else {
			d = ""
		}
		parent, err := unix.Openat(cur, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return
		}
		var nst unix.Stat_t
		if unix.Fstatat(parent, name, &nst, unix.AT_SYMLINK_NOFOLLOW) != nil || nst.Dev != cst.Dev || nst.Ino != cst.Ino {
			unix.Close(parent)
			return // moved meanwhile: left alone
		}
		unix.Close(cur)
		cur = parent
		if unix.Unlinkat(cur, name, unix.AT_REMOVEDIR) != nil {
			return // not empty: it stays
		}
	}
}

// removeTreeAt removes the directory name in dir and everything below it
// by descriptors: down by openat (O_NOFOLLOW), up by ".." checked against
// the device and inode seen on the way down, with two descriptors open at
// most and a name and an inode number a level in memory. A directory code
// made unreadable (its owner's, as the view's writer is) is given 0700
// first.
func removeTreeAt(dir int, name string) error {
	type level struct {
		name     string
		dev, ino uint64
	}
	var dst unix.Stat_t
	if err := unix.Fstat(dir, &dst); err != nil {
		return err
	}
	open := func(parent int, n string) (int, unix.Stat_t, error) {
		var st unix.Stat_t
		if err := unix.Fstatat(parent, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return -1, st, err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return -1, st, unix.ENOTDIR
		}
		if st.Mode&0o700 != 0o700 {
			_ = unix.Fchmodat(parent, n, 0o700, 0)
		}
		fd, err := unix.Openat(parent, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, st, err
		}
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, st, err
		}
		return fd, st, nil
	}
	cur, st, err := open(dir, name)
	if err != nil {
		return err
	}
	stack := []level{{name: "", dev: dst.Dev, ino: dst.Ino}, {name: name, dev: st.Dev, ino: st.Ino}}
	buf := make([]byte, 32<<10)
	for {
		// Unlink what is not a directory; go down into the first
		// directory met.
		sub := ""
		for sub == "" {
			n, err := unix.Getdents(cur, buf)
			if err != nil {
				unix.Close(cur)
				return fmt.Errorf("read a directory: %w", err)
			}
			if n <= 0 {
				break
			}
			for _, e := range parseDirents(buf[:n]) {
				var est unix.Stat_t
				if unix.Fstatat(cur, e, &est, unix.AT_SYMLINK_NOFOLLOW) != nil {
					continue
				}
				if est.Mode&unix.S_IFMT == unix.S_IFDIR {
					sub = e
					break
				}
				if err := unix.Unlinkat(cur, e, 0); err != nil && !errors.Is(err, unix.ENOENT) {
					unix.Close(cur)
					return fmt.Errorf("unlink %q: %w", e, err)
				}
			}
		}
		if sub != "" {
			next, st, err := open(cur, sub)
			unix.Close(cur)
			if err != nil {
				return fmt.Errorf("open directory %q: %w", sub, err)
			}
			cur = next
			stack = append(stack, level{name: sub, dev: st.Dev, ino: st.Ino})
			continue
		}
		// Empty: up, and remove it.
		top := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		parent, err := unix.Openat(cur, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(cur)
		if err != nil {
			return fmt.Errorf("open a directory's parent: %w", err)
		}
		var pst unix.Stat_t
		if err := unix.Fstat(parent, &pst); err != nil || pst.Dev != stack[len(stack)-1].dev || pst.Ino != stack[len(stack)-1].ino {
			unix.Close(parent)
			return errTreeChanged
		}
		if err := unix.Unlinkat(parent, top.name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
			unix.Close(parent)
			return fmt.Errorf("remove directory %q: %w", top.name, err)
		}
		if len(stack) == 1 {
			unix.Close(parent)
			return nil
		}
		cur = parent
	}
}

// mkdirAllBeneath opens the parent directory of rel below root, creating
// the missing directories without following a symlink on the way: each
// with the mode of mirror's directory at its path (0755 where mirror, or
// -1, has none) less mask, owned by owner's answer when owner is not nil;
// replace removes a file or symlink found where a directory goes. mirror
// is walked alongside from the first missing directory, so a path of any
// depth costs a descriptor or two.
func mkdirAllBeneath(root int, rel string, mirror int, mask uint32, owner func(parent int) (int, int, bool), replace bool) (int, string, error) {
	dir, name := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		fd, err := unix.Openat(root, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, "", err
		}
		return fd, name, nil
	}
	if fd, err := openDirBeneath(root, dir, unix.O_RDONLY); err == nil {
		return fd, name, nil // all there
	}
	fd, err := unix.Openat(root, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", err
	}
	mfd := -2 // mirror's directory at the current path; -2: not opened yet, -1: none
	defer func() {
		if mfd >= 0 {
			unix.Close(mfd)
		}
	}()
	sofar := ""
	for rest := dir; rest != ""; {
		comp := rest
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			comp, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		parentPath := sofar
		if sofar == "" {
			sofar = comp
		} else {
			sofar += "/" + comp
		}
		how := &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		}
		next, err := openat2(fd, comp, how)
		if replace && (errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)) {
			// A file or symlink where a directory goes: removed (in the
			// view only; never in the project).
			if uerr := unix.Unlinkat(fd, comp, 0); uerr == nil {
				err = unix.ENOENT
			}
		}
		if errors.Is(err, unix.ENOENT) && mfd == -2 {
			mfd = -1
			if mirror >= 0 {
				p := parentPath
				if p == "" {
					p = "."
				}
				if m, err := openDirBeneath(mirror, p, unix.O_PATH); err == nil {
					mfd = m
				}
			}
		}
		if errors.Is(err, unix.ENOENT) {
			mode := uint32(0o755)
			var mst unix.Stat_t
			if mfd >= 0 && unix.Fstatat(mfd, comp, &mst, unix.AT_SYMLINK_NOFOLLOW) == nil && mst.Mode&unix.S_IFMT == unix.S_IFDIR {
				mode = mst.Mode & 0o7777
			}
			mode = mode &^ mask &^ (unix.S_ISUID | unix.S_ISGID)
			if err := unix.Mkdirat(fd, comp, mode); err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(fd)
				return -1, "", &os.PathError{Op: "mkdir", Path: shortForm(sofar), Err: err}
			}
			next, err = openat2(fd, comp, how)
			if err == nil {
				if owner != nil {
					if uid, gid, ok := owner(fd); ok {
						_ = unix.Fchown(next, uid, gid)
					}
				}
				_ = unix.Fchmod(next, mode) // not cut by the umask
			}
		}
		if mfd >= 0 {
			m, merr := openDirBeneath(mfd, comp, unix.O_PATH)
			unix.Close(mfd)
			mfd = -1
			if merr == nil {
				mfd = m
			}
		}
		unix.Close(fd)
		if err != nil {
			return -1, "", &os.PathError{Op: "openat2", Path: shortForm(sofar), Err: err}
		}
		fd = next
	}
	return fd, name, nil
}

// putAt writes p as name in dir through a temporary file renamed over it.
func putAt(dir int, name string, p filePut) error {
	return putAtTemp(dir, name, tempName(name), p)
}

// tempName is a fresh temporary name next to name.
func tempName(name string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return tempPrefix(name) + hex.EncodeToString(b)
}

// tempPrefix starts every temporary file cellbox makes for name; short
// enough for any name, and different for different names: a long name is
// cut and given a hash of the whole, so two names that share their first
// bytes never share a commit's temporary file.
func tempPrefix(name string) string {
	if len(name) > 100 {
		sum := sha256.Sum256([]byte(name))
		name = name[:100] + "~" + hex.EncodeToString(sum[:8])
	}
	return "." + name + ".cellbox-tmp-"
}

func putAtTemp(dir int, name, tmp string, p filePut) error {
	f, err := createTemp(dir, name, tmp, p)
	if err != nil {
		return err
	}
	if f != nil {
		if p.sync {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = unix.Unlinkat(dir, tmp, 0)
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return renameTemp(dir, name, tmp)
}

// createTemp makes tmp in dir holding p (content or symlink, owner,
// permission bits, times). A regular file is returned open, for the
// caller to fsync and close; a symlink gives nil.
func createTemp(dir int, name, tmp string, p filePut) (_ *os.File, err error) {
	_ = unix.Unlinkat(dir, tmp, 0) // a leftover of a killed daemon
	defer func() {
		if err != nil {
			_ = unix.Unlinkat(dir, tmp, 0)
		}
	}()
	if p.isLink {
		if err := unix.Symlinkat(p.symlink, dir, tmp); err != nil {
			return nil, &os.PathError{Op: "symlink", Path: name, Err: err}
		}
		if p.chown {
			_ = unix.Fchownat(dir, tmp, p.uid, p.gid, unix.AT_SYMLINK_NOFOLLOW)
		}
		if p.hasTimes() {
			_ = unix.UtimesNanoAt(dir, tmp, []unix.Timespec{p.atime, p.mtime}, unix.AT_SYMLINK_NOFOLLOW)
		}
		return nil, nil
	}
	fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, &os.PathError{Op: "create", Path: name, Err: err}
	}
	f := os.NewFile(uintptr(fd), tmp)
	err = func() error {
		if p.content != nil {
			if _, err := io.Copy(f, p.content); err != nil {
				return err
			}
		}
		if p.chown {
			if err := f.Chown(p.uid, p.gid); err != nil {
				return err
			}
		}
		if err := unix.Fchmod(fd, p.perm); err != nil {
			return err
		}
		if p.hasTimes() {
			return unix.UtimesNanoAt(dir, tmp, []unix.Timespec{p.atime, p.mtime}, unix.AT_SYMLINK_NOFOLLOW)
		}
		return nil
	}()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("write %s: %w", name, err)
	}
	return f, nil
}

// renameTemp puts tmp in name's place.
func renameTemp(dir int, name, tmp string) error {
	if err := unix.Renameat(dir, tmp, dir, name); err != nil {
		_ = unix.Unlinkat(dir, tmp, 0)
		return &os.PathError{Op: "rename", Path: name, Err: err}
	}
	return nil
}
