package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Diff is PROTOCOL.md §3 workspace/diff: the unified diff of each change
// (or of those at or below paths), the project's file against the
// workspace's as the live mount shows it. See diff.go for the limits.
// Ignored paths are left out (DiffChanges).
func (w *Workspace) Diff(ctx context.Context, paths []string) ([]protocol.FileDiff, error) {
	return w.DiffChanges(ctx, ChangeOptions{Paths: paths})
}

// diff is Diff of the changes sel; the caller holds the lock.
func (w *Workspace) diff(ctx context.Context, sel []change) ([]protocol.FileDiff, error) {
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
func readSide(root int, rel string) (diffSide, error) { return readSideMax(root, rel, maxDiffInput) }

// readSideMax is readSide with the content read when the file holds at
// most limit bytes.
func readSideMax(root int, rel string, limit int64) (diffSide, error) {
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
		if st.Size > limit {
			return s, nil
		}
		f, err := openFileAt(dir, name)
		if err != nil {
			return diffSide{}, err
		}
		defer f.Close()
		s.text, err = io.ReadAll(io.LimitReader(f, limit+1))
		if err != nil {
			return diffSide{}, err
		}
		s.size = int64(len(s.text))
	}
	return s, nil
}
