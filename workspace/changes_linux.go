package workspace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

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
//   - a rename is a whiteout plus a new file: delete + add;
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
// Conflicts need to know what the workspace saw of each project file. The
// first time a scan meets a changed path it records a baseline of the
// project's file (type, mode, size, mtime, ctime, inode, SHA-256, or "no
// file") in the workspace's state dir (baselines.json, written atomically):
// commit refuses a path whose project file no longer matches it. A file the
// workspace holds equal to the project's moves its baseline to the project's
// current state (they agree now, so the workspace has seen it). When a scan
// first meets a path, the project may already have been edited after code
// in the sandbox copied the file up: a project file whose ctime is later
// than the birth time of its upper entry (statx STATX_BTIME: the copy-up,
// the whiteout) is newer than the workspace's copy, so no baseline is
// recorded and the path is a conflict until discarded. The baseline follows
// the path from the first time the workspace touched it, not the upper
// entry: while the sandbox runs, noteTouched records the baselines of new
// upper entries every quota tick, so a rename over a copied-up file (a
// new entry, born later) cannot pass a project edit made in between as
// what the workspace saw.

// fileState is a workspace's state that must outlive one Workspace value
// (a close and reopen makes a new one): the lock of its file operations and
// its baselines.
type fileState struct {
	// sem admits one of changes, diff, commit, discard, checkpoint,
	// restore and deleteCheckpoint at a time: they read and write the same
	// baselines and view.
	sem chan struct{}

	// Guarded by sem:
	owner *Workspace          // the open Workspace the baselines were loaded for
	base  map[string]baseline // loaded on first use
}

var fileStates sync.Map // workspace dir -> *fileState

func (w *Workspace) fileState() *fileState {
	if st, ok := fileStates.Load(w.dir); ok {
		return st.(*fileState)
	}
	st, _ := fileStates.LoadOrStore(w.dir, &fileState{sem: make(chan struct{}, 1)})
	return st.(*fileState)
}

// lockFiles takes the workspace's file-operation lock, or fails when ctx
// ends first.
func (w *Workspace) lockFiles(ctx context.Context) (*fileState, func(), error) {
	if w.mode != protocol.WorkspaceModeOverlay {
		return nil, nil, fmt.Errorf("%w: workspace %s is in mode %s: only an overlay workspace has changes to list, commit, discard or checkpoint", ErrInvalid, w.id, w.mode)
	}
	st := w.fileState()
	select {
	case st.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("workspace %s: waiting for another file operation: %w", w.id, ctx.Err())
	}
	if err := w.loadState(st); err != nil {
		<-st.sem
		return nil, nil, err
	}
	return st, func() { <-st.sem }, nil
}

// loadState makes st ready for w; the caller holds st.sem.
func (w *Workspace) loadState(st *fileState) error {
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed {
		return fmt.Errorf("workspace %s: %w", w.id, ErrClosed)
	}
	if st.owner != w {
		// Opened again (perhaps after a close with discard removed the
		// directory): the disk has the truth.
		st.owner, st.base = w, nil
	}
	if st.base == nil {
		b, err := w.loadBaselines()
		if err != nil {
			return err
		}
		st.base = b
	}
	return nil
}

