package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cellbox-dev/cellbox/protocol"
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
