//go:build linux

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// jupyterClientEnv is the review daemon's environment with Jupyter's dirs of
// its own: the kernelspecs `cellbox jupyter install` writes there, and the
// connection files.
func jupyterClientEnv(t *testing.T, d *reviewDaemon) []string {
	t.Helper()
	data, runtime := t.TempDir(), t.TempDir()
	env := []string{"JUPYTER_DATA_DIR=" + data, "JUPYTER_RUNTIME_DIR=" + runtime, "JUPYTER_PLATFORM_DIRS=0", "PYTHONUNBUFFERED=1"}
	for _, kv := range d.env {
		if !strings.HasPrefix(kv, "JUPYTER_") {
			env = append(env, kv)
		}
	}
	install := exec.Command(cellboxBin, "jupyter", "install")
	install.Env = env
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("cellbox jupyter install: %v\n%s", err, out)
	}
	return env
}

// python3 is Debian's, which has jupyter_client, jupyter_kernel_test and
// nbclient (.ci/run installs them); a PATH python (pyenv) may not.
const systemPython = "/usr/bin/python3"

func requirePythonModules(t *testing.T, modules ...string) {
	t.Helper()
	for _, m := range modules {
		if err := exec.Command(systemPython, "-c", "import "+m).Run(); err != nil {
			t.Fatalf("%s cannot import %s (apt-get install python3-jupyter-kernel-test python3-nbclient python3-jupyter-client; .ci/run does): %v", systemPython, m, err)
		}
	}
}

// TestJupyterKernelTest runs Jupyter's own kernel test suite
// (jupyter_kernel_test 0.4.5) and the checks of runtimed's kernel test bed
// (heartbeat, parent headers, stdin, interrupt, shutdown) on the
// cellbox-python, cellbox-javascript and cellbox-bash kernelspecs, through
// jupyter_client as JupyterLab drives a kernel. The tests a language has no
// sample for are skipped by the suite; exactly those may be skipped.
func TestJupyterKernelTest(t *testing.T) {
	requirePythonModules(t, "jupyter_kernel_test", "jupyter_client")
	d := startReviewDaemon(t)
	env := jupyterClientEnv(t, d)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	script, _ := filepath.Abs("testdata/jupyter/kernels_test.py")
	cmd := exec.CommandContext(ctx, systemPython, script)
	cmd.Env, cmd.Dir = env, t.TempDir()
	out, err := cmd.CombinedOutput()
	text := string(out)
	if err != nil || !regexp.MustCompile(`(?m)^OK( \(skipped=\d+\))?$`).MatchString(text) {
		t.Fatalf("jupyter_kernel_test failed: %v\n%s", err, text)
	}
	ran := regexp.MustCompile(`(?m)^Ran (\d+) tests`).FindStringSubmatch(text)
	var skipped []string
	for _, m := range regexp.MustCompile(`(?m)^(test_\w+) \(__main__\.(\w+)\.\w+\) \.\.\. skipped`).FindAllStringSubmatch(text, -1) {
		skipped = append(skipped, m[2]+"."+m[1])
	}
	slices.Sort(skipped)
	// bash leaves no values and shows no rich output; only python has a
	// pager; go, ruby, r and sql have no display or clear_output helper; go
	// reads no stdin but the request's; sql neither prints nor reads.
	want := []string{"CellboxBash.test_clear_output", "CellboxBash.test_display_data", "CellboxBash.test_execute_result",
		"CellboxBash.test_history", "CellboxBash.test_pager",
		"CellboxGo.test_clear_output", "CellboxGo.test_display_data", "CellboxGo.test_pager", "CellboxGo.test_stdin",
		"CellboxJavaScript.test_pager",
		"CellboxR.test_clear_output", "CellboxR.test_pager",
		"CellboxRuby.test_clear_output", "CellboxRuby.test_display_data", "CellboxRuby.test_pager",
		"CellboxSQL.test_clear_output", "CellboxSQL.test_display_data", "CellboxSQL.test_execute_stderr", "CellboxSQL.test_execute_stdout",
		"CellboxSQL.test_inspect", "CellboxSQL.test_pager", "CellboxSQL.test_stdin",
		"CellboxTypeScript.test_pager"}
	if !slices.Equal(skipped, want) {
		t.Errorf("skipped %v, want exactly %v\n%s", skipped, want, text)
	}
	t.Logf("jupyter_kernel_test: ran %s tests, %d skipped (no sample for the language): %v", ran[1], len(skipped), skipped)
}

// TestJupyterNotebooks executes real notebooks with nbclient on each
// cellbox kernelspec (outputs checked, a failing cell raises
// CellExecutionError with exactly one error output), then reviews what the
// notebooks' code wrote: nothing is in the project until cellbox commit.
func TestJupyterNotebooks(t *testing.T) {
	requirePythonModules(t, "nbclient", "nbformat")
	d := startReviewDaemon(t)
	env := jupyterClientEnv(t, d)
	project := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	script, _ := filepath.Abs("testdata/jupyter/notebooks.py")
	cmd := exec.CommandContext(ctx, systemPython, script, project)
	cmd.Env, cmd.Dir = env, project
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Count(string(out), "\nok ")+boolInt(strings.HasPrefix(string(out), "ok ")) != 3 {
		t.Fatalf("notebooks: %v\n%s", err, out)
	}
	langs := []string{"python", "javascript", "bash"}
	for _, l := range langs {
		if _, err := os.Stat(filepath.Join(project, l+"-out.txt")); !os.IsNotExist(err) {
			t.Fatalf("%s-out.txt reached the project before a commit (%v)", l, err)
		}
	}
	review := func(args ...string) string {
		t.Helper()
		c := exec.CommandContext(ctx, cellboxBin, args...)
		c.Env, c.Dir = env, project
		b, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("cellbox %v: %v\n%s", args, err, b)
		}
		return string(b)
	}
	changes := review("changes")
	for _, l := range langs {
		if !strings.Contains(changes, "A "+l+"-out.txt") {
			t.Errorf("cellbox changes does not list %s-out.txt:\n%s", l, changes)
		}
	}
	review("commit", "python-out.txt")
	b, err := os.ReadFile(filepath.Join(project, "python-out.txt"))
	if err != nil || string(b) != "written by python\n" {
		t.Fatalf("after cellbox commit: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(project, "bash-out.txt")); !os.IsNotExist(err) {
		t.Fatalf("bash-out.txt was committed too (%v)", err)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
