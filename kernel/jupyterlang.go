package kernel

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cellbox-dev/cellbox/kernel/drivers/jupyterbridge"
	"github.com/cellbox-dev/cellbox/kernel/jupyter"
	"github.com/cellbox-dev/cellbox/workspace"
)

// JupyterPrefix begins the language id of an installed Jupyter kernel:
// jupyter:NAME for the kernelspec NAME (PROTOCOL.md §8).
const JupyterPrefix = "jupyter:"

// jupyterUnsupported are the methods no Jupyter kernel answers through
// the bridge: the messaging protocol has no variables request.
var jupyterUnsupported = []string{"kernel/variables"}

// jupyterExtensions are the file extensions of the languages kernelspecs
// name (the kernelspec says only the language; a kernel tells its
// extension when it runs).
var jupyterExtensions = map[string][]string{
	"python": {".py"}, "r": {".r", ".R"}, "julia": {".jl"}, "javascript": {".js"}, "typescript": {".ts"},
	"bash": {".sh"}, "ruby": {".rb"}, "go": {".go"}, "scala": {".scala"}, "c++": {".cpp"}, "sql": {".sql"},
}

// JupyterLanguages are the host's Jupyter kernelspecs (jupyter.FindKernelSpecs)
// as languages jupyter:NAME, but for cellbox's own (a cellbox kernel
// inside a cellbox kernel makes no sense). A kernelspec whose program a
// sandbox cannot run is listed unavailable, with the reason. It reads a
// few small files: callers ask it anew, so a kernelspec installed while the
// daemon runs is seen.
func JupyterLanguages() []Language {
	specs, _ := jupyter.FindKernelSpecs()
	var out []Language
	for i := range specs {
		spec := &specs[i]
		if isCellboxSpec(spec) {
			continue
		}
		l := Language{
			ID:             JupyterPrefix + spec.Name,
			DisplayName:    spec.DisplayName,
			FileExtensions: slices.Clone(jupyterExtensions[strings.ToLower(spec.Language)]),
			Unsupported:    slices.Clone(jupyterUnsupported),
			jupyter:        spec,
		}
		if l.DisplayName == "" {
			l.DisplayName = spec.Name
		}
		if l.FileExtensions == nil {
			l.FileExtensions = []string{}
		}
		path, err := sandboxProgram(spec.Argv[0])
		if err != nil {
			l.Reason = fmt.Sprintf("kernelspec %s (%s): %v", spec.Name, spec.Dir, err)
		} else {
			l.Path, l.Available = path, true
		}
		out = append(out, l)
	}
	return out
}

// isCellboxSpec reports whether spec runs `cellbox jupyter-kernel`: a
// program named cellbox followed by that subcommand.
func isCellboxSpec(spec *jupyter.KernelSpec) bool {
	if jupyter.IsCellboxKernelSpec(*spec) {
		return true
	}
	for i, a := range spec.Argv {
		if filepath.Base(a) == "cellbox" && slices.Contains(spec.Argv[i+1:], "jupyter-kernel") {
			return true
		}
	}
	return false
}

// sandboxProgram finds a kernelspec's argv[0] as a sandbox would run it: a
// name on the sandbox's PATH, or an absolute path that the sandbox shows
// (the file and, when it is a symlink, what it points to).
func sandboxProgram(prog string) (string, error) {
	if !strings.Contains(prog, "/") {
		for _, dir := range sandboxPath() {
			p := filepath.Join(dir, prog)
			if isExecutable(p) {
				return p, nil
			}
		}
		return "", fmt.Errorf("%s not found on the sandbox's PATH (%s)", prog, strings.Join(sandboxPath(), ":"))
	}
	if !filepath.IsAbs(prog) {
		return "", fmt.Errorf("argv[0] %q is a relative path", prog)
	}
	p := filepath.Clean(prog)
	if !isExecutable(p) {
		return "", fmt.Errorf("%s is not an executable file", p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	for _, q := range []string{p, real} {
		if !workspace.SandboxShows(q) {
			return "", fmt.Errorf("%s is not in a sandbox, which shows the host's /usr, /bin, /sbin and /lib* only", q)
		}
	}
	return p, nil
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// jupyterDriver is the driver of a kernelspec: the bridge, this binary's
// entry inside the sandbox (jupyterbridge), with env plus the variable
// that selects it. The bridge gives up on a kernel that does not start a
// little before the manager would, so its reason is the one reported.
func jupyterDriver(spec *jupyter.KernelSpec, env []string, startTimeout time.Duration) (argv, _ []string, err error) {
	argv, entry, err := jupyterbridge.Command(jupyterbridge.Config{
		Name: spec.Name, Argv: spec.Argv, Env: spec.Env, InterruptMode: spec.InterruptMode,
		ResourceDir: spec.Dir, StartTimeoutMs: (startTimeout * 9 / 10).Milliseconds(),
	})
	if err != nil {
		return nil, nil, err
	}
	return argv, append(slices.Clone(env), entry), nil
}
