package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cellbox-dev/cellbox/protocol"
)

// makeVenv makes DIR/.venv with the host's python and a package
// cellbox_probe_pkg (VALUE = 42) in its site-packages.
func makeVenv(t *testing.T, dir string) {
	t.Helper()
	venv := filepath.Join(dir, ".venv")
	if out, err := exec.Command("/usr/bin/python3", "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		t.Skipf("python3 -m venv: %v\n%s", err, out)
	}
	sites, _ := filepath.Glob(filepath.Join(venv, "lib", "python*", "site-packages"))
	if len(sites) != 1 {
		t.Fatalf("site-packages of %s: %v", venv, sites)
	}
	if err := os.MkdirAll(filepath.Join(sites[0], "cellbox_probe_pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sites[0], "cellbox_probe_pkg", "__init__.py"), []byte("VALUE = 42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestKernelProjectVenv: initialize lists the host's interpreters;
// workspace/open says which ones its kernels run; a python kernel of a workspace on a project with a .venv runs it, says so,
// and imports its packages; a bad interpreter gets -32602 and the daemon
// goes on.
func TestKernelProjectVenv(t *testing.T) {
	project := t.TempDir()
	makeVenv(t, project)
	p := startStdio(t)
	c := p.client()
	init := c.initialize(t)
	found := false
	for _, in := range init.Capabilities.Interpreters {
		if in.Language == "python" && in.Source == "system" && in.Path != "" && in.Version != "" {
			found = true
		}
	}
	if !found {
		t.Fatalf("initialize's interpreters lack the system python: %+v", init.Capabilities.Interpreters)
	}
	var ws protocol.WorkspaceInfo
	c.mustCall(t, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: project}, &ws)
	real, _ := filepath.EvalSymlinks(project)
	// workspace/open says which interpreter each language's kernels run.
	by := map[string]protocol.InterpreterInfo{}
	for _, in := range ws.Interpreters {
		by[in.Language] = in
	}
	if in := by["python"]; in.Source != "venv" || in.Path != filepath.Join(real, ".venv", "bin", "python3") {
		t.Fatalf("workspace/open's python: %+v", ws.Interpreters)
	}
	if in := by["bash"]; in.Source != "system" || in.Version == "" {
		t.Fatalf("workspace/open's bash: %+v", ws.Interpreters)
	}

	res := startKernel(t, c, protocol.KernelStartParams{Language: "python", WorkspaceID: ws.WorkspaceID})
	if in := res.Interpreter; in == nil || in.Source != "venv" || in.Path != filepath.Join(real, ".venv", "bin", "python3") || in.Version == "" {
		t.Fatalf("kernel/start's interpreter: %+v", in)
	}
	r, outs := execute(t, c, res.KernelID, "import sys, cellbox_probe_pkg; print(sys.prefix, cellbox_probe_pkg.VALUE)")
	wantOK(t, r, outs)
	if got := streamText(outs, protocol.StreamStdout); got != "/workspace/.venv 42\n" {
		t.Fatalf("sys.prefix and the venv's package: %q", got)
	}

	for _, bad := range []string{"python3", "/nonexistent/python3", "/etc", "/bin/bash"} {
		err := c.call(t, protocol.MethodKernelStart, protocol.KernelStartParams{Language: "python", WorkspaceID: ws.WorkspaceID, Interpreter: bad}, nil)
		if msg := wantCode(t, err, protocol.CodeInvalidParams); !strings.Contains(msg, `field "interpreter"`) {
			t.Fatalf("interpreter %q: %s", bad, msg)
		}
	}
	r, outs = execute(t, c, res.KernelID, "print(cellbox_probe_pkg.VALUE + 1)")
	wantOK(t, r, outs)
	if got := streamText(outs, protocol.StreamStdout); got != "43\n" {
		t.Fatalf("after the refused starts: %q", got)
	}
}

// TestDoctorInterpreters: doctor lists the host's interpreters and says
// which ones a project's kernels would run.
func TestDoctorInterpreters(t *testing.T) {
	project := t.TempDir()
	makeVenv(t, project)
	if err := os.WriteFile(filepath.Join(project, ".nvmrc"), []byte("v1.2.3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	runDoctor(context.Background(), []string{"--json", "--state-dir", t.TempDir(), "--project", project}, &stdout, &stderr)
	var rep doctorReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("decode --json output: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	by := map[string]protocol.InterpreterInfo{}
	for _, in := range rep.ProjectInterpreters {
		by[in.Language] = in
	}
	real, _ := filepath.EvalSymlinks(project)
	if in := by["python"]; in.Source != "venv" || in.Path != filepath.Join(real, ".venv", "bin", "python3") {
		t.Errorf("the project's python: %+v", in)
	}
	if in := by["javascript"]; in.Source != "system" || !strings.Contains(in.Warning, "node 1.2.3: not installed") {
		t.Errorf("the project's node: %+v", in)
	}
	if len(rep.Interpreters) == 0 || rep.Interpreters[0].Source != "system" {
		t.Errorf("the host's interpreters: %+v", rep.Interpreters)
	}

	stdout.Reset()
	runDoctor(context.Background(), []string{"--state-dir", t.TempDir(), "--project", project}, &stdout, &stderr)
	out := stdout.String()
	for _, want := range []string{"Interpreters (the host's", "its kernels run", "python      venv", "warning: " + real + "/.nvmrc names node 1.2.3"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor's output lacks %q:\n%s", want, out)
		}
	}
}
