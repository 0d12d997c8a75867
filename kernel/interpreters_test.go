package kernel

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
	"github.com/cellbox-dev/cellbox/workspace/sandbox/sandboxtest"
)

// The user's own interpreters with real ones: a project's venv, a venv
// whose base interpreter lives outside /usr (bound read-only), an explicit
// interpreter, a bad one, and a .nvmrc. TestInterpretersAsUser runs them
// as an unprivileged user.

func interpManagers(t *testing.T) (*workspace.Manager, *Manager) {
	t.Helper()
	ws, err := workspace.NewManager(workspace.Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	m := NewManager(Options{Workspaces: ws, Languages: func() []Language { return DetectLanguages(context.Background()) }})
	// Discarded, so that the overlay's work/work (mode 000) goes too.
	t.Cleanup(func() {
		m.Close()
		for _, info := range ws.List() {
			_ = ws.CloseWorkspace(context.Background(), info.WorkspaceID, true)
		}
		ws.Close()
	})
	return ws, m
}

// openProject opens an overlay workspace on dir.
func openProject(t *testing.T, ws *workspace.Manager, dir string) string {
	t.Helper()
	w, err := ws.Open(context.Background(), protocol.WorkspaceOpenParams{Root: dir, Mode: protocol.WorkspaceModeOverlay})
	if err != nil {
		t.Fatal(err)
	}
	return w.ID()
}

// run executes code and returns its stdout; anything but ok fails.
func run(t *testing.T, k *Kernel, s *sink, code string) string {
	t.Helper()
	res, outs := execProbe(t, k, s, code)
	var b strings.Builder
	for _, o := range outs {
		b.WriteString(o.Text)
	}
	if res.Status != protocol.ExecutionStatusOK {
		t.Fatalf("%q: %+v %s", code, res, b.String())
	}
	return b.String()
}

func startKernel(t *testing.T, m *Manager, p protocol.KernelStartParams) (*Kernel, *sink) {
	t.Helper()
	s := &sink{}
	k, err := m.Start(context.Background(), p, s)
	if err != nil {
		t.Fatalf("kernel/start %+v: %v", p, err)
	}
	t.Cleanup(func() { m.Shutdown(context.Background(), k.ID()) })
	return k, s
}

func mustRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// makeVenv makes a venv at dir/.venv with python and puts the package
// cellbox_probe_pkg (VALUE = 42) into its site-packages.
func makeVenv(t *testing.T, python, dir string) {
	t.Helper()
	venv := filepath.Join(dir, ".venv")
	mustRun(t, python, "-m", "venv", "--without-pip", venv)
	sites, _ := filepath.Glob(filepath.Join(venv, "lib", "python*", "site-packages"))
	if len(sites) != 1 {
		t.Fatalf("site-packages of %s: %v", venv, sites)
	}
	pkg := filepath.Join(sites[0], "cellbox_probe_pkg")
	if err := os.Mkdir(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "__init__.py"), []byte("VALUE = 42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// homeTemp is a temporary directory in the home directory: outside /tmp,
// which a sandbox mounts for itself, so that it can be bound.
func homeTemp(t *testing.T) string {
	t.Helper()
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skipf("no home directory: %v", err)
	}
	dir, err := os.MkdirTemp(home, ".cellbox-interp-test-")
	if err != nil {
		t.Skipf("cannot write to the home directory: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// pythonPrefix builds a python installation outside /usr, as pyenv or uv
// make one: its own binary in DIR/bin (a copy of the host's), its standard
// library found through DIR/lib/pythonX.Y. It returns DIR.
func pythonPrefix(t *testing.T) string {
	t.Helper()
	_, ver := hostPython(t)
	return pythonPrefixAt(t, filepath.Join(homeTemp(t), "python-"+ver))
}

// hostPython is the host's python3, symlinks resolved, and its X.Y.
func hostPython(t *testing.T) (string, string) {
	t.Helper()
	real, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		t.Skipf("no /usr/bin/python3: %v", err)
	}
	return real, strings.TrimSpace(mustRun(t, real, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"))
}

// pythonPrefixAt is pythonPrefix at the directory prefix.
func pythonPrefixAt(t *testing.T, prefix string) string {
	t.Helper()
	real, ver := hostPython(t)
	copyFile(t, real, filepath.Join(prefix, "bin", "python"+ver), 0o755)
	if err := os.Symlink("python"+ver, filepath.Join(prefix, "bin", "python3")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(prefix, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/lib/python"+ver, filepath.Join(prefix, "lib", "python"+ver)); err != nil {
		t.Fatal(err)
	}
	got := strings.TrimSpace(mustRun(t, filepath.Join(prefix, "bin", "python3"), "-c", "import sys; print(sys.prefix)"))
	if got != prefix {
		t.Skipf("a copy of the host's python in %s has sys.prefix %s: this python cannot be relocated", prefix, got)
	}
	return prefix
}

func TestInterpreters(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	t.Run("project venv", func(t *testing.T) {
		ws, m := interpManagers(t)
		project := t.TempDir()
		makeVenv(t, "/usr/bin/python3", project)
		k, s := startKernel(t, m, protocol.KernelStartParams{Language: "python", WorkspaceID: openProject(t, ws, project)})
		in := k.StartResult().Interpreter
		if in == nil || in.Source != SourceVenv || in.Path != filepath.Join(project, ".venv", "bin", "python3") || in.Prefix != "" || in.Warning != "" {
			t.Fatalf("interpreter: %+v", in)
		}
		if got := run(t, k, s, "import sys, cellbox_probe_pkg; print(sys.prefix, cellbox_probe_pkg.VALUE)"); got != "/workspace/.venv 42\n" {
			t.Fatalf("sys.prefix and the venv's package: %q", got)
		}
		// The venv is activated: python in a subprocess is the venv's.
		got := run(t, k, s, "import os, subprocess\nprint(os.environ['VIRTUAL_ENV'], os.environ['PATH'].split(':')[0])\n"+
			"print(subprocess.run(['python', '-c', 'import sys; print(sys.prefix)'], capture_output=True, text=True).stdout, end='')")
		if got != "/workspace/.venv /workspace/.venv/bin\n/workspace/.venv\n" {
			t.Fatalf("the venv activated: %q", got)
		}
		// A restart runs the venv again.
		if err := k.Restart(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := run(t, k, s, "import sys; print(sys.prefix)"); got != "/workspace/.venv\n" {
			t.Fatalf("after a restart: %q", got)
		}
	})

	t.Run("venv with a base outside /usr", func(t *testing.T) {
		prefix := pythonPrefix(t)
		ws, m := interpManagers(t)
		project := t.TempDir()
		makeVenv(t, filepath.Join(prefix, "bin", "python3"), project)
		k, s := startKernel(t, m, protocol.KernelStartParams{Language: "python", WorkspaceID: openProject(t, ws, project)})
		in := k.StartResult().Interpreter
		if in == nil || in.Source != SourceVenv || in.Prefix != prefix {
			t.Fatalf("interpreter: %+v, want the prefix %s", in, prefix)
		}
		got := run(t, k, s, "import sys, os, cellbox_probe_pkg\n"+
			"print(sys.prefix, sys.base_prefix, cellbox_probe_pkg.VALUE)\n"+
			"print(sorted(os.listdir("+pyStr(prefix+"/bin")+")))\n"+
			"try:\n    open("+pyStr(prefix+"/written")+", 'w')\nexcept OSError as e:\n    print('write:', e.errno)\n")
		want := "/workspace/.venv " + prefix + " 42\n['python3', 'python" + filepath.Base(prefix)[len("python-"):] + "']\nwrite: 30\n"
		if got != want {
			t.Fatalf("in the sandbox:\n have %q\n want %q (the prefix readable, read-only: EROFS)", got, want)
		}
		if _, err := os.Stat(filepath.Join(prefix, "written")); err == nil {
			t.Fatal("the sandbox wrote into the bound prefix")
		}
	})

	t.Run("explicit", func(t *testing.T) {
		prefix := pythonPrefix(t)
		_, m := interpManagers(t)
		exe := filepath.Join(prefix, "bin", "python3")
		k, s := startKernel(t, m, protocol.KernelStartParams{Language: "python", Interpreter: exe})
		in := k.StartResult().Interpreter
		if in == nil || in.Source != SourceExplicit || in.Path != exe || in.Prefix != prefix {
			t.Fatalf("interpreter: %+v", in)
		}
		if got := run(t, k, s, "import sys; print(sys.prefix)"); got != prefix+"\n" {
			t.Fatalf("sys.prefix: %q, want %s", got, prefix)
		}
	})

	t.Run("explicit wins over the venv", func(t *testing.T) {
		ws, m := interpManagers(t)
		project := t.TempDir()
		makeVenv(t, "/usr/bin/python3", project)
		k, s := startKernel(t, m, protocol.KernelStartParams{Language: "python", WorkspaceID: openProject(t, ws, project), Interpreter: "/usr/bin/python3"})
		if in := k.StartResult().Interpreter; in == nil || in.Source != SourceExplicit {
			t.Fatalf("interpreter: %+v", in)
		}
		if got := run(t, k, s, "import sys; print(sys.prefix)"); got != "/usr\n" {
			t.Fatalf("sys.prefix: %q", got)
		}
	})

	t.Run("bad explicit", func(t *testing.T) {
		ws, m := interpManagers(t)
		project := t.TempDir()
		notExec := filepath.Join(project, "python3")
		if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		inProject := filepath.Join(project, "python")
		if err := os.WriteFile(inProject, []byte("#!/bin/sh\necho Python 3.11.0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		wsID := openProject(t, ws, project)
		for _, tc := range []struct{ lang, path, want string }{
			{"python", "python3", "not an absolute host path"},
			{"python", "/nonexistent/bin/python3", "no such file"},
			{"python", notExec, "not an executable file"},
			{"python", "/etc", "not an executable file"},
			{"python", "/bin/bash", "not a Python version"},
			{"javascript", "/usr/bin/python3", "not a JavaScript (Node.js) version"},
			{"python", inProject, "file of the project"},
		} {
			_, err := m.Start(context.Background(), protocol.KernelStartParams{Language: tc.lang, WorkspaceID: wsID, Interpreter: tc.path}, &sink{})
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `field "interpreter"`) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s %q: %v, want ErrInvalid saying %q", tc.lang, tc.path, err, tc.want)
			}
		}
		if len(m.List()) != 0 {
			t.Fatalf("kernels left: %+v", m.List())
		}
		// The manager goes on.
		k, s := startKernel(t, m, protocol.KernelStartParams{Language: "python", WorkspaceID: wsID})
		if got := run(t, k, s, "print(1)"); got != "1\n" {
			t.Fatal(got)
		}
	})

	t.Run("broken venv falls back", func(t *testing.T) {
		prefix := pythonPrefix(t)
		ws, m := interpManagers(t)
		project := t.TempDir()
		makeVenv(t, filepath.Join(prefix, "bin", "python3"), project)
		if err := os.RemoveAll(prefix); err != nil {
			t.Fatal(err)
		}
		k, s := startKernel(t, m, protocol.KernelStartParams{Language: "python", WorkspaceID: openProject(t, ws, project)})
		in := k.StartResult().Interpreter
		if in == nil || in.Source != SourceSystem || !strings.Contains(in.Warning, "base interpreter is gone") {
			t.Fatalf("interpreter: %+v", in)
		}
		if got := run(t, k, s, "import sys; print(sys.prefix)"); got != "/usr\n" {
			t.Fatalf("sys.prefix: %q", got)
		}
	})

	// A project (or code in a sandbox, in a direct workspace) names a
	// program of its own as a venv's base: it does not run on the host.
	t.Run("project program as a base", func(t *testing.T) {
		ws, m := interpManagers(t)
		project := homeTemp(t) // outside /tmp, whose prefixes are refused anyway
		marker := filepath.Join(t.TempDir(), "ran")
		venv := filepath.Join(project, ".venv")
		if err := os.MkdirAll(filepath.Join(venv, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(project, "evil", "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		evil := filepath.Join(project, "evil", "bin", "python3")
		if err := os.WriteFile(evil, []byte("#!/bin/sh\ntouch "+marker+"\necho Python 3.11.0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ link, home, want string }{
			{evil, "/nonexistent", "which sandboxes can write"},               // bin/python3 links to it
			{"python3.copy", filepath.Dir(evil), "which sandboxes can write"}, // pyvenv.cfg's home names it
			{"/bin/sh", "/nonexistent", "not named as a Python interpreter"},  // another host program
		} {
			_ = os.Remove(filepath.Join(venv, "bin", "python3"))
			if err := os.Symlink(tc.link, filepath.Join(venv, "bin", "python3")); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(venv, "pyvenv.cfg"), []byte("home = "+tc.home+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			k, _ := startKernel(t, m, protocol.KernelStartParams{Language: "python", WorkspaceID: openProject(t, ws, project)})
			if in := k.StartResult().Interpreter; in == nil || in.Source != SourceSystem || !strings.Contains(in.Warning, tc.want) {
				t.Errorf("bin/python3 -> %s, home %s: interpreter %+v, want a warning saying %q", tc.link, tc.home, in, tc.want)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("the project's program ran on the host")
			}
		}
	})

	t.Run("binds need a sandbox restart", func(t *testing.T) {
		prefix := pythonPrefix(t)
		ws, m := interpManagers(t)
		project := t.TempDir()
		wsID := openProject(t, ws, project)
		// A bash kernel starts the sandbox without binds; a python kernel
		// needing one cannot join it while it runs.
		b, _ := startKernel(t, m, protocol.KernelStartParams{Language: "bash", WorkspaceID: wsID})
		exe := filepath.Join(prefix, "bin", "python3")
		_, err := m.Start(context.Background(), protocol.KernelStartParams{Language: "python", WorkspaceID: wsID, Interpreter: exe}, &sink{})
		if !errors.Is(err, workspace.ErrInvalid) || !strings.Contains(err.Error(), "shut down the workspace's kernels") {
			t.Fatalf("python with a bind beside a running bash: %v", err)
		}
		if err := m.Shutdown(context.Background(), b.ID()); err != nil {
			t.Fatal(err)
		}
		k, s := startKernel(t, m, protocol.KernelStartParams{Language: "python", WorkspaceID: wsID, Interpreter: exe})
		if got := run(t, k, s, "import sys; print(sys.prefix)"); got != prefix+"\n" {
			t.Fatalf("sys.prefix: %q", got)
		}
		// A kernel needing no bind joins the sandbox that has one.
		b, bs := startKernel(t, m, protocol.KernelStartParams{Language: "bash", WorkspaceID: wsID})
		if got := run(t, b, bs, "ls "+prefix+"/bin"); !strings.Contains(got, "python3") {
			t.Fatalf("bash in the sandbox with the bind: %q", got)
		}
	})

	t.Run("project binds at sandbox start", func(t *testing.T) {
		prefix := pythonPrefix(t)
		ws, err := workspace.NewManager(workspace.Options{StateDir: t.TempDir(), ProjectReadOnly: ProjectBinds})
		if err != nil {
			t.Fatal(err)
		}
		m := NewManager(Options{Workspaces: ws, Languages: func() []Language { return DetectLanguages(context.Background()) }})
		t.Cleanup(func() {
			m.Close()
			for _, info := range ws.List() {
				_ = ws.CloseWorkspace(context.Background(), info.WorkspaceID, true)
			}
			ws.Close()
		})
		project := t.TempDir()
		makeVenv(t, filepath.Join(prefix, "bin", "python3"), project)
		wsID := openProject(t, ws, project)
		w, err := ws.Get(wsID)
		if err != nil {
			t.Fatal(err)
		}
		// A program (as a terminal) starts the sandbox first and runs on;
		// the sandbox already binds the venv's base, so the venv's python
		// runs there and a python kernel joins.
		r, wr, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		proc, err := w.Spawn(context.Background(), workspace.ProcSpec{Argv: []string{"/bin/sh", "-c", ".venv/bin/python -c 'import sys; print(sys.base_prefix)'; exec sleep 1000"}, Stdout: wr})
		wr.Close()
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = proc.SignalTree(syscall.SIGKILL); _, _ = proc.Wait() }()
		line, err := bufio.NewReader(r).ReadString('\n')
		if err != nil || line != prefix+"\n" {
			t.Fatalf("the venv's python in a program of the sandbox: %q, %v", line, err)
		}
		k, s := startKernel(t, m, protocol.KernelStartParams{Language: "python", WorkspaceID: wsID})
		if got := run(t, k, s, "import sys; print(sys.prefix, sys.base_prefix)"); got != "/workspace/.venv "+prefix+"\n" {
			t.Fatalf("the kernel beside it: %q", got)
		}
	})

	t.Run("venv outside the project", func(t *testing.T) {
		ws, m := interpManagers(t)
		envs := homeTemp(t)
		makeVenv(t, "/usr/bin/python3", envs)
		venv := filepath.Join(envs, ".venv")
		// Named explicitly, and linked from the project's .venv.
		k, s := startKernel(t, m, protocol.KernelStartParams{Language: "python", Interpreter: filepath.Join(venv, "bin", "python")})
		if in := k.StartResult().Interpreter; in == nil || in.Source != SourceExplicit || in.Path != filepath.Join(venv, "bin", "python") {
			t.Fatalf("explicit: interpreter %+v", in)
		}
		if got := run(t, k, s, "import sys, cellbox_probe_pkg; print(sys.prefix, cellbox_probe_pkg.VALUE)"); got != venv+" 42\n" {
			t.Fatalf("explicit: %q", got)
		}
		project := t.TempDir()
		if err := os.Symlink(venv, filepath.Join(project, ".venv")); err != nil {
			t.Fatal(err)
		}
		k, s = startKernel(t, m, protocol.KernelStartParams{Language: "python", WorkspaceID: openProject(t, ws, project)})
		if in := k.StartResult().Interpreter; in == nil || in.Source != SourceVenv || in.Path != filepath.Join(venv, "bin", "python3") {
			t.Fatalf(".venv linking out: interpreter %+v", in)
		}
		if got := run(t, k, s, "import sys, cellbox_probe_pkg; print(sys.prefix, cellbox_probe_pkg.VALUE)"); got != venv+" 42\n" {
			t.Fatalf(".venv linking out: %q", got)
		}
	})

	t.Run("python-version", func(t *testing.T) {
		_, ver := hostPython(t)
		pyenv := filepath.Join(homeTemp(t), ".pyenv")
		prefix := pythonPrefixAt(t, filepath.Join(pyenv, "versions", ver+".99"))
		t.Setenv("PYENV_ROOT", pyenv)
		ws, m := interpManagers(t)
		for _, named := range []string{ver + ".99", ver} {
			project := t.TempDir()
			if err := os.WriteFile(filepath.Join(project, ".python-version"), []byte(named+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			k, s := startKernel(t, m, protocol.KernelStartParams{Language: "python", WorkspaceID: openProject(t, ws, project)})
			if in := k.StartResult().Interpreter; in == nil || in.Source != SourceVersionFile || in.Prefix != prefix {
				t.Fatalf(".python-version %s: interpreter %+v", named, in)
			}
			if got := run(t, k, s, "import sys; print(sys.prefix)"); got != prefix+"\n" {
				t.Fatalf(".python-version %s: sys.prefix %q", named, got)
			}
		}
		project := t.TempDir()
		if err := os.WriteFile(filepath.Join(project, ".python-version"), []byte("2.1.0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		k, _ := startKernel(t, m, protocol.KernelStartParams{Language: "python", WorkspaceID: openProject(t, ws, project)})
		if in := k.StartResult().Interpreter; in == nil || in.Source != SourceSystem || !strings.Contains(in.Warning, "python 2.1.0: not installed") {
			t.Fatalf("a missing version: interpreter %+v", in)
		}
	})

	// A venv of a real pyenv python, where the host has one.
	t.Run("pyenv venv", func(t *testing.T) {
		var base protocol.InterpreterInfo
		for _, in := range HostInterpreters(nil) {
			if in.Source == "pyenv" && in.Prefix != "" && checkPrefix(in.Prefix, languageSpecs[0]) == nil {
				base = in
			}
		}
		if base.Path == "" {
			t.Skip("no pyenv python installed")
		}
		ws, m := interpManagers(t)
		project := t.TempDir()
		makeVenv(t, base.Path, project)
		k, s := startKernel(t, m, protocol.KernelStartParams{Language: "python", WorkspaceID: openProject(t, ws, project)})
		if in := k.StartResult().Interpreter; in == nil || in.Source != SourceVenv || in.Prefix != base.Prefix {
			t.Fatalf("interpreter: %+v, want the prefix %s", in, base.Prefix)
		}
		want := "/workspace/.venv " + base.Prefix + " 42\n"
		if got := run(t, k, s, "import sys, cellbox_probe_pkg; print(sys.prefix, sys.base_prefix, cellbox_probe_pkg.VALUE)"); got != want {
			t.Fatalf("have %q, want %q", got, want)
		}
	})

	// Each pyenv python the host has, named explicitly, runs a kernel.
	t.Run("pyenv versions", func(t *testing.T) {
		var found []protocol.InterpreterInfo
		for _, in := range HostInterpreters(nil) {
			if in.Source == "pyenv" && in.Prefix != "" && checkPrefix(in.Prefix, languageSpecs[0]) == nil {
				found = append(found, in)
			}
		}
		if len(found) == 0 {
			t.Skip("no pyenv python installed")
		}
		_, m := interpManagers(t)
		for _, in := range found {
			s := &sink{}
			k, err := m.Start(context.Background(), protocol.KernelStartParams{Language: "python", Interpreter: in.Path}, s)
			if compareVersions(in.Version, "3.8") < 0 {
				// The driver needs 3.8: a clear error, not a dead kernel.
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "older than 3.8") {
					t.Errorf("pyenv %s: %v, want ErrInvalid saying it is older than 3.8", in.Version, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("pyenv %s: %v", in.Version, err)
				continue
			}
			got := run(t, k, s, "import sys; print('%d.%d.%d' % sys.version_info[:3], sys.prefix)")
			if want := in.Version + " " + in.Prefix + "\n"; got != want {
				t.Errorf("pyenv %s: have %q, want %q", in.Version, got, want)
			}
			_ = m.Shutdown(context.Background(), k.ID())
		}
	})

	t.Run("nvmrc", func(t *testing.T) {
		node, err := filepath.EvalSymlinks("/usr/bin/node")
		if err != nil {
			t.Skip("no /usr/bin/node")
		}
		version := strings.TrimSpace(mustRun(t, node, "--version"))
		nvm := filepath.Join(homeTemp(t), ".nvm")
		prefix := filepath.Join(nvm, "versions", "node", version)
		copyFile(t, node, filepath.Join(prefix, "bin", "node"), 0o755)
		if got := strings.TrimSpace(mustRun(t, filepath.Join(prefix, "bin", "node"), "--version")); got != version {
			t.Fatalf("a copy of node says %s, the host's %s", got, version)
		}
		t.Setenv("NVM_DIR", nvm)
		ws, m := interpManagers(t)
		major, _, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
		for _, named := range []string{version, major} {
			project := t.TempDir()
			if err := os.WriteFile(filepath.Join(project, ".nvmrc"), []byte(named+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			k, s := startKernel(t, m, protocol.KernelStartParams{Language: "javascript", WorkspaceID: openProject(t, ws, project)})
			in := k.StartResult().Interpreter
			if in == nil || in.Source != SourceVersionFile || in.Prefix != prefix || in.Version != strings.TrimPrefix(version, "v") {
				t.Fatalf(".nvmrc %s: interpreter %+v", named, in)
			}
			if got := run(t, k, s, "console.log(process.execPath, process.env.PATH.split(':')[0])"); got != filepath.Join(prefix, "bin", "node")+" "+filepath.Join(prefix, "bin")+"\n" {
				t.Fatalf(".nvmrc %s: process.execPath and PATH %q", named, got)
			}
		}
		// A version not installed: the host's node, with a warning.
		project := t.TempDir()
		if err := os.WriteFile(filepath.Join(project, ".node-version"), []byte("v1.2.3\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		k, s := startKernel(t, m, protocol.KernelStartParams{Language: "javascript", WorkspaceID: openProject(t, ws, project)})
		in := k.StartResult().Interpreter
		if in == nil || in.Source != SourceSystem || !strings.Contains(in.Warning, "node 1.2.3: not installed") {
			t.Fatalf("a missing version: interpreter %+v", in)
		}
		if got := run(t, k, s, "console.log(process.execPath.startsWith('/usr/'))"); got != "true\n" {
			t.Fatalf("a missing version runs %q", got)
		}
	})
}

// TestInterpreterWithoutHostLanguage: a host without node on PATH runs
// the node a project's .nvmrc names, or kernel/start's; else -32014.
func TestInterpreterWithoutHostLanguage(t *testing.T) {
	node, err := filepath.EvalSymlinks("/usr/bin/node")
	if err != nil {
		t.Skip("no /usr/bin/node")
	}
	version := strings.TrimSpace(mustRun(t, node, "--version"))
	nvm := filepath.Join(homeTemp(t), ".nvm")
	prefix := filepath.Join(nvm, "versions", "node", version)
	copyFile(t, node, filepath.Join(prefix, "bin", "node"), 0o755)
	t.Setenv("NVM_DIR", nvm)
	ws, err := workspace.NewManager(workspace.Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	m := NewManager(Options{Workspaces: ws, Languages: func() []Language {
		langs := DetectLanguages(context.Background())
		for i := range langs {
			if langs[i].ID == "javascript" {
				langs[i] = Language{ID: "javascript", DisplayName: langs[i].DisplayName, FileExtensions: langs[i].FileExtensions, Reason: "node not found on PATH"}
			}
		}
		return langs
	}})
	t.Cleanup(func() {
		m.Close()
		for _, info := range ws.List() {
			_ = ws.CloseWorkspace(context.Background(), info.WorkspaceID, true)
		}
		ws.Close()
	})
	project := t.TempDir()
	if err := os.WriteFile(filepath.Join(project, ".nvmrc"), []byte(version+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	k, s := startKernel(t, m, protocol.KernelStartParams{Language: "javascript", WorkspaceID: openProject(t, ws, project)})
	if got := run(t, k, s, "console.log(process.execPath)"); got != filepath.Join(prefix, "bin", "node")+"\n" {
		t.Fatalf(".nvmrc: %q", got)
	}
	k, s = startKernel(t, m, protocol.KernelStartParams{Language: "javascript", Interpreter: filepath.Join(prefix, "bin", "node")})
	if got := run(t, k, s, "console.log(1 + 1)"); got != "2\n" {
		t.Fatalf("explicit: %q", got)
	}
	// No interpreter of the user's: the language is unavailable, saying why.
	empty := t.TempDir()
	if err := os.WriteFile(filepath.Join(empty, ".nvmrc"), []byte("1.2.3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{t.TempDir(), empty} {
		_, err := m.Start(context.Background(), protocol.KernelStartParams{Language: "javascript", WorkspaceID: openProject(t, ws, dir)}, &sink{})
		if !errors.Is(err, ErrLanguage) || !strings.Contains(err.Error(), "node not found on PATH") {
			t.Fatalf("no node at all: %v", err)
		}
		if dir == empty && !strings.Contains(err.Error(), "node 1.2.3: not installed") {
			t.Fatalf("no node at all, .nvmrc naming a missing one: %v", err)
		}
	}
	if len(m.List()) != 2 {
		t.Fatalf("kernels: %+v", m.List())
	}
}

func TestInterpretersAsUser(t *testing.T) {
	if sandboxtest.AsTestUser() {
		t.Skip("already the test user")
	}
	sandboxtest.RunAsTestUser(t, "^(TestInterpreters|TestInterpreterWithoutHostLanguage|TestProjectInterpreterFilesUntrusted)$")
}

// pyStr quotes s as a Python string literal.
func pyStr(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func TestPrefixRules(t *testing.T) {
	python, _ := specOf("python")
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip(err)
	}
	base := homeTemp(t)
	good := filepath.Join(base, "py")
	if err := os.MkdirAll(filepath.Join(good, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(good, "bin", "python3"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkPrefix(good, python); err != nil {
		t.Fatalf("%s: %v", good, err)
	}
	for _, bad := range []string{"/", "/home", "/opt", home, filepath.Join(home, ".ssh"), filepath.Join(home, ".config", "x"), filepath.Join(home, ".local"), base, "/tmp/x", "/etc/python3"} {
		if err := checkPrefix(bad, python); err == nil {
			t.Errorf("prefix %s accepted", bad)
		}
	}
	// Virtual environments of poetry live in ~/.cache.
	cached := filepath.Join(home, ".cache", "cellbox-interp-test", "py")
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(cached)) })
	if err := os.MkdirAll(filepath.Join(cached, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cached, "bin", "python3"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkPrefix(cached, python); err != nil {
		t.Errorf("%s: %v", cached, err)
	}
}

// BenchmarkProjectBinds: what a workspace's sandbox start spends on its
// project's interpreters (workspace.Options.ProjectReadOnly), for a
// project with none and one with a .venv (whose base's --version runs).
func BenchmarkProjectBinds(b *testing.B) {
	for _, venv := range []bool{false, true} {
		name := "none"
		if venv {
			name = "venv"
		}
		b.Run(name, func(b *testing.B) {
			project := b.TempDir()
			if venv {
				if out, err := exec.Command("/usr/bin/python3", "-m", "venv", "--without-pip", filepath.Join(project, ".venv")).CombinedOutput(); err != nil {
					b.Skipf("python3 -m venv: %v\n%s", err, out)
				}
			}
			for b.Loop() {
				ProjectBinds(project, nil)
			}
		})
	}
}
