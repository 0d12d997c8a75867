package jupyter

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode"
)

// Kernelspecs are found where Jupyter finds them: jupyter_core.paths
// (jupyter_data_dir, jupyter_path) and jupyter_client.kernelspec
// (KernelSpecManager.kernel_dirs, find_kernel_specs), whose rules this file
// follows on Linux and macOS. A kernelspec is a file anyone with write
// access to a directory of JUPYTER_PATH could have written, so it is read
// bounded and validated: nothing here panics on what it reads.

// KernelSpec is a kernelspec: a directory kernels/NAME on Jupyter's data
// path holding kernel.json (the fields below) and optional logos.
type KernelSpec struct {
	// Name is the directory's name, lower-cased (Jupyter's kernel name).
	Name string `json:"-"`
	// Dir is the kernelspec's directory (Jupyter's resource_dir).
	Dir           string            `json:"-"`
	Argv          []string          `json:"argv"`
	DisplayName   string            `json:"display_name"`
	Language      string            `json:"language"`
	InterruptMode string            `json:"interrupt_mode,omitempty"`
	Env           map[string]string `json:"env,omitempty"`
	Metadata      map[string]any    `json:"metadata,omitempty"`
}

// SkippedKernelSpec is a kernelspec directory FindKernelSpecs passed over
// (a broken kernel.json, an invalid name, an unreadable directory) and why.
type SkippedKernelSpec struct {
	Name string // lower-cased directory name; empty for a whole kernels dir
	Dir  string
	Err  error
}

// Bounds on a kernelspec.
const (
	// MaxKernelSpecSize is the largest kernel.json read.
	MaxKernelSpecSize = 1 << 20
	// maxSpecArgs bounds argv's length, maxSpecArgBytes each argument.
	maxSpecArgs     = 1024
	maxSpecArgBytes = 64 << 10
	// maxSpecEnv bounds env's entries.
	maxSpecEnv = 1024
	// maxSpecNameBytes is the longest kernel name (a file name).
	maxSpecNameBytes = 255
	// maxSpecEntries bounds the entries read from one kernels dir.
	maxSpecEntries = 10000
)

// ErrInvalidKernelSpec: a kernel.json, or a kernel name, that is not a
// valid kernelspec.
var ErrInvalidKernelSpec = errors.New("jupyter: invalid kernelspec")

// systemDataDirs are Jupyter's system data dirs on Linux and macOS
// (SYSTEM_JUPYTER_PATH).
var systemDataDirs = []string{"/usr/local/share/jupyter", "/usr/share/jupyter"}

// specEnv is what the path rules read of the process; tests make their own.
type specEnv struct {
	goos    string
	getenv  func(string) string
	home    func() string // the home directory, symlinks resolved
	rawHome func() string // the home directory as Python's expanduser("~") gives it
	// readFile reads a virtualenv's pyvenv.cfg.
	readFile func(string) ([]byte, error)
}

func processSpecEnv() specEnv {
	return specEnv{goos: runtime.GOOS, getenv: os.Getenv, home: resolvedHome, rawHome: rawHome, readFile: os.ReadFile}
}

// rawHome is what Python's os.path.expanduser("~") gives: $HOME, else the
// password database's entry.
func rawHome() string {
	if h := os.Getenv("HOME"); h != "" {
		return h
	}
	if u, err := user.Current(); err == nil {
		return u.HomeDir
	}
	return ""
}

// resolvedHome is jupyter_core's get_home_dir: the home directory with
// symlinks resolved where it exists.
func resolvedHome() string {
	h := rawHome()
	if h == "" {
		return ""
	}
	if r, err := filepath.EvalSymlinks(h); err == nil {
		return r
	}
	return h
}

// DataDir is Jupyter's user data dir (jupyter_data_dir): JUPYTER_DATA_DIR
// when set, else ~/Library/Jupyter on macOS and $XDG_DATA_HOME/jupyter
// (default ~/.local/share/jupyter) elsewhere. `jupyter kernelspec install
// --user` writes to its kernels directory.
func DataDir() string { return processSpecEnv().dataDir() }

func (e specEnv) dataDir() string {
	if d := e.getenv("JUPYTER_DATA_DIR"); d != "" {
		return absPath(d)
	}
	home := e.home()
	if e.goos == "darwin" {
		return absPath(filepath.Join(home, "Library", "Jupyter"))
	}
	xdg := e.getenv("XDG_DATA_HOME")
	if xdg == "" {
		xdg = filepath.Join(home, ".local", "share")
	}
	return absPath(filepath.Join(xdg, "jupyter"))
}

