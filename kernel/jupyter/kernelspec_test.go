package jupyter

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

var updateLogos = flag.Bool("update-logos", false, "rewrite logos/ from the drawing in kernelspec_test.go")

// fakeEnv is a specEnv of the given variables, home /home/u.
func fakeEnv(goos string, vars map[string]string, files map[string]string) specEnv {
	return specEnv{
		goos:    goos,
		getenv:  func(k string) string { return vars[k] },
		home:    func() string { return "/home/u" },
		rawHome: func() string { return "/home/u" },
		readFile: func(p string) ([]byte, error) {
			if s, ok := files[p]; ok {
				return []byte(s), nil
			}
			return nil, os.ErrNotExist
		},
	}
}

func TestDataDirs(t *testing.T) {
	const (
		local = "/home/u/.local/share/jupyter"
		ulcl  = "/usr/local/share/jupyter"
		usr   = "/usr/share/jupyter"
	)
	tests := []struct {
		name  string
		goos  string
		vars  map[string]string
		files map[string]string
		want  []string
	}{
		{"linux defaults", "linux", nil, nil, []string{local, ulcl, usr}},
		{"XDG_DATA_HOME", "linux", map[string]string{"XDG_DATA_HOME": "/xdg"}, nil,
			[]string{"/xdg/jupyter", local, ulcl, usr}},
		{"JUPYTER_DATA_DIR wins over XDG_DATA_HOME", "linux", map[string]string{"JUPYTER_DATA_DIR": "/jd", "XDG_DATA_HOME": "/xdg"}, nil,
			[]string{"/jd", local, ulcl, usr}},
		{"JUPYTER_PATH comes first", "linux", map[string]string{"JUPYTER_PATH": "/p1/:/p2::/p1", "JUPYTER_DATA_DIR": "/jd"}, nil,
			[]string{"/p1", "/p2", "/jd", local, ulcl, usr}},
		{"PYTHONUSERBASE", "linux", map[string]string{"PYTHONUSERBASE": "/ub"}, nil,
			[]string{local, "/ub/share/jupyter", ulcl, usr}},
		{"PYTHONNOUSERSITE", "linux", map[string]string{"PYTHONNOUSERSITE": "1", "XDG_DATA_HOME": "/xdg"}, nil,
			[]string{"/xdg/jupyter", ulcl, usr}},
		{"virtualenv: no user site", "linux", map[string]string{"VIRTUAL_ENV": "/venv", "XDG_DATA_HOME": "/xdg"}, nil,
			[]string{"/xdg/jupyter", "/venv/share/jupyter", ulcl, usr}},
		{"virtualenv with system site packages", "linux", map[string]string{"VIRTUAL_ENV": "/venv", "XDG_DATA_HOME": "/xdg"},
			map[string]string{"/venv/pyvenv.cfg": "home = /usr/bin\ninclude-system-site-packages = true\n"},
			[]string{"/xdg/jupyter", local, "/venv/share/jupyter", ulcl, usr}},
		{"VIRTUAL_ENV before CONDA_PREFIX", "linux", map[string]string{"VIRTUAL_ENV": "/venv", "CONDA_PREFIX": "/conda"}, nil,
			[]string{local, "/venv/share/jupyter", ulcl, usr}},
		{"conda keeps the user site", "linux", map[string]string{"CONDA_PREFIX": "/conda", "XDG_DATA_HOME": "/xdg"}, nil,
			[]string{"/xdg/jupyter", local, "/conda/share/jupyter", ulcl, usr}},
		{"JUPYTER_PREFER_ENV_PATH", "linux", map[string]string{"CONDA_PREFIX": "/conda", "JUPYTER_PREFER_ENV_PATH": "1"}, nil,
			[]string{"/conda/share/jupyter", local, ulcl, usr}},
		{"JUPYTER_PREFER_ENV_PATH=off", "linux", map[string]string{"CONDA_PREFIX": "/conda", "JUPYTER_PREFER_ENV_PATH": "Off"}, nil,
			[]string{local, "/conda/share/jupyter", ulcl, usr}},
		{"a system prefix is the system's", "linux", map[string]string{"CONDA_PREFIX": "/usr"}, nil,
			[]string{local, ulcl, usr}},
		{"macOS", "darwin", map[string]string{"XDG_DATA_HOME": "/xdg"}, nil,
			[]string{"/home/u/Library/Jupyter", local, ulcl, usr}},
		{"macOS JUPYTER_DATA_DIR", "darwin", map[string]string{"JUPYTER_DATA_DIR": "/jd", "PYTHONUSERBASE": "/ub"}, nil,
			[]string{"/jd", "/ub/share/jupyter", ulcl, usr}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fakeEnv(tt.goos, tt.vars, tt.files).dataDirs()
			if !slices.Equal(got, tt.want) {
				t.Errorf("dataDirs =\n  %q\nwant\n  %q", got, tt.want)
			}
		})
	}
}

