package kernel

import (
	"bufio"
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
	"syscall"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
)

// The user's own interpreters (kernel/start's interpreter, README.md
// "Interpreters"). A kernel runs, in this order:
//
//   - kernel/start's interpreter, an absolute host path;
//   - for python, the project's virtual environment: .venv, else venv, in
//     the workspace's root (overlay and direct workspaces), run as
//     /workspace/.venv/bin/python so that sys.prefix is the environment;
//   - for python, else, the pyenv version the project's .python-version
//     names, under $PYENV_ROOT/versions (~/.pyenv/versions): a name
//     there (a pyenv-virtualenv environment too), else the newest version
//     it begins (3.12 picks 3.12.x); "system" is the host's. A pyenv shim
//     on the daemon's PATH is not followed (DetectLanguages);
//   - for javascript, the node version the project's .nvmrc (else
//     .node-version) names, installed by nvm ($NVM_DIR, ~/.nvm), asdf
//     ($ASDF_DATA_DIR, ~/.asdf) or fnm ($FNM_DIR, ~/.local/share/fnm);
//   - the host's interpreter on PATH (DetectLanguages).
//
// A project's interpreter that cannot run (a .venv whose base interpreter
// is gone, a node version not installed) falls back to the host's, with a
// warning in kernel/start's result and the log; an explicit one that is
// not right fails kernel/start with -32602.
//
// The prefix of an interpreter outside /usr is bound read-only into the
// sandbox at its own path. The prefix is the directory above the bin/
// holding the interpreter, symlinks resolved on the host (for a virtual
// environment: its base interpreter's, and the environment itself when it
// is not in the project). A prefix must hold bin/python* or bin/node, and
// must not be / or a top-level directory, a home directory or anything
// above one, nor hold a directory of secrets of the daemon's user
// (sensitiveDirs), nor lie where a sandbox mounts its own file systems
// (sandboxMounts).
//
// Nothing a sandbox can write runs on the host (site.writable): an
// interpreter a project names must lie outside the project and the state
// dir and be named as an interpreter (interpreterNames), and its prefix
// must pass checkPrefix, before its --version runs; versions are asked of
// the base interpreter a virtual environment names, never of its
// bin/python.

// Interpreter sources (protocol.InterpreterInfo.Source).
const (
	SourceExplicit    = "explicit"
	SourceVenv        = "venv"
	SourceVersionFile = "version-file"
	SourceSystem      = "system"
)

// interpreter is what a kernel runs.
type interpreter struct {
	info protocol.InterpreterInfo
	// run is argv[0] inside the sandbox.
	run string
	// binds are host directories the sandbox must bind read-only.
	binds []string
	// venv: run is a virtual environment's bin/python.
	venv bool
}

// environ is env for a kernel running in: a virtual environment is
// activated (VIRTUAL_ENV, its bin/ first on PATH), and the bin/ of an
// interpreter outside /usr comes first on PATH, so that `!pip`, `python`
// and `npm` in the kernel's code are the kernel's own.
func (in interpreter) environ(env []string) []string {
	var bin string
	switch {
	case in.venv:
		bin = path.Dir(in.run)
		env = setEnv(env, "VIRTUAL_ENV", path.Dir(bin))
	case in.info.Prefix != "":
		bin = path.Dir(in.run)
	default:
		return env
	}
	old := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			old = v
		}
	}
	if old != "" {
		bin += ":" + old
	}
	return setEnv(env, "PATH", bin)
}

// minVersions are the oldest interpreters the drivers run on (driver.py
// uses top-level await compilation, Python 3.8).
var minVersions = map[string]string{"python": "3.8"}

// maxConfigBytes bounds a pyvenv.cfg, .nvmrc or .node-version read.
const maxConfigBytes = 64 << 10

// venvNames are the directories of a project searched for a virtual
// environment, in order.
var venvNames = []string{".venv", "venv"}

// nodeVersionFiles name a project's node version, in order.
var nodeVersionFiles = []string{".nvmrc", ".node-version"}

// sandboxMounts are where a sandbox mounts file systems of its own; a bind
// there would be hidden or would hide them.
var sandboxMounts = []string{"/tmp", "/dev", "/proc", "/etc", "/workspace", "/home/cellbox", "/var/tmp", "/run"}