// SysPrefix is the Python environment a Jupyter started from this shell
// would run in (its sys.prefix): $VIRTUAL_ENV, else $CONDA_PREFIX. ok is
// false when neither is set; cellbox does not run Python to ask.
func SysPrefix() (prefix string, ok bool) { return processSpecEnv().sysPrefix() }

func (e specEnv) sysPrefix() (string, bool) {
	for _, v := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if p := e.getenv(v); p != "" {
			return absPath(p), true
		}
	}
	return "", false
}

// DataDirs is Jupyter's data path (jupyter_path), first wins:
//
//  1. each entry of JUPYTER_PATH;
//  2. the user's: DataDir, then Python's user base share/jupyter
//     ($PYTHONUSERBASE, else ~/.local: the user base of every Python but
//     macOS framework builds, whose versioned ~/Library/Python/X.Y cellbox
//     cannot know without running Python) unless the user site is off
//     (PYTHONNOUSERSITE, or a virtualenv without system site packages);
//  3. the environment's: SysPrefix's share/jupyter, unless a system dir;
//  4. the system's: /usr/local/share/jupyter, /usr/share/jupyter.
//
// With JUPYTER_PREFER_ENV_PATH set (not no/n/false/off/0/0.0), 3 comes
// before 2. Relative entries are made absolute; a directory is listed once.
func DataDirs() []string { return processSpecEnv().dataDirs() }

func (e specEnv) dataDirs() []string {
	var dirs []string
	if p := e.getenv("JUPYTER_PATH"); p != "" {
		for _, d := range strings.Split(p, string(os.PathListSeparator)) {
			// Jupyter strips trailing separators; an empty entry would be
			// the current directory's kernels, which no one means.
			if d = strings.TrimRight(d, string(os.PathSeparator)); d != "" {
				dirs = append(dirs, absPath(d))
			}
		}
	}
	userDirs := []string{e.dataDir()}
	if base := e.userBase(); base != "" {
		if d := absPath(filepath.Join(base, "share", "jupyter")); d != userDirs[0] {
			userDirs = append(userDirs, d)
		}
	}
	var envDirs []string
	if prefix, ok := e.sysPrefix(); ok {
		if d := filepath.Join(prefix, "share", "jupyter"); !slices.Contains(systemDataDirs, d) {
			envDirs = append(envDirs, d)
		}
	}
	if envSet(e.getenv("JUPYTER_PREFER_ENV_PATH")) {
		dirs = append(append(dirs, envDirs...), userDirs...)
	} else {
		dirs = append(append(dirs, userDirs...), envDirs...)
	}
	dirs = append(dirs, systemDataDirs...)
	return uniquePaths(dirs)
}

// userBase is Python's site.getuserbase() when site.ENABLE_USER_SITE, as
// far as it can be known without running Python; "" when off.
func (e specEnv) userBase() string {
	if e.getenv("PYTHONNOUSERSITE") != "" {
		return ""
	}
	if venv := e.getenv("VIRTUAL_ENV"); venv != "" && !venvSystemSite(e.readFile, venv) {
		return ""
	}
	if b := e.getenv("PYTHONUSERBASE"); b != "" {
		return b
	}
	if h := e.rawHome(); h != "" {
		return filepath.Join(h, ".local")
	}
	return ""
}

// venvSystemSite reports whether the virtualenv at dir sees the system's
// site packages (include-system-site-packages = true in its pyvenv.cfg),
// which is when its Python keeps the user site on.
func venvSystemSite(readFile func(string) ([]byte, error), dir string) bool {
	b, err := readFile(filepath.Join(dir, "pyvenv.cfg"))
	if err != nil || len(b) > 64<<10 {
		return false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(strings.ToLower(k)) == "include-system-site-packages" {
			return strings.TrimSpace(strings.ToLower(v)) == "true"
		}
	}
	return false
}

// envSet is jupyter_core's envset: set unless empty or no, n, false, off,
// 0 or 0.0 (any case).
func envSet(v string) bool {
	switch strings.ToLower(v) {
	case "", "no", "n", "false", "off", "0", "0.0":
		return false
	}
	return true
}

// KernelDirs are the directories searched for kernelspecs, first wins:
// the kernels directory of each of DataDirs, then IPython's
// ($IPYTHONDIR/kernels, default ~/.ipython/kernels), which Jupyter adds
// when IPython is installed.
func KernelDirs() []string { return processSpecEnv().kernelDirs() }

