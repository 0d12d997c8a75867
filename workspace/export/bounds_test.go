package export

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// copyOnly runs copyTree alone over src, so that a test sees what the
// exporter keeps in memory.
func copyOnly(t *testing.T, src string) (*exporter, error) {
	t.Helper()
	x := &exporter{o: Options{Tree: os.DirFS(src).(Tree)}, app: filepath.Join(t.TempDir(), AppDir), res: &Result{}}
	return x, x.copyTree(context.Background())
}

// TestCopyTreeKeepsFewHeads: only the files detection and writePackages
// read are held, within maxHeads (the main scripts apart), and every file
// is still copied whole.
func TestCopyTreeKeepsFewHeads(t *testing.T) {
	defer func(old int) { maxHeads = old }(maxHeads)
	maxHeads = 10 << 10
	big := strings.Repeat("x", 300<<10)
	script := "# " + strings.Repeat("y", 4<<10) + "\n"
	files := map[string]string{
		"0data.bin":  big,
		"0notes.txt": big,
		"model.onnx": big,
		"app.py":     script,
		"a1.py":      script,
		"a2.py":      script,
		"a3.py":      script,
		"a4.js":      script,
		"sub/x.py":   script,
	}
	x, err := copyOnly(t, writeTree(t, files))
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	total := 0
	for name, b := range x.top {
		kept = append(kept, name)
		total += len(b)
	}
	slices.Sort(kept)
	for _, name := range kept {
		if name != "app.py" && !strings.HasPrefix(name, "a") {
			t.Errorf("the head of %s was kept (kept: %q)", name, kept)
		}
	}
	if string(x.top["app.py"]) != script {
		t.Errorf("the main script's head was not kept whole (kept: %q)", kept)
	}
	if x.heads > maxHeads || total > maxHeads+len(script) {
		t.Errorf("kept %d bytes of heads (%d counted), over the bound %d: %q", total, x.heads, maxHeads, kept)
	}
	for name, content := range files {
		if b, err := os.ReadFile(filepath.Join(x.app, name)); err != nil || string(b) != content {
			t.Errorf("%s copied as %d bytes (%v), want %d", name, len(b), err, len(content))
		}
	}
}

// TestWriteWholePackageFiles: requirements.txt and package.json over
// the head detection reads are read whole; past maxJSONRead the export
// fails, saying so.
func TestWriteWholePackageFiles(t *testing.T) {
	var req strings.Builder
	for i := 0; req.Len() < maxDetectRead+(64<<10); i++ {
		req.WriteString("# a comment to make the file long enough to be cut\n")
	}
	req.WriteString("zz-last-package==1.0\n")
	src := writeTree(t, map[string]string{"app.py": "print('hi')\n", "requirements.txt": req.String()})
	dest := filepath.Join(t.TempDir(), "py")
	if _, err := Write(context.Background(), Options{Tree: os.DirFS(src).(Tree), Dest: dest, PythonVersion: "3.11"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dest, "app/requirements.txt"))
	if err != nil || !bytes.Contains(b, []byte("\nzz-last-package==1.0\n")) {
		t.Errorf("requirements.txt lost its last line (%v): ...%q", err, b[max(0, len(b)-200):])
	}

	pkg := `{"name": "big", "description": "` + strings.Repeat("d", maxDetectRead) + `", "scripts": {"start": "node server.js"}}`
	src = writeTree(t, map[string]string{"server.js": "require('http').createServer().listen(4000)\n", "package.json": pkg})
	dest = filepath.Join(t.TempDir(), "node")
	res, err := Write(context.Background(), Options{Tree: os.DirFS(src).(Tree), Dest: dest, NodeVersion: "20"})
	if err != nil {
		t.Fatal(err)
	}
	if res.App.Kind != KindNPM || res.App.Port != 4000 {
		t.Errorf("a package.json over %d bytes: app %+v, want npm start on 4000", maxDetectRead, res.App)
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "app/package.json")); !bytes.Contains(b, []byte(`"start": "node server.js"`)) {
		t.Errorf("package.json written without its scripts: %.300s", b)
	}

	src = writeTree(t, map[string]string{"server.js": "1\n", "package.json": `{"x": "` + strings.Repeat("d", maxJSONRead) + `"}`})
	dest = filepath.Join(t.TempDir(), "huge")
	_, err = Write(context.Background(), Options{Tree: os.DirFS(src).(Tree), Dest: dest, NodeVersion: "20"})
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "package.json is over 4 MiB") {
		t.Errorf("a package.json over %d bytes: %v, want ErrLimit naming it", maxJSONRead, err)
	}
	if _, serr := os.Stat(dest); serr == nil {
		t.Errorf("the failed export left %s", dest)
	}
}

