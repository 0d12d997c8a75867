package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Commit is PROTOCOL.md §3 workspace/commit: each change (or each at or
// below paths) is copied from the live mount into the project.
//
//   - Atomic per file: the content goes to a temporary file in the same
//     directory (".NAME.cellbox-tmp-WSID"), given the workspace file's
//     permission bits (setuid and setgid cleared) and mtime, fsynced, and
//     renamed over the project's file; each directory written is fsynced
//     at the end. Files go by batches of commitBatch whose fsyncs run in
//     parallel (the journal commits them together). A reader of the project, or a crash, sees the old
//     file or the new one, never a torn one. A killed commit's temporary
//     files are removed by the next commit (commit.json lists its paths).
//   - Deleted files are unlinked, then the project's directories the
//     workspace no longer has are removed if empty; missing parents are
//     created with the workspace's directory modes.
//   - Nothing is followed out of the project: every project path is
//     resolved with openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS from the
//     project's directory (opened O_NOFOLLOW), so a symlink anywhere on the
//     way, even one planted after the workspace saw the project, makes that
//     path a conflict instead of a write elsewhere; a symlink the workspace
//     made is committed as a symlink (its target is not followed), unless
//     it would point outside the project (an absolute target, or one that
//     climbs out): that is a conflict that says so.
//   - Modes are the workspace's with the daemon's umask applied, so code
//     cannot make a world-writable file or directory in the project.
//   - A path whose project file departs from its baseline (see
//     baseline_linux.go) is a conflict and left alone, as is one the
//     project cannot take (a non-empty directory in the way, a permission
//     error): each conflict says why.
//   - A root daemon gives the files and directories it creates the owner
//     of their parent directory.
//
// A committed path's upper-layer file then equals the project's, so it is
// no longer a change; its baseline becomes the project's new file.
// progress (may be nil) is called after each path.
func (w *Workspace) Commit(ctx context.Context, paths []string, progress func(done, total int)) (*protocol.WorkspaceCommitResult, error) {
	proj := -1
	defer func() {
		if proj >= 0 {
			unix.Close(proj)
		}
	}()
	// Before the scan: open the project and remove what a killed commit
	// left in it.
	prepare := func() (err error) {
		if proj, err = w.openProject(); err != nil {
			return err
		}
		w.recoverCommit(proj)
		return nil
	}
	var res *protocol.WorkspaceCommitResult
	err := w.withChanges(ctx, paths, prepare, func(cs changeSet) (err error) {
		res, err = w.commit(ctx, cs.st, proj, cs.sel, progress)
		return err
	})
	return res, err
}

// commit is Commit of the changes sel; the caller holds the lock (st) and
// the project (proj).
func (w *Workspace) commit(ctx context.Context, st *fileState, proj int, sel []change, progress func(done, total int)) (*protocol.WorkspaceCommitResult, error) {
	res := &protocol.WorkspaceCommitResult{Applied: []string{}, Conflicts: []protocol.Conflict{}}
	if len(sel) == 0 {
		return res, nil
	}
	view, err := w.openView()
	if err != nil {
		return nil, err
	}
	defer unix.Close(view)
	journal := commitJournal{Paths: make([]string, len(sel))}
	for i, c := range sel {
		journal.Paths[i] = wireName(c.path)
	}
	if err := w.writeJournal(journal); err != nil {
		return nil, err
	}

	cm := &committer{w: w, st: st, proj: proj, view: view, res: res, dirs: map[string]int{}, root: os.Geteuid() == 0}
	defer cm.closeDirs()
	var deletes, writes []change
	for _, c := range sel {
		if c.kind == protocol.ChangeKindDeleted {
			deletes = append(deletes, c)
		} else {
			writes = append(writes, c)
		}
	}
	sort.Slice(deletes, func(i, j int) bool { return deletes[i].path > deletes[j].path })
	done := 0
	step := func() {
		done++
		if progress != nil {
			progress(done, len(deletes)+len(writes))
		}
	}
	var cerr error
	for _, c := range deletes {
		if cerr = ctx.Err(); cerr != nil {
			break
		}
		cm.delete(c)
		step()
	}
	if cerr == nil {
		cm.pruneDirs(deletes)
		cerr = cm.writeAll(ctx, writes, step)
	}
	if err := cm.syncDirs(); err != nil && cerr == nil {
		cerr = err
	}
	if err := w.saveBaselines(st.base); err != nil && cerr == nil {
		cerr = err
	}
	if cerr == nil {
		_ = os.Remove(w.journalPath())
	}
	sort.Strings(res.Applied)
	sort.Slice(res.Conflicts, func(i, j int) bool { return res.Conflicts[i].Path < res.Conflicts[j].Path })
	if cerr != nil {
		return nil, fmt.Errorf("commit workspace %s (%d of %d paths applied): %w", w.id, len(res.Applied), len(sel), cerr)
	}
	w.m.log.Info("workspace committed", "workspace", w.id, "applied", len(res.Applied), "conflicts", len(res.Conflicts))
	return res, nil
}

// commitJournal lists the paths of a commit under way (commit.json), so
// that the next commit after a crash removes its temporary files.
type commitJournal struct {
	Paths []string `json:"paths"`
}

func (w *Workspace) journalPath() string { return filepath.Join(w.dir, "commit.json") }

func (w *Workspace) writeJournal(j commitJournal) error {
	b, _ := json.Marshal(j)
	if err := writeAtomic(w.journalPath(), b, 0o600); err != nil {
		return fmt.Errorf("commit workspace %s: %w", w.id, err)
	}
	return nil
}

// commitTemp is the temporary name of name in a commit of this workspace:
// fixed, so that a killed commit's leftovers can be found.
func (w *Workspace) commitTemp(name string) string { return tempPrefix(name) + w.id }

// recoverCommit removes the temporary files a killed commit left in the
// project.
func (w *Workspace) recoverCommit(proj int) {
	b, err := os.ReadFile(w.journalPath())
	if err != nil {
		return
	}
	var j commitJournal
	if json.Unmarshal(b, &j) == nil {
		n := 0
		for _, p := range j.Paths {
			p = fromWire(p)
			dir, name, err := openParent(proj, p)
			if err != nil {
				continue
			}
			if unix.Unlinkat(dir, w.commitTemp(name), 0) == nil {
				n++
			}
			unix.Close(dir)
		}
		w.m.log.Warn("removed what an interrupted commit left in the project", "workspace", w.id, "paths", len(j.Paths), "temporary_files", n)
	}
	_ = os.Remove(w.journalPath())
}

type committer struct {
	w          *Workspace
	st         *fileState
	proj, view int
	res        *protocol.WorkspaceCommitResult
	dirs       map[string]int // project directories written, by path ("" is the root)
	root       bool           // the daemon is root: chown what it creates
}

// umask is the daemon's file mode creation mask (its user's), read once at
// start: what commit creates in the project gets the modes the user's own
// programs would give it, not a world-writable 0666 or 0777 that code in the
// sandbox chose.
var umask = func() uint32 {
	m := unix.Umask(0o022)
	unix.Umask(m)
	return uint32(m)
}()

// linkLeaves says why a symlink at rel (a workspace path) whose target is
// target must not be committed: in the project it would point outside it
// (an absolute target, even /workspace/..., names a host path there).
// "" if the target stays inside.
func linkLeaves(rel, target string) string {
	if path.IsAbs(target) {
		return fmt.Sprintf("a symlink to the absolute path %q: in the project it would point outside it, so cellbox does not commit it", target)
	}
	if t := path.Join(path.Dir(rel), target); t == ".." || strings.HasPrefix(t, "../") {
		return fmt.Sprintf("a symlink to %q, outside the project: cellbox does not commit symlinks that leave the project", target)
	}
	return ""
}

func (cm *committer) conflict(p, reason string) {
	cm.res.Conflicts = append(cm.res.Conflicts, protocol.Conflict{Path: wireName(p), Reason: reason})
}

// pathReason says why a project path cannot be reached, or "".
func pathReason(err error) string {
	switch {
	case errors.Is(err, unix.ELOOP):
		return "a directory on its path in the project is a symlink; cellbox does not follow symlinks when it writes the project"
	case errors.Is(err, unix.EXDEV):
		return "its path leaves the project"
	case errors.Is(err, unix.ENOTDIR):
		return "a parent of it in the project is not a directory"
	}
	return "not applied: " + err.Error()
}

// parent opens (and keeps) the project directory of p; create makes the
// missing ones.
func (cm *committer) parent(p string, create bool) (int, string, error) {
	d, name := path.Dir(p), path.Base(p)
	if d == "." {
		d = ""
	}
	if fd, ok := cm.dirs[d]; ok {
		return fd, name, nil
	}
	var fd int
	var err error
	if create {
		fd, _, err = mkdirAllBeneath(cm.proj, p, cm.view, umask, cm.owner, false)
	} else {
		fd, _, err = openParent(cm.proj, p)
	}
	if err != nil {
		return -1, "", err
	}
	cm.dirs[d] = fd
	return fd, name, nil
}

// owner is the owner a root daemon gives what it creates in dir: dir's.
func (cm *committer) owner(dir int) (int, int, bool) {
	if !cm.root {
		return 0, 0, false
	}
	var st unix.Stat_t
	if unix.Fstat(dir, &st) != nil {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}

// check is the conflict test of path p in dir: "" when the project's file
// is still what the workspace saw.
func (cm *committer) check(c change, dir int, name string) string {
	if c.stale != "" {
		return c.stale
	}
	b, ok := cm.st.base[c.path]
	if !ok {
		return "the project's file could not be read when the workspace first saw the change, so it cannot be checked"
	}
	reason, err := projectMoved(b, dir, name)
	if err != nil {
		return pathReason(err)
	}
	return reason
}

func (cm *committer) delete(c change) {
	dir, name, err := cm.parent(c.path, false)
	if errors.Is(err, unix.ENOENT) {
		cm.applied(c.path, baseline{})
		return // gone already: the project is as the workspace wants it
	}
	if err != nil {
		cm.conflict(c.path, pathReason(err))
		return
	}
	var pst unix.Stat_t
	if unix.Fstatat(dir, name, &pst, unix.AT_SYMLINK_NOFOLLOW) != nil {
		cm.applied(c.path, baseline{})
		return
	}
	if reason := cm.check(c, dir, name); reason != "" {
		cm.conflict(c.path, reason)
		return
	}
	if err := unix.Unlinkat(dir, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		cm.conflict(c.path, pathReason(err))
		return
	}
	cm.applied(c.path, baseline{})
}

// pruneDirs removes the project's directories that held deleted files and
// that the workspace no longer has, when they are empty now.
func (cm *committer) pruneDirs(deletes []change) {
	seen := map[string]bool{}
	var dirs []string
	for _, c := range deletes {
		for d := path.Dir(c.path); d != "." && !seen[d]; d = path.Dir(d) {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	sort.Slice(dirs, func(i, j int) bool { return dirs[i] > dirs[j] })
	for _, d := range dirs {
		if hasDirBeneath(cm.view, d) {
			continue
		}
		pd, name, err := openParent(cm.proj, d)
		if err != nil {
			continue
		}
		if unix.Unlinkat(pd, name, unix.AT_REMOVEDIR) == nil {
			cm.syncLater(path.Dir(d), pd)
		} else {
			unix.Close(pd)
		}
	}
}

func (cm *committer) syncLater(d string, fd int) {
	if d == "." {
		d = ""
	}
	if _, ok := cm.dirs[d]; ok {
		unix.Close(fd)
		return
	}
	cm.dirs[d] = fd
}

// pendingWrite is a file of the commit written to its temporary name and
// not yet renamed into place.
type pendingWrite struct {
	c         change
	dir       int
	name, tmp string
	f         *os.File // the temporary file, open until fsynced (nil: a symlink)
	link      string
	isLink    bool
	h         hash.Hash
	err       error // of the fsync
}

// commitBatch is how many files are written before their fsyncs run
// together; commitSyncers is how many fsyncs run at once (the filesystem
// journal commits concurrent fsyncs together).
const (
	commitBatch   = 128
	commitSyncers = 32
)

// writeAll writes the added and modified files: each batch goes to
// temporary files, is fsynced in parallel, then renamed into place one by
// one (each rename checked against the baseline once more).
func (cm *committer) writeAll(ctx context.Context, writes []change, step func()) error {
	for len(writes) > 0 {
		n := min(len(writes), commitBatch)
		batch := writes[:n]
		writes = writes[n:]
		var ps []*pendingWrite
		for _, c := range batch {
			if err := ctx.Err(); err != nil {
				cm.abandon(ps)
				return err
			}
			if p := cm.prepare(c); p != nil {
				ps = append(ps, p)
			} else {
				step()
			}
		}
		syncAll(ps)
		for _, p := range ps {
			cm.finish(p)
			step()
		}
	}
	return nil
}

// prepare writes c's temporary file, or records why it cannot be
// committed and returns nil.
func (cm *committer) prepare(c change) *pendingWrite {
	vdir, vname, err := openParent(cm.view, c.path)
	if err != nil {
		cm.conflict(c.path, "no longer in the workspace: "+err.Error())
		return nil
	}
	defer unix.Close(vdir)
	var vst unix.Stat_t
	if err := unix.Fstatat(vdir, vname, &vst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		cm.conflict(c.path, "no longer in the workspace")
		return nil
	}
	put := filePut{perm: vst.Mode & 0o7777 &^ (unix.S_ISUID | unix.S_ISGID) &^ umask, atime: vst.Atim, mtime: vst.Mtim}
	p := &pendingWrite{c: c, h: sha256.New()}
	switch vst.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		f, err := openFileAt(vdir, vname)
		if err != nil {
			cm.conflict(c.path, "the workspace's file cannot be read: "+err.Error())
			return nil
		}
		defer f.Close()
		put.content = io.TeeReader(f, p.h)
	case unix.S_IFLNK:
		l, err := readlinkAt(vdir, vname)
		if err != nil {
			cm.conflict(c.path, "the workspace's symlink cannot be read: "+err.Error())
			return nil
		}
		if why := linkLeaves(c.path, l); why != "" {
			cm.conflict(c.path, why)
			return nil
		}
		put.symlink, put.isLink = l, true
		p.link, p.isLink = l, true
	default:
		cm.conflict(c.path, "the workspace holds neither a file nor a symlink there now")
		return nil
	}
	dir, name, err := cm.parent(c.path, true)
	if err != nil {
		cm.conflict(c.path, pathReason(err))
		return nil
	}
	if reason := cm.check(c, dir, name); reason != "" {
		cm.conflict(c.path, reason)
		return nil
	}
	if uid, gid, ok := cm.owner(dir); ok {
		put.uid, put.gid, put.chown = uid, gid, true
	}
	p.dir, p.name, p.tmp = dir, name, cm.w.commitTemp(name)
	p.f, err = createTemp(dir, name, p.tmp, put)
	if err != nil {
		cm.conflict(c.path, pathReason(err))
		return nil
	}
	return p
}

// syncAll fsyncs and closes the temporary files of ps, commitSyncers at
// a time.
func syncAll(ps []*pendingWrite) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, commitSyncers)
	for _, p := range ps {
		if p.f == nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			p.err = p.f.Sync()
			if err := p.f.Close(); p.err == nil {
				p.err = err
			}
			p.f = nil
		}()
	}
	wg.Wait()
}

