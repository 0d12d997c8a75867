package export

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// writeTree writes files (a "->" prefix makes a symlink) under a new
// directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if target, ok := strings.CutPrefix(content, "->"); ok {
			err = os.Symlink(target, p)
		} else {
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// globIgnorer ignores build/ and *.log, as a .gitignore would.
func globIgnorer(_ context.Context, paths []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, p := range paths {
		if p == "build/" || strings.HasSuffix(p, ".log") {
			out[p] = true
		}
	}
	return out, nil
}

func TestWriteDir(t *testing.T) {
	src := writeTree(t, map[string]string{
		"app.py":                  "from flask import Flask\napp = Flask(__name__)\n",
		"templates/index.html":    "<p>hi</p>\n",
		"requirements.txt":        "flask\n",
		"build/out.bin":           "ignored\n",
		"debug.log":               "ignored\n",
		"node_modules/x/index.js": "left out\n",
		".git/HEAD":               "left out\n",
		"secret":                  "->/etc/shadow",
		"templates/link.html":     "->index.html",
		"sub/__pycache__/a.pyc":   "left out",
	})
	if err := syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "shop")
	var steps []string
	res, err := Write(context.Background(), Options{Tree: os.DirFS(src).(Tree), Ignored: globIgnorer, Env: envFS(), Dest: dest,
		Progress: func(s string) { steps = append(steps, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.App.Kind != KindFlask || res.Path != dest || res.Skipped != 1 || len(steps) < 3 {
		t.Fatalf("result %+v, steps %q", res, steps)
	}
	for _, gone := range []string{"app/build", "app/debug.log", "app/node_modules", "app/.git", "app/fifo", "app/sub/__pycache__", "image"} {
		if _, err := os.Lstat(filepath.Join(dest, gone)); err == nil {
			t.Errorf("%s was exported", gone)
		}
	}
	if target, err := os.Readlink(filepath.Join(dest, "app/secret")); err != nil || target != "/etc/shadow" {
		t.Errorf("the symlink out of the workspace: %q %v, want it written as a symlink", target, err)
	}
	if target, _ := os.Readlink(filepath.Join(dest, "app/templates/link.html")); target != "index.html" {
		t.Errorf("a symlink inside: %q", target)
	}
	req, _ := os.ReadFile(filepath.Join(dest, "app/requirements.txt"))
	if !strings.Contains(string(req), "\nflask\ncbdemo==1.0\nFlask-Cors==4.0.1\n") {
		t.Errorf("requirements.txt:\n%s", req)
	}
	df, _ := os.ReadFile(filepath.Join(dest, "Dockerfile"))
	if !strings.Contains(string(df), "FROM python:3.11-slim\n") {
		t.Errorf("the base image is not /env's Python's:\n%s", df)
	}
	files, bytes := 0, int64(0)
	filepath.Walk(dest, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			files++
			if info.Mode().IsRegular() {
				bytes += info.Size()
			}
		}
		return nil
	})
	if res.Files != files || res.Bytes != bytes {
		t.Errorf("result counts %d files, %d bytes; the bundle has %d, %d", res.Files, res.Bytes, files, bytes)
	}
}

func TestWriteRefuses(t *testing.T) {
	src := writeTree(t, map[string]string{"app.py": "print(1)\n"})
	tree := os.DirFS(src).(Tree)
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "x"), nil, 0o644)
	file := filepath.Join(full, "x")
	for name, o := range map[string]Options{
		"relative dest":    {Dest: "out"},
		"unclean dest":     {Dest: full + "/../x"},
		"non-empty dest":   {Dest: full},
		"dest is a file":   {Dest: file},
		"unknown format":   {Dest: filepath.Join(t.TempDir(), "b"), Format: "zip"},
		"base without oci": {Dest: filepath.Join(t.TempDir(), "b"), Base: "/x"},
		"bad port":         {Dest: filepath.Join(t.TempDir(), "b"), Port: -1},
		"no base image":    {Dest: filepath.Join(t.TempDir(), "b"), Format: FormatOCI, ImagesDir: t.TempDir()},
	} {
		t.Run(name, func(t *testing.T) {
			o.Tree = tree
			_, err := Write(context.Background(), o)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Write: %v, want ErrInvalid", err)
			}
			if name == "no base image" {
				if !strings.Contains(err.Error(), "skopeo copy docker://python:") {
					t.Fatalf("the error does not say how to get a base image: %v", err)
				}
				if _, serr := os.Stat(o.Dest); serr == nil {
					t.Fatalf("a failed export left %s", o.Dest)
				}
			}
		})
	}
	if names, _ := os.ReadDir(full); len(names) != 1 {
		t.Fatalf("a refused export touched the non-empty dest: %v", names)
	}
}