func (e specEnv) kernelDirs() []string {
	var dirs []string
	for _, d := range e.dataDirs() {
		dirs = append(dirs, filepath.Join(d, "kernels"))
	}
	ipython := e.getenv("IPYTHONDIR")
	if ipython == "" {
		ipython = e.getenv("IPYTHON_DIR")
	}
	switch {
	case ipython == "~":
		ipython = e.rawHome()
	case strings.HasPrefix(ipython, "~/"):
		ipython = filepath.Join(e.rawHome(), ipython[2:])
	case ipython == "":
		if h := e.home(); h != "" {
			ipython = filepath.Join(h, ".ipython")
		}
	}
	if ipython != "" {
		dirs = append(dirs, filepath.Join(absPath(ipython), "kernels"))
	}
	return uniquePaths(dirs)
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}

func uniquePaths(dirs []string) []string {
	out := dirs[:0]
	seen := map[string]bool{}
	for _, d := range dirs {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// ValidKernelName reports whether name is a valid kernel name: ASCII
// letters, digits, '-', '.' and '_' (Jupyter's rule), at most 255 bytes,
// and not "." or "..".
func ValidKernelName(name string) bool {
	if name == "" || name == "." || name == ".." || len(name) > maxSpecNameBytes {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '.', c == '_':
		default:
			return false
		}
	}
	return true
}

// FindKernelSpecs is every kernelspec on Jupyter's path (KernelDirs),
// sorted by name. As in Jupyter, the first directory holding kernels/NAME
// with a kernel.json wins, even when that kernel.json is broken: the broken
// one is reported in skipped and hides the later ones. Also in skipped:
// directories whose name is not a valid kernel name (Jupyter warns and
// uses them; cellbox does not), and kernels dirs that could not be read.
// Missing directories are not reported.
func FindKernelSpecs() (specs []KernelSpec, skipped []SkippedKernelSpec) {
	return FindKernelSpecsIn(KernelDirs())
}

// FindKernelSpecsIn is FindKernelSpecs over the given kernels directories.
func FindKernelSpecsIn(kernelDirs []string) (specs []KernelSpec, skipped []SkippedKernelSpec) {
	seen := map[string]bool{}
	for _, kdir := range kernelDirs {
		names, err := readDirNames(kdir)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
				skipped = append(skipped, SkippedKernelSpec{Dir: kdir, Err: err})
			}
			if len(names) == 0 {
				continue
			}
		}
		for _, entry := range names {
			dir := filepath.Join(kdir, entry)
			if !isKernelDir(dir) {
				continue
			}
			name := strings.ToLower(entry)
			if !ValidKernelName(name) {
				skipped = append(skipped, SkippedKernelSpec{Name: name, Dir: dir, Err: invalidName(entry)})
				continue
			}
			if seen[name] {
				continue
			}
			seen[name] = true
			spec, err := ReadKernelSpec(dir)
			if err != nil {
				skipped = append(skipped, SkippedKernelSpec{Name: name, Dir: dir, Err: err})
				continue
			}
			specs = append(specs, spec)
		}
	}
	slices.SortFunc(specs, func(a, b KernelSpec) int { return strings.Compare(a.Name, b.Name) })
	return specs, skipped
}

// readDirNames lists at most maxSpecEntries names of dir, sorted; past
// that, it returns the names read and an error saying the rest is ignored.
func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(maxSpecEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("jupyter: list %s: %w", dir, err)
	}
	slices.Sort(names)
	if len(names) > maxSpecEntries {
		return names[:maxSpecEntries], fmt.Errorf("jupyter: %s holds more than %d entries; the rest are ignored", dir, maxSpecEntries)
	}
	return names, nil
}

// isKernelDir is Jupyter's _is_kernel_dir: a directory (symlinks followed)
// holding a regular file kernel.json.
func isKernelDir(dir string) bool {
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return false
	}
	fi, err = os.Stat(filepath.Join(dir, "kernel.json"))
	return err == nil && fi.Mode().IsRegular()
}

func invalidName(name string) error {
	return fmt.Errorf("%w: name %q: kernel names are ASCII letters, digits, '-', '.' and '_', at most %d bytes", ErrInvalidKernelSpec, name, maxSpecNameBytes)
}

