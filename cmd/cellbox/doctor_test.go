package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cellbox-dev/cellbox/kernel"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// runDoctor probes in-process; its helpers re-execute this test binary,
// whose TestMain (e2e_test.go) calls sandbox.Main first.

func TestDoctorOnThisHost(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := runDoctor(context.Background(), []string{"--state-dir", t.TempDir()}, &stdout, &stderr)
	out := stdout.String()
	t.Logf("cellbox doctor (exit %d):\n%s%s", code, out, stderr.String())
	if code != 0 {
		t.Errorf("exit code %d, want 0 on this host", code)
	}
	for _, name := range sandbox.LayerNames() {
		if !strings.Contains(out, "  "+name+" ") {
			t.Errorf("output does not name layer %s", name)
		}
	}
	for _, lang := range []string{"python", "javascript", "bash"} {
		if !strings.Contains(out, "  "+lang+" ") {
			t.Errorf("output does not name language %s", lang)
		}
	}
	for _, want := range []string{"Sandbox helper: cellbox-sandbox", "State dir", "writable: yes", "overlay upper layers: yes", "Verdict: ready"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestDoctorJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	state := filepath.Join(t.TempDir(), "not", "yet")
	code := runDoctor(context.Background(), []string{"--json", "--state-dir", state}, &stdout, &stderr)
	var rep doctorReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("decode --json output: %v\n%s", err, stdout.String())
	}
	if code != 0 || !rep.OK {
		t.Errorf("exit %d, ok %v, problems %v; want 0, true", code, rep.OK, rep.Problems)
	}
	if len(rep.Sandbox.Layers) != len(sandbox.LayerNames()) || len(rep.Langs) != len(kernel.DetectLanguages(context.Background())) {
		t.Errorf("got %d layers and %d languages", len(rep.Sandbox.Layers), len(rep.Langs))
	}
	if rep.Sandbox.Helper != "lean" {
		t.Errorf("sandbox helper %q (%s), want lean", rep.Sandbox.Helper, rep.Sandbox.HelperReason)
	}
	if rep.StateDir.Exists || !rep.StateDir.Writable || !strings.Contains(rep.StateDir.Note, "does not exist yet") {
		t.Errorf("state dir = %+v; want missing but creatable", rep.StateDir)
	}
	if _, err := os.Stat(state); err == nil {
		t.Errorf("doctor created the state dir")
	}
}

func TestDoctorExitsOneWhenDefaultsCannotRun(t *testing.T) {
	// No interpreter on PATH: the languages that need one are missing and
	// named; sql, built into the binary, still runs, so the defaults can.
	t.Setenv("PATH", t.TempDir())
	var stdout, stderr bytes.Buffer
	code := runDoctor(context.Background(), []string{"--state-dir", t.TempDir()}, &stdout, &stderr)
	out := stdout.String()
	line := regexp.MustCompile(`languages unavailable: (.*)`).FindStringSubmatch(out)
	missing := []string{}
	if line != nil {
		missing = strings.Split(line[1], ", ")
	}
	if code != 0 || !slices.Contains(missing, "python") || !slices.Contains(missing, "javascript") || !slices.Contains(missing, "bash") ||
		slices.Contains(missing, "sql") || !strings.Contains(out, "python3 not found on PATH") {
		t.Errorf("exit %d, output:\n%s\nwant exit 0 naming the missing languages", code, out)
	}

	// A state dir that is a file cannot hold workspaces.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	if code := runDoctor(context.Background(), []string{"--state-dir", file}, &stdout, &stderr); code != 1 {
		t.Errorf("state dir is a file: exit %d, want 1\n%s", code, stdout.String())
	}
}

func TestDoctorBadFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := runDoctor(context.Background(), []string{"--nope"}, &stdout, &stderr); code != 2 {
		t.Errorf("bad flag: exit %d, want 2", code)
	}
}

// TestDoctorJupyterKernels: doctor lists the installed kernelspecs as
// jupyter:NAME, one whose program a sandbox cannot run with the reason.
func TestDoctorJupyterKernels(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "kernels", "gone")
	if err := os.MkdirAll(spec, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(spec, "kernel.json"), []byte(`{"argv":["cellbox-test-no-such-kernel","-f","{connection_file}"],"display_name":"Gone","language":"gone"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("JUPYTER_PATH", dir)
	var stdout, stderr bytes.Buffer
	runDoctor(context.Background(), []string{"--json", "--state-dir", t.TempDir()}, &stdout, &stderr)
	var rep doctorReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("decode --json output: %v\n%s", err, stdout.String())
	}
	var gone *kernel.Language
	for i := range rep.Jupyter {
		if rep.Jupyter[i].ID == "jupyter:gone" {
			gone = &rep.Jupyter[i]
		}
	}
	if gone == nil || gone.Available || !strings.Contains(gone.Reason, "cellbox-test-no-such-kernel") {
		t.Fatalf("jupyter:gone in doctor's report: %+v (all: %+v)", gone, rep.Jupyter)
	}
	if !rep.OK {
		t.Errorf("an unavailable Jupyter kernel made doctor fail: %v", rep.Problems)
	}
	stdout.Reset()
	runDoctor(context.Background(), []string{"--state-dir", t.TempDir()}, &stdout, &stderr)
	if !strings.Contains(stdout.String(), "jupyter:gone") {
		t.Errorf("the text report does not list jupyter:gone:\n%s", stdout.String())
	}
}
