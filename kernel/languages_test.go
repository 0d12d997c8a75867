package kernel

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/workspace"
)

func TestParseVersion(t *testing.T) {
	spec := func(id string) languageSpec {
		for _, s := range languageSpecs {
			if s.id == id {
				return s
			}
		}
		t.Fatalf("no language %q", id)
		return languageSpec{}
	}
	tests := []struct {
		id, out, want string
		ok            bool
	}{
		{"python", "Python 3.11.2", "3.11.2", true},
		{"python", "Python 3.13.0rc1\n", "3.13.0rc1", true},
		{"python", "pyenv: python3: command not found", "", false},
		{"javascript", "v20.19.2", "20.19.2", true},
		{"javascript", "v22.0.0-nightly2024\n", "22.0.0-nightly2024", true},
		{"javascript", "node: bad option", "", false},
		{"bash", "GNU bash, version 5.2.15(1)-release (x86_64-pc-linux-gnu)\nCopyright (C) 2022", "5.2.15", true},
		{"bash", "GNU bash, version 3.2.57(1)-release (arm64-apple-darwin23)", "3.2.57", true},
		{"bash", "zsh 5.9", "", false},
		{"ruby", "ruby 3.1.2p20 (2022-04-12 revision 4491bb740a) [x86_64-linux-gnu]", "3.1.2", true},
		{"ruby", "jruby 9.4.5.0 (3.1.4) 2023-11-02", "", false},
		{"r", "Rscript (R) version 4.2.2 Patched (2022-11-10 r83330)", "4.2.2", true},
		{"r", "R version 4.2.2", "", false},
		{"go", "go version go1.26.8 linux/amd64", "1.26.8", true},
		{"go", "go version go1.27rc1 linux/arm64\n", "1.27rc1", true},
		{"go", "gccgo (GCC) 12.2.0", "", false},
	}
	for _, tt := range tests {
		got, ok := parseVersion(spec(tt.id), tt.out)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseVersion(%s, %q) = %q, %v; want %q, %v", tt.id, tt.out, got, ok, tt.want, tt.ok)
		}
	}
}

func TestDetectLanguagesWithoutInterpreters(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	langs := DetectLanguages(context.Background())
	if len(langs) != len(languageSpecs)+len(builtinLanguages) {
		t.Fatalf("got %d languages, want %d", len(langs), len(languageSpecs)+len(builtinLanguages))
	}
	// The languages this binary runs itself need no interpreter.
	for _, l := range langs[len(languageSpecs):] {
		if !l.Available || l.Version == "" || l.Reason != "" {
			t.Errorf("%s = %+v; want available", l.ID, l)
		}
	}
	for i, l := range langs[:len(languageSpecs)] {
		want := languageSpecs[i].command + " not found on PATH"
		if l.Available || l.Reason != want || l.Path != "" || l.Version != "" {
			t.Errorf("%s = %+v; want unavailable with reason %q", l.ID, l, want)
		}
		if l.ID == "" || l.DisplayName == "" || len(l.FileExtensions) == 0 {
			t.Errorf("%+v: id, display name or extensions missing", l)
		}
	}
}

func TestDetectLanguagesOnThisHost(t *testing.T) {
	// python3, node and bash are installed on the development and CI machines.
	start := time.Now()
	langs := DetectLanguages(context.Background())
	t.Logf("detection took %v", time.Since(start))
	want := map[string]string{"python": "python3", "javascript": "node", "bash": "bash"}
	for _, l := range langs[:len(languageSpecs)] {
		t.Logf("%-10s available=%v version=%q path=%q reason=%q", l.ID, l.Available, l.Version, l.Path, l.Reason)
		if !l.Available || l.Version == "" || !filepath.IsAbs(l.Path) || l.Reason != "" {
			t.Errorf("%s = %+v; want available with a version and an absolute path", l.ID, l)
		}
		if shownPathLanguages[l.ID] {
			if !workspace.SandboxShows(l.Path) {
				t.Errorf("%s path = %q, which a sandbox does not show", l.ID, l.Path)
			}
		} else if !slices.Contains(SandboxPath(), filepath.Dir(l.Path)) {
			t.Errorf("%s path = %q, not in a directory a sandbox has (%v)", l.ID, l.Path, SandboxPath())
		}
		delete(want, l.ID)
	}
	if len(want) != 0 {
		t.Errorf("languages not reported: %v", want)
	}
}

func TestDetectLanguagesFailingInterpreter(t *testing.T) {
	dir := t.TempDir()
	scripts := map[string]string{
		"python3": "#!/bin/sh\necho 'pyenv: python3: command not found' >&2\nexit 127\n",
		"node":    "#!/bin/sh\necho 'not a version'\n",
		"bash":    "#!/bin/sh\nexec sleep 10\n",
		"go":      "#!/bin/sh\nexit 3\n",
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir+":/usr/bin:/bin")
	// As if the sandbox had dir: the fakes there are found first.
	sandboxPath = func() []string { return append([]string{dir}, SandboxPath()...) }
	t.Cleanup(func() { sandboxPath = SandboxPath })
	start := time.Now()
	langs := DetectLanguages(context.Background())
	// The fake bash hangs for 10 s; the bound leaves room for a loaded
	// machine and stays well below that.
	if took := time.Since(start); took > versionTimeout+4*time.Second {
		t.Errorf("detection took %v, want about %v at most", took, versionTimeout)
	}
	wantReason := map[string]string{
		"python":     "--version failed: exit status 127: pyenv: python3: command not found",
		"javascript": `printed "not a version"`,
		"bash":       "--version did not finish within 2s",
		"go":         "go version failed: exit status 3",
	}
	for _, l := range langs {
		if _, faked := wantReason[l.ID]; !faked {
			continue
		}
		if l.Available || !strings.Contains(l.Reason, wantReason[l.ID]) {
			t.Errorf("%s = %+v; want unavailable with reason containing %q", l.ID, l, wantReason[l.ID])
		}
	}
}

// TestGoVersionFile: the go language's version comes from its toolchain's
// VERSION file (through a symlinked go command too), without running
// `go version`, which leaves a telemetry upload running behind it.
func TestGoVersionFile(t *testing.T) {
	root := filepath.Join(t.TempDir(), "goroot")
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	goCmd := filepath.Join(root, "bin", "go")
	if err := os.WriteFile(goCmd, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "go")
	if err := os.Symlink(goCmd, link); err != nil {
		t.Fatal(err)
	}
	if v := goVersionFile(link); v != "" {
		t.Fatalf("without a VERSION file: %q", v)
	}
	if err := os.WriteFile(filepath.Join(root, "VERSION"), []byte("go1.24.3\ntime 2025-01-01T00:00:00Z\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v := goVersionFile(link); v != "go1.24.3" {
		t.Fatalf("goVersionFile = %q", v)
	}
	for _, spec := range languageSpecs {
		if spec.id == "go" {
			if v, ok := parseVersion(spec, "go version "+goVersionFile(link)); !ok || v != "1.24.3" {
				t.Fatalf("the go language's version from a VERSION file: %q %v", v, ok)
			}
			return
		}
	}
	t.Fatal("no go language")
}