// noteTouched records, while the sandbox runs, the baseline of every path
// the workspace touched since the time since (ns; 0: ever) that has none
// yet, so that a baseline follows the path from the first time the
// workspace touched it: a later rename over it (an editor's save, sed -i)
// makes a new upper entry with a new birth time, which would hide an edit
// of the project made in between. watchQuota calls it every tick. It
// returns the since of the next call: unchanged when the lock was busy
// (the tick is skipped, the next one catches up) or the walk failed.
//
// The walk is by descriptors (dirChain), reads only the directories
// whose mtime or ctime is at or after since (an entry linked into a
// directory changes its ctime, which code cannot set back), and stats
// their entries for the birth time (statx; the ctime where the filesystem
// keeps none).
func (w *Workspace) noteTouched(since int64) int64 {
	if w.mode != protocol.WorkspaceModeOverlay || w.UpperDir() == "" {
		return since
	}
	st := w.fileState()
	select {
	case st.sem <- struct{}{}:
	default:
		return since // changes, commit, ... are at work: the next tick
	}
	defer func() { <-st.sem }()
	if w.loadState(st) != nil {
		return since
	}
	// Birth times come from a coarse clock: a margin keeps an entry made
	// during this walk for the next one.
	next := time.Now().UnixNano() - int64(100*time.Millisecond)
	type touched struct {
		p     string
		btime int64
	}
	var found []touched
	err := walkTouched(w.UpperDir(), since, func(p string, btime int64) {
		if _, ok := st.base[p]; !ok {
			found = append(found, touched{p, btime})
		}
	})
	if err != nil {
		return since
	}
	if len(found) == 0 {
		return next
	}
	proj, err := w.openProject()
	if err != nil {
		return since
	}
	defer unix.Close(proj)
	dirty := false
	for _, t := range found {
		dir, name, err := openParent(proj, t.p)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			st.base[t.p], dirty = baseline{}, true // the project has no file there
			continue
		}
		if err != nil {
			continue // the scan decides
		}
		var pst unix.Stat_t
		switch err := unix.Fstatat(dir, name, &pst, unix.AT_SYMLINK_NOFOLLOW); {
		case errors.Is(err, unix.ENOENT):
			st.base[t.p], dirty = baseline{}, true
		case err != nil, pst.Mode&unix.S_IFMT == unix.S_IFDIR:
		case t.btime > 0 && pst.Ctim.Nano() > t.btime:
			st.base[t.p], dirty = baseline{Stale: true}, true
		default:
			if b, err := projectBaseline(dir, name, &pst); err == nil {
				st.base[t.p], dirty = b, true
			}
		}
		unix.Close(dir)
	}
	if dirty && w.saveBaselines(st.base) != nil {
		return since
	}
	return next
}

// walkTouched calls fn with the path and birth time of every file,
// symlink and whiteout under upper whose birth time is at or after since
// (0: every one), reading only the directories changed since then.
func walkTouched(upper string, since int64, fn func(p string, btime int64)) error {
	root, err := unix.Open(upper, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	var chain dirChain
	defer chain.closeAll()
	if err := chain.push(root); err != nil {
		return err
	}
	type frame struct {
		parentLen int
		names     []dirent
		changed   bool
	}
	changed := func(fd int) bool {
		var st unix.Stat_t
		if since == 0 || unix.Fstat(fd, &st) != nil {
			return true
		}
		return st.Mtim.Nano() >= since || st.Ctim.Nano() >= since
	}
	var pathBuf []byte
	names, err := readDirents(root)
	if err != nil {
		return err
	}
	frames := []frame{{names: names, changed: changed(root)}}
	for len(frames) > 0 {
		f := &frames[len(frames)-1]
		if len(f.names) == 0 {
			pathBuf = pathBuf[:f.parentLen]
			frames = frames[:len(frames)-1]
			if err := chain.pop(); err != nil {
				return err
			}
			continue
		}
		e := f.names[len(f.names)-1]
		f.names = f.names[:len(f.names)-1]
		dir := chain.top()
		if e.typ == unix.DT_DIR {
			fd, err := unix.Openat(dir, e.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
					continue
				}
				return err
			}
			names, err := readDirents(fd)
			if err != nil {
				unix.Close(fd)
				return err
			}
			ch := changed(fd)
			if err := chain.push(fd); err != nil {
				return err
			}
			frames = append(frames, frame{parentLen: len(pathBuf), names: names, changed: ch})
			if len(pathBuf) > 0 {
				pathBuf = append(pathBuf, '/')
			}
			pathBuf = append(pathBuf, e.name...)
			continue
		}
		if !f.changed {
			continue
		}
		var stx unix.Statx_t
		if unix.Statx(dir, e.name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &stx) != nil {
			continue
		}
		switch uint32(stx.Mode) & unix.S_IFMT {
		case unix.S_IFREG, unix.S_IFLNK:
		case unix.S_IFCHR:
			if stx.Rdev_major != 0 || stx.Rdev_minor != 0 {
				continue
			}
		default:
			continue
		}
		btime := statxBirth(&stx)
		if btime == 0 {
			btime = stx.Ctime.Sec*1e9 + int64(stx.Ctime.Nsec)
		}
		if since != 0 && btime < since {
			continue
		}
		p := e.name
		if len(pathBuf) > 0 {
			p = string(pathBuf) + "/" + e.name
		}
		fn(p, btime)
	}
	return nil
}

