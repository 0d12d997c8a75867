package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/export"
	"github.com/cellbox-dev/cellbox/workspace/gitexport"
)

// Export is PROTOCOL.md §11 workspace/export: the workspace as its
// sandbox sees it (the live mount, read by descriptors: no symlink is
// followed, special files are left out), without the paths the project's
// git ignores, and its /env, written as a bundle at p.Dest by
// workspace/export. The sandbox is started if it is not running; the
// project is not touched. A dest or base where a sandbox can write (see
// exportRefused) is refused before anything is written.
func (w *Workspace) Export(ctx context.Context, p protocol.WorkspaceExportParams, progress ExportProgress) (*protocol.WorkspaceExportResult, error) {
	fail := func(err error) error {
		return fmt.Errorf("export workspace %s to %s: %w", w.id, shortForm(p.Dest), exportError(err))
	}
	if err := CheckExport(p); err != nil {
		return nil, err
	}
	if withinReal(w.root, p.Dest) {
		// The project is the overlay's lower layer: writing there while
		// it is mounted is undefined, and the walk would meet the bundle.
		return nil, fail(fmt.Errorf("%w: dest is inside the workspace's project %s; give a directory outside it", ErrInvalid, w.root))
	}
	if why := w.m.exportRefused(p.Dest); why != "" {
		return nil, fail(fmt.Errorf("%w: dest is %s; give a directory outside it", ErrInvalid, why))
	}
	if p.Base != "" {
		for _, b := range []string{p.Base, baseDir(p.Base)} {
			if why := w.m.exportRefused(b); why != "" {
				return nil, fail(fmt.Errorf("%w: base is %s; copy the image layout outside it", ErrInvalid, why))
			}
		}
	}
	start := time.Now()
	view, err := w.openView()
	if err != nil {
		return nil, fail(err)
	}
	defer unix.Close(view)
	defer w.fileOps.Add(1)
	o := export.Options{
		Tree: &fdTree{root: view}, Dest: p.Dest, Format: string(p.Format),
		Command: p.Command, Port: p.Port, Base: p.Base, Progress: progress,
	}
	// /env is a mount of the sandbox's own root, beside /workspace.
	if sb, err := unix.Openat(view, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		env, err := openDirBeneath(sb, "env", unix.O_PATH)
		unix.Close(sb)
		if err == nil {
			defer unix.Close(env)
			o.Env = &fdTree{root: env}
		}
	}
	if w.mode != protocol.WorkspaceModeScratch {
		repo, err := gitexport.Open(ctx, w.root)
		switch {
		case err == nil:
			o.Ignored = repo.Ignored
		case !errors.Is(err, gitexport.ErrNotRepository):
			// As workspace/changes does: nothing is hidden, and the log says why.
			w.m.log.Warn("export: ignored paths not left out: the project's repository cannot be read", "workspace", w.id, "error", err)
		}
	}
	res, err := export.Write(ctx, o)
	if err != nil {
		return nil, fail(err)
	}
	out := &protocol.WorkspaceExportResult{Path: res.Path, Files: res.Files, Bytes: res.Bytes, Command: res.App.Command, App: res.App.Kind}
	if res.Image != nil {
		out.Image = &protocol.ExportImage{Digest: res.Image.Digest, Layout: res.Image.Layout, Base: res.Image.Base}
	}
	w.m.log.Info("workspace exported", "workspace", w.id, "dest", p.Dest, "format", p.Format, "app", res.App.Kind,
		"files", res.Files, "bytes", res.Bytes, "skipped", res.Skipped, "duration_ms", time.Since(start).Milliseconds())
	return out, nil
}

// withinReal reports whether path is root or below it, as the host resolves
// them (symlinks in either, and in path's existing parents, followed).
func withinReal(root, path string) bool {
	real := func(p string) string {
		var rest []string
		for {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				return filepath.Join(append([]string{r}, rest...)...)
			}
			parent := filepath.Dir(p)
			if parent == p {
				return p
			}
			rest = append([]string{filepath.Base(p)}, rest...)
			p = parent
		}
	}
	r, p := real(root), real(path)
	return p == r || strings.HasPrefix(p, r+string(filepath.Separator))
}

// exportRefused says why an export may not write (dest) or read (base)
// at path, "" if it may: below the daemon's state directory (the
// workspaces' upper layers, scratch directories) or its hidden ones, or
// below the project of a workspace open. A sandbox can write there, and
// could swap a directory of the bundle for a symlink while the daemon
// writes (or reads) by path.
func (m *Manager) exportRefused(path string) string {
	for _, h := range m.hidden {
		if withinReal(h, path) {
			return "inside cellbox's state or runtime directory " + h + ", which sandboxes write"
		}
	}
	m.mu.Lock()
	var open []*Workspace
	for _, w := range m.open {
		open = append(open, w)
	}
	m.mu.Unlock()
	for _, w := range open {
		for _, d := range []string{w.dir, w.root} {
			if withinReal(d, path) {
				return "inside " + d + ", a directory of the open workspace " + w.id + " (its sandbox, or a commit, writes there)"
			}
		}
	}
	return ""
}

// baseDir is the directory of base ("DIR" or "DIR:TAG").
func baseDir(base string) string {
	if i := strings.LastIndexByte(base, ':'); i > strings.LastIndexByte(base, '/') {
		return base[:i]
	}
	return base
}

// exportError gives export's errors the sentinel rpc maps to a code.
func exportError(err error) error {
	switch {
	case errors.Is(err, export.ErrInvalid):
		return &kindError{err, ErrInvalid}
	case errors.Is(err, export.ErrLimit):
		return &kindError{err, ErrLimit}
	}
	return err
}

