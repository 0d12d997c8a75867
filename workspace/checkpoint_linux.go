package workspace

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Checkpoints: a checkpoint is a saved copy of a workspace's changes,
// on disk under the workspace's state dir (ARCHITECTURE.md constraint 7):
//
//	checkpoints/cp-<16 hex>/
//	    info.json      the protocol's Checkpoint (id, name, createdAt, files,
//	                   bytes, auto, copied)
//	    manifest.json  every change: path, kind, type, mode, mtime, symlink
//	                   target, the stat identity of its upper-layer entry,
//	                   and the baseline the workspace had of it
//	    files/N        the content of entry N (added and modified files)
//	    fingerprint    the upper layer's sum when it was taken (upperState)
//
// Checkpoints are incremental: a change whose upper-layer entry has the
// stat identity (upperstate_linux.go) that the same path has in the newest
// checkpoint is not read again: its files/N is a hard link to that
// checkpoint's. A checkpoint's files are never written once it exists, so
// sharing them is safe, and deleting one checkpoint leaves the others'
// links whole. (Upper-layer files are never linked: overlayfs writes them
// in place.)
//
// A checkpoint is built in checkpoints/.tmp-<id>, its files fsynced (one
// syncfs when it copies many), and renamed into place, so a crash leaves
// either the whole checkpoint or a .tmp- directory that the next
// checkpoint operation removes. Deleting renames to .del-<id> first. At
// most MaxCheckpoints are kept, and MaxAutoCheckpoints automatic ones (a
// ring of their own, see AutoCheckpoint); taking one over its bound
// removes the oldest of its kind.

// checkpointEntry is one change a checkpoint holds.
type checkpointEntry struct {
	Path    string              `json:"path"`
	Kind    protocol.ChangeKind `json:"kind"`
	Symlink bool                `json:"symlink,omitempty"`
	Link    string              `json:"link,omitempty"`
	Mode    uint32              `json:"mode,omitempty"` // permission bits
	Size    int64               `json:"size,omitempty"`
	MtimeNs int64               `json:"mtimeNs,omitempty"`
	File    string              `json:"file,omitempty"` // under files/
	// Upper is the stat identity of the upper-layer entry whose content
	// this is, nil when it was not settled (upperState): the next
	// checkpoint shares the content while the entry keeps it.
	Upper    *statID   `json:"upper,omitempty"`
	Baseline *baseline `json:"baseline,omitempty"`
}

type checkpointManifest struct {
	Entries []checkpointEntry `json:"entries"`
}

// names maps every name in the manifest (paths, link targets, those of
// the baselines) through f: wireName before it is written as JSON,
// fromWire after it is read, so names that are not UTF-8 survive.
func (m *checkpointManifest) names(f func(string) string) {
	for i := range m.Entries {
		e := &m.Entries[i]
		e.Path, e.Link = f(e.Path), f(e.Link)
		if e.Baseline != nil {
			bl := *e.Baseline
			bl.Link = f(bl.Link)
			e.Baseline = &bl
		}
	}
}

func (w *Workspace) checkpointsDir() string { return filepath.Join(w.dir, "checkpoints") }

func (w *Workspace) maxCheckpoints() int {
	if n := w.m.opts.MaxCheckpoints; n > 0 {
		return n
	}
	return DefaultMaxCheckpoints
}

func (w *Workspace) maxAutoCheckpoints() int {
	if n := w.m.opts.MaxAutoCheckpoints; n > 0 {
		return n
	}
	return DefaultMaxAutoCheckpoints
}

// Checkpoint is PROTOCOL.md §3 workspace/checkpoint: it saves the
// workspace's changes as they are now (read through the live mount).
// progress (may be nil) is called after each file.
func (w *Workspace) Checkpoint(ctx context.Context, name string, progress func(done, total int)) (protocol.Checkpoint, error) {
	_, unlock, err := w.lockFiles(ctx)
	if err != nil {
		return protocol.Checkpoint{}, err
	}
	defer unlock()
	us, err := w.upperStateOrNil(ctx)
	if err != nil {
		return protocol.Checkpoint{}, err
	}
	return w.checkpointLocked(ctx, us, name, false, progress)
}

// checkpointLocked takes a checkpoint of every change and prunes those
// over the bounds; us is the upper layer as it was read before (nil: not
// read). The caller holds the file-operation lock.
func (w *Workspace) checkpointLocked(ctx context.Context, us *upperState, name string, auto bool, progress func(done, total int)) (protocol.Checkpoint, error) {
	if err := w.settle(ctx, us); err != nil {
		return protocol.Checkpoint{}, err
	}
	all, err := w.scan(ctx)
	if err != nil {
		return protocol.Checkpoint{}, err
	}
	cp, err := w.saveCheckpoint(ctx, all, us, name, auto, progress)
	if err != nil {
		return protocol.Checkpoint{}, err
	}
	w.pruneCheckpoints()
	return cp, nil
}

