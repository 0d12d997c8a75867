package export

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Formats.
const (
	FormatDir = "dir"
	FormatOCI = "oci"
)

// Options are one export.
type Options struct {
	// Tree is the app's files: the workspace as its sandbox sees it.
	Tree Tree
	// Ignored says which paths the project ignores (nil: none); they are
	// left out.
	Ignored Ignorer
	// Env is the workspace's /env (nil: none).
	Env fs.FS
	// Dest is the bundle's directory: absolute, clean, and missing or
	// empty.
	Dest   string
	Format string
	// Command runs the app (nil: detected); Port is what it serves on
	// (0: detected).
	Command []string
	Port    int
	// Base is the OCI image layout to build on ("DIR" or "DIR:TAG"), for
	// FormatOCI; "" looks in ImagesDir.
	Base string
	// ImagesDir is where base image layouts are looked for ("":
	// DefaultImagesDir).
	ImagesDir string
	// Name names the app and its image ("": Dest's base name).
	Name string
	// PythonVersion and NodeVersion ("3.11", "20") choose the base image
	// ("": those of /env's pyvenv.cfg, else of the host's python3 and node).
	PythonVersion, NodeVersion string
	// Progress is told of each step (nil: nobody).
	Progress func(msg string)
}

// Result is what an export wrote.
type Result struct {
	Path  string
	Files int
	Bytes int64
	App   App
	// Image is set with FormatOCI.
	Image *Image
	// Skipped counts the entries left out: special files (FIFOs, sockets,
	// devices), and those that changed under the walk (gone, or of
	// another type, as the app wrote on).
	Skipped int
}

// Image is the OCI image written.
type Image struct {
	// Digest is the image manifest's digest; Layout the layout's
	// directory; Ref its name (NAME:latest); Base the base image used.
	Digest, Layout, Ref, Base string
}

// Write writes the bundle. It is written in a new directory beside Dest
// and renamed to Dest when whole: Dest never holds half a bundle, two
// exports to one Dest cannot mix (the second finds it not empty), and on
// an error what was written is removed.
func Write(ctx context.Context, o Options) (res *Result, err error) {
	start := time.Now()
	if err := checkOptions(&o); err != nil {
		return nil, err
	}
	mode, err := checkDest(o.Dest)
	if err != nil {
		return nil, err
	}
	dest := o.Dest
	o.Dest, err = os.MkdirTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".export-")
	if err != nil {
		return nil, fmt.Errorf("%w: create a directory beside dest: %v", ErrInvalid, err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(o.Dest)
		}
	}()
	if err := os.Chmod(o.Dest, mode); err != nil {
		return nil, fmt.Errorf("set the mode of %s: %w", o.Dest, err)
	}
	res, err = write(ctx, o, start)
	if err != nil {
		return nil, err
	}
	// rename(2) itself: it replaces an empty directory, which os.Rename
	// refuses.
	if err := syscall.Rename(o.Dest, dest); err != nil {
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) || errors.Is(err, syscall.ENOTDIR) {
			return nil, fmt.Errorf("%w: dest %s is not empty any more (written while the export ran): give a new or empty directory", ErrInvalid, dest)
		}
		return nil, fmt.Errorf("move the bundle to %s: %w", dest, err)
	}
	res.Path = dest
	if res.Image != nil {
		res.Image.Layout = filepath.Join(dest, ImageDir)
	}
	return res, nil
}