// fdTree is a directory held open (the view, /env) as an export.Tree:
// every path is resolved below it with no symlink followed (openat2
// RESOLVE_BENEATH, at_linux.go), Open opens only regular files and
// directories (a FIFO swapped in never blocks), and ReadDir gives the
// entries' types without following them.
type fdTree struct{ root int }

var _ export.Tree = (*fdTree)(nil)

func checkTreePath(op, name string) error {
	if name == "" || strings.HasPrefix(name, "/") || strings.IndexByte(name, 0) >= 0 {
		return &fs.PathError{Op: op, Path: shortForm(name), Err: fs.ErrInvalid}
	}
	for _, c := range strings.Split(name, "/") {
		if c == "" || c == ".." || (c == "." && name != ".") {
			return &fs.PathError{Op: op, Path: shortForm(name), Err: fs.ErrInvalid}
		}
	}
	return nil
}

// maxExportDirEntries bounds a directory an export lists (what the
// sandbox wrote), before its names are held; a variable for the tests.
var maxExportDirEntries = 200000

func (t *fdTree) Open(name string) (fs.File, error) {
	if err := checkTreePath("open", name); err != nil {
		return nil, err
	}
	if name == "." {
		return t.openDir(name)
	}
	dir, base, err := openParent(t.root, name)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	f, err := openFileAt(dir, base)
	if errors.Is(err, errNotRegular) {
		var st unix.Stat_t
		if unix.Fstatat(dir, base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return t.openDir(name)
		}
		return nil, &fs.PathError{Op: "open", Path: shortForm(name), Err: export.ErrReplaced}
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (t *fdTree) openDir(name string) (*os.File, error) {
	fd, err := openDirBeneath(t.root, name, unix.O_RDONLY)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: shortForm(name), Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

func (t *fdTree) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := checkTreePath("readdir", name); err != nil {
		return nil, err
	}
	fd, err := openDirBeneath(t.root, name, unix.O_RDONLY)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: shortForm(name), Err: err}
	}
	defer unix.Close(fd)
	ents, err := readDirents(fd, maxExportDirEntries)
	if errors.Is(err, errTooManyEntries) {
		return nil, fmt.Errorf("%w: the directory %s holds more than %d entries", export.ErrLimit, shortForm(name), maxExportDirEntries)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: shortForm(name), Err: err}
	}
	out := make([]fs.DirEntry, 0, len(ents))
	for _, e := range ents {
		typ, ok := direntType(e.typ)
		if !ok {
			var st unix.Stat_t
			if unix.Fstatat(fd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				continue // gone since
			}
			typ = fileMode(st.Mode) & fs.ModeType
		}
		out = append(out, &fdDirEntry{t: t, dir: name, name: e.name, typ: typ})
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

func (t *fdTree) Lstat(name string) (fs.FileInfo, error) {
	if err := checkTreePath("lstat", name); err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if name == "." {
		if err := unix.Fstat(t.root, &st); err != nil {
			return nil, &fs.PathError{Op: "lstat", Path: name, Err: err}
		}
		return &fdFileInfo{name: ".", st: st}, nil
	}
	dir, base, err := openParent(t.root, name)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	if err := unix.Fstatat(dir, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: shortForm(name), Err: err}
	}
	return &fdFileInfo{name: base, st: st}, nil
}

func (t *fdTree) ReadLink(name string) (string, error) {
	if err := checkTreePath("readlink", name); err != nil {
		return "", err
	}
	dir, base, err := openParent(t.root, name)
	if err != nil {
		return "", err
	}
	defer unix.Close(dir)
	return readlinkAt(dir, base)
}

// direntType is a d_type's fs.FileMode type bits (ok false: unknown).
func direntType(t uint8) (fs.FileMode, bool) {
	switch t {
	case unix.DT_REG:
		return 0, true
	case unix.DT_DIR:
		return fs.ModeDir, true
	case unix.DT_LNK:
		return fs.ModeSymlink, true
	case unix.DT_FIFO:
		return fs.ModeNamedPipe, true
	case unix.DT_SOCK:
		return fs.ModeSocket, true
	case unix.DT_CHR:
		return fs.ModeDevice | fs.ModeCharDevice, true
	case unix.DT_BLK:
		return fs.ModeDevice, true
	}
	return 0, false
}

// fileMode is st_mode as an fs.FileMode.
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	}
	return mode
}

type fdDirEntry struct {
	t         *fdTree
	dir, name string
	typ       fs.FileMode
}

func (e *fdDirEntry) Name() string      { return e.name }
func (e *fdDirEntry) IsDir() bool       { return e.typ.IsDir() }
func (e *fdDirEntry) Type() fs.FileMode { return e.typ }
func (e *fdDirEntry) Info() (fs.FileInfo, error) {
	p := e.name
	if e.dir != "." {
		p = e.dir + "/" + e.name
	}
	return e.t.Lstat(p)
}

type fdFileInfo struct {
	name string
	st   unix.Stat_t
}

func (i *fdFileInfo) Name() string       { return i.name }
func (i *fdFileInfo) Size() int64        { return i.st.Size }
func (i *fdFileInfo) Mode() fs.FileMode  { return fileMode(i.st.Mode) }
func (i *fdFileInfo) ModTime() time.Time { return time.Unix(i.st.Mtim.Unix()) }
func (i *fdFileInfo) IsDir() bool        { return i.st.Mode&unix.S_IFMT == unix.S_IFDIR }
func (i *fdFileInfo) Sys() any           { return &i.st }
