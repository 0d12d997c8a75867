// Package gitexport hands a project's changes to git: as a commit on a
// branch of the project's repository, or as a patch that `git apply`
// takes. It knows nothing of workspaces: it is given the project directory
// and a list of changes (a path relative to the project, added, modified
// or deleted, and for a file its mode and a way to read its content).
//
// Nothing the user works with is touched. The commit is written with
// plumbing only, in a private index (GIT_INDEX_FILE in a temporary
// directory): read-tree of HEAD, update-index (--force-remove for the
// deletions, --add for the files, which are copied to a private work tree
// beside the index so that git stores them as git add would), write-tree,
// commit-tree and update-ref of the one branch asked for, from the commit
// it expects the branch at. The working tree, the real index, HEAD and the
// branch checked out stay byte for byte what they were (never add,
// checkout, commit or stash); `git status` runs without optional locks, so
// it does not refresh the index either. A patch writes nothing to the
// repository at all: its objects go to a temporary object directory that
// borrows the repository's as an alternate.
//
// The baseline. A workspace's overlay has the live project as its lower
// layer, so what code in the sandbox sees under its own changes is the
// working tree as it is now, the user's uncommitted work included, not
// HEAD. A commit of the changes on top of HEAD would therefore hold that
// work too, mixed with the sandbox's. So when the project's part of the
// working tree differs from HEAD (modified, deleted or untracked files not
// ignored, as `git status` sees them), Commit first commits that work as
// it is (message "cellbox: baseline (uncommitted work in the project)",
// parent HEAD), and puts the changes on top of it: the branch's last commit
// is exactly the changes. Patch diffs against the same base, so the patch
// applies to the working tree as it is now.
//
// A root daemon runs git as the repository's owner (see runner).
package gitexport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Kind is what a change does to its path.
type Kind uint8

const (
	Added Kind = iota + 1
	Modified
	Deleted
)

// Mode is the git mode of an added or modified file.
type Mode uint8

const (
	Regular    Mode = iota // 100644
	Executable             // 100755
	Symlink                // 120000
)

func (m Mode) String() string {
	switch m {
	case Executable:
		return "100755"
	case Symlink:
		return "120000"
	}
	return "100644"
}

// Change is a path of the project that the export changes.
type Change struct {
	// Path is relative to the project directory, '/'-separated: any bytes
	// but NUL, no "." or ".." component. Paths git cannot hold (a ".git"
	// component) are left out.
	Path string
	Kind Kind
	// Mode, Target, Open and HostPath describe an added or modified path.
	Mode Mode
	// Target is a symlink's target.
	Target string
	// Open returns a regular file's content. When it is nil, HostPath
	// names a host file holding it (opened without following a symlink at
	// its last component).
	Open     func() (io.ReadCloser, error)
	HostPath string
}

// Repo is the git repository a project directory is in.
type Repo struct {
	dir     string // the project directory, absolute, symlinks resolved
	top     string // the top level of the repository's working tree
	prefix  string // dir relative to top: "" or ending in "/"
	gitDir  string // the repository's git directory, absolute
	objects string // the repository's object directory, absolute
	r       *runner
}

// Open finds the repository whose working tree holds dir. A dir outside
// any is ErrNotRepository, found without running git when no ".git" is at
// or above it.
func Open(ctx context.Context, dir string) (*Repo, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open the repository of %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("open the repository of %s: %w", dir, err)
	}
	dotGit := findDotGit(real)
	if dotGit == "" {
		return nil, fmt.Errorf("%w: %s (no .git at or above it)", ErrNotRepository, real)
	}
	r, err := newRunner(dotGit, filepath.Dir(dotGit))
	if err != nil {
		return nil, err
	}
	out, err := r.output(ctx, real, "rev-parse", "--show-toplevel", "--show-prefix", "--absolute-git-dir", "--git-path", "objects")
	if err != nil {
		msg := stderrOf(err)
		switch {
		case strings.Contains(msg, "not a git repository"):
			return nil, fmt.Errorf("%w: %s: %v", ErrNotRepository, real, err)
		case ctx.Err() != nil:
			return nil, fmt.Errorf("open the repository of %s: %w", real, err)
		}
		return nil, fmt.Errorf("%w: the repository of %s cannot be used: %v", ErrInvalid, real, err)
	}
	lines := strings.Split(out, "\n")
	if len(lines) != 4 || lines[0] == "" || lines[2] == "" || lines[3] == "" {
		return nil, fmt.Errorf("%w: the repository of %s: git rev-parse printed %q", ErrInvalid, real, out)
	}
	p := &Repo{dir: real, top: lines[0], prefix: lines[1], gitDir: lines[2], objects: lines[3], r: r}
	if !filepath.IsAbs(p.objects) {
		p.objects = filepath.Join(real, p.objects)
	}
	r.setSafe(p.top)
	return p, nil
}