func TestKernelDirs(t *testing.T) {
	got := fakeEnv("linux", map[string]string{"JUPYTER_PATH": "/p"}, nil).kernelDirs()
	want := []string{"/p/kernels", "/home/u/.local/share/jupyter/kernels", "/usr/local/share/jupyter/kernels", "/usr/share/jupyter/kernels", "/home/u/.ipython/kernels"}
	if !slices.Equal(got, want) {
		t.Errorf("kernelDirs = %q, want %q", got, want)
	}
	got = fakeEnv("linux", map[string]string{"IPYTHONDIR": "~/ipy"}, nil).kernelDirs()
	if last := got[len(got)-1]; last != "/home/u/ipy/kernels" {
		t.Errorf("with IPYTHONDIR=~/ipy the last kernel dir is %q", last)
	}
}

// isolate points every variable of Jupyter's path at directories of a
// fresh temporary directory and returns it.
func isolate(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for k, v := range map[string]string{
		"HOME":                    filepath.Join(root, "home"),
		"JUPYTER_DATA_DIR":        filepath.Join(root, "data"),
		"JUPYTER_PATH":            filepath.Join(root, "p1") + string(os.PathListSeparator) + filepath.Join(root, "p2"),
		"XDG_DATA_HOME":           filepath.Join(root, "xdg"),
		"PYTHONUSERBASE":          filepath.Join(root, "userbase"),
		"IPYTHONDIR":              filepath.Join(root, "ipython"),
		"VIRTUAL_ENV":             "",
		"CONDA_PREFIX":            "",
		"PYTHONNOUSERSITE":        "",
		"JUPYTER_PREFER_ENV_PATH": "",
	} {
		t.Setenv(k, v)
	}
	return root
}

// writeSpec writes dir/kernel.json.
func writeSpec(t *testing.T, dir, kernelJSON string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kernel.json"), []byte(kernelJSON), 0o644); err != nil {
		t.Fatal(err)
	}
}

func specJSON(argv0, display string) string {
	return fmt.Sprintf(`{"argv": [%q, "-f", "{connection_file}"], "display_name": %q, "language": "python"}`, argv0, display)
}

