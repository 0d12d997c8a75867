package kernel

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// TestProjectInterpreterFilesUntrusted: what a project names (a .venv's
// interpreter, .nvmrc) may have been written by a sandbox, so the daemon
// never runs it on the host, never follows a version file's symbolic link
// (whose target's text would reach the client) and never blocks on a FIFO
// there; and kernels whose driver is built in take no interpreter.
func TestProjectInterpreterFilesUntrusted(t *testing.T) {
	ws, m := interpManagers(t)

	t.Run("a .venv's interpreter does not run on the host", func(t *testing.T) {
		evil, markers := homeTemp(t), homeTemp(t)
		marker := filepath.Join(markers, "ran-on-the-host")
		script := "#!/bin/sh\ntouch " + marker + " 2>/dev/null\nexec /usr/bin/python3 \"$@\"\n"
		if err := os.MkdirAll(filepath.Join(evil, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(evil, "bin", "python3"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		project := t.TempDir()
		makeVenv(t, "/usr/bin/python3", project)
		venv := filepath.Join(project, ".venv")
		for _, name := range []string{"python", "python3"} {
			p := filepath.Join(venv, "bin", name)
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(evil, "bin", "python3"), p); err != nil {
				t.Fatal(err)
			}
		}
		cfg := "home = " + filepath.Join(evil, "bin") + "\ninclude-system-site-packages = false\n"
		if err := os.WriteFile(filepath.Join(venv, "pyvenv.cfg"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		s := &sink{}
		k, err := m.Start(context.Background(), protocol.KernelStartParams{Language: "python", WorkspaceID: openProject(t, ws, project)}, s)
		if err == nil {
			defer m.Shutdown(context.Background(), k.ID())
			run(t, k, s, "1")
		}
		if _, serr := os.Stat(marker); serr == nil {
			t.Fatalf("the project's interpreter ran on the host (kernel/start: %v)", err)
		}
	})

	t.Run("a version file's symbolic link is not followed", func(t *testing.T) {
		secret := filepath.Join(t.TempDir(), "credentials")
		if err := os.WriteFile(secret, []byte("https://user:SECRET-TOKEN@example.com\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		project := t.TempDir()
		if err := os.Symlink(secret, filepath.Join(project, ".nvmrc")); err != nil {
			t.Fatal(err)
		}
		k, _ := startKernel(t, m, protocol.KernelStartParams{Language: "javascript", WorkspaceID: openProject(t, ws, project)})
		in := k.StartResult().Interpreter
		if in == nil || in.Source != SourceSystem || in.Warning == "" || strings.Contains(in.Warning, "SECRET") {
			t.Fatalf("interpreter %+v: want the host's node, with a warning that does not quote the link's target", in)
		}
	})

	t.Run("a FIFO for a version file does not block", func(t *testing.T) {
		project := t.TempDir()
		if err := syscall.Mkfifo(filepath.Join(project, ".nvmrc"), 0o644); err != nil {
			t.Fatal(err)
		}
		done := make(chan *Kernel, 1)
		go func() {
			k, err := m.Start(context.Background(), protocol.KernelStartParams{Language: "javascript", WorkspaceID: openProject(t, ws, project)}, &sink{})
			if err != nil {
				t.Error(err)
			}
			done <- k
		}()
		select {
		case k := <-done:
			if k != nil {
				defer m.Shutdown(context.Background(), k.ID())
				if in := k.StartResult().Interpreter; in == nil || !strings.Contains(in.Warning, "not a regular file") {
					t.Fatalf("interpreter %+v: want the host's node, with a warning", in)
				}
			}
		case <-time.After(2 * time.Minute):
			t.Fatal("kernel/start blocked on the project's FIFO")
		}
	})

	t.Run("kernels with a built-in driver take no interpreter", func(t *testing.T) {
		for _, lang := range []string{"sql", "go"} {
			_, err := m.Start(context.Background(), protocol.KernelStartParams{Language: lang, Interpreter: "/usr/bin/python3"}, &sink{})
			if lang == "go" && errors.Is(err, ErrLanguage) {
				continue // no go on this host: nothing to refuse
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "interpreter") {
				t.Errorf("%s with an interpreter: %v; want invalid params naming it", lang, err)
			}
		}
	})
}