// write writes the bundle in o.Dest, a new empty directory.
func write(ctx context.Context, o Options, start time.Time) (*Result, error) {
	x := &exporter{o: o, app: filepath.Join(o.Dest, AppDir), res: &Result{Path: o.Dest}}
	x.progress("copying the workspace's files")
	if err := x.copyTree(ctx); err != nil {
		return nil, err
	}
	x.readMain()
	app, err := Detect(x.top, o.Command, o.Port)
	if err != nil {
		return nil, err
	}
	x.res.App = app
	b := Bundle{Name: o.Name, App: app}
	x.progress("writing the packages")
	if err := x.writePackages(ctx, &b); err != nil {
		return nil, err
	}
	version := o.PythonVersion
	if app.Lang == LangNode {
		version = o.NodeVersion
	}
	if version == "" {
		version = hostVersion(app.Lang, o.Env)
	}
	b.BaseImage = BaseImage(app.Lang, version)
	if o.Format == FormatOCI {
		b.Image = o.Name + ":latest"
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{"Dockerfile", Dockerfile(b)},
		{".dockerignore", DockerIgnore()},
		{"compose.yaml", Compose(b)},
		{"README.md", Readme(b)},
	} {
		if err := x.writeFile(filepath.Join(o.Dest, f.name), f.data, 0o644); err != nil {
			return nil, err
		}
	}
	if o.Format == FormatOCI {
		x.progress("building the OCI image")
		img, n, files, err := writeImage(ctx, o, b)
		if err != nil {
			return nil, err
		}
		x.res.Image = img
		x.res.Bytes += n
		x.res.Files += files
	}
	x.progress(fmt.Sprintf("exported in %v", time.Since(start).Round(time.Millisecond)))
	return x.res, nil
}

var reName = regexp.MustCompile(`^[a-z0-9]+(?:[._-][a-z0-9]+)*$`)

func checkOptions(o *Options) error {
	switch {
	case o.Tree == nil:
		return fmt.Errorf("%w: no tree to export", ErrInvalid)
	case o.Dest == "":
		return fmt.Errorf("%w: dest is empty", ErrInvalid)
	case !filepath.IsAbs(o.Dest):
		return fmt.Errorf("%w: dest %q is not an absolute path", ErrInvalid, o.Dest)
	case filepath.Clean(o.Dest) != o.Dest || strings.IndexByte(o.Dest, 0) >= 0 || len(o.Dest) > maxPath:
		return fmt.Errorf("%w: dest %q is not a clean path", ErrInvalid, o.Dest)
	case o.Dest == "/":
		return fmt.Errorf("%w: dest is /", ErrInvalid)
	}
	switch o.Format {
	case "":
		o.Format = FormatDir
	case FormatDir, FormatOCI:
	default:
		return fmt.Errorf("%w: format %q: want %q or %q", ErrInvalid, o.Format, FormatDir, FormatOCI)
	}
	if o.Format != FormatOCI && o.Base != "" {
		return fmt.Errorf("%w: base is for format %q", ErrInvalid, FormatOCI)
	}
	if o.Name == "" {
		o.Name = npmName(filepath.Base(o.Dest))
	}
	if !reName.MatchString(o.Name) || len(o.Name) > 100 {
		return fmt.Errorf("%w: name %q: want lowercase letters, digits and . _ - between them", ErrInvalid, o.Name)
	}
	return nil
}

// checkDest checks that dest is missing (its parent is made) or an empty
// directory, and returns the mode the bundle's directory gets: dest's
// own, or 0755.
func checkDest(dest string) (os.FileMode, error) {
	st, err := os.Lstat(dest)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			return 0, fmt.Errorf("%w: create the parent of dest: %v", ErrInvalid, err)
		}
		return 0o755, nil
	case err != nil:
		return 0, fmt.Errorf("%w: dest: %v", ErrInvalid, err)
	case !st.IsDir():
		return 0, fmt.Errorf("%w: dest %s exists and is not a directory", ErrInvalid, dest)
	}
	f, err := os.Open(dest)
	if err != nil {
		return 0, fmt.Errorf("%w: dest: %v", ErrInvalid, err)
	}
	defer f.Close()
	if names, _ := f.Readdirnames(1); len(names) > 0 {
		return 0, fmt.Errorf("%w: dest %s is not empty: give a new or empty directory", ErrInvalid, dest)
	}
	return st.Mode().Perm(), nil
}

// exporter is one Write under way.
type exporter struct {
	o   Options
	app string // the bundle's app directory
	res *Result
	// top holds the top-level regular files of the tree that detection
	// and writePackages read (name to content, as keepHead says): not
	// every file's, so that a sandbox's tree does not make the daemon
	// hold it.
	top map[string][]byte
	// heads are the bytes of top counted towards maxHeads; entries the
	// files, symlinks and directories copied, towards maxFiles.
	heads, entries int
}