func TestWriteLongName(t *testing.T) {
	src := t.TempDir()
	deep := src
	for range 6 {
		deep = filepath.Join(deep, strings.Repeat("d", 200))
	}
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(src, "app.py"), []byte("print(1)\n"), 0o644)
	dest := filepath.Join(t.TempDir(), "b")
	_, err := Write(context.Background(), Options{Tree: os.DirFS(src).(Tree), Dest: dest})
	if !errors.Is(err, ErrLimit) || len(err.Error()) > 400 {
		t.Fatalf("Write of a path over %d bytes: %v", maxPath, err)
	}
}

// TestWriteWholeOrNothing: a bundle is written beside dest and moved there
// whole. Exports racing to one dest: one bundle wins, the others fail
// with ErrInvalid, and nothing of theirs is left; a failed export leaves
// dest as it was; an empty dest keeps its mode.
func TestWriteWholeOrNothing(t *testing.T) {
	src := writeTree(t, map[string]string{"app.py": "print('hi')\n", "data/a.txt": strings.Repeat("a", 1<<20)})
	parent := t.TempDir()
	dest := filepath.Join(parent, "race")
	const n = 4
	errs := make(chan error, n)
	var (
		mu    sync.Mutex
		saw   []string
		start = make(chan struct{})
	)
	for range n {
		go func() {
			<-start
			res, err := Write(context.Background(), Options{Tree: os.DirFS(src).(Tree), Dest: dest,
				Progress: func(string) {
					// dest never holds half a bundle.
					if ents, _ := os.ReadDir(dest); len(ents) > 0 && len(ents) < 5 {
						mu.Lock()
						saw = append(saw, fmt.Sprint(len(ents)))
						mu.Unlock()
					}
				}})
			if err == nil && res.Path != dest {
				err = fmt.Errorf("path %s", res.Path)
			}
			errs <- err
		}()
	}
	close(start)
	won := 0
	for range n {
		switch err := <-errs; {
		case err == nil:
			won++
		case !errors.Is(err, ErrInvalid):
			t.Errorf("a losing export: %v, want ErrInvalid", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d exports to one dest succeeded, want 1", won)
	}
	if len(saw) > 0 {
		t.Errorf("dest seen half written: %v entries", saw)
	}
	if b, err := os.ReadFile(filepath.Join(dest, "app", "data", "a.txt")); err != nil || len(b) != 1<<20 {
		t.Errorf("the bundle: %d bytes, %v", len(b), err)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 1 {
		t.Errorf("beside dest: %v, want only dest", ents)
	}

	// A failed export: an empty dest stays, empty, with its mode.
	empty := filepath.Join(parent, "empty")
	if err := os.Mkdir(empty, 0o750); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(context.Background(), Options{Tree: os.DirFS(src).(Tree), Dest: empty, Command: []string{""}}); err == nil {
		t.Fatal("an export with an empty command succeeded")
	}
	if ents, err := os.ReadDir(empty); err != nil || len(ents) != 0 {
		t.Errorf("a failed export into an empty dest left %v %v", ents, err)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 2 {
		t.Errorf("beside dest after a failure: %v", ents)
	}
	if _, err := Write(context.Background(), Options{Tree: os.DirFS(src).(Tree), Dest: empty}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(empty); err != nil || st.Mode().Perm() != 0o750 {
		t.Errorf("an empty dest's mode after the export: %v %v, want 0750", st.Mode(), err)
	}
}
