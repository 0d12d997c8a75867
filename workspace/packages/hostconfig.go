package packages

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// maxConfigBytes bounds a configuration file read from the host.
const maxConfigBytes = 1 << 20

// HostPipIndex returns the index URL the host's pip would use for pip
// install, or "" when nothing is configured. As pip does: the environment
// variable PIP_INDEX_URL first; else index-url of [install] in any
// configuration file over index-url of [global] in any; between files, the
// later one of /etc/xdg/pip/pip.conf (each of $XDG_CONFIG_DIRS),
// /etc/pip.conf, ~/.pip/pip.conf, $XDG_CONFIG_HOME/pip/pip.conf (else
// ~/.config/pip/pip.conf) and $PIP_CONFIG_FILE wins.
func HostPipIndex(env func(string) string, home string) string {
	return hostPipIndex(env, home, readConfig)
}

// HostNPMRegistry returns the registry the host's npm would use, or "" when
// nothing is configured: npm_config_registry or NPM_CONFIG_REGISTRY, else
// registry= in the user's npmrc ($NPM_CONFIG_USERCONFIG, else ~/.npmrc),
// with ${VAR} expanded as npm does.
func HostNPMRegistry(env func(string) string, home string) string {
	return hostNPMRegistry(env, home, readConfig)
}

func readConfig(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxConfigBytes))
}

func hostPipIndex(env func(string) string, home string, read func(string) ([]byte, error)) string {
	if v := strings.TrimSpace(env("PIP_INDEX_URL")); v != "" {
		return v
	}
	var files []string
	dirs := env("XDG_CONFIG_DIRS")
	if dirs == "" {
		dirs = "/etc/xdg"
	}
	for _, d := range filepath.SplitList(dirs) {
		if filepath.IsAbs(d) {
			files = append(files, filepath.Join(d, "pip", "pip.conf"))
		}
	}
	files = append(files, "/etc/pip.conf")
	if home != "" {
		files = append(files, filepath.Join(home, ".pip", "pip.conf"))
	}
	if x := env("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		files = append(files, filepath.Join(x, "pip", "pip.conf"))
	} else if home != "" {
		files = append(files, filepath.Join(home, ".config", "pip", "pip.conf"))
	}
	if f := env("PIP_CONFIG_FILE"); f != "" && f != os.DevNull {
		files = append(files, f)
	}
	var global, install string
	for _, f := range files {
		b, err := read(f)
		if err != nil {
			continue
		}
		sections := parseINI(b)
		if v := sections["global"]["index-url"]; v != "" {
			global = v
		}
		if v := sections["install"]["index-url"]; v != "" {
			install = v
		}
	}
	if install != "" {
		return install
	}
	return global
}

// parseINI reads configparser's subset that pip's files use: [section],
// key = value or key: value, whole-line comments (# and ;), keys folded to
// lower case with "_" read as "-" (as pip does). Continuation lines are
// skipped: index-url is one URL.
func parseINI(b []byte) map[string]map[string]string {
	out := map[string]map[string]string{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), maxConfigBytes)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == ' ' || line[0] == '\t' {
			continue
		}
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			if end := strings.IndexByte(line, ']'); end > 0 {
				section = strings.TrimSpace(line[1:end])
			}
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i <= 0 {
			continue
		}
		key := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(line[:i])), "_", "-")
		if out[section] == nil {
			out[section] = map[string]string{}
		}
		out[section][key] = strings.TrimSpace(line[i+1:])
	}
	return out
}

func hostNPMRegistry(env func(string) string, home string, read func(string) ([]byte, error)) string {
	for _, k := range []string{"npm_config_registry", "NPM_CONFIG_REGISTRY"} {
		if v := strings.TrimSpace(env(k)); v != "" {
			return v
		}
	}
	rc := env("npm_config_userconfig")
	if rc == "" {
		rc = env("NPM_CONFIG_USERCONFIG")
	}
	if rc == "" {
		if home == "" {
			return ""
		}
		rc = filepath.Join(home, ".npmrc")
	}
	b, err := read(rc)
	if err != nil {
		return ""
	}
	reg := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), maxConfigBytes)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) != "registry" {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		reg = expandNPM(v, env)
	}
	return reg
}

// expandNPM replaces ${VAR} as npm's config does (a missing variable is
// left as written).
func expandNPM(s string, env func(string) string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		name := s[i+2 : i+j]
		b.WriteString(s[:i])
		if v := env(name); v != "" {
			b.WriteString(v)
		} else {
			b.WriteString(s[i : i+j+1])
		}
		s = s[i+j+1:]
	}
}