// readMain adds package.json's main to top when copyTree did not keep
// it (a main such as server.cjs): its head as copied to app/, never
// through a symlink.
func (x *exporter) readMain() {
	m := path.Clean(parsePackageJSON(x.top["package.json"]).Main)
	if m == "." || !isPlainName(m) || x.top[m] != nil {
		return
	}
	p := filepath.Join(x.app, m)
	lst, err := os.Lstat(p)
	if err != nil || !lst.Mode().IsRegular() {
		return // not copied (ignored), or not a regular file
	}
	f, err := os.Open(p)
	if err != nil {
		return
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !os.SameFile(st, lst) {
		return
	}
	if b, err := io.ReadAll(io.LimitReader(f, maxDetectRead)); err == nil {
		x.top[m] = b
	}
}

func (x *exporter) progress(msg string) {
	if x.o.Progress != nil {
		x.o.Progress(msg)
	}
}

// writePackages writes app/requirements.txt and app/package.json, as the
// app's language and /env's packages ask.
func (x *exporter) writePackages(ctx context.Context, b *Bundle) error {
	py, err := PythonPackages(ctx, x.o.Env)
	if err != nil {
		return err
	}
	node, err := NodePackages(ctx, x.o.Env)
	if err != nil {
		return err
	}
	if b.App.Lang == LangPython || len(py) > 0 || x.top["requirements.txt"] != nil {
		data := Requirements(x.top["requirements.txt"], py, b.App.Needs)
		if err := x.replaceFile(filepath.Join(x.app, "requirements.txt"), data); err != nil {
			return err
		}
		b.Requirements = true
	}
	if b.App.Lang == LangNode || len(node) > 0 {
		data, err := PackageJSON(x.top["package.json"], x.o.Name, node, b.App)
		if err != nil {
			return err
		}
		if err := x.replaceFile(filepath.Join(x.app, "package.json"), data); err != nil {
			return err
		}
		b.PackageJSON = true
	}
	return nil
}

// replaceFile writes a generated file over what the tree copied there
// (a symlink is replaced, never followed).
func (x *exporter) replaceFile(p string, data []byte) error {
	if st, err := os.Lstat(p); err == nil {
		if st.IsDir() {
			return fmt.Errorf("%w: the workspace has a directory at %s, where the bundle writes a file", ErrInvalid, filepath.Base(p))
		}
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("replace %s: %w", p, err)
		}
		x.res.Files--
		x.res.Bytes -= st.Size()
	}
	return x.writeFile(p, data, 0o644)
}

// writeFile creates the new file p (never through a symlink).
func (x *exporter) writeFile(p string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	x.res.Files++
	x.res.Bytes += int64(len(data))
	return nil
}

// hostVersion is the version of lang that the sandbox ran: /env's Python
// (pyvenv.cfg), else the host's python3; the host's node. The newest
// long-term ones when there is none.
func hostVersion(lang string, env fs.FS) string {
	if lang == LangNode {
		out := run("node", "--version") // v20.11.1
		if m := regexp.MustCompile(`^v(\d+)\.`).FindStringSubmatch(out); m != nil {
			return m[1]
		}
		return "22"
	}
	if env != nil {
		if b, err := readHead(env, "pyvenv.cfg", 16<<10); err == nil {
			if m := regexp.MustCompile(`(?m)^version(?:_info)?\s*=\s*(3\.\d+)`).FindSubmatch(b); m != nil {
				return string(m[1])
			}
		}
	}
	out := run("python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])")
	if m := regexp.MustCompile(`^3\.\d+$`).FindString(out); m != "" {
		return m
	}
	return "3.12"
}

// ran keeps what run printed: the host's interpreters do not change
// under a daemon often enough to ask each export.
var ran sync.Map // "name args" to string

// run is a short command's stdout, trimmed ("" when it fails).
func run(name string, args ...string) string {
	key := name + " " + strings.Join(args, " ")
	if v, ok := ran.Load(key); ok {
		return v.(string)
	}
	out := runOnce(name, args...)
	if out != "" {
		ran.Store(key, out)
	}
	return out
}

func runOnce(name string, args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout = &limitWriter{w: &out, n: 4096}
	if cmd.Run() != nil {
		return ""
	}
	return strings.TrimSpace(out.String())
}

type limitWriter struct {
	w io.Writer
	n int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.n -= k
		l.w.Write(p[:k])
	}
	return len(p), nil
}
