package workspace

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// Extra read-only binds (ProcSpec.ReadOnly): a program may need a host
// directory that sandboxes do not show, such as the prefix of an
// interpreter installed by pyenv, nvm or uv. A sandbox gets its binds when
// it starts and keeps them: its programs share its mount namespace.

// checkBinds refuses binds that are not absolute clean directories' paths,
// that are the filesystem's root, or that lie in a directory no sandbox may
// see (the state dir, Options.Hidden). A hidden directory inside a bind is
// hidden in the sandbox (Config.Hide), as for Options.ReadOnly.
func (m *Manager) checkBinds(need []string) error {
	for _, p := range need {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
			return fmt.Errorf("%w: read-only bind %q is not an absolute, clean path other than /", ErrInvalid, p)
		}
		for _, h := range m.hidden {
			if within(p, h) {
				return fmt.Errorf("%w: read-only bind %q lies in %s, which no sandbox may see", ErrInvalid, p, h)
			}
		}
	}
	return nil
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// covered reports whether a sandbox binding have shows p.
func covered(have []string, p string) bool {
	if sandbox.Shows(p) {
		return true
	}
	for _, h := range have {
		if within(p, h) {
			return true
		}
	}
	return false
}

// missingBinds are the paths of need that a sandbox binding have lacks.
func missingBinds(have, need []string) []string {
	var out []string
	for _, p := range need {
		if !covered(have, p) {
			out = append(out, p)
		}
	}
	return out
}

// unionBinds is base and the paths of need it does not cover; nil when
// both are empty, so that the pool's sandbox is used (it has no binds).
func unionBinds(base, need []string) []string {
	out := append([]string(nil), base...)
	for _, p := range need {
		if !covered(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// Hidden are the host directories no sandbox sees (the state dir, with
// every workspace's writable layer, and Options.Hidden), symlinks resolved:
// sandboxes write there, so nothing there may run on the host.
func (m *Manager) Hidden() []string { return append([]string(nil), m.hidden...) }