// sensitiveDirs are directories of the daemon's user's home that no bind
// may hold or lie in; holdOnlyDirs may not be held (poetry keeps virtual
// environments in ~/.cache/pypoetry).
var (
	sensitiveDirs = []string{
		".ssh", ".gnupg", ".aws", ".azure", ".config", ".docker", ".kube",
		".password-store", ".pki", ".mozilla", ".netrc", ".git-credentials",
		".local/share/keyrings", ".local/state",
	}
	holdOnlyDirs = []string{".cache"}
)

// resolveInterpreter chooses the interpreter of a kernel of language lang
// in ws; hidden are the directories no sandbox sees (the state dir) and
// explicit is kernel/start's interpreter. A zero interpreter (run
// "") means the driver's default (Jupyter kernels).
func resolveInterpreter(ctx context.Context, lang Language, ws *workspace.Workspace, hidden []string, explicit string) (interpreter, error) {
	if lang.jupyter != nil {
		if explicit != "" {
			return interpreter{}, fmt.Errorf("%w: invalid params for kernel/start: field \"interpreter\" is for kernels that run an interpreter (python, javascript, typescript, bash, ruby, r), not %s (its kernelspec names the interpreter)", ErrInvalid, lang.ID)
		}
		return interpreter{}, nil
	}
	spec, ok := specOf(lang.ID)
	if !ok || drivers[lang.ID].entry != nil {
		// sql's driver is built in, go's builds with the go command found.
		if explicit != "" {
			return interpreter{}, fmt.Errorf("%w: invalid params for kernel/start: field \"interpreter\" is for kernels that run an interpreter (python, javascript, typescript, bash, ruby, r), not %s", ErrInvalid, lang.ID)
		}
		return interpreter{}, nil
	}
	st := site{root: projectRoot(ws), writable: hidden}
	if st.root != "" {
		st.writable = append([]string{st.root}, hidden...)
	}
	return resolveIn(ctx, lang, spec, st, explicit)
}

// site is where an interpreter is chosen: the project's root ("" for
// none), and the host directories that sandboxes can write (the project,
// the state dir with every overlay's upper layer), where an interpreter
// that runs on the host (its --version) may not be.
type site struct {
	root     string
	writable []string
	// bindsOnly: only the binds are wanted (ProjectBinds, as a sandbox
	// starts): no --version runs.
	bindsOnly bool
}

// interpreterNames are the names of the interpreters a project may name
// (a venv's base, an installed version): a project does not get the host
// to run another program.
var interpreterNames = map[string]*regexp.Regexp{
	"python":     regexp.MustCompile(`^python(\d+(\.\d+)?)?$`),
	"javascript": regexp.MustCompile(`^node$`),
}

// resolveIn is resolveInterpreter for a project at the host directory
// root ("" for none).
func resolveIn(ctx context.Context, lang Language, spec languageSpec, st site, explicit string) (interpreter, error) {
	root := st.root
	if explicit != "" {
		in, err := explicitInterpreter(ctx, spec, st, explicit)
		if err != nil {
			return interpreter{}, fmt.Errorf("%w: invalid params for kernel/start: field \"interpreter\": %v", ErrInvalid, err)
		}
		return in, nil
	}
	system := interpreter{
		info: protocol.InterpreterInfo{Path: lang.Path, Source: SourceSystem, Version: lang.Version},
		run:  lang.Path,
	}
	if root == "" {
		return system, nil
	}
	in, found, err := projectInterpreter(ctx, spec, st)
	switch {
	case err != nil:
		system.info.Warning = err.Error()
		if lang.Available {
			system.info.Warning += "; the host's " + spec.command + " runs"
		}
		return system, nil
	case found:
		return in, nil
	}
	return system, nil
}

// hasSpec reports whether id is a language of languageSpecs.
func hasSpec(id string) bool {
	_, ok := specOf(id)
	return ok
}

// specOf is the languageSpec of id.
func specOf(id string) (languageSpec, bool) {
	for _, s := range languageSpecs {
		if s.id == id {
			return s, true
		}
	}
	return languageSpec{}, false
}

// projectRoot is the host directory ws shows at /workspace with the
// project's files ("" for scratch workspaces), symlinks resolved.
func projectRoot(ws *workspace.Workspace) string {
	if ws == nil {
		return ""
	}
	info := ws.Info()
	if info.Mode == protocol.WorkspaceModeScratch || info.Root == "" {
		return ""
	}
	if real, err := filepath.EvalSymlinks(info.Root); err == nil {
		return real
	}
	return info.Root
}

