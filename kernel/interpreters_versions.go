package kernel

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The versions a project's files name (.nvmrc, .node-version,
// .python-version) and where they are installed (nvm, asdf, fnm, pyenv).

// nodeVersion is a version a .nvmrc or .node-version may name: 20, 20.1
// or 20.1.0, with or without a v.
var nodeVersion = regexp.MustCompile(`^v?(\d+(?:\.\d+){0,2})$`)

// readVersionFile is the node version a .nvmrc or .node-version names.
func readVersionFile(file string) (string, error) {
	b, err := readBounded(file)
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := nodeVersion.FindStringSubmatch(line)
		if m == nil {
			return "", fmt.Errorf("%s does not name a version number (aliases such as lts/* or node are not resolved)", file)
		}
		return m[1], nil
	}
	return "", fmt.Errorf("%s names no version", file)
}

// nodeInstall is a directory where a version manager keeps node versions.
type nodeInstall struct {
	source string
	dir    string
	// bin is the bin/ directory below a version's directory.
	bin string
}

// userDir is the directory the environment variable env names, when it
// is an absolute path, else def below the user's home; "" when neither is
// absolute (where a version manager keeps its versions: PYENV_ROOT or
// ~/.pyenv).
func userDir(env, def string) string {
	if v := os.Getenv(env); filepath.IsAbs(v) {
		return v
	}
	if home, err := os.UserHomeDir(); err == nil && filepath.IsAbs(home) {
		return filepath.Join(home, def)
	}
	return ""
}

// nodeInstalls are where nvm, asdf and fnm keep node versions.
func nodeInstalls() []nodeInstall {
	var out []nodeInstall
	for _, in := range []struct {
		source, env, def, sub, bin string
	}{
		{"nvm", "NVM_DIR", ".nvm", "versions/node", "bin"},
		{"asdf", "ASDF_DATA_DIR", ".asdf", "installs/nodejs", "bin"},
		{"fnm", "FNM_DIR", ".local/share/fnm", "node-versions", "installation/bin"},
	} {
		if d := userDir(in.env, in.def); d != "" {
			out = append(out, nodeInstall{in.source, filepath.Join(d, in.sub), in.bin})
		}
	}
	return out
}

// findNode is the real path of the newest installed node whose version
// begins with want's components (20 matches 20.x.y).
func findNode(want string) (string, error) {
	var wantParts []int
	for f := range strings.SplitSeq(want, ".") {
		n, err := strconv.Atoi(f)
		if err != nil {
			return "", fmt.Errorf("%q is not a version number", want)
		}
		wantParts = append(wantParts, n)
	}
	var best []int
	var bestExe string
	var looked []string
	for _, in := range nodeInstalls() {
		looked = append(looked, in.dir)
		es, err := os.ReadDir(in.dir)
		if err != nil {
			continue
		}
		for _, e := range es {
			parts, ok := versionParts(strings.TrimPrefix(e.Name(), "v"))
			if !ok || len(parts) < len(wantParts) {
				continue
			}
			if !slices.Equal(parts[:len(wantParts)], wantParts) || (best != nil && slices.Compare(parts, best) <= 0) {
				continue
			}
			exe := filepath.Join(in.dir, e.Name(), in.bin, "node")
			real, err := filepath.EvalSymlinks(exe)
			if err != nil {
				continue
			}
			best, bestExe = parts, real
		}
	}
	if bestExe == "" {
		return "", fmt.Errorf("not installed (looked in %s)", strings.Join(looked, ", "))
	}
	return bestExe, nil
}

// versionParts parses "20.1.0".
func versionParts(s string) ([]int, bool) {
	fields := strings.Split(s, ".")
	if len(fields) != 3 {
		return nil, false
	}
	out := make([]int, 3)
	for i, f := range fields {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}

// readPythonVersion is the first version a .python-version names.
func readPythonVersion(file string) (string, error) {
	b, err := readBounded(file)
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		v := fields[0]
		if v == "." || v == ".." || strings.ContainsAny(v, "/\\") || len(v) > 255 {
			return "", fmt.Errorf("%s does not name a pyenv version", file)
		}
		return v, nil
	}
	return "", fmt.Errorf("%s names no version", file)
}

// pyenvVersions is pyenv's directory of versions.
func pyenvVersions() string {
	if d := userDir("PYENV_ROOT", ".pyenv"); d != "" {
		return filepath.Join(d, "versions")
	}
	return ""
}

// findPyenv is the python3 of the pyenv version want: the version of that
// name, else the newest whose number begins with want's components.
func findPyenv(want string) (string, error) {
	dir := pyenvVersions()
	if dir == "" {
		return "", errors.New("no pyenv directory (no home directory)")
	}
	exe := func(name string) (string, bool) {
		for _, n := range []string{"python3", "python"} {
			p := filepath.Join(dir, name, "bin", n)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				return p, true
			}
		}
		return "", false
	}
	if p, ok := exe(want); ok {
		return p, nil
	}
	es, _ := os.ReadDir(dir)
	best := ""
	for _, e := range es {
		name := e.Name()
		if !strings.HasPrefix(name, want+".") || installedVersion.FindString(name) != name {
			continue
		}
		if _, ok := exe(name); ok && (best == "" || compareVersions(name, best) > 0) {
			best = name
		}
	}
	if best == "" {
		return "", fmt.Errorf("not installed (looked in %s)", dir)
	}
	p, _ := exe(best)
	return p, nil
}
