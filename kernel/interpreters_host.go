package kernel

import (
	"cmp"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
)

// maxInstalled bounds the versions listed per version manager.
const maxInstalled = 100

// installedVersion finds a version in a version manager's directory name:
// "3.12.1", "v20.1.0", "cpython-3.12.1-linux-x86_64-gnu".
var installedVersion = regexp.MustCompile(`\d+\.\d+(?:\.\d+)?`)

// HostInterpreters lists the interpreters found on the host: the system's
// (langs, as DetectLanguages found them) and the versions installed by
// pyenv ($PYENV_ROOT, ~/.pyenv), uv ($UV_PYTHON_INSTALL_DIR,
// ~/.local/share/uv/python), nvm, asdf and fnm (nodeInstalls). An installed
// version's version is its directory's name; nothing is run.
func HostInterpreters(langs []Language) []protocol.InterpreterInfo {
	var out []protocol.InterpreterInfo
	for _, l := range langs {
		if _, ok := specOf(l.ID); ok && l.Available && l.jupyter == nil {
			out = append(out, protocol.InterpreterInfo{Language: l.ID, Path: l.Path, Source: SourceSystem, Version: l.Version})
		}
	}
	type place struct {
		lang, source, dir, bin, exe string
	}
	places := []place{
		{"python", "pyenv", pyenvVersions(), "bin", "python3"},
		{"python", "uv", userDir("UV_PYTHON_INSTALL_DIR", ".local/share/uv/python"), "bin", "python3"},
	}
	for _, in := range nodeInstalls() {
		places = append(places, place{"javascript", in.source, in.dir, in.bin, "node"})
	}
	for _, pl := range places {
		if !filepath.IsAbs(pl.dir) {
			continue
		}
		es, err := os.ReadDir(pl.dir)
		if err != nil {
			continue
		}
		// Oldest version first, as numbers: 3.9 before 3.10.
		slices.SortStableFunc(es, func(a, b os.DirEntry) int {
			return compareVersions(installedVersion.FindString(a.Name()), installedVersion.FindString(b.Name()))
		})
		n := 0
		for _, e := range es {
			if n >= maxInstalled {
				break
			}
			exe := filepath.Join(pl.dir, e.Name(), pl.bin, pl.exe)
			real, err := filepath.EvalSymlinks(exe)
			if err != nil {
				continue
			}
			if fi, err := os.Stat(real); err != nil || !fi.Mode().IsRegular() {
				continue
			}
			info := protocol.InterpreterInfo{Language: pl.lang, Path: exe, Source: pl.source, Version: installedVersion.FindString(e.Name())}
			if b := filepath.Dir(real); filepath.Base(b) == "bin" {
				info.Prefix = filepath.Dir(b)
			}
			out = append(out, info)
			n++
		}
	}
	return out
}

// ProjectInterpreters says which interpreter a kernel of each of langs
// (python, javascript, bash) would run in a workspace on the project at
// the host directory root, without kernel/start's interpreter: the
// project's, or the host's with a warning saying why not the project's.
func ProjectInterpreters(ctx context.Context, root string, hidden []string, langs []Language) []protocol.InterpreterInfo {
	return projectInterpreters(ctx, projectSite(root, hidden), langs)
}

// WorkspaceInterpreters is ProjectInterpreters for ws (workspace/open's
// result), without running a project's interpreter to ask its version.
func (m *Manager) WorkspaceInterpreters(ctx context.Context, ws *workspace.Workspace) []protocol.InterpreterInfo {
	if m.opts.Languages == nil {
		return nil
	}
	st := site{writable: m.opts.Workspaces.Hidden(), bindsOnly: true}
	if root := projectRoot(ws); root != "" {
		st.root = root
		st.writable = append([]string{root}, st.writable...)
	}
	return projectInterpreters(ctx, st, m.opts.Languages())
}

func projectInterpreters(ctx context.Context, st site, langs []Language) []protocol.InterpreterInfo {
	var out []protocol.InterpreterInfo
	for _, l := range langs {
		spec, ok := specOf(l.ID)
		if !ok || l.jupyter != nil || !l.Available {
			continue
		}
		in, err := resolveIn(ctx, l, spec, st, "")
		if err != nil {
			continue
		}
		info := in.info
		info.Language = l.ID
		out = append(out, info)
	}
	return out
}

// compareVersions orders "3.9.1" before "3.10"; "" first.
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range min(len(as), len(bs)) {
		x, _ := strconv.Atoi(as[i])
		y, _ := strconv.Atoi(bs[i])
		if c := cmp.Compare(x, y); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(as), len(bs))
}

// ProjectBinds are the read-only binds the interpreters of the project at
// the host directory root need (its virtual environment's base prefix,
// the prefix of the node its .nvmrc names): workspace.Options.ProjectReadOnly.
// hidden are the directories no sandbox sees (the state dir).
func ProjectBinds(root string, hidden []string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*versionTimeout)
	defer cancel()
	st := projectSite(root, hidden)
	st.bindsOnly = true
	var out []string
	for _, id := range []string{"python", "javascript"} {
		spec, _ := specOf(id)
		if in, found, err := projectInterpreter(ctx, spec, st); err == nil && found {
			out = append(out, in.binds...)
		}
	}
	return out
}

// projectSite is the site of the project at root (symlinks resolved).
func projectSite(root string, hidden []string) site {
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	return site{root: root, writable: append([]string{root}, hidden...)}
}
