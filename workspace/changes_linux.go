package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Changes: what an overlay workspace changed, read from its upper layer on
// the host (reading is allowed; every write goes through the live mount) and
// compared with the project:
//
//   - a whiteout (a character device 0:0, or an empty file carrying
//     user.overlay.whiteout) deletes the project's file, or every file of
//     the project's directory, at its path;
//   - a directory marked user.overlay.opaque="y" replaces the project's
//     directory: the project's files under it that the upper layer lacks
//     are deleted;
//   - a regular file or symlink is added when the project has none at its
//     path (or has a directory there, whose files are then deleted), and
//     modified when the project's differs in type, permission bits, content
//     or link target; one equal to the project's (a copy-up by chmod and
//     back, a rewrite with the same bytes) is not a change;
//   - a rename is a whiteout plus a new file: delete + add (ListChanges
//     pairs them, review_linux.go);
//   - directories are not changes of their own (an empty new directory is
//     not reported nor committed, as in git); FIFOs, sockets and devices
//     the code made are not reported;
//   - redirect_dir and metacopy are off in an unprivileged (userxattr)
//     overlay, so every upper file holds its whole content.
//
// Binary: a file whose first 8 KiB hold a NUL byte or are not valid UTF-8
// (a multi-byte character cut at 8 KiB is fine) is binary, as git decides
// on a prefix.
//
// What the workspace saw of each project file, for conflicts, is its
// baseline (baseline_linux.go), recorded by the scan.

// change is one changed path with what commit, diff, discard and
// checkpoint need.
type change struct {
	path   string
	kind   protocol.ChangeKind
	typ    uint32 // S_IFREG or S_IFLNK: the workspace's file (added, modified) or the project's (deleted)
	mode   uint32 // permission bits of that file
	size   int64  // size of that file (a symlink: its target's length)
	binary bool
	// stale says why the project's file is newer than the workspace's copy
	// (the birth-time rule), "" when it is not known to be.
	stale string
}

func (c *change) protocol() protocol.Change {
	pc := protocol.Change{Path: wireName(c.path), Kind: c.kind, Binary: c.binary}
	if c.kind != protocol.ChangeKindDeleted {
		size := c.size
		pc.Size = &size
	}
	return pc
}

// Changes lists the workspace's changes (PROTOCOL.md §3 workspace/changes),
// sorted by path, as ListChanges does with no options: renames paired,
// ignored paths left out.
func (w *Workspace) Changes(ctx context.Context) ([]protocol.Change, error) {
	out, _, err := w.ListChanges(ctx, ChangeOptions{})
	return out, err
}

// changeSet is what withChanges hands its caller.
type changeSet struct {
	st      *fileState // locked
	sel     []change   // the changes at or below the paths asked for, sorted by path
	newDirs []string   // every new directory of the upper layer (see scanDirs)
}

