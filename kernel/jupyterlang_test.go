package kernel

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cellbox-dev/cellbox/kernel/jupyter"
)

// TestJupyterLanguages: every kernelspec is a language jupyter:NAME with
// its display name, but cellbox's own; one whose program a sandbox cannot
// run is unavailable with the reason.
func TestJupyterLanguages(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("JUPYTER_PATH", dir)
	t.Setenv("JUPYTER_DATA_DIR", t.TempDir())
	kernels := filepath.Join(dir, "kernels")
	outside := filepath.Join(t.TempDir(), "kernel-program")
	if err := os.WriteFile(outside, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, s := range []jupyter.KernelSpec{
		{Name: "zz-shell", Argv: []string{"sh", "-c", "true", "{connection_file}"}, DisplayName: "Shell kernel", Language: "bash"},
		{Name: "zz-abs", Argv: []string{"/bin/sh", "{connection_file}"}, Language: "R"},
		{Name: "zz-missing", Argv: []string{"no-such-program-anywhere"}, DisplayName: "Missing"},
		{Name: "zz-outside", Argv: []string{outside}, DisplayName: "Outside"},
		{Name: "zz-relative", Argv: []string{"bin/kernel"}, DisplayName: "Relative"},
		{Name: "zz-cellbox", Argv: []string{"/opt/bin/cellbox", "jupyter-kernel", "--language", "python", "-f", "{connection_file}"}},
		{Name: "zz-cellbox-renamed", Argv: []string{"/usr/local/bin/cb", "jupyter-kernel", "--language", "python"}},
		{Name: "zz-cellbox-later", Argv: []string{"env", "X=1", "cellbox", "--verbose", "jupyter-kernel"}},
	} {
		if _, err := jupyter.WriteKernelSpec(kernels, s, nil); err != nil {
			t.Fatal(err)
		}
	}
	langs := map[string]Language{}
	for _, l := range JupyterLanguages() {
		if strings.HasPrefix(l.ID, "jupyter:zz-") {
			langs[l.ID] = l
		}
	}
	for _, id := range []string{"jupyter:zz-cellbox", "jupyter:zz-cellbox-renamed", "jupyter:zz-cellbox-later"} {
		if _, ok := langs[id]; ok {
			t.Errorf("cellbox's own kernelspec %s is listed", id)
		}
	}
	want := map[string]struct {
		available bool
		name      string
		reason    string
		exts      []string
	}{
		"jupyter:zz-shell":    {true, "Shell kernel", "", []string{".sh"}},
		"jupyter:zz-abs":      {true, "zz-abs", "", []string{".r", ".R"}},
		"jupyter:zz-missing":  {false, "Missing", "no-such-program-anywhere not found on the sandbox's PATH", []string{}},
		"jupyter:zz-outside":  {false, "Outside", "is not in a sandbox", []string{}},
		"jupyter:zz-relative": {false, "Relative", "is a relative path", []string{}},
	}
	if len(langs) != len(want) {
		t.Fatalf("languages %+v", langs)
	}
	for id, w := range want {
		l := langs[id]
		if l.Available != w.available || l.DisplayName != w.name || !strings.Contains(l.Reason, w.reason) || !slices.Equal(l.FileExtensions, w.exts) ||
			!slices.Equal(l.Unsupported, []string{"kernel/variables"}) || l.jupyter == nil {
			t.Errorf("%s = %+v", id, l)
		}
	}
}