// findDotGit is the nearest ".git" (a directory, or the file of a linked
// worktree or submodule) at or above dir, "" when there is none.
func findDotGit(dir string) string {
	for {
		p := filepath.Join(dir, ".git")
		if _, err := os.Lstat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Top is the top level of the repository's working tree.
func (p *Repo) Top() string { return p.top }

// Prefix is the project directory's path in the repository: "" at the
// top level, else ending in "/".
func (p *Repo) Prefix() string { return p.prefix }

// Ignored returns which of paths (relative to the project directory) the
// repository's ignore rules ignore: .gitignore files, .git/info/exclude
// and core.excludesFile, as `git check-ignore` reads them (a tracked file
// is never ignored). One git command for them all.
//
// check-ignore takes pathspecs and refuses the literal magic, so each
// path goes with "./" before it (a leading ":" is then no magic). A name
// with glob characters that matches a tracked file as a pattern is not
// reported: such a name is shown rather than hidden.
//
// Paths git will not judge, and would fail on, are not ignored: those in
// a submodule or a nested repository (git applies their own rules, not
// this repository's), and those below a symlink of the project's working
// tree (the sandbox made a directory where the project has a link). The
// first are found by a ".git" in a directory of the project, or by git
// naming the submodule (one not checked out); the second by Lstat.
func (p *Repo) Ignored(ctx context.Context, paths []string) (map[string]bool, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	opaque := map[string]bool{} // a directory (relative) -> its paths are not git's to judge here
	ign := map[string]bool{}
	probed := map[string]bool{} // a directory (relative) -> found opaque in the working tree
	for try := 0; ; try++ {
		var in bytes.Buffer
		for _, s := range paths {
			if strings.IndexByte(s, 0) >= 0 || p.beyond(s, opaque, probed) {
				continue
			}
			in.WriteString("./")
			in.WriteString(s)
			in.WriteByte(0)
		}
		if in.Len() == 0 {
			return ign, nil
		}
		out, err := p.r.run(ctx, cmd{dir: p.dir, args: []string{"check-ignore", "--stdin", "-z"}, stdin: &in, env: []string{"GIT_LITERAL_PATHSPECS=0"}})
		if err != nil && exitCode(err) != 1 { // 1: none is ignored
			if sub, ok := submoduleOf(stderrOf(err), p.prefix); ok && try < maxSubmoduleTries && !opaque[sub] {
				opaque[sub] = true
				continue
			}
			return nil, fmt.Errorf("check the ignore rules of %s: %w", p.dir, err)
		}
		for _, s := range bytes.Split(out, []byte{0}) {
			if s, ok := bytes.CutPrefix(s, []byte("./")); ok && len(s) > 0 {
				ign[string(s)] = true
			}
		}
		return ign, nil
	}
}

// maxSubmoduleTries bounds the submodules one Ignored call learns from
// git's refusals (each costs a git command).
const maxSubmoduleTries = 16

// beyond reports whether a directory above path s is opaque to the ignore
// rules: known to be (a submodule git named), or found so in the project's
// working tree (a symlink, or a directory with a ".git"; what was found is
// kept in probed).
func (p *Repo) beyond(s string, opaque, probed map[string]bool) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '/' {
			continue
		}
		d := s[:i]
		if opaque[d] {
			return true
		}
		seen, ok := probed[d]
		if !ok {
			full := filepath.Join(p.dir, filepath.FromSlash(d))
			fi, err := os.Lstat(full)
			if err == nil && fi.Mode()&os.ModeSymlink != 0 {
				seen = true
			} else if err == nil && fi.IsDir() {
				_, err := os.Lstat(filepath.Join(full, ".git"))
				seen = err == nil
			}
			probed[d] = seen
		}
		if seen {
			return true
		}
	}
	return false
}

// submoduleOf reads the submodule's path, relative to the project
// directory (prefix is the project's in the repository), from git's
// refusal of a path in it: "Pathspec './sm/x' is in submodule 'sub/sm'"
// names it from the top level (git runs with LC_ALL=C).
func submoduleOf(stderr, prefix string) (string, bool) {
	_, rest, ok := strings.Cut(stderr, "' is in submodule '")
	if !ok {
		return "", false
	}
	sub, _, ok := strings.Cut(rest, "'")
	if !ok || !strings.HasPrefix(sub, prefix) {
		return "", false
	}
	sub = strings.TrimPrefix(sub, prefix)
	return sub, sub != ""
}

// GitPath reports whether a path (relative, '/'-separated) has a ".git"
// component, which git never holds in a tree.
func GitPath(p string) bool {
	for _, c := range strings.Split(p, "/") {
		if strings.EqualFold(c, ".git") {
			return true
		}
	}
	return false
}

// checkPath checks a change's path.
func checkPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.IndexByte(p, 0) >= 0 {
		return fmt.Errorf("%w: bad path %q", ErrInvalid, p)
	}
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." || c == ".." {
			return fmt.Errorf("%w: bad path %q", ErrInvalid, p)
		}
	}
	return nil
}

var errNoChange = errors.New("the changes leave the project's files as git has them")