// projectInterpreter is the interpreter the project at root names for
// spec's language: found false when it names none, an error when it names
// one that cannot run.
func projectInterpreter(ctx context.Context, spec languageSpec, st site) (interpreter, bool, error) {
	root := st.root
	switch spec.id {
	case "python":
		for _, name := range venvNames {
			dir := filepath.Join(root, name)
			if _, err := os.Lstat(filepath.Join(dir, "pyvenv.cfg")); err != nil {
				continue
			}
			in, err := venvInterpreter(ctx, spec, st, dir)
			if err != nil {
				return interpreter{}, false, fmt.Errorf("the project's virtual environment %s cannot run: %v", dir, err)
			}
			in.info.Source = SourceVenv
			return in, true, nil
		}
		file := filepath.Join(root, ".python-version")
		want, err := readPythonVersion(file)
		if errors.Is(err, fs.ErrNotExist) || (err == nil && want == "system") {
			return interpreter{}, false, nil
		}
		if err != nil {
			return interpreter{}, false, err
		}
		exe, err := findPyenv(want)
		if err != nil {
			return interpreter{}, false, fmt.Errorf("%s names python %s: %v", file, want, err)
		}
		var in interpreter
		if venv, ok := venvOf(exe); ok {
			// A pyenv-virtualenv environment.
			in, err = venvInterpreter(ctx, spec, st, venv)
		} else if real, rerr := filepath.EvalSymlinks(exe); rerr != nil {
			err = rerr
		} else {
			in, err = hostInterpreter(ctx, spec, real, st, true)
		}
		if err != nil {
			return interpreter{}, false, fmt.Errorf("%s names python %s: %v", file, want, err)
		}
		in.info.Source = SourceVersionFile
		return in, true, nil
	case "javascript", "typescript":
		for _, name := range nodeVersionFiles {
			file := filepath.Join(root, name)
			want, err := readVersionFile(file)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return interpreter{}, false, err
			}
			exe, err := findNode(want)
			if err != nil {
				return interpreter{}, false, fmt.Errorf("%s names node %s: %v", file, want, err)
			}
			in, err := hostInterpreter(ctx, spec, exe, st, true)
			if err != nil {
				return interpreter{}, false, fmt.Errorf("%s names node %s: %v", file, want, err)
			}
			in.info.Source = SourceVersionFile
			return in, true, nil
		}
	}
	return interpreter{}, false, nil
}

// explicitInterpreter checks kernel/start's interpreter p.
func explicitInterpreter(ctx context.Context, spec languageSpec, st site, p string) (interpreter, error) {
	root := st.root
	if !filepath.IsAbs(p) {
		return interpreter{}, fmt.Errorf("%q is not an absolute host path", p)
	}
	p = filepath.Clean(p)
	fi, err := os.Stat(p)
	if err != nil {
		return interpreter{}, fmt.Errorf("%q: %v", p, unwrapPath(err))
	}
	if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return interpreter{}, fmt.Errorf("%q is not an executable file", p)
	}
	if spec.id == "python" {
		if venv, ok := venvOf(p); ok {
			if real, err := filepath.EvalSymlinks(venv); err == nil {
				venv = real
			}
			in, err := venvInterpreter(ctx, spec, st, venv)
			if err != nil {
				return interpreter{}, err
			}
			if root == "" || !within(venv, root) {
				// A virtual environment elsewhere, seen at its own path.
				in.run = filepath.Join(venv, "bin", filepath.Base(p))
				in.info.Path = in.run
			}
			in.info.Source = SourceExplicit
			return in, nil
		}
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return interpreter{}, fmt.Errorf("%q: %v", p, unwrapPath(err))
	}
	if root != "" && within(real, root) {
		return interpreter{}, fmt.Errorf("%q is a file of the project, which does not run on the host; only a virtual environment there is supported", p)
	}
	in, err := hostInterpreter(ctx, spec, real, st, false)
	if err != nil {
		return interpreter{}, err
	}
	in.info.Path = p
	in.info.Source = SourceExplicit
	return in, nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// venvOf is the virtual environment whose bin/ holds p, if any.
func venvOf(p string) (string, bool) {
	bin := filepath.Dir(p)
	if filepath.Base(bin) != "bin" {
		return "", false
	}
	dir := filepath.Dir(bin)
	if fi, err := os.Stat(filepath.Join(dir, "pyvenv.cfg")); err == nil && fi.Mode().IsRegular() {
		return dir, true
	}
	return "", false
}