func TestFindKernelSpecsPrecedence(t *testing.T) {
	root := isolate(t)
	dirs := DataDirs()
	want := []string{"p1", "p2", "data", "userbase/share/jupyter"}
	for i, w := range want {
		if dirs[i] != filepath.Join(root, w) {
			t.Fatalf("DataDirs()[%d] = %q, want %q (all: %q)", i, dirs[i], filepath.Join(root, w), dirs)
		}
	}
	if DataDir() != filepath.Join(root, "data") {
		t.Errorf("DataDir() = %q with JUPYTER_DATA_DIR set", DataDir())
	}
	k := func(d, name string) string { return filepath.Join(root, d, "kernels", name) }

	writeSpec(t, k("p1", "shared"), specJSON("/p1", "from p1"))
	writeSpec(t, k("data", "shared"), specJSON("/data", "from data"))
	writeSpec(t, k("p2", "second"), specJSON("/p2", "from p2"))
	writeSpec(t, k("userbase/share/jupyter", "second"), specJSON("/ub", "from userbase"))
	writeSpec(t, k("data", "MixedCase"), specJSON("/data", "mixed"))
	writeSpec(t, k("p1", "broken"), `{"argv": []}`)
	writeSpec(t, k("data", "broken"), specJSON("/data", "hidden by the broken one"))
	writeSpec(t, k("data", "bad name"), specJSON("/data", "bad"))
	writeSpec(t, filepath.Join(root, "ipython", "kernels", "fromipython"), specJSON("/ipy", "ipython"))
	if err := os.MkdirAll(k("data", "nokerneljson"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(k("p2", "plainfile"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A symlinked kernelspec directory counts, as in Jupyter.
	if err := os.Symlink(k("p2", "second"), k("p2", "linked")); err != nil {
		t.Fatal(err)
	}

	specs, skipped := FindKernelSpecs()
	byName := map[string]KernelSpec{}
	for _, s := range specs {
		byName[s.Name] = s
	}
	for name, wantDisplay := range map[string]string{
		"shared": "from p1", "second": "from p2", "mixedcase": "mixed", "fromipython": "ipython", "linked": "from p2",
	} {
		if got := byName[name].DisplayName; got != wantDisplay {
			t.Errorf("%s: display name %q, want %q", name, got, wantDisplay)
		}
	}
	if s := byName["mixedcase"]; s.Dir != k("data", "MixedCase") {
		t.Errorf("mixedcase dir = %q", s.Dir)
	}
	for _, name := range []string{"broken", "bad name", "nokerneljson", "plainfile"} {
		if _, ok := byName[name]; ok {
			t.Errorf("%s was found", name)
		}
	}
	if !slices.IsSortedFunc(specs, func(a, b KernelSpec) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("specs not sorted by name")
	}
	var skippedNames []string
	for _, s := range skipped {
		if strings.HasPrefix(s.Dir, root) {
			skippedNames = append(skippedNames, s.Name)
			if !errors.Is(s.Err, ErrInvalidKernelSpec) {
				t.Errorf("skipped %s: %v, not ErrInvalidKernelSpec", s.Dir, s.Err)
			}
		}
	}
	slices.Sort(skippedNames)
	if want := []string{"bad name", "broken"}; !slices.Equal(skippedNames, want) {
		t.Errorf("skipped %q, want %q", skippedNames, want)
	}
}

func TestFindKernelSpecsUnreadableDir(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads any directory")
	}
	root := t.TempDir()
	kdir := filepath.Join(root, "kernels")
	writeSpec(t, filepath.Join(kdir, "k"), specJSON("/x", "x"))
	if err := os.Chmod(kdir, 0); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(kdir, 0o755)
	specs, skipped := FindKernelSpecsIn([]string{kdir, filepath.Join(root, "missing")})
	if len(specs) != 0 || len(skipped) != 1 || skipped[0].Dir != kdir {
		t.Errorf("specs %v, skipped %v; want one skip of %s", specs, skipped, kdir)
	}
}

func TestReadKernelSpec(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "My-Kernel_1.0")
	writeSpec(t, dir, `{"argv": ["python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
		"display_name": "Python 3", "language": "python", "interrupt_mode": "Message",
		"env": {"A": "b"}, "metadata": {"debugger": true}, "unknown": [1, 2], "Argv": ["not this"]}`)
	spec, err := ReadKernelSpec(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := KernelSpec{
		Name: "my-kernel_1.0", Dir: dir,
		Argv:        []string{"python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"},
		DisplayName: "Python 3", Language: "python", InterruptMode: "message",
		Env: map[string]string{"A": "b"}, Metadata: map[string]any{"debugger": true},
	}
	if !reflect.DeepEqual(spec, want) {
		t.Errorf("ReadKernelSpec =\n  %+v\nwant\n  %+v", spec, want)
	}
}

func TestReadKernelSpecBad(t *testing.T) {
	huge := `{"argv": ["x"]` + strings.Repeat(" ", MaxKernelSpecSize) + `}`
	manyArgs := `{"argv": ["x"` + strings.Repeat(`, "a"`, maxSpecArgs) + `]}`
	longArg := `{"argv": ["` + strings.Repeat("a", maxSpecArgBytes+1) + `"]}`
	tests := []struct{ name, data string }{
		{"empty", ""},
		{"not json", "argv = python"},
		{"null", "null"},
		{"array", `[{"argv": ["x"]}]`},
		{"string", `"x"`},
		{"no argv", `{"display_name": "x"}`},
		{"empty argv", `{"argv": []}`},
		{"argv a string", `{"argv": "python3 -f {connection_file}"}`},
		{"argv of numbers", `{"argv": [1, 2]}`},
		{"argv with null", `{"argv": ["x", null]}`},
		{"empty argv[0]", `{"argv": ["", "x"]}`},
		{"NUL in argv", `{"argv": ["x", "a\u0000b"]}`},
		{"too many args", manyArgs},
		{"too long an arg", longArg},
		{"bad interrupt_mode", `{"argv": ["x"], "interrupt_mode": "kill"}`},
		{"display_name not a string", `{"argv": ["x"], "display_name": 3}`},
		{"env value not a string", `{"argv": ["x"], "env": {"A": 1}}`},
		{"env name with =", `{"argv": ["x"], "env": {"A=B": "1"}}`},
		{"metadata not an object", `{"argv": ["x"], "metadata": []}`},
		{"metadata null", `{"argv": ["x"], "metadata": null}`},
		{"display_name null", `{"argv": ["x"], "display_name": null}`},
		{"env value null", `{"argv": ["x"], "env": {"A": null}}`},
		{"ARGV is not argv", `{"ARGV": ["x"]}`},
		{"trailing data", `{"argv": ["x"]} {}`},
		{"BOM", "\xef\xbb\xbf" + `{"argv": ["x"]}`},
		{"too big", huge},
		{"deep nesting", `{"argv": ["x"], "metadata": {"a": ` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "k")
			writeSpec(t, dir, tt.data)
			spec, err := ReadKernelSpec(dir)
			if err == nil {
				t.Fatalf("read %+v, want an error", spec)
			}
			if !errors.Is(err, ErrInvalidKernelSpec) {
				t.Errorf("error %v is not ErrInvalidKernelSpec", err)
			}
		})
	}

	t.Run("kernel.json a directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "k")
		if err := os.MkdirAll(filepath.Join(dir, "kernel.json"), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadKernelSpec(dir); err == nil {
			t.Error("no error")
		}
	})
	t.Run("kernel.json a FIFO", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "k")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(filepath.Join(dir, "kernel.json"), 0o644); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := ReadKernelSpec(dir); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrInvalidKernelSpec) {
				t.Errorf("error %v, want ErrInvalidKernelSpec", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("ReadKernelSpec blocked on a FIFO")
		}
	})
	t.Run("kernel.json a link to /dev/zero", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "k")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/dev/zero", filepath.Join(dir, "kernel.json")); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadKernelSpec(dir); !errors.Is(err, ErrInvalidKernelSpec) {
			t.Errorf("error %v, want ErrInvalidKernelSpec", err)
		}
	})
	t.Run("no kernel.json", func(t *testing.T) {
		if _, err := ReadKernelSpec(t.TempDir()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("error %v, want ErrNotExist", err)
		}
	})
	t.Run("invalid name", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "a b")
		writeSpec(t, dir, `{"argv": ["x"]}`)
		if _, err := ReadKernelSpec(dir); !errors.Is(err, ErrInvalidKernelSpec) {
			t.Errorf("error %v, want ErrInvalidKernelSpec", err)
		}
	})
}

