package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	udiff "github.com/aymanbagabas/go-udiff"
	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/gitexport"
)

// Hand-off to git (PROTOCOL.md §10): the changes a workspace/changes call
// lists (the same paths and ignored options) go to workspace/gitexport,
// their content read through the live mount while the file-operation lock
// is held. The project is not touched: exportGit writes objects and one
// branch to its repository, exportPatch writes nothing.

// maxPatchBytes bounds the patch of a project that is not a git repository
// (it travels whole in one JSON string), as gitexport.MaxPatch bounds a git
// repository's.
const maxPatchBytes = gitexport.MaxPatch

// ExportGit is PROTOCOL.md §10 workspace/exportGit: the changes as a commit
// on branch p.Branch of the project's repository (gitexport.Repo.Commit).
func (w *Workspace) ExportGit(ctx context.Context, p protocol.WorkspaceExportGitParams) (*protocol.WorkspaceExportGitResult, error) {
	fail := func(err error) error { return fmt.Errorf("export workspace %s to git: %w", w.id, gitError(err)) }
	repo, err := gitexport.Open(ctx, w.root)
	if err != nil {
		return nil, fail(err)
	}
	msg := p.Message
	if msg == "" {
		name := w.id
		if w.name != "" {
			name = w.name + " (" + w.id + ")"
		}
		msg = "cellbox: the changes of workspace " + name
	}
	var res *gitexport.Result
	err = w.withChanges(ctx, p.Paths, nil, func(cs changeSet) error {
		sel, _ := w.reviewable(ctx, cs.sel, p.Ignored, repo)
		if len(sel) == 0 {
			return fmt.Errorf("%w: no changes to export", ErrInvalid)
		}
		return w.withGitChanges(sel, func(gcs []gitexport.Change) (err error) {
			res, err = repo.Commit(ctx, gcs, gitexport.Options{Branch: p.Branch, Force: p.Force, Message: msg})
			return err
		})
	})
	if err != nil {
		return nil, fail(err)
	}
	w.m.log.Info("workspace exported to git", "workspace", w.id, "branch", p.Branch, "commit", res.Commit, "baseline", res.Baseline, "files", res.Files)
	return &protocol.WorkspaceExportGitResult{Commit: res.Commit, Branch: p.Branch, Baseline: res.Baseline, Files: res.Files}, nil
}

// ExportPatch is workspace/exportPatch (extension of §10): the changes as
// one patch that `git apply` takes in the project directory. In a git
// repository it is git's own (gitexport.Repo.Patch: binary files too, paths
// from the repository's top level); elsewhere it is built from the
// workspace's diffs (plainPatch).
func (w *Workspace) ExportPatch(ctx context.Context, p protocol.WorkspaceExportPatchParams) (*protocol.WorkspaceExportPatchResult, error) {
	fail := func(err error) error { return fmt.Errorf("export workspace %s as a patch: %w", w.id, gitError(err)) }
	repo, err := gitexport.Open(ctx, w.root)
	if err != nil && !errors.Is(err, gitexport.ErrNotRepository) {
		return nil, fail(err)
	}
	res := &protocol.WorkspaceExportPatchResult{}
	err = w.withChanges(ctx, p.Paths, nil, func(cs changeSet) error {
		if repo == nil {
			var err error
			res.Patch, res.Files, err = w.plainPatch(ctx, cs.sel)
			return err
		}
		sel, _ := w.reviewable(ctx, cs.sel, p.Ignored, repo)
		return w.withGitChanges(sel, func(gcs []gitexport.Change) (err error) {
			res.Patch, res.Files, err = repo.Patch(ctx, gcs)
			return err
		})
	})
	if err != nil {
		return nil, fail(err)
	}
	return res, nil
}

// gitError gives gitexport's errors the sentinel rpc maps to a code.
func gitError(err error) error {
	switch {
	case errors.Is(err, gitexport.ErrConflict):
		return &kindError{err, ErrConflict}
	case errors.Is(err, gitexport.ErrInvalid), errors.Is(err, gitexport.ErrNotRepository):
		return &kindError{err, ErrInvalid}
	case errors.Is(err, gitexport.ErrLimit):
		return &kindError{err, ErrLimit}
	}
	return err
}

// kindError is err, also matching kind (errors.Is) without saying so.
type kindError struct{ err, kind error }

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.err, e.kind} }

// withGitChanges runs fn with sel as gitexport changes whose content is
// read through the live mount. The caller holds the lock.
func (w *Workspace) withGitChanges(sel []change, fn func([]gitexport.Change) error) error {
	view, err := w.openView()
	if err != nil {
		return err
	}
	defer unix.Close(view)
	gcs := make([]gitexport.Change, 0, len(sel))
	for _, c := range sel {
		gc := gitexport.Change{Path: c.path, Kind: gitexport.Modified}
		switch {
		case c.kind == protocol.ChangeKindDeleted:
			gc.Kind = gitexport.Deleted
		case c.kind == protocol.ChangeKindAdded:
			gc.Kind = gitexport.Added
		}
		if gc.Kind != gitexport.Deleted {
			switch {
			case c.typ == unix.S_IFLNK:
				gc.Mode = gitexport.Symlink
				dir, name, err := openParent(view, c.path)
				if err != nil {
					return fmt.Errorf("read the symlink %s in the workspace: %w", shortForm(c.path), err)
				}
				gc.Target, err = readlinkAt(dir, name)
				unix.Close(dir)
				if err != nil {
					return fmt.Errorf("read the symlink %s in the workspace: %w", shortForm(c.path), err)
				}
			case c.mode&0o100 != 0:
				gc.Mode = gitexport.Executable
			}
			if gc.Mode != gitexport.Symlink {
				gc.Open = func() (io.ReadCloser, error) {
					dir, name, err := openParent(view, c.path)
					if err != nil {
						return nil, fmt.Errorf("in the workspace: %w", err)
					}
					defer unix.Close(dir)
					f, err := openFileAt(dir, name)
					if err != nil {
						return nil, fmt.Errorf("in the workspace: %w", err)
					}
					return f, nil
				}
			}
		}
		gcs = append(gcs, gc)
	}
	return fn(gcs)
}

