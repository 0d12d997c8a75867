package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/export"
)

// TestExportRefusesSandboxDirs: an export writes (dest) and reads (base)
// nowhere a sandbox can write: the state directory (the workspaces' upper
// layers), and the directories of the workspaces open; the refusal comes
// before anything is written or a sandbox started.
func TestExportRefusesSandboxDirs(t *testing.T) {
	state, project, other := t.TempDir(), t.TempDir(), t.TempDir()
	m, err := NewManager(Options{StateDir: state, DefaultRoot: project, NoPool: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	ctx := context.Background()
	w, err := m.Open(ctx, protocol.WorkspaceOpenParams{Root: project})
	if err != nil {
		t.Fatal(err)
	}
	ow, err := m.Open(ctx, protocol.WorkspaceOpenParams{Root: other, Mode: protocol.WorkspaceModeDirect, AllowDirect: true})
	if err != nil {
		t.Fatal(err)
	}
	scratch, err := m.Open(ctx, protocol.WorkspaceOpenParams{Mode: protocol.WorkspaceModeScratch})
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "to-state")
	if err := os.Symlink(state, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, dest, base, want string
	}{
		{"the state dir", filepath.Join(state, "out"), "", "state or runtime directory"},
		{"an upper layer", filepath.Join(w.UpperDir(), "bundle"), "", "state or runtime directory"},
		{"a scratch workspace", filepath.Join(scratch.Info().Root, "bundle"), "", "state or runtime directory"},
		{"through a symlink", filepath.Join(link, "workspaces", "x"), "", "state or runtime directory"},
		{"another workspace's project", filepath.Join(other, "dist"), "", "open workspace " + ow.ID()},
		{"a base in the state dir", filepath.Join(t.TempDir(), "ok"), filepath.Join(state, "img") + ":3.11-slim", "base is inside cellbox's state"},
		{"a base in an open project", filepath.Join(t.TempDir(), "ok"), filepath.Join(other, "img"), "base is inside " + other},
	} {
		format := protocol.ExportDir
		if c.base != "" {
			format = protocol.ExportOCI
		}
		_, err := w.Export(ctx, protocol.WorkspaceExportParams{Dest: c.dest, Format: format, Base: c.base}, nil)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalid saying %q", c.name, err, c.want)
		}
		if _, err := os.Lstat(c.dest); err == nil {
			t.Errorf("%s: %s was made", c.name, c.dest)
		}
	}
	w.mu.Lock()
	started := w.sb != nil
	w.mu.Unlock()
	if started {
		t.Error("a refused export started the sandbox")
	}
}

// TestExportTreeBounds: the tree an export reads lists a directory only
// within a bound (an error, before the names are held), and a path that
// is not a regular file any more is ErrReplaced, which the export skips.
func TestExportTreeBounds(t *testing.T) {
	defer func(old int) { maxExportDirEntries = old }(maxExportDirEntries)
	maxExportDirEntries = 10
	dir := t.TempDir()
	for i := range 11 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	tree := &fdTree{root: fd}
	if _, err := tree.ReadDir("."); !errors.Is(err, export.ErrLimit) {
		t.Errorf("a directory of 12 entries past a bound of 10: %v, want export.ErrLimit", err)
	}
	maxExportDirEntries = 12
	if ents, err := tree.ReadDir("."); err != nil || len(ents) != 12 {
		t.Errorf("12 entries within a bound of 12: %d, %v", len(ents), err)
	}
	if _, err := tree.Open("fifo"); !errors.Is(err, export.ErrReplaced) {
		t.Errorf("open a FIFO: %v, want export.ErrReplaced", err)
	}
}