// withChanges is the preamble of Changes, Diff, Discard, Commit and
// Checkpoint: it takes the file-operation lock (lockFiles), runs before
// (may be nil) under it, scans the upper layer (scanDirs) and keeps the
// changes at or below paths (none: every change; selectChanges), then runs
// fn with them, still under the lock.
func (w *Workspace) withChanges(ctx context.Context, paths []string, before func() error, fn func(cs changeSet) error) error {
	st, unlock, err := w.lockFiles(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if before != nil {
		if err := before(); err != nil {
			return err
		}
	}
	all, newDirs, err := w.scanDirs(ctx)
	if err != nil {
		return err
	}
	sel, err := selectChanges(all, paths)
	if err != nil {
		return err
	}
	return fn(changeSet{st: st, sel: sel, newDirs: newDirs})
}

// selectChanges keeps the changes at or below the given workspace-relative
// paths (none: every change).
func selectChanges(all []change, paths []string) ([]change, error) {
	if len(paths) == 0 {
		return all, nil
	}
	want := make(map[string]struct{}, len(paths))
	for _, p := range paths {
		rel, err := relPath(p)
		if err != nil {
			return nil, err
		}
		if rel == "." {
			return all, nil
		}
		want[rel] = struct{}{}
	}
	// A change is selected when its path or a directory above it was asked
	// for: a look-up per level, so a commit of every listed path stays
	// linear.
	var out []change
	for _, c := range all {
		for p := c.path; ; {
			if _, ok := want[p]; ok {
				out = append(out, c)
				break
			}
			i := strings.LastIndexByte(p, '/')
			if i < 0 {
				break
			}
			p = p[:i]
		}
	}
	return out, nil
}

// scan reads the upper layer and returns the changes sorted by path,
// recording baselines of paths met for the first time and dropping those
// of paths the upper layer no longer holds. The caller holds the lock.
func (w *Workspace) scan(ctx context.Context) ([]change, error) {
	cs, _, err := w.scanDirs(ctx)
	return cs, err
}

// scanDirs is scan, and also returns the topmost directories of the upper
// layer that the project has no directory at (new directories: discard
// removes them whole, empty or not).
func (w *Workspace) scanDirs(ctx context.Context) ([]change, []string, error) {
	st := w.fileState()
	var s *scanner
	var err error
	for range quotaRetries {
		s = &scanner{ctx: ctx, base: st.base, seen: make(map[string]bool)}
		if err = w.runScan(s); !errors.Is(err, errTreeChanged) {
			break
		}
	}
	if s.dirty && err != nil {
		_ = w.saveBaselines(st.base)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("scan workspace %s: %w", w.id, err)
	}
	for p := range st.base {
		if !s.seen[p] {
			delete(st.base, p)
			s.dirty = true
		}
	}
	if s.dirty {
		if err := w.saveBaselines(st.base); err != nil {
			return nil, nil, err
		}
	}
	sort.Slice(s.out, func(i, j int) bool { return s.out[i].path < s.out[j].path })
	sort.Strings(s.newDirs)
	return s.out, s.newDirs, nil
}

func (w *Workspace) runScan(s *scanner) error {
	up, err := unix.Open(w.UpperDir(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the upper layer: %w", err)
	}
	proj, err := w.openProject()
	if err != nil {
		unix.Close(up)
		return err
	}
	return s.run(up, proj)
}

// scanner walks the upper layer and the project side by side through
// directory descriptors opened with O_NOFOLLOW, so neither a symlink the
// code made nor one in the project leads it elsewhere. The walk is a loop
// over an explicit stack, not a recursion: a level costs a frame of a few
// words plus its directory's names, and the path is one buffer; each side
// keeps at most chainOpen descriptors open (dirChain). So a tree 30,000
// directories deep costs neither thousands of descriptors nor a path copy
// a level.
type scanner struct {
	ctx     context.Context
	base    map[string]baseline
	seen    map[string]bool // paths the upper layer holds or deletes
	out     []change
	newDirs []string
	dirty   bool // base changed

	path     []byte // the current directory's path
	frames   []scanFrame
	up, proj dirChain
}

// scanFrame is a directory of the walk.
type scanFrame struct {
	parentLen int      // len(path) of the parent
	names     []string // entries still to read
	// deleted: a project directory with no upper side, every file of
	// which is deleted (under a whiteout, a file, or an opaque directory).
	deleted  bool
	opaque   bool  // an upper directory that hides the project's
	tailDone bool  // the opaque directory's project entries are listed
	btime    int64 // the birth time the deletions below are dated by
}

// rel is the workspace path of name in the current directory.
func (s *scanner) rel(name string) string {
	if len(s.path) == 0 {
		return name
	}
	return string(s.path) + "/" + name
}

// run walks the upper directory up against the project's directory proj;
// it owns both descriptors.
func (s *scanner) run(up, proj int) error {
	defer s.up.closeAll()
	defer s.proj.closeAll()
	if err := s.up.push(up); err != nil {
		unix.Close(proj)
		return err
	}
	if err := s.proj.push(proj); err != nil {
		return err
	}
	names, err := readNames(up)
	if err != nil {
		return fmt.Errorf("read . in the upper layer: %w", err)
	}
	s.frames = append(s.frames, scanFrame{names: names})
	for n := 0; len(s.frames) > 0; n++ {
		if n%256 == 0 {
			if err := s.ctx.Err(); err != nil {
				return err
			}
		}
		f := &s.frames[len(s.frames)-1]
		if len(f.names) > 0 {
			name := f.names[len(f.names)-1]
			f.names = f.names[:len(f.names)-1]
			var err error
			if f.deleted {
				err = s.deletedEntry(name, f.btime)
			} else {
				err = s.entry(name)
			}
			if err != nil {
				return err
			}
			continue
		}
		if f.opaque && !f.tailDone && s.proj.top() >= 0 {
			// The project's entries the opaque directory lacks are
			// deleted, dated by the directory's birth.
			f.tailDone = true
			pnames, err := readNames(s.proj.top())
			if err != nil {
				return fmt.Errorf("read %s in the project: %w", orDot(string(s.path)), err)
			}
			var st unix.Stat_t
			kept := pnames[:0]
			for _, pn := range pnames {
				if errors.Is(unix.Fstatat(s.up.top(), pn, &st, unix.AT_SYMLINK_NOFOLLOW), unix.ENOENT) {
					kept = append(kept, pn)
				}
			}
			f.names, f.deleted = kept, true
			continue
		}
		parentLen := f.parentLen
		s.frames = s.frames[:len(s.frames)-1]
		if err := s.up.pop(); err != nil {
			return err
		}
		if err := s.proj.pop(); err != nil {
			return err
		}
		s.path = s.path[:parentLen]
	}
	return nil
}

// push enters the directory name: up and proj are its descriptors (-1:
// that side has none), which the walk now owns.
func (s *scanner) push(name string, up, proj int, deleted, opaque bool, btime int64) error {
	lister := up
	if deleted {
		lister = proj
	}
	names, err := readNames(lister)
	if err != nil {
		where := "the upper layer"
		if deleted {
			where = "the project"
		}
		err = fmt.Errorf("read %s in %s: %w", s.rel(name), where, err)
	}
	perr := s.up.push(up)
	if perr2 := s.proj.push(proj); perr == nil {
		perr = perr2
	}
	f := scanFrame{parentLen: len(s.path), names: names, deleted: deleted, opaque: opaque, btime: btime}
	if len(s.path) > 0 {
		s.path = append(s.path, '/')
	}
	s.path = append(s.path, name...)
	s.frames = append(s.frames, f)
	if err != nil {
		return err
	}
	return perr
}

// entry reads the upper layer's entry name in the current directory.
func (s *scanner) entry(name string) error {
	up, proj := s.up.top(), s.proj.top()
	var stx unix.Statx_t
	if err := unix.Statx(up, name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &stx); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // removed by code in the sandbox while we read
		}
		return fmt.Errorf("stat %s in the upper layer: %w", s.rel(name), err)
	}
	btime := statxBirth(&stx)
	var pst unix.Stat_t
	pexists := proj >= 0 && unix.Fstatat(proj, name, &pst, unix.AT_SYMLINK_NOFOLLOW) == nil
	typ := uint32(stx.Mode) & unix.S_IFMT
	if typ == unix.S_IFREG && stx.Size == 0 && hasXattr(up, name, "user.overlay.whiteout") {
		typ = unix.S_IFCHR // an xattr whiteout
	}
	switch typ {
	case unix.S_IFCHR:
		if stx.Rdev_major != 0 || stx.Rdev_minor != 0 {
			return nil // a device node the code made: not reported
		}
		s.seen[s.rel(name)] = true
		if pexists {
			return s.deletedAt(name, &pst, btime)
		}
	case unix.S_IFDIR:
		cfd, err := openDirAt(up, name)
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				return nil
			}
			return fmt.Errorf("open %s in the upper layer: %w", s.rel(name), err)
		}
		op := xattrIs(cfd, "user.overlay.opaque", "y")
		cproj := -1
		if pexists && pst.Mode&unix.S_IFMT == unix.S_IFDIR {
			if fd, err := openDirAt(proj, name); err == nil {
				cproj = fd
			}
		} else if proj >= 0 {
			s.newDirs = append(s.newDirs, s.rel(name))
			if pexists {
				if err := s.deletedAt(name, &pst, btime); err != nil {
					unix.Close(cfd)
					return err
				}
			}
		}
		return s.push(name, cfd, cproj, false, op, btime)
	case unix.S_IFREG, unix.S_IFLNK:
		p := s.rel(name)
		s.seen[p] = true
		return s.file(p, up, name, &stx, btime, proj, pexists, &pst)
	}
	return nil
}

