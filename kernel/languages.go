package kernel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/cellbox-dev/cellbox/kernel/jupyter"
	"github.com/cellbox-dev/cellbox/workspace"
)

// versionTimeout bounds each interpreter's `--version`.
const versionTimeout = 2 * time.Second

// Language is a kernel language and whether this host can run it.
type Language struct {
	ID             string   `json:"id"`
	DisplayName    string   `json:"displayName"`
	Version        string   `json:"version"`
	Path           string   `json:"path,omitempty"`
	FileExtensions []string `json:"fileExtensions"`
	Available      bool     `json:"available"`
	// Reason says why the language is unavailable, e.g.
	// "python3 not found on PATH".
	Reason string `json:"reason,omitempty"`
	// Unsupported are the methods of PROTOCOL.md §4 the language cannot
	// answer (languages[].unsupported, §8).
	Unsupported []string `json:"unsupported,omitempty"`

	// jupyter is the kernelspec of a language jupyter:NAME.
	jupyter *jupyter.KernelSpec
}

// languageSpec says how to find and identify one language's interpreter.
type languageSpec struct {
	id, displayName string
	command         string
	extensions      []string
	version         *regexp.Regexp // first submatch is the version
}

// languageSpecs are the supported languages, in the order they are reported.
var languageSpecs = []languageSpec{
	{"python", "Python", "python3", []string{".py"}, regexp.MustCompile(`Python (\d+\.\d+(?:\.\d+)?\S*)`)},
	{"javascript", "JavaScript (Node.js)", "node", []string{".js", ".mjs", ".cjs"}, regexp.MustCompile(`^v?(\d+\.\d+\.\d+\S*)`)},
	{"typescript", "TypeScript (Node.js, types erased)", "node", []string{".ts", ".mts", ".cts"}, regexp.MustCompile(`^v?(\d+\.\d+\.\d+\S*)`)},
	{"bash", "Bash", "bash", []string{".sh", ".bash"}, regexp.MustCompile(`version (\d+\.\d+(?:\.\d+)?)`)},
	{"ruby", "Ruby", "ruby", []string{".rb"}, regexp.MustCompile(`^ruby (\d+\.\d+\.\d+)`)},
	{"r", "R", "Rscript", []string{".r", ".R"}, regexp.MustCompile(`^Rscript \(R\) version (\d+\.\d+\.\d+)`)},
	{"go", "Go", "go", []string{".go"}, regexp.MustCompile(`go version go(\d+\.\d+(?:\.\d+)?\S*)`)},
}

// DetectLanguages looks up each language's interpreter on PATH and runs its
// `--version` (all in parallel, each bounded by 2 s). A language whose
// interpreter is missing or does not run is listed with Available false and
// the reason.
//
// Only the PATH directories that a sandbox also has (SandboxPath) count:
// the interpreter found is the one a kernel runs, so a version manager's
// shim earlier on the daemon's PATH (pyenv, nvm), which a sandbox cannot
// see, does not make initialize report another version than kernel/start.
func DetectLanguages(ctx context.Context) []Language {
	out := make([]Language, len(languageSpecs))
	var wg sync.WaitGroup
	for i, spec := range languageSpecs {
		wg.Go(func() { out[i] = detect(ctx, spec) })
	}
	wg.Wait()
	for _, b := range builtinLanguages {
		out = append(out, b())
	}
	return out
}

// builtinLanguages are the languages this binary runs itself, with no
// interpreter to look up: reported after the others.
var builtinLanguages = []func() Language{sqlLanguage}

func detect(ctx context.Context, spec languageSpec) Language {
	l := Language{
		ID:             spec.id,
		DisplayName:    spec.displayName,
		FileExtensions: append([]string(nil), spec.extensions...),
	}
	path, err := lookPath(spec.command)
	if err != nil && shownPathLanguages[spec.id] {
		path, err = lookShownPath(spec.command)
	}
	if err != nil {
		switch {
		case errors.Is(err, exec.ErrDot):
			l.Reason = fmt.Sprintf("%s found only in the current directory (PATH holds a relative entry); not used", spec.command)
		default:
			l.Reason = spec.command + " not found on PATH"
		}
		return l
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	l.Path = path

	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	versionArg := "--version"
	if a, ok := versionArgs[spec.id]; ok {
		versionArg = a
	}
	if spec.id == "go" {
		// The toolchain's VERSION file: running `go version` leaves a
		// telemetry upload running after it, writing into the user's
		// config directory.
		if v := goVersionFile(path); v != "" {
			if ver, ok := parseVersion(spec, "go version "+v); ok {
				l.Version, l.Available = ver, true
				l.Unsupported = append([]string(nil), languageUnsupported[spec.id]...)
				return l
			}
		}
	}
	cmd := exec.CommandContext(ctx, path, versionArg)
	// Not in the daemon's directory, which may be a project a sandbox
	// writes: its go.mod would choose (and download) the go command's
	// toolchain, its .python-version a pyenv shim's python.
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	// A wrapper (pyenv shim, ...) whose child outlives it must not hang us.
	cmd.WaitDelay = 500 * time.Millisecond
	err = cmd.Run()
	text := strings.TrimSpace(buf.String())
	if err != nil {
		switch {
		case ctx.Err() != nil:
			l.Reason = fmt.Sprintf("%s %s did not finish within %v", path, versionArg, versionTimeout)
		default:
			l.Reason = fmt.Sprintf("%s %s failed: %v", path, versionArg, err)
			if first := firstLine(text); first != "" {
				l.Reason += ": " + first
			}
		}
		return l
	}
	v, ok := parseVersion(spec, text)
	if !ok {
		l.Reason = fmt.Sprintf("%s %s printed %q, which is not a %s version", path, versionArg, firstLine(text), spec.displayName)
		return l
	}
	l.Version = v
	l.Available = true
	l.Unsupported = append([]string(nil), languageUnsupported[spec.id]...)
	return l
}

// SandboxPath is the PATH of programs in a sandbox.
func SandboxPath() []string {
	for _, kv := range workspace.DefaultEnv() {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			return filepath.SplitList(v)
		}
	}
	return nil
}

// sandboxPath is SandboxPath; tests add directories to it.
var sandboxPath = SandboxPath

// lookPath finds command on PATH, in the directories a sandbox also has.
func lookPath(command string) (string, error) {
	seen := map[string]bool{}
	for _, d := range sandboxPath() {
		seen[filepath.Clean(d)] = true
	}
	relative := false
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if !filepath.IsAbs(dir) {
			if dir != "" {
				if fi, err := os.Stat(filepath.Join(dir, command)); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
					relative = true
				}
			}
			continue
		}
		if !seen[filepath.Clean(dir)] {
			continue
		}
		p := filepath.Join(dir, command)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if relative {
		return "", exec.ErrDot
	}
	return "", exec.ErrNotFound
}

// parseVersion extracts the version from an interpreter's --version output:
// "Python 3.11.2" -> "3.11.2", "v20.19.2" -> "20.19.2",
// "GNU bash, version 5.2.15(1)-release ..." -> "5.2.15".
func parseVersion(spec languageSpec, out string) (string, bool) {
	m := spec.version.FindStringSubmatch(strings.TrimSpace(out))
	if m == nil {
		return "", false
	}
	return m[1], true
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	const max = 200
	if len(line) > max {
		line = line[:max] + "..."
	}
	return strings.TrimSpace(line)
}
