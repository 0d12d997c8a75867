package godriver

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

func TestMain(m *testing.M) {
	if sandbox.Main() { // the cache program's entry, run by TestCacheLayers's go command
		return
	}
	os.Exit(m.Run())
}

// snapshot lists a directory's files and their sizes and times.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out[p] = fi.ModTime().String() + " " + fi.Mode().String()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCacheLayers: a build through the cache program finds what a plain
// build put in the shared layer (nothing is compiled again), writes only
// to the own layer, and a second build finds its own objects there.
func TestCacheLayers(t *testing.T) {
	goPath, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	shared, own, plain, prog := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	for name, text := range map[string]string{"go.mod": "module m\n\ngo 1.22\n", "main.go": "package main\n\nfunc main() {}\n"} {
		if err := os.WriteFile(filepath.Join(prog, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	build := func(set map[string]string) string {
		t.Helper()
		cmd := exec.Command(goPath, "build", "-x", "-o", filepath.Join(prog, "out"), ".")
		cmd.Dir = prog
		cmd.Env = buildEnv(os.Environ(), set)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		return string(out)
	}
	build(map[string]string{"GOCACHE": shared, "GOPATH": filepath.Join(plain, "gopath")})
	before := snapshot(t, shared)

	layered := map[string]string{
		"GOCACHE": plain, "GOPATH": filepath.Join(plain, "gopath"),
		"GOCACHEPROG": cacheProg(self, shared, own), sandbox.ReexecEnv: CacheEntry,
	}
	if !strings.HasPrefix(layered["GOCACHEPROG"], "'"+self+"' ") {
		t.Fatalf("GOCACHEPROG = %q", layered["GOCACHEPROG"])
	}
	out := build(layered)
	if strings.Contains(out, "/compile ") {
		t.Fatalf("a package was compiled again though the shared layer has it:\n%s", out)
	}
	after := snapshot(t, shared)
	if len(after) != len(before) {
		t.Fatalf("the shared layer changed: %d files, then %d", len(before), len(after))
	}
	for p, v := range before {
		if after[p] != v {
			t.Fatalf("the shared layer's %s changed", p)
		}
	}
	// A package of the program's own, compiled once, is found in the own
	// layer the next time.
	if err := os.WriteFile(filepath.Join(prog, "main.go"), []byte("package main\n\nvar x = 42\n\nfunc main() { _ = x }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := build(layered); !strings.Contains(out, "/compile ") {
		t.Fatalf("the changed main was not compiled:\n%s", out)
	}
	if len(snapshot(t, own)) == 0 {
		t.Fatal("nothing was put in the own layer")
	}
	if out := build(layered); strings.Contains(out, "/compile ") {
		t.Fatalf("the own layer's objects were not found:\n%s", out)
	}
}

func TestCacheProtocolBadInput(t *testing.T) {
	c := &layers{own: t.TempDir()}
	for _, in := range []string{"", "not json", `{"ID":1,"Command":"put","BodySize":5}` + "\n" + `"!!"`, `{"ID":1,"Command":"get","ActionID":"AAAA"}`} {
		var out strings.Builder
		_ = c.serve(strings.NewReader(in), &out) // no panic; an error ends it
		if !strings.Contains(out.String(), `"KnownCommands":["get","put","close"]`) {
			t.Fatalf("%q: no greeting: %s", in, out.String())
		}
	}
	if r := c.get(make([]byte, hashSize)); !r.Miss {
		t.Fatalf("get of an unknown action = %+v", r)
	}
}

// TestSharedCacheDirNotBelowTmp: a user cache directory below /tmp (which
// a sandbox mounts its own over) gives no shared layer.
func TestSharedCacheDirNotBelowTmp(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", filepath.Join(t.TempDir(), "cache"))
	if !strings.HasPrefix(os.Getenv("XDG_CACHE_HOME"), "/tmp/") {
		t.Skip("TMPDIR is not below /tmp")
	}
	if dir := SharedCacheDir(); dir != "" {
		t.Fatalf("SharedCacheDir = %q, want none below /tmp", dir)
	}
}