// statxBirth is the birth time of stx, 0 when the filesystem keeps none.
func statxBirth(stx *unix.Statx_t) int64 {
	if stx.Mask&unix.STATX_BTIME == 0 {
		return 0
	}
	return stx.Btime.Sec*1e9 + int64(stx.Btime.Nsec)
}

// deletedEntry reads the project's entry name in a deleted directory.
func (s *scanner) deletedEntry(name string, btime int64) error {
	var pst unix.Stat_t
	if unix.Fstatat(s.proj.top(), name, &pst, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return nil
	}
	return s.deletedAt(name, &pst, btime)
}

// deletedAt reports the project's file name (in the current directory)
// deleted, or every file of the project's directory there.
func (s *scanner) deletedAt(name string, pst *unix.Stat_t, btime int64) error {
	proj := s.proj.top()
	switch pst.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		fd, err := openDirAt(proj, name)
		if err != nil {
			return nil // gone since, or unreadable: nothing the workspace shows
		}
		return s.push(name, -1, fd, true, false, btime)
	case unix.S_IFREG, unix.S_IFLNK:
		p := s.rel(name)
		s.seen[p] = true
		c := change{path: p, kind: protocol.ChangeKindDeleted, typ: pst.Mode & unix.S_IFMT, mode: pst.Mode & 0o7777, size: pst.Size}
		if c.typ == unix.S_IFREG {
			c.binary = fileIsBinary(proj, name)
		}
		c.stale = s.note(p, proj, name, pst, btime)
		s.out = append(s.out, c)
	}
	return nil
}

