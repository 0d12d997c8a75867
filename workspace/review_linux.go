package workspace

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"path"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/gitexport"
)

// What workspace/changes and workspace/diff show of the scan's changes
// (README.md, "Renames and ignored paths"):
//
//   - Ignored paths are left out unless asked for: when the project is in
//     a git repository, the paths its ignore rules ignore (one `git
//     check-ignore` for the whole list, which reads .gitignore files,
//     .git/info/exclude and core.excludesFile; a tracked file is never
//     ignored), a deleted path as much as an added one, and every path
//     with a .git component (a repository's own files, which git never
//     shows). A project outside any repository hides nothing. When git
//     fails, nothing is hidden (and the daemon logs why).
//   - Renames are paired: a deleted file and an added one of the same
//     type and the same content (sizes compared first, then SHA-256 of
//     both; exact renames only, and not empty files, which would pair by
//     chance). Both entries stay; the added one names the deleted one in
//     renamedFrom, the deleted one the added one in renamedTo. Among equal
//     contents, a pair with the same base name is preferred, then path
//     order. commit, discard and checkpoints still take each path alone.

// ListChanges is PROTOCOL.md §3 workspace/changes: the changes (sorted by
// path) with renames paired, and how many changes of ignored paths were
// left out.
func (w *Workspace) ListChanges(ctx context.Context, o ChangeOptions) ([]protocol.Change, int, error) {
	var out []protocol.Change
	var hidden int
	err := w.withChanges(ctx, o.Paths, nil, func(cs changeSet) error {
		var sel []change
		sel, hidden = w.reviewable(ctx, cs.sel, o.Ignored, nil)
		from, to := w.pairRenames(sel)
		out = make([]protocol.Change, len(sel))
		for i, c := range sel {
			out[i] = c.protocol()
			if p, ok := from[c.path]; ok {
				out[i].RenamedFrom = wireName(p)
			}
			if p, ok := to[c.path]; ok {
				out[i].RenamedTo = wireName(p)
			}
		}
		return nil
	})
	return out, hidden, err
}

// DiffChanges is PROTOCOL.md §3 workspace/diff of the changes o chooses.
func (w *Workspace) DiffChanges(ctx context.Context, o ChangeOptions) ([]protocol.FileDiff, error) {
	var out []protocol.FileDiff
	err := w.withChanges(ctx, o.Paths, nil, func(cs changeSet) (err error) {
		sel, _ := w.reviewable(ctx, cs.sel, o.Ignored, nil)
		out, err = w.diff(ctx, sel)
		return err
	})
	return out, err
}

// reviewable leaves out the changes of ignored paths unless ignored, and
// returns the others and how many were left out. repo is the project's
// repository when the caller has it open (nil: found here).
func (w *Workspace) reviewable(ctx context.Context, sel []change, ignored bool, repo *gitexport.Repo) ([]change, int) {
	if ignored || len(sel) == 0 {
		return sel, 0
	}
	if repo == nil {
		var err error
		if repo, err = gitexport.Open(ctx, w.root); err != nil {
			if !errors.Is(err, gitexport.ErrNotRepository) {
				w.m.log.Warn("ignored paths not hidden: the project's repository cannot be read", "workspace", w.id, "error", err)
			}
			return sel, 0
		}
	}
	paths := make([]string, 0, len(sel))
	for _, c := range sel {
		if !gitexport.GitPath(c.path) {
			paths = append(paths, c.path)
		}
	}
	ign, err := repo.Ignored(ctx, paths)
	if err != nil {
		w.m.log.Warn("ignored paths not hidden", "workspace", w.id, "error", err)
		ign = nil
	}
	kept := make([]change, 0, len(sel))
	for _, c := range sel {
		if !ign[c.path] && !gitexport.GitPath(c.path) {
			kept = append(kept, c)
		}
	}
	return kept, len(sel) - len(kept)
}

// renameKey is what an exact rename keeps: type, size and content.
type renameKey struct {
	typ  uint32
	size int64
	sum  [sha256.Size]byte
}

// pairRenames pairs deleted and added files of sel with the same content:
// from maps an added path to the deleted one, to the other way. Only
// files whose type and size match a file of the other kind are hashed
// (the added ones in the upper layer, the deleted ones in the project),
// each once. The caller holds the lock.
func (w *Workspace) pairRenames(sel []change) (from, to map[string]string) {
	type shape struct {
		typ  uint32
		size int64
	}
	shapes := map[shape]uint8{} // bit 1: a deletion has it, bit 2: an addition
	for _, c := range sel {
		if c.size == 0 && c.typ == unix.S_IFREG {
			continue
		}
		switch c.kind {
		case protocol.ChangeKindDeleted:
			shapes[shape{c.typ, c.size}] |= 1
		case protocol.ChangeKindAdded:
			shapes[shape{c.typ, c.size}] |= 2
		}
	}
	var cands []change
	for _, c := range sel {
		if c.kind != protocol.ChangeKindModified && shapes[shape{c.typ, c.size}] == 3 {
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return nil, nil
	}
	up, err := unix.Open(w.UpperDir(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil
	}
	defer unix.Close(up)
	proj, err := w.openProject()
	if err != nil {
		return nil, nil
	}
	defer unix.Close(proj)

	deleted := map[renameKey][]string{} // in path order
	var added []struct {
		path string
		key  renameKey
	}
	for _, c := range cands {
		root := up
		if c.kind == protocol.ChangeKindDeleted {
			root = proj
		}
		sum, ok := contentSum(root, c.path, c.typ)
		if !ok {
			continue
		}
		k := renameKey{c.typ, c.size, sum}
		if c.kind == protocol.ChangeKindDeleted {
			deleted[k] = append(deleted[k], c.path)
		} else {
			added = append(added, struct {
				path string
				key  renameKey
			}{c.path, k})
		}
	}
	from, to = map[string]string{}, map[string]string{}
	for _, a := range added {
		list := deleted[a.key]
		if len(list) == 0 {
			continue
		}
		pick := 0
		for i, d := range list {
			if path.Base(d) == path.Base(a.path) {
				pick = i
				break
			}
		}
		d := list[pick]
		deleted[a.key] = slices.Delete(list, pick, pick+1)
		from[a.path], to[d] = d, a.path
	}
	return from, to
}

// contentSum is the SHA-256 of a regular file's content or a symlink's
// target at rel below root, read without following a symlink.
func contentSum(root int, rel string, typ uint32) ([sha256.Size]byte, bool) {
	var sum [sha256.Size]byte
	dir, name, err := openParent(root, rel)
	if err != nil {
		return sum, false
	}
	defer unix.Close(dir)
	h := sha256.New()
	if typ == unix.S_IFLNK {
		l, err := readlinkAt(dir, name)
		if err != nil {
			return sum, false
		}
		io.WriteString(h, l)
	} else {
		f, err := openFileAt(dir, name)
		if err != nil {
			return sum, false
		}
		defer f.Close()
		if _, err := io.Copy(h, f); err != nil {
			return sum, false
		}
	}
	h.Sum(sum[:0])
	return sum, true
}