// venvInterpreter is the virtual environment dir's python, run from
// /workspace when dir is in the project at root; its base interpreter's
// prefix is bound, and dir too when it is not in the project.
func venvInterpreter(ctx context.Context, spec languageSpec, st site, dir string) (interpreter, error) {
	root := st.root
	// A .venv that links elsewhere is an environment outside the project.
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return interpreter{}, fmt.Errorf("%s: %v", dir, unwrapPath(err))
	}
	dir = real
	var exe string
	for _, name := range []string{"python3", "python"} {
		p := filepath.Join(dir, "bin", name)
		if _, err := os.Lstat(p); err == nil {
			exe = p
			break
		}
	}
	if exe == "" {
		return interpreter{}, fmt.Errorf("%s has no bin/python3 or bin/python", dir)
	}
	base, err := venvBase(dir, exe)
	if err != nil {
		return interpreter{}, err
	}
	in, err := hostInterpreter(ctx, spec, base, st, true)
	if err != nil {
		return interpreter{}, fmt.Errorf("its base interpreter %s: %v", base, err)
	}
	if root != "" && within(dir, root) {
		rel, _ := filepath.Rel(root, exe)
		in.run = "/workspace/" + filepath.ToSlash(rel)
	} else {
		if err := checkPrefix(dir, spec); err != nil {
			return interpreter{}, err
		}
		in.run = exe
		in.binds = append(in.binds, dir)
	}
	in.info.Path = exe
	in.venv = true
	return in, nil
}

// venvBase is the real path of the base interpreter of the virtual
// environment dir: what its bin/python links to, or (made with --copies,
// or linking into the environment) the interpreter of the same name in
// the directory pyvenv.cfg's home names.
func venvBase(dir, exe string) (string, error) {
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		if !within(real, dir) {
			return real, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s: %v", exe, unwrapPath(err))
	}
	home, err := venvHome(filepath.Join(dir, "pyvenv.cfg"))
	if err != nil {
		return "", err
	}
	for _, name := range []string{filepath.Base(exe), "python3", "python"} {
		if real, err := filepath.EvalSymlinks(filepath.Join(home, name)); err == nil && !within(real, dir) {
			return real, nil
		}
	}
	return "", fmt.Errorf("its base interpreter is gone (%s links nowhere, and pyvenv.cfg's home %s holds no python3)", exe, home)
}

// venvHome is the home = line of a pyvenv.cfg: the base interpreter's
// directory.
func venvHome(cfg string) (string, error) {
	b, err := readBounded(cfg)
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok && strings.TrimSpace(k) == "home" {
			home := strings.TrimSpace(v)
			if !filepath.IsAbs(home) {
				return "", fmt.Errorf("%s: home %q is not absolute", cfg, home)
			}
			return filepath.Clean(home), nil
		}
	}
	return "", fmt.Errorf("%s has no home = line", cfg)
}

// readBounded reads a small configuration file of a project, refusing a
// large one. The file is the project's (a sandbox may have written it): a
// symbolic link is not followed (it could name a secret of the host, whose
// text would reach the client in an error) and only a regular file is read
// (a FIFO would block the read for ever).
func readBounded(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, unwrapPath(err))
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if len(b) > maxConfigBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", p, maxConfigBytes)
	}
	return b, nil
}