// baseline is a project file as the workspace saw it.
type baseline struct {
	Exists  bool   `json:"exists"`
	Mode    uint32 `json:"mode,omitempty"` // type and permission bits (st_mode)
	Size    int64  `json:"size,omitempty"`
	MtimeNs int64  `json:"mtimeNs,omitempty"`
	CtimeNs int64  `json:"ctimeNs,omitempty"`
	Ino     uint64 `json:"ino,omitempty"`
	SHA256  string `json:"sha256,omitempty"` // regular files
	Link    string `json:"link,omitempty"`   // symlinks
	// Stale: the project's file changed after the workspace first touched
	// the path and before a baseline was taken; a conflict until the path
	// is discarded or the workspace holds what the project holds.
	Stale bool `json:"stale,omitempty"`
}

func (w *Workspace) baselinesPath() string { return filepath.Join(w.dir, "baselines.json") }

func (w *Workspace) loadBaselines() (map[string]baseline, error) {
	b, err := os.ReadFile(w.baselinesPath())
	if errors.Is(err, os.ErrNotExist) {
		return map[string]baseline{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the baselines of workspace %s: %w", w.id, err)
	}
	stored := map[string]baseline{}
	if err := json.Unmarshal(b, &stored); err != nil {
		// Baselines only guard against conflicts; a damaged file is
		// rebuilt from the birth-time rule rather than blocking the
		// workspace.
		w.m.log.Warn("damaged baselines.json ignored", "workspace", w.id, "err", err)
		return map[string]baseline{}, nil
	}
	m := make(map[string]baseline, len(stored))
	for p, bl := range stored {
		bl.Link = fromWire(bl.Link)
		m[fromWire(p)] = bl
	}
	return m, nil
}

// saveBaselines writes the baselines, names and link targets as wireName
// carries them (a name that is not UTF-8 survives the JSON).
func (w *Workspace) saveBaselines(m map[string]baseline) error {
	stored := make(map[string]baseline, len(m))
	for p, bl := range m {
		bl.Link = wireName(bl.Link)
		stored[wireName(p)] = bl
	}
	b, err := json.Marshal(stored)
	if err != nil {
		return fmt.Errorf("encode the baselines of workspace %s: %w", w.id, err)
	}
	return writeAtomic(w.baselinesPath(), b, 0o600)
}

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
// sorted by path.
func (w *Workspace) Changes(ctx context.Context) ([]protocol.Change, error) {
	_, unlock, err := w.lockFiles(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	cs, err := w.scan(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]protocol.Change, len(cs))
	for i := range cs {
		out[i] = cs[i].protocol()
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

// chainOpen bounds the descriptors one side of a walk (the upper layer,
// the project) keeps open, as maxOpenDirs does for walkUsage.
const chainOpen = 32

// dirChain is the line of directories from a walk's root to where it is,
// one side of it (absent where that side has no directory), with at most
// chainOpen descriptors open: deeper, the outermost open one is closed and
// opened again from its child ("..") when the walk comes back up, checked
// to be the same directory (dev, ino). Memory is a few words a level, so
// no depth is too deep for it.
type dirChain struct {
	links []dirLink
	open  int
	first int // the links below first are closed or absent
}

type dirLink struct {
	fd       int // -1: closed, or absent
	absent   bool
	dev, ino uint64
}

// push makes fd (which the chain now owns; -1: absent) the deepest link.
func (c *dirChain) push(fd int) error {
	if fd < 0 {
		c.links = append(c.links, dirLink{fd: -1, absent: true})
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return err
	}
	c.links = append(c.links, dirLink{fd: fd, dev: st.Dev, ino: st.Ino})
	c.open++
	for c.open > chainOpen {
		for c.first < len(c.links)-1 && c.links[c.first].fd < 0 {
			c.first++
		}
		if c.first >= len(c.links)-1 {
			break
		}
		unix.Close(c.links[c.first].fd)
		c.links[c.first].fd = -1
		c.open--
		c.first++
	}
	return nil
}

// top is the deepest link's descriptor (-1: absent). It is always open.
func (c *dirChain) top() int { return c.links[len(c.links)-1].fd }

// pop closes the deepest link, opening its parent again if it was closed.
func (c *dirChain) pop() error {
	n := len(c.links)
	l := c.links[n-1]
	c.links = c.links[:n-1]
	defer func() {
		if l.fd >= 0 {
			unix.Close(l.fd)
			c.open--
		}
	}()
	if n == 1 {
		return nil
	}
	p := &c.links[n-2]
	if !p.absent && p.fd < 0 {
		if l.fd < 0 {
			return errTreeChanged // cannot be: a closed link has an open child
		}
		fd, err := unix.Openat(l.fd, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open a directory's parent: %w", err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Dev != p.dev || st.Ino != p.ino {
			unix.Close(fd)
			return errTreeChanged
		}
		p.fd = fd
		c.open++
	}
	c.first = min(c.first, n-2)
	return nil
}

func (c *dirChain) closeAll() {
	for _, l := range c.links {
		if l.fd >= 0 {
			unix.Close(l.fd)
		}
	}
	c.links, c.open, c.first = nil, 0, 0
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
		cfd, err := unix.Openat(up, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				return nil
			}
			return fmt.Errorf("open %s in the upper layer: %w", s.rel(name), err)
		}
		op := xattrIs(cfd, "user.overlay.opaque", "y")
		cproj := -1
		if pexists && pst.Mode&unix.S_IFMT == unix.S_IFDIR {
			if fd, err := unix.Openat(proj, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
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
		fd, err := unix.Openat(proj, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
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

// projectBaseline describes the project's file name in dir (pst its lstat,
// or nil to stat it): absent, or its stat and content hash.
func projectBaseline(dir int, name string, pst *unix.Stat_t) (baseline, error) {
	if pst == nil {
		var st unix.Stat_t
		if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				return baseline{}, nil
			}
			return baseline{}, err
		}
		pst = &st
	}
	b := baseline{Exists: true, Mode: pst.Mode, Size: pst.Size, MtimeNs: pst.Mtim.Nano(), CtimeNs: pst.Ctim.Nano(), Ino: pst.Ino}
	switch pst.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		sum, err := hashAt(dir, name)
		if err != nil {
			return baseline{}, err
		}
		b.SHA256 = sum
	case unix.S_IFLNK:
		l, err := readlinkAt(dir, name)
		if err != nil {
			return baseline{}, err
		}
		b.Link = l
	}
	return b, nil
}

// sameStat: the file's stat is the one recorded (so its content is too).
func (b baseline) sameStat(st *unix.Stat_t) bool {
	return b.Exists && b.Mode == st.Mode && b.Size == st.Size && b.MtimeNs == st.Mtim.Nano() &&
		b.CtimeNs == st.Ctim.Nano() && b.Ino == st.Ino
}

// projectMoved says how the project's file name in dir departs from the
// baseline b ("" when it does not): the conflict test of commit.
func projectMoved(b baseline, dir int, name string) (string, error) {
	var st unix.Stat_t
	err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		if b.Exists {
			return "deleted in the project since the workspace saw it", nil
		}
		return "", nil
	}
	if err != nil {
		return "", err
	}
	switch {
	case !b.Exists:
		return "created in the project since the workspace saw it", nil
	case b.sameStat(&st):
		return "", nil
	case st.Mode&unix.S_IFMT != b.Mode&unix.S_IFMT:
		return "replaced in the project (another file type) since the workspace saw it", nil
	case st.Mode != b.Mode:
		return "its mode changed in the project since the workspace saw it", nil
	}
	cur, err := projectBaseline(dir, name, &st)
	if err != nil {
		return "", err
	}
	if cur.SHA256 == b.SHA256 && cur.Link == b.Link {
		return "", nil // touched, or rewritten with the same bytes
	}
	return "modified in the project since the workspace saw it", nil
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

func hashAt(dir int, name string) (string, error) {
	f, err := openFileAt(dir, name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
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

// selectChanges keeps the changes at or below the given workspace-relative
// paths (none: every change).
func selectChanges(all []change, paths []string) ([]change, error) {
	if len(paths) == 0 {
		return all, nil
	}
	var prefixes []string
	for _, p := range paths {
		rel, err := relPath(p)
		if err != nil {
			return nil, err
		}
		if rel == "." {
			return all, nil
		}
		prefixes = append(prefixes, rel)
	}
	var out []change
	for _, c := range all {
		for _, p := range prefixes {
			if c.path == p || strings.HasPrefix(c.path, p+"/") {
				out = append(out, c)
				break
			}
		}
	}
	return out, nil
}

// Diff is PROTOCOL.md §3 workspace/diff: the unified diff of each change
// (or of those at or below paths), the project's file against the
// workspace's as the live mount shows it. See diff.go for the limits.
func (w *Workspace) Diff(ctx context.Context, paths []string) ([]protocol.FileDiff, error) {
	_, unlock, err := w.lockFiles(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	all, err := w.scan(ctx)
	if err != nil {
		return nil, err
	}
	sel, err := selectChanges(all, paths)
	if err != nil {
		return nil, err
	}
	view, err := w.openView()
	if err != nil {
		return nil, err
	}
	defer unix.Close(view)
	proj, err := w.openProject()
	if err != nil {
		return nil, err
	}
	defer unix.Close(proj)
	out := make([]protocol.FileDiff, 0, len(sel))
	total := 0
	for _, c := range sel {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		fd := protocol.FileDiff{Path: wireName(c.path), Kind: c.kind, Binary: c.binary}
		switch {
		case c.binary:
		case total >= maxDiffTotal:
			fd.Diff = omittedDiff(c.path)
		default:
			var old, new diffSide
			if c.kind != protocol.ChangeKindAdded {
				if old, err = readSide(proj, c.path); err != nil {
					return nil, fmt.Errorf("diff %s: read the project's file: %w", c.path, err)
				}
			}
			if c.kind != protocol.ChangeKindDeleted {
				if new, err = readSide(view, c.path); err != nil {
					return nil, fmt.Errorf("diff %s: read the workspace's file: %w", c.path, err)
				}
			}
			if old.binary() || new.binary() {
				fd.Binary = true // it became binary since the scan
				break
			}
			fd.Diff = unifiedDiff(c.path, old, new)
		}
		total += len(fd.Diff)
		out = append(out, fd)
	}
	return out, nil
}

func (s diffSide) binary() bool {
	if !s.exists || s.mode&unix.S_IFMT != unix.S_IFREG {
		return false
	}
	head := s.text[:min(len(s.text), binaryPrefix)]
	return isBinary(head, len(head) == binaryPrefix)
}

// readSide reads rel below root (the view or the project) for a diff,
// following no symlink: a symlink's text is its target.
func readSide(root int, rel string) (diffSide, error) {
	dir, name, err := openParent(root, rel)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return diffSide{}, nil
		}
		return diffSide{}, err
	}
	defer unix.Close(dir)
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return diffSide{}, nil
		}
		return diffSide{}, err
	}
	s := diffSide{exists: true, mode: st.Mode, size: st.Size}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		l, err := readlinkAt(dir, name)
		if err != nil {
			return diffSide{}, err
		}
		s.text = []byte(l)
	case unix.S_IFREG:
		if st.Size > maxDiffInput {
			return s, nil
		}
		f, err := openFileAt(dir, name)
		if err != nil {
			return diffSide{}, err
		}
		defer f.Close()
		s.text, err = io.ReadAll(io.LimitReader(f, maxDiffInput+1))
		if err != nil {
			return diffSide{}, err
		}
		s.size = int64(len(s.text))
	}
	return s, nil
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