// file compares the upper layer's regular file or symlink at p with the
// project's.
func (s *scanner) file(p string, up int, name string, stx *unix.Statx_t, btime int64, proj int, pexists bool, pst *unix.Stat_t) error {
	typ := uint32(stx.Mode) & unix.S_IFMT
	c := change{path: p, kind: protocol.ChangeKindAdded, typ: typ, mode: uint32(stx.Mode) & 0o7777, size: int64(stx.Size)}
	projDir := pexists && pst.Mode&unix.S_IFMT == unix.S_IFDIR
	if projDir {
		pexists = false
	}
	if pexists {
		c.kind = protocol.ChangeKindModified
		if pst.Mode&unix.S_IFMT == typ && pst.Mode&0o7777 == c.mode {
			same, err := sameContent(up, proj, name, typ, c.size, pst.Size)
			if err != nil {
				return fmt.Errorf("compare %s with the project: %w", p, err)
			}
			if same {
				// The workspace holds what the project holds: it has
				// seen the project as it is now.
				if b, ok := s.base[p]; !ok || !b.sameStat(pst) {
					s.record(p, proj, name, pst)
				}
				return nil
			}
		}
	}
	if typ == unix.S_IFREG {
		c.binary = fileIsBinary(up, name)
	}
	if pexists && pst.Mode&unix.S_IFMT == unix.S_IFREG && !c.binary {
		c.binary = fileIsBinary(proj, name) // no line diff either way
	}
	if pexists {
		c.stale = s.note(p, proj, name, pst, btime)
	} else {
		s.note(p, proj, name, nil, btime)
	}
	s.out = append(s.out, c)
	if projDir {
		// The project's directory here: its files are deleted.
		return s.deletedAt(name, pst, btime)
	}
	return nil
}

