package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cellbox-dev/cellbox/kernel"
	"github.com/cellbox-dev/cellbox/kernel/jupyter"
)

// jupyterPython is Debian's python3, which has jupyter_client (not PATH's
// python3, which may be a pyenv shim without it).
const jupyterPython = "/usr/bin/python3"

// requireJupyter fails the test when Debian's jupyter_client is missing:
// CI installs it, so the check must not pass by skipping.
func requireJupyter(t *testing.T) {
	t.Helper()
	out, err := exec.Command(jupyterPython, "-c", "import jupyter_core, jupyter_client.kernelspecapp").CombinedOutput()
	if err != nil {
		t.Fatalf("%s cannot import jupyter_client (%v: %s); install Debian's python3-jupyter-client and python3-jupyter-core (apt-get install python3-jupyter-client python3-jupyter-core jupyter-core)",
			jupyterPython, err, bytes.TrimSpace(out))
	}
}

// jupyterTestEnv points Jupyter's data path at a fresh temporary
// directory and returns the user kernels dir ($JUPYTER_DATA_DIR/kernels).
func jupyterTestEnv(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for k, v := range map[string]string{
		"JUPYTER_DATA_DIR":               filepath.Join(root, "data"),
		"HOME":                           filepath.Join(root, "home"),
		"XDG_DATA_HOME":                  filepath.Join(root, "xdg"),
		"PYTHONUSERBASE":                 filepath.Join(root, "userbase"),
		"IPYTHONDIR":                     filepath.Join(root, "ipython"),
		"PYDEVD_DISABLE_FILE_VALIDATION": "1",
	} {
		t.Setenv(k, v)
	}
	for _, k := range []string{"JUPYTER_PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "JUPYTER_PREFER_ENV_PATH", "PYTHONNOUSERSITE"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	return filepath.Join(root, "data", "kernels")
}

func runCellbox(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errb)
	t.Logf("cellbox %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
	return code, out.String(), errb.String()
}

// availableLanguages are the ids of the languages this host can run.
func availableLanguages(t *testing.T) []string {
	t.Helper()
	var ids []string
	for _, l := range kernel.DetectLanguages(context.Background()) {
		if l.Available {
			ids = append(ids, l.ID)
		}
	}
	if !slices.Contains(ids, "python") {
		t.Fatalf("python is not available on this host (languages %v); the test needs it", ids)
	}
	return ids
}

// jupyterSeen is a kernelspec as `jupyter kernelspec list --json` shows it.
type jupyterSeen struct {
	ResourceDir string `json:"resource_dir"`
	Spec        struct {
		Argv          []string `json:"argv"`
		DisplayName   string   `json:"display_name"`
		Language      string   `json:"language"`
		InterruptMode string   `json:"interrupt_mode"`
		Metadata      struct {
			Cellbox struct {
				Language string `json:"language"`
			} `json:"cellbox"`
		} `json:"metadata"`
	} `json:"spec"`
}

// jupyterKernelspecs is what Jupyter's own `jupyter kernelspec list --json`
// sees (Debian's /usr/bin/jupyter lacks the kernelspec subcommand's
// script, so its module is run).
func jupyterKernelspecs(t *testing.T) map[string]jupyterSeen {
	t.Helper()
	cmd := exec.Command(jupyterPython, "-Xfrozen_modules=off", "-m", "jupyter_client.kernelspecapp", "list", "--json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("jupyter kernelspec list --json: %v\n%s", err, stderr.String())
	}
	var list struct {
		Kernelspecs map[string]jupyterSeen `json:"kernelspecs"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("decode jupyter kernelspec list --json: %v\n%s", err, out)
	}
	return list.Kernelspecs
}

func TestJupyterInstallListUninstall(t *testing.T) {
	requireJupyter(t)
	kdir := jupyterTestEnv(t)
	langs := availableLanguages(t)
	exe, err := ownExecutable()
	if err != nil {
		t.Fatal(err)
	}

	code, out, _ := runCellbox(t, "jupyter", "install")
	if code != 0 {
		t.Fatalf("install: exit %d", code)
	}
	var wantDirs []string
	for _, id := range langs {
		wantDirs = append(wantDirs, filepath.Join(kdir, "cellbox-"+id))
	}
	if got := strings.Fields(out); !slices.Equal(got, wantDirs) {
		t.Fatalf("install printed %q, want %q", got, wantDirs)
	}
	for _, id := range langs {
		dir := filepath.Join(kdir, "cellbox-"+id)
		spec, err := jupyter.ReadKernelSpec(dir)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{exe, "jupyter-kernel", "--language", id, "-f", "{connection_file}"}
		if !slices.Equal(spec.Argv, want) {
			t.Errorf("%s argv = %q, want %q", id, spec.Argv, want)
		}
		for name, data := range jupyter.CellboxLogos() {
			if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(b, data) {
				t.Errorf("%s: logo %s: %v", id, name, err)
			}
		}
	}

	// Jupyter's own tools see them.
	specs := jupyterKernelspecs(t)
	wantDisplay := map[string]string{
		"python": "Python (cellbox sandbox)", "javascript": "JavaScript (Node.js, cellbox sandbox)", "bash": "Bash (cellbox sandbox)",
	}
	for _, id := range langs {
		s, ok := specs["cellbox-"+id]
		if !ok {
			t.Errorf("jupyter kernelspec list does not show cellbox-%s", id)
			continue
		}
		lang := id
		if id == "r" {
			lang = "R" // Jupyter's name of the language, as IRkernel's kernelspec gives it
		}
		if s.ResourceDir != filepath.Join(kdir, "cellbox-"+id) || s.Spec.Language != lang || s.Spec.InterruptMode != "message" ||
			s.Spec.Metadata.Cellbox.Language != id || s.Spec.Argv[0] != exe {
			t.Errorf("jupyter sees cellbox-%s as %+v", id, s)
		}
		if w, ok := wantDisplay[id]; ok && s.Spec.DisplayName != w {
			t.Errorf("jupyter shows cellbox-%s as %q, want %q", id, s.Spec.DisplayName, w)
		}
	}
	argvOut, err := exec.Command(jupyterPython, "-Xfrozen_modules=off", "-c",
		"import json; from jupyter_client.kernelspec import KernelSpecManager; print(json.dumps(KernelSpecManager().get_kernel_spec('cellbox-python').argv))").Output()
	if err != nil {
		t.Fatalf("KernelSpecManager().get_kernel_spec('cellbox-python'): %v", err)
	}
	var argv []string
	if err := json.Unmarshal(argvOut, &argv); err != nil {
		t.Fatalf("%v: %s", err, argvOut)
	}
	if want := []string{exe, "jupyter-kernel", "--language", "python", "-f", "{connection_file}"}; !slices.Equal(argv, want) {
		t.Errorf("get_kernel_spec('cellbox-python').argv = %q, want %q", argv, want)
	}

	// cellbox's list shows the same, with the binary found.
	code, out, _ = runCellbox(t, "jupyter", "list", "--json")
	var rep jupyterListReport
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("list --json: exit %d, %v", code, err)
	}
	var listed []string
	for _, e := range rep.KernelSpecs {
		listed = append(listed, e.CellboxLanguage)
		if !e.Cellbox || !e.BinaryExists || e.Binary != exe || e.Dir != filepath.Join(kdir, e.Name) {
			t.Errorf("list: %+v", e)
		}
	}
	if !slices.Equal(listed, slices.Sorted(slices.Values(langs))) {
		t.Errorf("list shows %q, want %q", listed, langs)
	}
	code, out, _ = runCellbox(t, "jupyter", "list", "--all")
	if code != 0 || !strings.Contains(out, "CELLBOX") || !strings.Contains(out, "cellbox-python") {
		t.Errorf("list --all: exit %d", code)
	}

	// Installing again replaces them in place.
	if code, _, _ := runCellbox(t, "jupyter", "install", "--language", "python"); code != 0 {
		t.Fatalf("second install: exit %d", code)
	}

	// Specs that are not cellbox's are refused, by name or among cellbox-*.
	other := filepath.Join(kdir, "other")
	fake := filepath.Join(kdir, "cellbox-fake")
	for _, d := range []string{other, fake} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "kernel.json"), []byte(`{"argv": ["python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"], "display_name": "x", "language": "python"}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, _, errOut := runCellbox(t, "jupyter", "uninstall", "other")
	if code != 1 || !strings.Contains(errOut, "not a cellbox kernelspec") {
		t.Errorf("uninstall other: exit %d, %q", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(other, "kernel.json")); err != nil {
		t.Errorf("a refused uninstall removed the spec: %v", err)
	}
	code, out, errOut = runCellbox(t, "jupyter", "uninstall")
	if code != 1 || !strings.Contains(errOut, "refusing to remove "+fake) {
		t.Errorf("uninstall: exit %d, %q; want 1 for cellbox-fake", code, errOut)
	}
	for _, id := range langs {
		dir := filepath.Join(kdir, "cellbox-"+id)
		if !strings.Contains(out, "removed "+dir) {
			t.Errorf("uninstall did not print the removal of %s", dir)
		}
		if _, err := os.Lstat(dir); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", dir, err)
		}
	}
	for _, d := range []string{other, fake} {
		if _, err := os.Stat(filepath.Join(d, "kernel.json")); err != nil {
			t.Errorf("uninstall removed %s: %v", d, err)
		}
	}
	specs = jupyterKernelspecs(t)
	for name := range specs {
		if strings.HasPrefix(name, "cellbox-") && name != "cellbox-fake" {
			t.Errorf("jupyter still lists %s after uninstall", name)
		}
	}
	if code, _, _ := runCellbox(t, "jupyter", "uninstall", "cellbox-python"); code != 1 {
		t.Errorf("uninstalling a missing spec: exit %d, want 1", code)
	}
}

func TestJupyterInstallRefusesForeignSpec(t *testing.T) {
	kdir := jupyterTestEnv(t)
	dir := filepath.Join(kdir, "cellbox-python")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	foreign := []byte(`{"argv": ["/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"], "display_name": "mine", "language": "python"}`)
	if err := os.WriteFile(filepath.Join(dir, "kernel.json"), foreign, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCellbox(t, "jupyter", "install")
	if code != 1 || !strings.Contains(errOut, "refusing to replace") || out != "" {
		t.Errorf("install over a foreign cellbox-python: exit %d, %q", code, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "kernel.json")); !bytes.Equal(b, foreign) {
		t.Errorf("the foreign spec was changed")
	}
	if entries, _ := os.ReadDir(kdir); len(entries) != 1 {
		t.Errorf("a refused install wrote %d entries", len(entries))
	}
}

func TestJupyterTargets(t *testing.T) {
	kdir := jupyterTestEnv(t)
	root := filepath.Dir(filepath.Dir(kdir))

	prefix := filepath.Join(root, "prefix")
	code, out, errOut := runCellbox(t, "jupyter", "install", "--prefix", prefix, "--language", "python")
	if want := filepath.Join(prefix, "share", "jupyter", "kernels", "cellbox-python"); code != 0 || strings.TrimSpace(out) != want {
		t.Errorf("--prefix: exit %d, printed %q, want %q", code, out, want)
	}
	if !strings.Contains(errOut, "not on Jupyter's path") {
		t.Errorf("--prefix outside Jupyter's path: no warning in %q", errOut)
	}
	code, out, _ = runCellbox(t, "jupyter", "uninstall", "--prefix", prefix)
	if code != 0 || !strings.Contains(out, "removed") {
		t.Errorf("uninstall --prefix: exit %d", code)
	}

	if code, _, errOut := runCellbox(t, "jupyter", "install", "--sys-prefix"); code != 2 || !strings.Contains(errOut, "neither VIRTUAL_ENV nor CONDA_PREFIX") {
		t.Errorf("--sys-prefix without an environment: exit %d, %q", code, errOut)
	}
	venv := filepath.Join(root, "venv")
	t.Setenv("VIRTUAL_ENV", venv)
	code, out, errOut = runCellbox(t, "jupyter", "install", "--sys-prefix", "--language=bash,python", "--language", "python")
	want := []string{filepath.Join(venv, "share", "jupyter", "kernels", "cellbox-bash"), filepath.Join(venv, "share", "jupyter", "kernels", "cellbox-python")}
	if code != 0 || !slices.Equal(strings.Fields(out), want) {
		t.Errorf("--sys-prefix: exit %d, printed %q, want %q", code, out, want)
	}
	if strings.Contains(errOut, "warning") {
		t.Errorf("$VIRTUAL_ENV's kernels dir is on Jupyter's path, yet: %q", errOut)
	}
	if code, _, _ := runCellbox(t, "jupyter", "uninstall", "--sys-prefix", "cellbox-bash", "cellbox-python"); code != 0 {
		t.Errorf("uninstall --sys-prefix: exit %d", code)
	}

	for _, args := range [][]string{
		{"jupyter", "install", "--user", "--prefix", prefix},
		{"jupyter", "install", "stray"},
		{"jupyter", "uninstall", "../x"},
		{"jupyter", "frobnicate"},
		{"jupyter"},
	} {
		if code, _, _ := runCellbox(t, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
	if code, _, errOut := runCellbox(t, "jupyter", "install", "--language", "cobol"); code != 1 || !strings.Contains(errOut, "unknown language") {
		t.Errorf("--language cobol: exit %d, %q", code, errOut)
	}
	if entries, _ := os.ReadDir(kdir); len(entries) != 0 {
		t.Errorf("the failed installs wrote into %s", kdir)
	}
}

func TestJupyterHelp(t *testing.T) {
	code, out, _ := runCellbox(t, "help", "jupyter")
	for _, want := range []string{"cellbox jupyter install", "cellbox jupyter list", "cellbox jupyter uninstall", "--sys-prefix", "After moving or replacing the binary"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("help jupyter: exit %d, lacks %q", code, want)
		}
	}
	if code, out, _ := runCellbox(t, "help"); code != 0 || !strings.Contains(out, "cellbox jupyter install") {
		t.Errorf("help does not list jupyter install")
	}
}