// TestWriteMainOutsideHeads: package.json's main, whose head copyTree
// does not keep (server.cjs), is still read for its port.
func TestWriteMainOutsideHeads(t *testing.T) {
	src := writeTree(t, map[string]string{
		"server.cjs":   "require('http').createServer().listen(4321)\n",
		"package.json": `{"name": "m", "main": "server.cjs"}`,
	})
	res, err := Write(context.Background(), Options{Tree: os.DirFS(src).(Tree), Dest: filepath.Join(t.TempDir(), "m"), NodeVersion: "20"})
	if err != nil {
		t.Fatal(err)
	}
	if res.App.Kind != KindNode || !slices.Equal(res.App.Command, []string{"node", "server.cjs"}) || res.App.Port != 4321 {
		t.Errorf("app %+v, want node server.cjs on 4321", res.App)
	}
}

// TestWriteCountsDirectories: directories count towards maxFiles, so a
// tree of empty directories is bounded too.
func TestWriteCountsDirectories(t *testing.T) {
	defer func(old int) { maxFiles = old }(maxFiles)
	maxFiles = 50
	src := t.TempDir()
	for i := range 30 {
		if err := os.MkdirAll(filepath.Join(src, "wide", strings.Repeat("d", i+1), "deep"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(src, "app.py"), []byte("print(1)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "dirs")
	_, err := Write(context.Background(), Options{Tree: os.DirFS(src).(Tree), Dest: dest, PythonVersion: "3.11"})
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "files and directories") {
		t.Errorf("61 directories with maxFiles %d: %v, want ErrLimit", maxFiles, err)
	}
	maxFiles = 100
	if _, err := Write(context.Background(), Options{Tree: os.DirFS(src).(Tree), Dest: filepath.Join(t.TempDir(), "dirs"), PythonVersion: "3.11"}); err != nil {
		t.Errorf("61 directories with maxFiles %d: %v", maxFiles, err)
	}
}

// changingTree is os.DirFS(dir) whose entries in gone vanish (or, in
// replaced, turn into a directory) as the walk reaches them: what an app
// that runs on during the export does.
type changingTree struct {
	Tree
	dir            string
	gone, replaced map[string]bool
}

func (c changingTree) change(name string) {
	p := filepath.Join(c.dir, filepath.FromSlash(name))
	switch {
	case c.gone[name]:
		_ = os.RemoveAll(p)
	case c.replaced[name]:
		_ = os.RemoveAll(p)
		_ = os.Mkdir(p, 0o755)
	}
}

func (c changingTree) Open(name string) (fs.File, error) {
	c.change(name)
	return c.Tree.Open(name)
}

func (c changingTree) ReadDir(name string) ([]fs.DirEntry, error) {
	c.change(name)
	return c.Tree.ReadDir(name)
}

func (c changingTree) ReadLink(name string) (string, error) {
	c.change(name)
	return c.Tree.ReadLink(name)
}

// TestCopyTreeChangedUnderTheWalk: entries that go, or change type,
// between the listing and the copy are left out and counted; the rest is
// copied and the export goes on.
func TestCopyTreeChangedUnderTheWalk(t *testing.T) {
	src := writeTree(t, map[string]string{"app.py": "print(1)\n", "db.sqlite-journal": "j", "logs/old.log": "l", "tmp/upload": "u", "keep/a.txt": "a", "link": "->app.py"})
	tree := changingTree{Tree: os.DirFS(src).(Tree), dir: src,
		gone:     map[string]bool{"db.sqlite-journal": true, "tmp": true, "link": true},
		replaced: map[string]bool{"logs/old.log": true}}
	x := &exporter{o: Options{Tree: tree}, app: filepath.Join(t.TempDir(), AppDir), res: &Result{}}
	if err := x.copyTree(context.Background()); err != nil {
		t.Fatalf("copyTree: %v", err)
	}
	if x.res.Skipped != 4 || x.res.Files != 2 {
		t.Errorf("skipped %d, files %d; want 4 and 2", x.res.Skipped, x.res.Files)
	}
	for _, p := range []string{"db.sqlite-journal", "tmp", "link", "logs/old.log"} {
		if _, err := os.Lstat(filepath.Join(x.app, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s in the bundle: %v", p, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(x.app, "keep", "a.txt")); err != nil || string(b) != "a" {
		t.Errorf("keep/a.txt: %q %v", b, err)
	}
}

// TestCopyTreeEndsWithTheContext: a cancelled export stops copying.
func TestCopyTreeEndsWithTheContext(t *testing.T) {
	src := writeTree(t, map[string]string{"app.py": "print(1)\n"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	x := &exporter{o: Options{Tree: os.DirFS(src).(Tree)}, app: filepath.Join(t.TempDir(), AppDir), res: &Result{}}
	if err := x.copyTree(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("copyTree with a cancelled context: %v", err)
	}
	// The copy of one file checks it too.
	dst := filepath.Join(t.TempDir(), "app.py")
	if _, _, err := x.copyFile(ctx, "app.py", dst, 1<<20); !errors.Is(err, context.Canceled) {
		t.Fatalf("copyFile with a cancelled context: %v", err)
	}
}