// hostInterpreter checks the interpreter at the real (symlinks resolved)
// host path real: in a bin/ directory of a prefix checkPrefix accepts,
// and its --version is one of spec's language.
func hostInterpreter(ctx context.Context, spec languageSpec, real string, st site, fromProject bool) (interpreter, error) {
	// Nothing sandboxes can write runs on the host.
	for _, w := range st.writable {
		if within(real, w) {
			return interpreter{}, fmt.Errorf("%s lies in %s, which sandboxes can write; it does not run on the host", real, w)
		}
	}
	if re := interpreterNames[spec.id]; fromProject && re != nil && !re.MatchString(filepath.Base(real)) {
		return interpreter{}, fmt.Errorf("%s is not named as a %s interpreter", real, spec.displayName)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return interpreter{}, fmt.Errorf("%s: %v", real, unwrapPath(err))
	}
	if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return interpreter{}, fmt.Errorf("%s is not an executable file", real)
	}
	var prefix string
	if !workspace.SandboxShows(real) {
		bin := filepath.Dir(real)
		if filepath.Base(bin) != "bin" {
			return interpreter{}, fmt.Errorf("%s is not in a bin/ directory, so it has no prefix to bind into the sandbox", real)
		}
		prefix = filepath.Dir(bin)
		if err := checkPrefix(prefix, spec); err != nil {
			return interpreter{}, err
		}
	}
	var version string
	// Only an interpreter kernel/start names runs here, for its version: a
	// project's (a .venv's base, a version file's) comes from files a
	// sandbox may have written, so it never runs on the host; its version
	// is the one its driver reports.
	if !st.bindsOnly && !fromProject {
		if version, err = interpreterVersion(ctx, spec, real); err != nil {
			return interpreter{}, err
		}
		if min := minVersions[spec.id]; min != "" && compareVersions(installedVersion.FindString(version), min) < 0 {
			return interpreter{}, fmt.Errorf("%s is %s %s, older than %s, the oldest its driver runs on", real, spec.displayName, version, min)
		}
	}
	in := interpreter{
		info: protocol.InterpreterInfo{Path: real, Version: version, Prefix: prefix},
		run:  real,
	}
	if prefix != "" {
		in.binds = []string{prefix}
	}
	return in, nil
}

// checkPrefix says why the host directory prefix may not be bound
// read-only into a sandbox for spec's interpreter (see the rules above).
func checkPrefix(prefix string, spec languageSpec) error {
	fi, err := os.Stat(prefix)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("prefix %s is not a directory", prefix)
	}
	if strings.Count(prefix, "/") < 2 {
		return fmt.Errorf("prefix %s is / or a top-level directory, which is not bound into a sandbox", prefix)
	}
	for _, m := range sandboxMounts {
		if within(prefix, m) {
			return fmt.Errorf("prefix %s is under %s, which a sandbox mounts for itself", prefix, m)
		}
	}
	for _, home := range homeDirs() {
		if within(home, prefix) {
			return fmt.Errorf("prefix %s holds the home directory %s, which is not bound into a sandbox", prefix, home)
		}
	}
	if home, err := os.UserHomeDir(); err == nil && filepath.IsAbs(home) {
		if real, err := filepath.EvalSymlinks(home); err == nil {
			home = real
		}
		for _, s := range sensitiveDirs {
			d := filepath.Join(home, s)
			if within(d, prefix) || within(prefix, d) {
				return fmt.Errorf("prefix %s holds or lies in %s, which is not bound into a sandbox", prefix, d)
			}
		}
		for _, s := range holdOnlyDirs {
			if d := filepath.Join(home, s); within(d, prefix) {
				return fmt.Errorf("prefix %s holds %s, which is not bound into a sandbox", prefix, d)
			}
		}
	}
	names, err := os.ReadDir(filepath.Join(prefix, "bin"))
	if err != nil {
		return fmt.Errorf("prefix %s has no bin/ directory", prefix)
	}
	for _, e := range names {
		n := e.Name()
		if (spec.id == "python" && strings.HasPrefix(n, "python")) || n == spec.command {
			return nil
		}
	}
	return fmt.Errorf("prefix %s holds no bin/%s", prefix, spec.command)
}

// homeDirs are the daemon's user's home and the directories of /home,
// symlinks resolved.
func homeDirs() []string {
	var out []string
	if h, err := os.UserHomeDir(); err == nil && filepath.IsAbs(h) {
		out = append(out, filepath.Clean(h))
	}
	if es, err := os.ReadDir("/home"); err == nil {
		for _, e := range es {
			out = append(out, filepath.Join("/home", e.Name()))
		}
	}
	for i, h := range out {
		if real, err := filepath.EvalSymlinks(h); err == nil {
			out[i] = real
		}
	}
	return out
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// interpreterVersion runs exe --version (bounded like DetectLanguages) and
// says which version of spec's language it is.
func interpreterVersion(ctx context.Context, spec languageSpec, exe string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "--version")
	cmd.Dir = "/" // not the daemon's directory, which may be a project (detect)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	cmd.WaitDelay = 500 * time.Millisecond
	err := cmd.Run()
	text := strings.TrimSpace(buf.String())
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("%s --version did not finish within %v", exe, versionTimeout)
		}
		return "", fmt.Errorf("%s --version failed: %v", exe, err)
	}
	v, ok := parseVersion(spec, text)
	if !ok {
		return "", fmt.Errorf("%s --version printed %q, which is not a %s version", exe, firstLine(text), spec.displayName)
	}
	return v, nil
}
