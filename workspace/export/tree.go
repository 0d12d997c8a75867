package export

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Tree is a read-only file tree, the workspace as its sandbox sees it:
// ReadDir lists a directory with its entries' types and Lstat and
// ReadLink never follow a symlink; Open opens a regular file (an
// implementation over sandboxed content refuses anything else, and never
// follows a symlink). os.DirFS is one (for trusted trees).
type Tree interface {
	fs.ReadDirFS
	fs.ReadLinkFS
}

// Ignorer says which of paths (relative, slash-separated; a directory
// ends in "/") the project ignores.
type Ignorer func(ctx context.Context, paths []string) (map[string]bool, error)

// Bounds of the tree an export copies (what the sandbox wrote).
const (
	maxTreeBytes  = 4 << 30
	maxPath       = 1024 // bytes of a path in the tree (and of dest)
	maxLinkTarget = 4096
	maxDetectRead = 256 << 10 // of a top-level file that detection reads
)

// Variables so that the tests can lower them.
var (
	// maxFiles bounds the entries copied: files, symlinks and
	// directories.
	maxFiles = 200000
	// maxHeads bounds the heads of top-level scripts kept for detection
	// (past it, other scripts' heads are not kept); the main scripts'
	// (pyMains, nodeMains), requirements.txt and package.json are kept
	// apart from it.
	maxHeads = 16 << 20
)

// keepHead says whether detection or writePackages reads the top-level
// file name, and how much of it: requirements.txt and package.json whole
// (up to maxJSONRead, past which the export fails), a script's head
// (maxDetectRead). counted: the head counts towards maxHeads.
func keepHead(name string) (limit int64, whole, counted bool) {
	switch {
	case name == "requirements.txt" || name == "package.json":
		return maxJSONRead, true, false
	case slices.Contains(pyMains, name) || slices.Contains(nodeMains, name):
		return maxDetectRead, false, false
	case strings.HasSuffix(name, ".py") || strings.HasSuffix(name, ".js") || strings.HasSuffix(name, ".mjs"):
		return maxDetectRead, false, true
	}
	return 0, false, false
}

// skipNames are never copied: a repository's own files, and what the
// bundle's installs make again (the Dockerfile's and README's npm install
// and venv), which .dockerignore also keeps out.
var skipNames = []string{".git", "node_modules", "__pycache__", ".venv", ".ipynb_checkpoints"}

func skipName(name string) bool {
	return slices.ContainsFunc(skipNames, func(s string) bool { return strings.EqualFold(s, name) })
}

// item is one entry of a level of the walk.
type item struct {
	rel string
	typ fs.FileMode
}

// copyTree copies the tree to app/, a level of directories at a time so
// that one Ignored call decides each level (an ignored directory is not
// walked at all).
func (x *exporter) copyTree(ctx context.Context) error {
	if err := os.Mkdir(x.app, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", x.app, err)
	}
	x.top = map[string][]byte{}
	level := []string{"."}
	var bytes int64
	for len(level) > 0 {
		var items []item
		for _, dir := range level {
			if err := ctx.Err(); err != nil {
				return err
			}
			ents, err := x.o.Tree.ReadDir(dir)
			if dir != "." && changed(err) {
				// Gone since its level was listed (the app runs on).
				_ = os.Remove(filepath.Join(x.app, filepath.FromSlash(dir)))
				x.res.Skipped++
				continue
			}
			if err != nil {
				return fmt.Errorf("list %s in the workspace: %w", short(dir), err)
			}
			for _, e := range ents {
				name := e.Name()
				if skipName(name) || name == "" || strings.ContainsAny(name, "/\x00") {
					continue
				}
				rel := name
				if dir != "." {
					rel = dir + "/" + name
				}
				if len(rel) > maxPath {
					return fmt.Errorf("%w: the path %s is longer than %d bytes", ErrLimit, short(rel), maxPath)
				}
				items = append(items, item{rel, e.Type()})
				if x.entries+len(items) > maxFiles {
					return fmt.Errorf("%w: more than %d files and directories in the workspace", ErrLimit, maxFiles)
				}
			}
		}
		ign, err := x.ignored(ctx, items)
		if err != nil {
			return err
		}
		level = level[:0:0]
		for _, it := range items {
			if ign[it.rel] {
				continue
			}
			dst := filepath.Join(x.app, filepath.FromSlash(it.rel))
			switch {
			case it.typ.IsDir():
				if err := os.Mkdir(dst, 0o755); err != nil {
					return fmt.Errorf("create %s: %w", short(it.rel), err)
				}
				x.entries++
				level = append(level, it.rel)
			case it.typ&fs.ModeSymlink != 0:
				target, err := x.o.Tree.ReadLink(it.rel)
				if changed(err) {
					x.res.Skipped++
					continue
				}
				if err != nil {
					return fmt.Errorf("read the symlink %s in the workspace: %w", short(it.rel), err)
				}
				if len(target) > maxLinkTarget || strings.IndexByte(target, 0) >= 0 {
					return fmt.Errorf("%w: the symlink %s has a target longer than %d bytes", ErrLimit, short(it.rel), maxLinkTarget)
				}
				// Written as it is, never followed: a link out of the
				// workspace stays a link.
				if err := os.Symlink(target, dst); err != nil {
					return fmt.Errorf("write the symlink %s: %w", short(it.rel), err)
				}
				x.entries++
				x.res.Files++
			case it.typ.IsRegular():
				n, gone, err := x.copyFile(ctx, it.rel, dst, maxTreeBytes-bytes)
				if err != nil {
					return err
				}
				if gone {
					x.res.Skipped++
					continue
				}
				bytes += n
			default:
				x.res.Skipped++ // FIFOs, sockets, devices
			}
		}
	}
	return nil
}