// ReadKernelSpec reads dir/kernel.json: at most MaxKernelSpecSize bytes of
// a regular file, which must be a JSON object with a non-empty argv of
// strings, string display_name, language and env values, and an
// interrupt_mode of "signal" or "message" (any case; lower-cased) when set.
// Name is dir's base name lower-cased, and must be a valid kernel name.
func ReadKernelSpec(dir string) (KernelSpec, error) {
	dir = filepath.Clean(dir)
	name := strings.ToLower(filepath.Base(dir))
	if !ValidKernelName(name) {
		return KernelSpec{}, fmt.Errorf("jupyter: read kernelspec %s: %w", dir, invalidName(filepath.Base(dir)))
	}
	data, err := readSpecFile(filepath.Join(dir, "kernel.json"))
	if err != nil {
		return KernelSpec{}, fmt.Errorf("jupyter: read kernelspec %s: %w", dir, err)
	}
	spec, err := parseKernelSpec(data)
	if err != nil {
		return KernelSpec{}, fmt.Errorf("jupyter: read kernelspec %s: %w", dir, err)
	}
	spec.Name, spec.Dir = name, dir
	return spec, nil
}

// readSpecFile reads a regular file of at most MaxKernelSpecSize bytes.
// It opens without blocking, so a FIFO put in kernel.json's place cannot
// hang the reader, and checks what it opened.
func readSpecFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrInvalidKernelSpec, path)
	}
	if fi.Size() > MaxKernelSpecSize {
		return nil, fmt.Errorf("%w: %s is %d bytes, more than %d", ErrInvalidKernelSpec, path, fi.Size(), MaxKernelSpecSize)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxKernelSpecSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxKernelSpecSize {
		return nil, fmt.Errorf("%w: %s is more than %d bytes", ErrInvalidKernelSpec, path, MaxKernelSpecSize)
	}
	return data, nil
}

// parseKernelSpec decodes and validates a kernel.json. Keys are matched
// exactly, as Python does (encoding/json alone would take "ARGV" for
// argv), the last of duplicate keys wins, other keys are ignored, and a
// null where Jupyter wants a string, list or dict is refused, as
// traitlets refuses it.
func parseKernelSpec(data []byte) (KernelSpec, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return KernelSpec{}, fmt.Errorf("%w: kernel.json: %v", ErrInvalidKernelSpec, err)
	}
	var spec KernelSpec
	var argv []*string
	var env map[string]*string
	for key, dst := range map[string]any{
		"argv": &argv, "display_name": &spec.DisplayName, "language": &spec.Language,
		"interrupt_mode": &spec.InterruptMode, "env": &env, "metadata": &spec.Metadata,
	} {
		raw, ok := fields[key]
		if !ok {
			continue
		}
		if string(raw) == "null" {
			return KernelSpec{}, fmt.Errorf("%w: %s is null", ErrInvalidKernelSpec, key)
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return KernelSpec{}, fmt.Errorf("%w: %s: %v", ErrInvalidKernelSpec, key, err)
		}
	}
	for i, a := range argv {
		if a == nil {
			return KernelSpec{}, fmt.Errorf("%w: argv[%d] is null", ErrInvalidKernelSpec, i)
		}
		spec.Argv = append(spec.Argv, *a)
	}
	for k, v := range env {
		if v == nil {
			return KernelSpec{}, fmt.Errorf("%w: env %q is null", ErrInvalidKernelSpec, k)
		}
		if spec.Env == nil {
			spec.Env = map[string]string{}
		}
		spec.Env[k] = *v
	}
	if len(spec.Metadata) == 0 {
		spec.Metadata = nil
	}
	if err := spec.validate(); err != nil {
		return KernelSpec{}, err
	}
	spec.InterruptMode = strings.ToLower(spec.InterruptMode)
	return spec, nil
}

// validate checks the fields of kernel.json.
func (s KernelSpec) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidKernelSpec, fmt.Sprintf(format, args...))
	}
	switch {
	case len(s.Argv) == 0:
		return bad("argv is empty")
	case len(s.Argv) > maxSpecArgs:
		return bad("argv has %d entries, more than %d", len(s.Argv), maxSpecArgs)
	case s.Argv[0] == "":
		return bad("argv[0] is empty")
	}
	for i, a := range s.Argv {
		if len(a) > maxSpecArgBytes {
			return bad("argv[%d] is %d bytes, more than %d", i, len(a), maxSpecArgBytes)
		}
		if strings.IndexByte(a, 0) >= 0 {
			return bad("argv[%d] holds a NUL byte", i)
		}
	}
	switch strings.ToLower(s.InterruptMode) {
	case "", "signal", "message":
	default:
		return bad("interrupt_mode %q is neither signal nor message", s.InterruptMode)
	}
	if len(s.Env) > maxSpecEnv {
		return bad("env has %d entries, more than %d", len(s.Env), maxSpecEnv)
	}
	for k, v := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return bad("env entry %q is not a valid environment variable", k)
		}
	}
	return nil
}