func FuzzReadKernelSpec(f *testing.F) {
	for _, s := range []string{
		`{"argv": ["python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"], "display_name": "Python 3", "language": "python"}`,
		`{"argv": ["x"], "interrupt_mode": "SIGNAL", "env": {"A": "1"}, "metadata": {"a": [1, 2.5, null, {"b": "c"}]}}`,
		`{"argv": []}`, `null`, `[]`, `{"argv": ["x", "\u0000"]}`, `{"argv": ["x"], "env": {"": ""}}`,
		`{"Argv": ["0"], "00000000000000": "000000", "env": {}}`, // keys match exactly; an empty env is none

	} {
		f.Add([]byte(s))
	}
	dir := filepath.Join(f.TempDir(), "k")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, "kernel.json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		spec, err := ReadKernelSpec(dir)
		if err != nil {
			if !errors.Is(err, ErrInvalidKernelSpec) {
				t.Fatalf("error %v is not ErrInvalidKernelSpec", err)
			}
			return
		}
		if err := spec.validate(); err != nil {
			t.Fatalf("read a spec that does not validate: %v", err)
		}
		if spec.InterruptMode != "" && spec.InterruptMode != "signal" && spec.InterruptMode != "message" {
			t.Fatalf("interrupt mode %q", spec.InterruptMode)
		}
		// What was read writes back and reads again the same.
		out, err := json.Marshal(spec)
		if err != nil {
			t.Fatalf("marshal %+v: %v", spec, err)
		}
		again, err := parseKernelSpec(out)
		if err != nil {
			t.Fatalf("re-read %s: %v", out, err)
		}
		again.Name, again.Dir = spec.Name, spec.Dir
		if !reflect.DeepEqual(again, spec) {
			t.Fatalf("round trip changed the spec:\n  %+v\n  %+v", spec, again)
		}
	})
}