// abandon removes the temporary files of writes not renamed.
func (cm *committer) abandon(ps []*pendingWrite) {
	for _, p := range ps {
		if p.f != nil {
			p.f.Close()
		}
		_ = unix.Unlinkat(p.dir, p.tmp, 0)
	}
}

// finish renames p's temporary file into place, after checking the
// project's file once more.
func (cm *committer) finish(p *pendingWrite) {
	fail := func(reason string) {
		_ = unix.Unlinkat(p.dir, p.tmp, 0)
		cm.conflict(p.c.path, reason)
	}
	if p.err != nil {
		fail(pathReason(p.err))
		return
	}
	if reason := cm.check(p.c, p.dir, p.name); reason != "" {
		fail(reason)
		return
	}
	var pst unix.Stat_t
	if unix.Fstatat(p.dir, p.name, &pst, unix.AT_SYMLINK_NOFOLLOW) == nil && pst.Mode&unix.S_IFMT == unix.S_IFDIR {
		// The workspace replaced a directory with this file; its files
		// were deleted above, unless some conflicted.
		if unix.Unlinkat(p.dir, p.name, unix.AT_REMOVEDIR) != nil {
			fail("the project has a directory there that is not empty")
			return
		}
	}
	if err := renameTemp(p.dir, p.name, p.tmp); err != nil {
		cm.conflict(p.c.path, pathReason(err))
		return
	}
	if unix.Fstatat(p.dir, p.name, &pst, unix.AT_SYMLINK_NOFOLLOW) != nil {
		cm.applied(p.c.path, baseline{})
		return
	}
	b := baseline{Exists: true, Mode: pst.Mode, Size: pst.Size, MtimeNs: pst.Mtim.Nano(), CtimeNs: pst.Ctim.Nano(), Ino: pst.Ino}
	if p.isLink {
		b.Link = p.link
	} else {
		b.SHA256 = hex.EncodeToString(p.h.Sum(nil))
	}
	cm.applied(p.c.path, b)
}

func (cm *committer) applied(p string, b baseline) {
	cm.res.Applied = append(cm.res.Applied, wireName(p))
	cm.st.base[p] = b
}

// syncDirs fsyncs every project directory the commit wrote, so the
// renames are on disk when the commit answers.
func (cm *committer) syncDirs() error {
	for d, fd := range cm.dirs {
		if err := unix.Fsync(fd); err != nil {
			return fmt.Errorf("fsync the project's directory %s: %w", orDot(d), err)
		}
	}
	return nil
}

func (cm *committer) closeDirs() {
	for _, fd := range cm.dirs {
		unix.Close(fd)
	}
}