// WriteKernelSpec installs spec as kernelsDir/spec.Name, with extra files
// (logos) beside its kernel.json, and returns that directory. What was
// there is replaced almost atomically: the new spec is written into a
// temporary directory in kernelsDir (kernel.json last, so an unfinished
// one is not a kernelspec), the old one is renamed aside, the new one
// renamed in its place, and the old one removed. Leftovers of an install
// that died are removed first. Whether the old one may be replaced is the
// caller's to decide.
func WriteKernelSpec(kernelsDir string, spec KernelSpec, files map[string][]byte) (string, error) {
	if !ValidKernelName(spec.Name) || spec.Name != strings.ToLower(spec.Name) {
		return "", fmt.Errorf("jupyter: write kernelspec: %w", invalidName(spec.Name))
	}
	if err := spec.validate(); err != nil {
		return "", fmt.Errorf("jupyter: write kernelspec %s: %w", spec.Name, err)
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return "", fmt.Errorf("jupyter: write kernelspec %s: %w", spec.Name, err)
	}
	data = append(data, '\n')
	if len(data) > MaxKernelSpecSize {
		return "", fmt.Errorf("jupyter: write kernelspec %s: %w: kernel.json would be %d bytes", spec.Name, ErrInvalidKernelSpec, len(data))
	}
	for f := range files {
		if f == "kernel.json" || !ValidKernelName(f) {
			return "", fmt.Errorf("jupyter: write kernelspec %s: %w: file name %q", spec.Name, ErrInvalidKernelSpec, f)
		}
	}
	if err := os.MkdirAll(kernelsDir, 0o755); err != nil {
		return "", fmt.Errorf("jupyter: write kernelspec %s: %w", spec.Name, err)
	}
	sweepSpecTemps(kernelsDir, spec.Name)

	tmp, err := os.MkdirTemp(kernelsDir, tempPrefix(spec.Name, "new"))
	if err != nil {
		return "", fmt.Errorf("jupyter: write kernelspec %s: %w", spec.Name, err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	// MkdirTemp makes 0700; a kernelspec is read by whoever runs Jupyter.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("jupyter: write kernelspec %s: %w", spec.Name, err)
	}
	for _, f := range slices.Sorted(maps.Keys(files)) {
		if err := writeSynced(filepath.Join(tmp, f), files[f]); err != nil {
			return "", fmt.Errorf("jupyter: write kernelspec %s: %w", spec.Name, err)
		}
	}
	if err := writeSynced(filepath.Join(tmp, "kernel.json"), data); err != nil {
		return "", fmt.Errorf("jupyter: write kernelspec %s: %w", spec.Name, err)
	}

	dest := filepath.Join(kernelsDir, spec.Name)
	aside, err := moveAside(dest)
	if err != nil {
		return "", fmt.Errorf("jupyter: write kernelspec %s: replace %s: %w", spec.Name, dest, err)
	}
	if err := os.Rename(tmp, dest); err != nil {
		if aside != "" {
			os.Rename(aside, dest)
		}
		return "", fmt.Errorf("jupyter: write kernelspec %s: %w", spec.Name, err)
	}
	done = true
	if aside != "" {
		os.RemoveAll(aside)
	}
	return dest, nil
}

// RemoveKernelSpec removes a kernelspec directory (or the symlink to one,
// not what it points to): renamed aside first, so that a removal cut short
// does not leave a half kernelspec under its name.
func RemoveKernelSpec(dir string) error {
	aside, err := moveAside(filepath.Clean(dir))
	if err != nil {
		return fmt.Errorf("jupyter: remove kernelspec %s: %w", dir, err)
	}
	if aside == "" {
		return fmt.Errorf("jupyter: remove kernelspec %s: %w", dir, os.ErrNotExist)
	}
	if err := os.RemoveAll(aside); err != nil {
		return fmt.Errorf("jupyter: remove kernelspec %s: %w", dir, err)
	}
	return nil
}

// moveAside renames dir to a temporary name beside it and returns that
// name, or "" when dir does not exist. A symlink is moved, not followed.
func moveAside(dir string) (string, error) {
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	parent, name := filepath.Split(dir)
	for range 10 {
		aside := filepath.Join(parent, tempPrefix(name, "old")+fmt.Sprint(time.Now().UnixNano()))
		if _, err := os.Lstat(aside); err == nil {
			continue
		}
		if err := os.Rename(dir, aside); err != nil {
			return "", err
		}
		return aside, nil
	}
	return "", fmt.Errorf("no free name beside %s", dir)
}

// tempPrefix names the temporary directories of kernelspec NAME: hidden,
// and with '~', which is not in a kernel name, so no spec is ever named so.
func tempPrefix(name, kind string) string { return "." + name + "~" + kind + "-" }

// specTempAge is how old a temporary directory must be before another
// install takes it for the leftover of one that died.
const specTempAge = time.Minute

// sweepSpecTemps removes the temporary directories that an install or
// removal of kernelspec name left behind in kernelsDir.
func sweepSpecTemps(kernelsDir, name string) {
	names, _ := readDirNames(kernelsDir)
	for _, n := range names {
		if !strings.HasPrefix(n, tempPrefix(name, "new")) && !strings.HasPrefix(n, tempPrefix(name, "old")) {
			continue
		}
		p := filepath.Join(kernelsDir, n)
		if fi, err := os.Lstat(p); err == nil && time.Since(fi.ModTime()) > specTempAge {
			os.RemoveAll(p)
		}
	}
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// CellboxKernelPrefix begins the name of every kernelspec that
// `cellbox jupyter install` writes: cellbox-LANGUAGE.
const CellboxKernelPrefix = "cellbox-"

// cellboxKernelCommand is the cellbox subcommand a cellbox kernelspec runs.
const cellboxKernelCommand = "jupyter-kernel"

// jupyterLanguageNames are Jupyter's names of the cellbox languages whose
// name differs from cellbox's language id (the language of IRkernel is R).
var jupyterLanguageNames = map[string]string{"r": "R"}

// CellboxKernelSpec is the kernelspec of cellbox language for Jupyter
// (PROTOCOL.md §8): named cellbox-LANGUAGE, running
// `EXE jupyter-kernel --language LANGUAGE -f {connection_file}`, with
// interrupts sent as messages and the language in metadata.cellbox.
// displayName is cellbox's name of the language ("Python"); the spec's
// says it runs in cellbox's sandbox.
func CellboxKernelSpec(exe, language, displayName string) KernelSpec {
	jl := language
	if n, ok := jupyterLanguageNames[language]; ok {
		jl = n
	}
	if displayName == "" {
		displayName = language
	}
	if rest, ok := strings.CutSuffix(displayName, ")"); ok && strings.Contains(rest, "(") {
		displayName = rest + ", cellbox sandbox)" // "JavaScript (Node.js, cellbox sandbox)"
	} else {
		displayName += " (cellbox sandbox)"
	}
	return KernelSpec{
		Name:          CellboxKernelPrefix + language,
		Argv:          []string{exe, cellboxKernelCommand, "--language", language, "-f", "{connection_file}"},
		DisplayName:   displayName,
		Language:      jl,
		InterruptMode: "message",
		Metadata:      map[string]any{"cellbox": map[string]any{"language": language}},
	}
}

// IsCellboxKernelSpec reports whether spec is one that cellbox writes: its
// argv runs `PROGRAM jupyter-kernel --language LANGUAGE ...`.
func IsCellboxKernelSpec(spec KernelSpec) bool {
	return CellboxLanguage(spec) != ""
}

// CellboxLanguage is the cellbox language a cellbox kernelspec runs, or ""
// when spec is not a cellbox kernelspec.
func CellboxLanguage(spec KernelSpec) string {
	a := spec.Argv
	if len(a) < 4 || a[1] != cellboxKernelCommand || a[2] != "--language" || a[3] == "" {
		return ""
	}
	if strings.IndexFunc(a[3], func(r rune) bool { return unicode.IsSpace(r) || r == '/' }) >= 0 {
		return ""
	}
	return a[3]
}

//go:embed logos/logo-32x32.png logos/logo-64x64.png logos/logo-svg.svg
var logos embed.FS

// CellboxLogos are the logo files of a cellbox kernelspec, by file name
// (logo-32x32.png, logo-64x64.png, logo-svg.svg): a box.
func CellboxLogos() map[string][]byte {
	out := map[string][]byte{}
	entries, _ := logos.ReadDir("logos")
	for _, e := range entries {
		if b, err := logos.ReadFile("logos/" + e.Name()); err == nil {
			out[e.Name()] = b
		}
	}
	return out
}