func TestWriteKernelSpec(t *testing.T) {
	kdir := filepath.Join(t.TempDir(), "share", "jupyter", "kernels")
	spec := CellboxKernelSpec("/opt/cellbox", "python", "Python")
	dir, err := WriteKernelSpec(kdir, spec, map[string][]byte{"old.txt": []byte("old")})
	if err != nil {
		t.Fatal(err)
	}
	if dir != filepath.Join(kdir, "cellbox-python") {
		t.Fatalf("dir = %q", dir)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("stat %s: %v, %v; want mode 0755", dir, fi, err)
	}

	// A leftover of an install that died long ago is swept; a young one
	// (another install at work) is not.
	oldTemp := filepath.Join(kdir, tempPrefix("cellbox-python", "new")+"123")
	youngTemp := filepath.Join(kdir, tempPrefix("cellbox-python", "old")+"456")
	for _, d := range []string{oldTemp, youngTemp} {
		writeSpec(t, d, specJSON("/x", "x"))
	}
	long := time.Now().Add(-time.Hour)
	if err := os.Chtimes(oldTemp, long, long); err != nil {
		t.Fatal(err)
	}

	spec.Argv[0] = "/usr/local/bin/cellbox"
	if _, err := WriteKernelSpec(kdir, spec, CellboxLogos()); err != nil {
		t.Fatal(err)
	}
	got, err := ReadKernelSpec(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Argv[0] != "/usr/local/bin/cellbox" {
		t.Errorf("replaced spec's argv = %q", got.Argv)
	}
	if _, err := os.Stat(filepath.Join(dir, "old.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old spec's file is still there: %v", err)
	}
	for name, data := range CellboxLogos() {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(b, data) {
			t.Errorf("%s: %v", name, err)
		}
	}
	entries, _ := os.ReadDir(kdir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{filepath.Base(youngTemp), "cellbox-python"}; !slices.Equal(names, want) {
		t.Errorf("kernels dir holds %q, want %q", names, want)
	}

	// A symlinked spec is replaced; what it pointed to is left alone.
	target := filepath.Join(t.TempDir(), "elsewhere")
	writeSpec(t, target, specJSON("/x", "x"))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteKernelSpec(kdir, spec, nil); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		t.Errorf("after replacing a symlink: %v, %v", fi, err)
	}
	if _, err := ReadKernelSpec(target); err != nil {
		t.Errorf("the symlink's target was touched: %v", err)
	}

	if err := RemoveKernelSpec(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after RemoveKernelSpec: %v", err)
	}
	if err := RemoveKernelSpec(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("removing a missing spec: %v", err)
	}
}

func TestWriteKernelSpecRefuses(t *testing.T) {
	kdir := t.TempDir()
	good := CellboxKernelSpec("/x", "python", "Python")
	for name, tc := range map[string]struct {
		spec  KernelSpec
		files map[string][]byte
	}{
		"bad name":       {KernelSpec{Name: "../x", Argv: []string{"x"}}, nil},
		"upper case":     {KernelSpec{Name: "X", Argv: []string{"x"}}, nil},
		"no argv":        {KernelSpec{Name: "x"}, nil},
		"file in subdir": {good, map[string][]byte{"a/b": nil}},
		"kernel.json":    {good, map[string][]byte{"kernel.json": nil}},
		"dot-dot":        {good, map[string][]byte{"..": nil}},
	} {
		if _, err := WriteKernelSpec(kdir, tc.spec, tc.files); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if entries, _ := os.ReadDir(kdir); len(entries) != 0 {
		t.Errorf("refused writes left %d entries", len(entries))
	}
}

func TestCellboxKernelSpec(t *testing.T) {
	for _, tt := range []struct{ lang, display, wantDisplay, wantLang string }{
		{"python", "Python", "Python (cellbox sandbox)", "python"},
		{"javascript", "JavaScript (Node.js)", "JavaScript (Node.js, cellbox sandbox)", "javascript"},
		{"bash", "Bash", "Bash (cellbox sandbox)", "bash"},
		{"r", "R", "R (cellbox sandbox)", "R"},
	} {
		s := CellboxKernelSpec("/bin/cellbox", tt.lang, tt.display)
		want := []string{"/bin/cellbox", "jupyter-kernel", "--language", tt.lang, "-f", "{connection_file}"}
		if s.Name != "cellbox-"+tt.lang || !slices.Equal(s.Argv, want) || s.DisplayName != tt.wantDisplay ||
			s.Language != tt.wantLang || s.InterruptMode != "message" {
			t.Errorf("CellboxKernelSpec(%s) = %+v", tt.lang, s)
		}
		if !IsCellboxKernelSpec(s) || CellboxLanguage(s) != tt.lang {
			t.Errorf("%s: not recognized as a cellbox spec", tt.lang)
		}
		b, _ := json.Marshal(s)
		if strings.Contains(string(b), `"Name"`) || strings.Contains(string(b), `"Dir"`) {
			t.Errorf("kernel.json holds Name or Dir: %s", b)
		}
	}
	for _, argv := range [][]string{
		{"python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"},
		{"cellbox", "jupyter-kernel"},
		{"cellbox", "serve", "--language", "python"},
		{"cellbox", "jupyter-kernel", "--language", "../x"},
	} {
		if IsCellboxKernelSpec(KernelSpec{Argv: argv}) {
			t.Errorf("%q taken for a cellbox spec", argv)
		}
	}
}

// The logo is a box seen from a corner: three faces of a cube. Its SVG
// and PNGs are drawn here; -update-logos rewrites them.
var logoFaces = []struct {
	fill   color.RGBA
	points [][2]float64 // in a 64×64 box
}{
	{color.RGBA{0x7d, 0xd3, 0xfc, 0xff}, [][2]float64{{32, 4}, {56.25, 18}, {32, 32}, {7.75, 18}}},   // top
	{color.RGBA{0x0e, 0xa5, 0xe9, 0xff}, [][2]float64{{7.75, 18}, {32, 32}, {32, 60}, {7.75, 46}}},   // left
	{color.RGBA{0x03, 0x69, 0xa1, 0xff}, [][2]float64{{32, 32}, {56.25, 18}, {56.25, 46}, {32, 60}}}, // right
}

func logoSVG() []byte {
	var b bytes.Buffer
	b.WriteString(`<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64" viewBox="0 0 64 64">` + "\n")
	for _, f := range logoFaces {
		var pts []string
		for _, p := range f.points {
			pts = append(pts, fmt.Sprintf("%g,%g", p[0], p[1]))
		}
		fmt.Fprintf(&b, `  <polygon points="%s" fill="#%02x%02x%02x"/>`+"\n", strings.Join(pts, " "), f.fill.R, f.fill.G, f.fill.B)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// inConvex reports whether p is inside the convex polygon pts.
func inConvex(pts [][2]float64, x, y float64) bool {
	sign := 0.0
	for i, a := range pts {
		b := pts[(i+1)%len(pts)]
		c := (b[0]-a[0])*(y-a[1]) - (b[1]-a[1])*(x-a[0])
		if c != 0 {
			if sign != 0 && (c > 0) != (sign > 0) {
				return false
			}
			sign = c
		}
	}
	return true
}

// logoPNG draws the logo at size×size, 4×4 samples a pixel. It is NRGBA,
// as PNG stores it, so that a decoded file compares exactly.
func logoPNG(size int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	scale := 64 / float64(size)
	const n = 4
	for py := range size {
		for px := range size {
			var r, g, b, hits int
			for sy := range n {
				for sx := range n {
					x := (float64(px) + (float64(sx)+0.5)/n) * scale
					y := (float64(py) + (float64(sy)+0.5)/n) * scale
					for _, f := range logoFaces {
						if inConvex(f.points, x, y) {
							r, g, b, hits = r+int(f.fill.R), g+int(f.fill.G), b+int(f.fill.B), hits+1
							break
						}
					}
				}
			}
			if hits > 0 {
				img.SetNRGBA(px, py, color.NRGBA{uint8(r / hits), uint8(g / hits), uint8(b / hits), uint8(hits * 0xff / (n * n))})
			}
		}
	}
	return img
}

func TestLogos(t *testing.T) {
	want := map[string]any{"logo-svg.svg": logoSVG(), "logo-32x32.png": logoPNG(32), "logo-64x64.png": logoPNG(64)}
	if *updateLogos {
		for name, v := range want {
			var data []byte
			switch v := v.(type) {
			case []byte:
				data = v
			case *image.NRGBA:
				var b bytes.Buffer
				enc := png.Encoder{CompressionLevel: png.BestCompression}
				if err := enc.Encode(&b, v); err != nil {
					t.Fatal(err)
				}
				data = b.Bytes()
			}
			if err := os.WriteFile(filepath.Join("logos", name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Log("rewrote logos/; the binary embeds them, so run the test again to check them")
		return
	}
	got := CellboxLogos()
	if len(got) != len(want) {
		t.Fatalf("CellboxLogos has %d files, want %d", len(got), len(want))
	}
	for name, v := range want {
		data := got[name]
		if len(data) > 8<<10 {
			t.Errorf("%s is %d bytes; keep the logos small", name, len(data))
		}
		switch v := v.(type) {
		case []byte:
			if !bytes.Equal(data, v) {
				t.Errorf("%s differs from the drawing; run go test -run TestLogos -update-logos", name)
			}
		case *image.NRGBA:
			// Pixels, not bytes: another Go's compressor may write other bytes.
			img, err := png.Decode(bytes.NewReader(data))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if img.Bounds() != v.Bounds() {
				t.Fatalf("%s is %v, want %v", name, img.Bounds(), v.Bounds())
			}
			for y := range v.Bounds().Dy() {
				for x := range v.Bounds().Dx() {
					r1, g1, b1, a1 := img.At(x, y).RGBA()
					r2, g2, b2, a2 := v.At(x, y).RGBA()
					if r1 != r2 || g1 != g2 || b1 != b2 || a1 != a2 {
						t.Fatalf("%s differs from the drawing at (%d,%d); run go test -run TestLogos -update-logos", name, x, y)
					}
				}
			}
		}
	}
}

// TestKernelDirsMatchJupyter compares DataDirs and KernelDirs with what
// Debian's jupyter_core and jupyter_client compute in the same environment.
func TestKernelDirsMatchJupyter(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("compared with Debian's python3-jupyter-client on Linux")
	}
	python := requireJupyterPython(t)
	root := t.TempDir()
	home := filepath.Join(root, "home")
	if err := os.MkdirAll(filepath.Join(home, ".ipython"), 0o755); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{
		"HOME": home, "JUPYTER_DATA_DIR": "", "JUPYTER_PATH": "", "XDG_DATA_HOME": "", "PYTHONUSERBASE": "",
		"IPYTHONDIR": "", "VIRTUAL_ENV": "", "CONDA_PREFIX": "", "PYTHONNOUSERSITE": "", "JUPYTER_PREFER_ENV_PATH": "",
	}
	for _, tc := range []struct {
		name string
		vars map[string]string
	}{
		{"defaults", nil},
		{"XDG_DATA_HOME", map[string]string{"XDG_DATA_HOME": filepath.Join(root, "xdg")}},
		{"JUPYTER_DATA_DIR and JUPYTER_PATH", map[string]string{
			"JUPYTER_DATA_DIR": filepath.Join(root, "jd"),
			"JUPYTER_PATH":     filepath.Join(root, "p1") + "/:" + filepath.Join(root, "p2"),
		}},
		{"PYTHONUSERBASE and IPYTHONDIR", map[string]string{"PYTHONUSERBASE": filepath.Join(root, "ub"), "IPYTHONDIR": filepath.Join(root, "ipy")}},
		{"PYTHONNOUSERSITE", map[string]string{"PYTHONNOUSERSITE": "1", "XDG_DATA_HOME": filepath.Join(root, "xdg")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range base {
				t.Setenv(k, v)
				if v == "" {
					os.Unsetenv(k) // Python takes IPYTHONDIR="" for the current directory
				}
			}
			for k, v := range tc.vars {
				t.Setenv(k, v)
			}
			cmd := exec.Command(python, "-c", `import json
from jupyter_core.paths import jupyter_path
from jupyter_client.kernelspec import KernelSpecManager
print(json.dumps({"data": jupyter_path(), "kernels": KernelSpecManager().kernel_dirs}))`)
			cmd.Dir = root
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s: %v", python, err)
			}
			var jupyter struct{ Data, Kernels []string }
			if err := json.Unmarshal(out, &jupyter); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			for i := range jupyter.Data {
				jupyter.Data[i] = filepath.Clean(jupyter.Data[i])
			}
			for i := range jupyter.Kernels {
				jupyter.Kernels[i] = filepath.Clean(jupyter.Kernels[i])
			}
			if got := DataDirs(); !slices.Equal(got, jupyter.Data) {
				t.Errorf("DataDirs() =\n  %q\njupyter_path() =\n  %q", got, jupyter.Data)
			}
			if got := KernelDirs(); !slices.Equal(got, jupyter.Kernels) {
				t.Errorf("KernelDirs() =\n  %q\nKernelSpecManager().kernel_dirs =\n  %q", got, jupyter.Kernels)
			}
		})
	}
}

// requireJupyterPython is Debian's python3 with jupyter_client: CI
// installs it, so its absence fails the test rather than skipping it.
func requireJupyterPython(t *testing.T) string {
	t.Helper()
	const python = "/usr/bin/python3"
	out, err := exec.Command(python, "-c", "import jupyter_core, jupyter_client").CombinedOutput()
	if err != nil {
		t.Fatalf("%s cannot import jupyter_core and jupyter_client (%v: %s); install Debian's python3-jupyter-client and python3-jupyter-core (apt-get install python3-jupyter-client python3-jupyter-core jupyter-core)", python, err, bytes.TrimSpace(out))
	}
	return python
}
