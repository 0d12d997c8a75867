package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Baselines: what the workspace saw of each project file, for commit's
// conflicts (README.md, "Conflicts: what the workspace saw"), and the lock
// of the file operations that read and write them.
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
// the whiteout) is newer than the workspace's copy, so its baseline is
// recorded stale and the path is a conflict until discarded. The baseline follows
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
	// newest is the newest checkpoint's shareable entries, kept by the
	// checkpoint that took it (checkpoint_linux.go); nil: read them.
	newest *sharedFrom
}

// fileState is the workspace's fileState, kept by its Manager and made on
// first use.
func (w *Workspace) fileState() *fileState {
	if st, ok := w.m.fileStates.Load(w.dir); ok {
		return st.(*fileState)
	}
	st, _ := w.m.fileStates.LoadOrStore(w.dir, &fileState{sem: make(chan struct{}, 1)})
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
	return st, func() { w.fileOps.Add(1); <-st.sem }, nil
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
	dirty := noteBaselines(st.base, proj, found)
	if dirty && w.saveBaselines(st.base) != nil {
		return since
	}
	return next
}

// touched is an upper-layer entry and its birth time (ns; 0: unknown).
type touched struct {
	p     string
	btime int64
}

// noteBaselines records in base the baseline of each path of found (none
// of which has one) as the project proj holds it now, or stale when the
// project's file changed after the entry's birth. It says whether base
// changed.
func noteBaselines(base map[string]baseline, proj int, found []touched) bool {
	dirty := false
	for _, t := range found {
		dir, name, err := openParent(proj, t.p)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			base[t.p], dirty = baseline{}, true // the project has no file there
			continue
		}
		if err != nil {
			continue // the scan decides
		}
		var pst unix.Stat_t
		switch err := unix.Fstatat(dir, name, &pst, unix.AT_SYMLINK_NOFOLLOW); {
		case errors.Is(err, unix.ENOENT):
			base[t.p], dirty = baseline{}, true
		case err != nil, pst.Mode&unix.S_IFMT == unix.S_IFDIR:
		case t.btime > 0 && pst.Ctim.Nano() > t.btime:
			base[t.p], dirty = baseline{Stale: true}, true
		default:
			if b, err := projectBaseline(dir, name, &pst); err == nil {
				base[t.p], dirty = b, true
			}
		}
		unix.Close(dir)
	}
	return dirty
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
	names, err := readDirents(root, 0)
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
			fd, err := openDirAt(dir, e.name)
			if err != nil {
				if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
					continue
				}
				return err
			}
			names, err := readDirents(fd, 0)
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