// Checkpoints is PROTOCOL.md §3 workspace/checkpoints, oldest first.
func (w *Workspace) Checkpoints() ([]protocol.Checkpoint, error) {
	if w.mode != protocol.WorkspaceModeOverlay {
		return nil, fmt.Errorf("%w: workspace %s is in mode %s: only an overlay workspace has checkpoints", ErrInvalid, w.id, w.mode)
	}
	return w.listCheckpoints()
}

// DeleteCheckpoint is PROTOCOL.md §3 workspace/deleteCheckpoint.
func (w *Workspace) DeleteCheckpoint(ctx context.Context, id string) error {
	_, unlock, err := w.lockFiles(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := w.checkpointDir(id); err != nil {
		return err
	}
	return w.removeCheckpoint(id)
}

// Restore is PROTOCOL.md §3 workspace/restore: the workspace's changes
// become the checkpoint's, through the live mount (so it works while
// kernels run): a change the checkpoint lacks is discarded, a file it holds
// is written back (content, mode, mtime; temporary file and rename), a file
// it deleted is removed. The state before is first saved as a checkpoint
// named "before-restore"; if that cannot be saved the restore is refused
// with ErrConflict (it would overwrite work kept nowhere else). The paths'
// baselines become the checkpoint's, so a project file changed since the
// checkpoint was taken is a conflict at commit. progress (may be nil) is
// called after each path.
func (w *Workspace) Restore(ctx context.Context, id string, progress func(done, total int)) error {
	st, unlock, err := w.lockFiles(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	dir, err := w.checkpointDir(id)
	if err != nil {
		return err
	}
	man, err := w.readManifest(id, dir)
	if err != nil {
		return err
	}
	us, err := w.upperStateOrNil(ctx)
	if err != nil {
		return err
	}
	if err := w.settle(ctx, us); err != nil {
		return err
	}
	all, err := w.scan(ctx)
	if err != nil {
		return err
	}
	if _, err := w.saveCheckpoint(ctx, all, us, "before-restore", false, nil); err != nil {
		return fmt.Errorf("%w: restore of workspace %s refused: the current changes could not be kept as checkpoint before-restore: %v", ErrConflict, w.id, err)
	}
	proj, err := w.openProject()
	if err != nil {
		return err
	}
	defer unix.Close(proj)

	target := make(map[string]*checkpointEntry, len(man.Entries))
	for i := range man.Entries {
		e := &man.Entries[i]
		if _, err := checkRel(e.Path); err != nil || e.Path == "." {
			return fmt.Errorf("checkpoint %s of workspace %s: bad path %q in its manifest", id, w.id, e.Path)
		}
		target[e.Path] = e
	}
	var toProject []string
	for _, c := range all {
		if target[c.path] == nil {
			toProject = append(toProject, c.path)
		}
	}
	total := len(toProject) + len(man.Entries)
	done := 0
	step := func() {
		done++
		if progress != nil {
			progress(done, total)
		}
	}
	// Removals first, deepest first, then writes: a directory the
	// checkpoint has where a file is now (or the reverse) is emptied
	// before it is replaced.
	var removes, writes []*checkpointEntry
	for i := range man.Entries {
		e := &man.Entries[i]
		if e.Kind == protocol.ChangeKindDeleted {
			removes = append(removes, e)
		} else {
			writes = append(writes, e)
		}
	}
	sort.Slice(removes, func(i, j int) bool { return removes[i].Path > removes[j].Path })
	for _, e := range removes {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := w.viewRemove(e.Path, proj, false); err != nil {
			return err
		}
		step()
	}
	if _, err := w.matchProject(ctx, proj, toProject, step); err != nil {
		return err
	}
	for _, p := range toProject {
		delete(st.base, p)
	}
	sort.Slice(writes, func(i, j int) bool { return writes[i].Path < writes[j].Path })
	for _, e := range writes {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := w.restoreEntry(dir, e, proj); err != nil {
			return err
		}
		step()
	}
	for _, e := range man.Entries {
		if e.Baseline != nil {
			st.base[e.Path] = *e.Baseline
		} else {
			delete(st.base, e.Path)
		}
	}
	if err := w.saveBaselines(st.base); err != nil {
		return err
	}
	w.pruneCheckpoints()
	w.m.log.Info("workspace restored", "workspace", w.id, "checkpoint", id, "paths", total)
	return nil
}

// restoreEntry writes a checkpoint's file back into the view.
func (w *Workspace) restoreEntry(dir string, e *checkpointEntry, proj int) error {
	mtime := unix.NsecToTimespec(e.MtimeNs)
	put := filePut{perm: e.Mode, atime: mtime, mtime: mtime}
	if e.Symlink {
		put.symlink, put.isLink = e.Link, true
	} else {
		f, err := os.Open(filepath.Join(dir, "files", e.File))
		if err != nil {
			return fmt.Errorf("restore %s: %w", e.Path, err)
		}
		defer f.Close()
		put.content = f
	}
	return w.viewPut(e.Path, put, proj)
}

// readManifest reads the manifest of checkpoint id, in directory dir.
func (w *Workspace) readManifest(id, dir string) (checkpointManifest, error) {
	var man checkpointManifest
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return man, fmt.Errorf("read checkpoint %s of workspace %s: %w", id, w.id, err)
	}
	if err := json.Unmarshal(b, &man); err != nil {
		return man, fmt.Errorf("read checkpoint %s of workspace %s: %w", id, w.id, err)
	}
	man.names(fromWire)
	return man, nil
}

// syncEach is how many copied files a checkpoint fsyncs one by one; past
// it, one syncfs of the state's filesystem makes the rest durable (10,000
// fsyncs cost seconds, one syncfs a flush).
const syncEach = 64

// sharedFrom is the newest checkpoint, whose files a new one may share.
type sharedFrom struct {
	id, dir string
	entries map[string]*checkpointEntry // by path, those with an identity
}

// newSharedFrom keeps the entries of checkpoint id (in dir) that have an
// identity, copied (without their baselines).
func newSharedFrom(id, dir string, entries []checkpointEntry) *sharedFrom {
	sf := &sharedFrom{id: id, dir: dir, entries: make(map[string]*checkpointEntry, len(entries))}
	for _, e := range entries {
		if e.Upper != nil && e.Kind != protocol.ChangeKindDeleted {
			e.Baseline = nil
			sf.entries[e.Path] = &e
		}
	}
	return sf
}

// newestShared is the newest checkpoint's entries that have an identity
// (none: nil, and nothing is shared): those the last checkpoint taken
// left in memory when it is still the newest, else read from its
// manifest. The caller holds the file-operation lock.
func (w *Workspace) newestShared() *sharedFrom {
	cps, err := w.listCheckpoints()
	if err != nil || len(cps) == 0 {
		return nil
	}
	id := cps[len(cps)-1].CheckpointID
	st := w.fileState()
	if st.newest != nil && st.newest.id == id {
		return st.newest
	}
	dir := filepath.Join(w.checkpointsDir(), id)
	man, err := w.readManifest(id, dir)
	if err != nil {
		w.m.log.Warn("checkpoint without sharing: the newest checkpoint cannot be read", "workspace", w.id, "err", err)
		return nil
	}
	st.newest = newSharedFrom(id, dir, man.Entries)
	return st.newest
}

// share makes e (the change c, at files/N of tmp) the newest checkpoint's
// entry of the same path, when the upper layer's entry there still has
// the identity that one recorded: a hard link to its file, or its link
// target. It says whether it did.
func (sf *sharedFrom) share(c *change, id statID, e *checkpointEntry, tmp string) bool {
	if sf == nil {
		return false
	}
	old := sf.entries[c.path]
	if old == nil || *old.Upper != id || old.Symlink != (c.typ == unix.S_IFLNK) {
		return false
	}
	if !old.Symlink {
		if old.File == "" || os.Link(filepath.Join(sf.dir, "files", old.File), filepath.Join(tmp, "files", e.File)) != nil {
			return false // too many links, say: copied instead
		}
	} else {
		e.File = ""
	}
	e.Symlink, e.Link, e.Mode, e.Size, e.MtimeNs = old.Symlink, old.Link, old.Mode, old.Size, old.MtimeNs
	e.Upper = &id
	return true
}

// saveCheckpoint writes the changes cs (as the view holds them now) as a
// new checkpoint; us is the upper layer as read before cs was (nil: not
// read, so nothing is shared and the checkpoint has no fingerprint).
func (w *Workspace) saveCheckpoint(ctx context.Context, cs []change, us *upperState, name string, auto bool, progress func(done, total int)) (protocol.Checkpoint, error) {
	st := w.fileState()
	root := w.checkpointsDir()
	if err := os.MkdirAll(root, 0o700); err != nil {
		return protocol.Checkpoint{}, fmt.Errorf("create %s: %w", root, err)
	}
	w.cleanCheckpointTemps()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	now := time.Now().UTC()
	cp := protocol.Checkpoint{CheckpointID: "cp-" + hex.EncodeToString(b), Name: name, CreatedAt: now, Auto: auto}
	if cp.Name == "" {
		cp.Name = "checkpoint " + now.Format("2006-01-02 15:04:05")
		if auto {
			cp.Name = "automatic " + now.Format("2006-01-02 15:04:05")
		}
	}
	tmp := filepath.Join(root, ".tmp-"+cp.CheckpointID)
	if err := os.MkdirAll(filepath.Join(tmp, "files"), 0o700); err != nil {
		return protocol.Checkpoint{}, fmt.Errorf("create checkpoint %s: %w", cp.CheckpointID, err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(tmp)
		}
	}()
	view, err := w.openView()
	if err != nil {
		return protocol.Checkpoint{}, err
	}
	defer unix.Close(view)
	var shared *sharedFrom
	if us != nil && len(us.ids) > 0 {
		shared = w.newestShared()
	}
	var man checkpointManifest
	for i := range cs {
		c := &cs[i]
		if err := ctx.Err(); err != nil {
			return protocol.Checkpoint{}, err
		}
		e := checkpointEntry{Path: c.path, Kind: c.kind}
		if bl, ok := st.base[c.path]; ok {
			e.Baseline = &bl
		}
		if c.kind != protocol.ChangeKindDeleted {
			e.File = strconv.Itoa(i)
			var id statID
			var known bool
			if us != nil {
				id, known = us.ids[c.path]
			}
			if !known || !shared.share(c, id, &e, tmp) {
				err := copyFromView(view, c.path, filepath.Join(tmp, "files", e.File), &e, cp.Copied < syncEach)
				if errors.Is(err, unix.ENOENT) {
					continue // removed by code in the sandbox since the scan
				}
				if err != nil {
					return protocol.Checkpoint{}, fmt.Errorf("checkpoint %s of workspace %s: copy %s: %w", cp.CheckpointID, w.id, c.path, err)
				}
				if known {
					e.Upper = &id
				}
				cp.Copied++
			}
			cp.Bytes += e.Size
		}
		cp.Files++
		man.Entries = append(man.Entries, e)
		if progress != nil {
			progress(i+1, len(cs))
		}
	}
	if man.Entries == nil {
		man.Entries = []checkpointEntry{}
	}
	newest := newSharedFrom(cp.CheckpointID, filepath.Join(root, cp.CheckpointID), man.Entries)
	man.names(wireName)
	files := []struct {
		name string
		v    any
	}{{"manifest.json", man}, {"info.json", cp}}
	if us != nil && us.sum != "" {
		files = append(files, struct {
			name string
			v    any
		}{"fingerprint", us.sum})
	}
	for _, f := range files {
		if err := writeJSONSynced(filepath.Join(tmp, f.name), f.v); err != nil {
			return protocol.Checkpoint{}, fmt.Errorf("checkpoint %s of workspace %s: %w", cp.CheckpointID, w.id, err)
		}
	}
	if cp.Copied > syncEach {
		if err := syncFS(tmp); err != nil {
			return protocol.Checkpoint{}, fmt.Errorf("checkpoint %s of workspace %s: %w", cp.CheckpointID, w.id, err)
		}
	}
	for _, d := range []string{filepath.Join(tmp, "files"), tmp} {
		if err := syncDir(d); err != nil {
			return protocol.Checkpoint{}, err
		}
	}
	if err := os.Rename(tmp, filepath.Join(root, cp.CheckpointID)); err != nil {
		return protocol.Checkpoint{}, fmt.Errorf("checkpoint %s of workspace %s: %w", cp.CheckpointID, w.id, err)
	}
	ok = true
	st.newest = newest
	if err := syncDir(root); err != nil {
		return protocol.Checkpoint{}, err
	}
	w.m.log.Info("checkpoint taken", "workspace", w.id, "checkpoint", cp.CheckpointID, "name", cp.Name, "auto", auto,
		"files", cp.Files, "copied", cp.Copied, "bytes", cp.Bytes)
	return cp, nil
}

// copyFromView copies the view's file or symlink rel to dst (a symlink: only
// its target, into e), filling e's type, mode, size and mtime; sync: fsync
// the copy.
func copyFromView(view int, rel, dst string, e *checkpointEntry, sync bool) error {
	dir, name, err := openParent(view, rel)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	e.Mode, e.MtimeNs = st.Mode&0o7777, st.Mtim.Nano()
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		l, err := readlinkAt(dir, name)
		if err != nil {
			return err
		}
		e.Symlink, e.Link, e.File, e.Size = true, l, "", int64(len(l))
		return nil
	case unix.S_IFREG:
	default:
		return unix.ENOENT // no longer a file: as if removed
	}
	src, err := openFileAt(dir, name)
	if err != nil {
		return err
	}
	defer src.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	e.Size, err = io.Copy(out, src)
	if err == nil && sync {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncFS makes everything written to the filesystem of dir durable.
func syncFS(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Syncfs(fd); err != nil {
		return fmt.Errorf("syncfs %s: %w", dir, err)
	}
	return nil
}

// writeJSONSynced writes v as JSON to a new file p, streamed (a manifest
// of 100,000 entries is tens of MB), and fsyncs it.
func writeJSONSynced(p string, v any) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	err = json.NewEncoder(bw).Encode(v)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(d string) error {
	f, err := os.Open(d)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", d, err)
	}
	return nil
}

// checkpointDir is the directory of checkpoint id (ErrNotFound if none).
func (w *Workspace) checkpointDir(id string) (string, error) {
	if !strings.HasPrefix(id, "cp-") || strings.ContainsAny(id, "/\x00") || id == "cp-" {
		return "", fmt.Errorf("%w: checkpoint %q in workspace %s", ErrNotFound, id, w.id)
	}
	dir := filepath.Join(w.checkpointsDir(), id)
	if _, err := os.Stat(filepath.Join(dir, "info.json")); err != nil {
		return "", fmt.Errorf("%w: checkpoint %q in workspace %s", ErrNotFound, id, w.id)
	}
	return dir, nil
}

// listCheckpoints reads every checkpoint's info, oldest first.
func (w *Workspace) listCheckpoints() ([]protocol.Checkpoint, error) {
	entries, err := os.ReadDir(w.checkpointsDir())
	if errors.Is(err, os.ErrNotExist) {
		return []protocol.Checkpoint{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the checkpoints of workspace %s: %w", w.id, err)
	}
	out := []protocol.Checkpoint{}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "cp-") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(w.checkpointsDir(), e.Name(), "info.json"))
		if err != nil {
			continue
		}
		var cp protocol.Checkpoint
		if json.Unmarshal(b, &cp) != nil || cp.CheckpointID != e.Name() {
			continue
		}
		out = append(out, cp)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// removeCheckpoint deletes a checkpoint: renamed away first, so it is
// never seen half removed.
func (w *Workspace) removeCheckpoint(id string) error {
	dir := filepath.Join(w.checkpointsDir(), id)
	gone := filepath.Join(w.checkpointsDir(), ".del-"+id)
	if err := os.Rename(dir, gone); err != nil {
		return fmt.Errorf("delete checkpoint %s of workspace %s: %w", id, w.id, err)
	}
	if err := os.RemoveAll(gone); err != nil {
		return fmt.Errorf("delete checkpoint %s of workspace %s: %w", id, w.id, err)
	}
	return nil
}

// pruneCheckpoints removes the oldest checkpoints over the bounds: user
// checkpoints over MaxCheckpoints, automatic ones over MaxAutoCheckpoints.
func (w *Workspace) pruneCheckpoints() {
	cps, err := w.listCheckpoints()
	if err != nil {
		return
	}
	var user, auto []protocol.Checkpoint
	for _, cp := range cps {
		if cp.Auto {
			auto = append(auto, cp)
		} else {
			user = append(user, cp)
		}
	}
	prune := func(cps []protocol.Checkpoint, max int, why string) {
		for i := 0; i < len(cps)-max; i++ {
			if err := w.removeCheckpoint(cps[i].CheckpointID); err != nil {
				w.m.log.Warn("cannot remove a checkpoint over the bound", "workspace", w.id, "err", err)
				continue
			}
			w.m.log.Info("oldest checkpoint removed ("+why+")", "workspace", w.id, "checkpoint", cps[i].CheckpointID, "max", max)
		}
	}
	prune(user, w.maxCheckpoints(), "over --max-checkpoints")
	prune(auto, w.maxAutoCheckpoints(), "over the automatic checkpoints kept")
}

// cleanCheckpointTemps removes what a killed checkpoint or delete left.
func (w *Workspace) cleanCheckpointTemps() {
	entries, _ := os.ReadDir(w.checkpointsDir())
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") || strings.HasPrefix(e.Name(), ".del-") {
			_ = os.RemoveAll(filepath.Join(w.checkpointsDir(), e.Name()))
		}
	}
}
