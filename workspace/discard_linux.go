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
	var out []string
	err := w.withChanges(ctx, paths, nil, func(cs changeSet) (err error) {
		out, err = w.discard(ctx, cs, paths)
		return err
	})
	return out, err
}

// discard is Discard of the changes cs holds, selected by paths; the
// caller holds the lock. An error may come with the paths done before it.
func (w *Workspace) discard(ctx context.Context, cs changeSet, paths []string) ([]string, error) {
	st, sel := cs.st, cs.sel
	trees, err := selectTrees(cs.newDirs, paths)
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
	var removes, writes []string
	for _, p := range paths {
		src, err := openProjectFile(proj, p)
		if err != nil {
			return nil, fmt.Errorf("discard %s: read the project's file: %w", p, err)
		}
		if src == nil {
			removes = append(removes, p)
		} else {
			src.close()
			writes = append(writes, p)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(removes)))
	var done []string
	for _, p := range removes {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		if err := w.viewRemove(p, proj, false); err != nil {
			return done, err
		}
		done = append(done, p)
		if progress != nil {
			progress()
		}
	}
	for _, p := range writes {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		src, err := openProjectFile(proj, p)
		if err != nil {
			return done, fmt.Errorf("discard %s: read the project's file: %w", p, err)
		}
		if src == nil { // gone since
			err = w.viewRemove(p, proj, false)
		} else {
			err = w.viewPut(p, src.put(), proj)
			src.close()
		}
		if err != nil {
			return done, err
		}
		done = append(done, p)
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