// changed says whether err is the tree changing under the walk: an entry
// listed is gone (a temporary file, a journal, a rotated log), or is of
// another type now. Such an entry is left out, as a copy made a moment
// later would have it; anything else fails the export.
func changed(err error) bool {
	return err != nil && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrReplaced) ||
		errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EINVAL))
}

// ignored asks the Ignorer about one level (directories with a "/" at
// the end, so that a pattern like "build/" matches one the project does
// not have).
func (x *exporter) ignored(ctx context.Context, items []item) (map[string]bool, error) {
	if x.o.Ignored == nil || len(items) == 0 {
		return nil, nil
	}
	paths := make([]string, len(items))
	for i, it := range items {
		paths[i] = it.rel
		if it.typ.IsDir() {
			paths[i] += "/"
		}
	}
	got, err := x.o.Ignored(ctx, paths)
	if err != nil {
		return nil, fmt.Errorf("read which paths the project ignores: %w", err)
	}
	out := make(map[string]bool, len(got))
	for p, ign := range got {
		if ign {
			out[strings.TrimSuffix(p, "/")] = true
		}
	}
	return out, nil
}

// copyFile copies the regular file rel to dst (mode 0644, or 0755 when it
// is executable) and returns its size; budget is what the tree may still
// hold. The copy ends with ctx. gone: the file changed under the walk
// (changed) and was not copied.
func (x *exporter) copyFile(ctx context.Context, rel, dst string, budget int64) (n int64, gone bool, err error) {
	f, err := x.o.Tree.Open(rel)
	if changed(err) {
		return 0, true, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("open %s in the workspace: %w", short(rel), err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, false, fmt.Errorf("stat %s in the workspace: %w", short(rel), err)
	}
	if !st.Mode().IsRegular() {
		return 0, true, nil
	}
	mode := os.FileMode(0o644)
	if st.Mode()&0o100 != 0 {
		mode = 0o755
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return 0, false, fmt.Errorf("write %s: %w", short(rel), err)
	}
	var r io.Reader = io.LimitReader(ctxReader{ctx, f}, budget+1)
	if limit, whole, counted := keepHead(rel); limit > 0 && !strings.Contains(rel, "/") && (!counted || x.heads < maxHeads) {
		// Detection and writePackages read these top-level files: their
		// heads are kept (a bounded few), requirements.txt and
		// package.json whole.
		if counted {
			limit = min(limit, int64(maxHeads-x.heads))
		}
		read, err := io.ReadAll(io.LimitReader(f, limit+1))
		if err != nil {
			out.Close()
			return 0, false, fmt.Errorf("copy %s: %w", short(rel), err)
		}
		if whole && int64(len(read)) > limit {
			out.Close()
			return 0, false, fmt.Errorf("%w: the workspace's %s is over %d MiB, more than an export reads", ErrLimit, rel, limit>>20)
		}
		head := slices.Clone(read[:min(int64(len(read)), limit)])
		if counted {
			x.heads += len(head)
		}
		x.top[rel] = head
		r = io.MultiReader(bytes.NewReader(read), io.LimitReader(ctxReader{ctx, f}, budget+1-int64(len(read))))
	}
	n, err = io.Copy(out, r)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, false, fmt.Errorf("copy %s: %w", short(rel), err)
	}
	if n > budget {
		return 0, false, fmt.Errorf("%w: the workspace's files are over %d GiB", ErrLimit, maxTreeBytes>>30)
	}
	x.entries++
	x.res.Files++
	x.res.Bytes += n
	return n, false, nil
}

// ctxReader is r until ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// short is a path for a message: a long one is cut in the middle.
func short(p string) string {
	if len(p) <= 200 {
		return p
	}
	return p[:100] + fmt.Sprintf("...(%d bytes)...", len(p)-200) + p[len(p)-100:]
}