// note records the baseline of a changed path met for the first time and
// returns why the project's file is newer than the workspace's copy, if
// the birth-time rule says so (then that is what is recorded: a stale
// baseline, which a later rename of the upper entry does not clear).
func (s *scanner) note(p string, proj int, name string, pst *unix.Stat_t, btime int64) string {
	if b, ok := s.base[p]; ok {
		if b.Stale {
			return staleReason
		}
		return ""
	}
	if pst == nil {
		s.base[p] = baseline{}
		s.dirty = true
		return ""
	}
	if ctime := pst.Ctim.Nano(); btime > 0 && ctime > btime {
		s.base[p] = baseline{Stale: true}
		s.dirty = true
		return staleReason
	}
	s.record(p, proj, name, pst)
	return ""
}

// staleReason is the conflict of a path whose project file changed after
// the workspace first touched it and before any baseline was recorded.
const staleReason = "the project's file changed after code in the workspace copied or deleted it"

// record makes the project's current file p's baseline.
func (s *scanner) record(p string, proj int, name string, pst *unix.Stat_t) {
	b, err := projectBaseline(proj, name, pst)
	if err != nil {
		return // unreadable: no baseline, commit will say why
	}
	s.base[p] = b
	s.dirty = true
}

// sameContent compares the upper file name in up with the project's in
// proj, both of type typ.
func sameContent(up, proj int, name string, typ uint32, usize, psize int64) (bool, error) {
	if typ == unix.S_IFLNK {
		a, err := readlinkAt(up, name)
		if err != nil {
			return false, err
		}
		b, err := readlinkAt(proj, name)
		if err != nil {
			return false, nil
		}
		return a == b, nil
	}
	if usize != psize {
		return false, nil
	}
	a, err := openFileAt(up, name)
	if err != nil {
		return false, err
	}
	defer a.Close()
	b, err := openFileAt(proj, name)
	if err != nil {
		return false, nil // unreadable project file: shown as modified
	}
	defer b.Close()
	return sameReaders(a, b)
}

var cmpBufs = sync.Pool{New: func() any { b := make([]byte, 2*64<<10); return &b }}

func sameReaders(a, b io.Reader) (bool, error) {
	bp := cmpBufs.Get().(*[]byte)
	defer cmpBufs.Put(bp)
	ba, bb := (*bp)[:64<<10], (*bp)[64<<10:]
	for {
		na, ea := io.ReadFull(a, ba)
		nb, eb := io.ReadFull(b, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		aEnd := ea == io.EOF || ea == io.ErrUnexpectedEOF
		bEnd := eb == io.EOF || eb == io.ErrUnexpectedEOF
		if ea != nil && !aEnd {
			return false, ea
		}
		if eb != nil && !bEnd {
			return false, nil
		}
		if aEnd || bEnd {
			return aEnd == bEnd, nil
		}
	}
}

// binaryPrefix is how much of a file decides whether it is binary.
const binaryPrefix = 8 << 10

// fileIsBinary reads the head of a regular file (unreadable: binary, it
// cannot be shown as text).
func fileIsBinary(dir int, name string) bool {
	f, err := openFileAt(dir, name)
	if err != nil {
		return true
	}
	defer f.Close()
	head := make([]byte, binaryPrefix)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return true
	}
	return isBinary(head[:n], n == binaryPrefix)
}

func orDot(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

// openProject opens the project directory, refusing a symlink put in its
// place since the workspace was opened.
func (w *Workspace) openProject() (int, error) {
	fd, err := unix.Open(w.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the project %s of workspace %s: %w", w.root, w.id, err)
	}
	return fd, nil
}