// plainPatch is the patch of a project that is not a git repository, in
// git's format so that `git apply` (and patch -p1) take it: a "diff --git"
// header a file, "new file mode", "deleted file mode" or "old mode"/"new
// mode" lines, /dev/null for the side that does not exist, and the unified
// diff in full (none of workspace/diff's limits). A file that is binary, or
// whose content is not UTF-8 (a patch is text in JSON), is left out: each
// is named in a comment line before the first header, which git apply
// passes over. It returns the patch and how many files it holds. The
// caller holds the lock.
func (w *Workspace) plainPatch(ctx context.Context, sel []change) (string, int, error) {
	view, err := w.openView()
	if err != nil {
		return "", 0, err
	}
	defer unix.Close(view)
	proj, err := w.openProject()
	if err != nil {
		return "", 0, err
	}
	defer unix.Close(proj)
	var head, body strings.Builder
	files := 0
	for _, c := range sel {
		if err := ctx.Err(); err != nil {
			return "", 0, err
		}
		var old, new diffSide
		budget := int64(maxPatchBytes - body.Len())
		if c.kind != protocol.ChangeKindAdded {
			if old, err = readSideMax(proj, c.path, budget); err != nil {
				return "", 0, fmt.Errorf("read %s in the project: %w", shortForm(c.path), err)
			}
		}
		if c.kind != protocol.ChangeKindDeleted {
			if new, err = readSideMax(view, c.path, budget); err != nil {
				return "", 0, fmt.Errorf("read %s in the workspace: %w", shortForm(c.path), err)
			}
		}
		// Text sides over what is left of the budget (not read when over
		// it) would make the patch too big; a binary file (the scan read
		// its head) is left out anyway.
		if old.size+new.size > budget && !c.binary {
			return "", 0, fmt.Errorf("%w: the patch is over %d MiB; ask for fewer paths", ErrLimit, maxPatchBytes>>20)
		}
		if !patchable(old) || !patchable(new) {
			fmt.Fprintf(&head, "# binary file not included: %s\n", quotePath(c.path))
			continue
		}
		if old.exists && new.exists && old.mode&unix.S_IFMT != new.mode&unix.S_IFMT {
			// A file became a symlink or the other way: git's patch
			// deletes one and adds the other.
			err = writeFilePatch(&body, c.path, old, diffSide{})
			if err == nil {
				err = writeFilePatch(&body, c.path, diffSide{}, new)
			}
		} else {
			err = writeFilePatch(&body, c.path, old, new)
		}
		if err != nil {
			return "", 0, err
		}
		files++
		if body.Len() > maxPatchBytes {
			return "", 0, fmt.Errorf("%w: the patch is over %d bytes; ask for fewer paths", ErrLimit, maxPatchBytes)
		}
	}
	if head.Len() > 0 {
		head.WriteString("# (a patch is text: cellbox leaves binary files out of the patch of a project that is not a git repository)\n")
	}
	return head.String() + body.String(), files, nil
}

// patchable: the side can be a text patch (missing, or UTF-8 without a
// NUL byte, read whole).
func patchable(s diffSide) bool {
	if !s.exists {
		return true
	}
	if int64(len(s.text)) != s.size || int64(len(s.text)) > maxPatchBytes {
		return false // over the limit, or not read whole
	}
	return utf8.Valid(s.text) && strings.IndexByte(string(s.text), 0) < 0
}

// gitMode is the mode git records for st_mode.
func gitMode(m uint32) string {
	switch {
	case m&unix.S_IFMT == unix.S_IFLNK:
		return "120000"
	case m&0o100 != 0:
		return "100755"
	}
	return "100644"
}

// writeFilePatch writes the git-style patch of one path from old to new.
func writeFilePatch(b *strings.Builder, p string, old, new diffSide) error {
	a, bb := quotePath("a/"+p), quotePath("b/"+p)
	fmt.Fprintf(b, "diff --git %s %s\n", a, bb)
	switch {
	case !old.exists:
		fmt.Fprintf(b, "new file mode %s\n", gitMode(new.mode))
		a = "/dev/null"
	case !new.exists:
		fmt.Fprintf(b, "deleted file mode %s\n", gitMode(old.mode))
		bb = "/dev/null"
	case gitMode(old.mode) != gitMode(new.mode):
		fmt.Fprintf(b, "old mode %s\nnew mode %s\n", gitMode(old.mode), gitMode(new.mode))
	}
	if string(old.text) == string(new.text) {
		return nil
	}
	// udiff.Unified would log.Fatal on an internal error; ToUnified returns it.
	d, err := udiff.ToUnified(a, bb, string(old.text), udiff.Lines(string(old.text), string(new.text)), diffContext)
	if err != nil {
		return fmt.Errorf("diff %s: %w", shortForm(p), err)
	}
	b.WriteString(d)
	return nil
}
