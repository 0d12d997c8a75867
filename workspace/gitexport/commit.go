package gitexport

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// BaselineMessage is the message of the commit of the project's
// uncommitted work that an export builds on.
const BaselineMessage = "cellbox: baseline (uncommitted work in the project)"

// Options are what Commit writes where.
type Options struct {
	// Branch is the branch to write (refs/heads/Branch). An existing one
	// is moved only when it points at the commit the export builds on (the
	// project's HEAD), unless Force.
	Branch string
	Force  bool
	// Message is the commit message ("cellbox: export" when empty).
	Message string
}

// Result is what Commit wrote.
type Result struct {
	Commit string
	// Baseline is the commit of the project's uncommitted work, Commit's
	// parent, when there was such work ("" otherwise: Commit's parent is
	// HEAD, or none when HEAD is unborn).
	Baseline string
	// Files is how many paths Commit changes.
	Files int
}

// Commit writes changes as a commit on a branch: on top of HEAD, or of a
// baseline commit of the project's uncommitted work (see the package
// documentation). The branch may not be the one the project (or another
// worktree of the repository) has checked out.
func (p *Repo) Commit(ctx context.Context, changes []Change, o Options) (*Result, error) {
	ref, err := p.checkBranch(ctx, o.Branch)
	if err != nil {
		return nil, err
	}
	head, err := p.head(ctx)
	if err != nil {
		return nil, err
	}
	old, err := p.resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	if old != "" && old != head && !o.Force {
		base := "the project's HEAD " + head
		if head == "" {
			base = "no commit (the project's HEAD is unborn)"
		}
		return nil, fmt.Errorf("%w: branch %s exists at %s, and the export builds on %s; moving it would lose its commits (force moves it anyway)", ErrConflict, o.Branch, short(old), base)
	}

	tmp, err := p.r.privateDir()
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	env := []string{"GIT_INDEX_FILE=" + indexFile(tmp)}
	t, err := p.build(ctx, tmp, env, head, changes)
	if err != nil {
		return nil, err
	}
	if t.next == t.base {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, errNoChange)
	}
	files, err := p.countFiles(ctx, env, t.base, t.next)
	if err != nil {
		return nil, err
	}

	env = append(env, p.identity(ctx)...)
	res := &Result{Files: files}
	parent := head
	if t.base != t.headTree {
		if res.Baseline, err = p.commitTree(ctx, env, t.base, parent, BaselineMessage); err != nil {
			return nil, err
		}
		parent = res.Baseline
	}
	msg := o.Message
	if strings.TrimSpace(msg) == "" {
		msg = "cellbox: export"
	}
	if res.Commit, err = p.commitTree(ctx, env, t.next, parent, msg); err != nil {
		return nil, err
	}
	if old == "" {
		old = strings.Repeat("0", len(res.Commit))
	}
	if _, err := p.r.run(ctx, cmd{dir: p.top, args: []string{"update-ref", "-m", "cellbox: export", ref, res.Commit, old}}); err != nil {
		if strings.Contains(stderrOf(err), "but expected") || strings.Contains(stderrOf(err), "cannot lock ref") {
			return nil, fmt.Errorf("%w: branch %s moved while the export ran: %v", ErrConflict, o.Branch, err)
		}
		return nil, fmt.Errorf("write branch %s: %w", o.Branch, err)
	}
	return res, nil
}

// checkBranch checks that git takes name as a branch name and that no
// worktree of the repository has it checked out, and returns its ref.
func (p *Repo) checkBranch(ctx context.Context, name string) (string, error) {
	if name == "" || strings.HasPrefix(name, "-") || name == "HEAD" {
		return "", fmt.Errorf("%w: %q is not a valid branch name", ErrInvalid, name)
	}
	// --branch expands @{-N}: a name is taken only as it is.
	out, err := p.r.output(ctx, p.top, "check-ref-format", "--branch", name)
	if err != nil || out != name {
		return "", fmt.Errorf("%w: %q is not a valid branch name (git check-ref-format --branch)", ErrInvalid, name)
	}
	ref := "refs/heads/" + name
	cur, err := p.r.output(ctx, p.dir, "symbolic-ref", "-q", "HEAD")
	if err != nil && exitCode(err) != 1 { // 1: a detached HEAD
		return "", fmt.Errorf("read HEAD of %s: %w", p.top, err)
	}
	if cur == ref {
		return "", fmt.Errorf("%w: branch %s is the one the project has checked out: writing it would change the files git shows the project to have; name another branch", ErrInvalid, name)
	}
	list, err := p.r.output(ctx, p.top, "worktree", "list", "--porcelain")
	if err != nil {
		return "", fmt.Errorf("list the worktrees of %s: %w", p.top, err)
	}
	wt := ""
	for _, line := range strings.Split(list, "\n") {
		if s, ok := strings.CutPrefix(line, "worktree "); ok {
			wt = s
		}
		if line == "branch "+ref {
			return "", fmt.Errorf("%w: branch %s is checked out in the worktree %s: name another branch", ErrInvalid, name, wt)
		}
	}
	return ref, nil
}

// head is the commit HEAD names, "" when HEAD is unborn.
func (p *Repo) head(ctx context.Context) (string, error) {
	return p.resolve(ctx, "HEAD")
}

// resolve is the commit rev names, "" when there is none.
func (p *Repo) resolve(ctx context.Context, rev string) (string, error) {
	out, err := p.r.output(ctx, p.top, "rev-parse", "-q", "--verify", rev+"^{commit}")
	if err != nil {
		if exitCode(err) == 1 && stderrOf(err) == "" {
			return "", nil
		}
		return "", fmt.Errorf("resolve %s in %s: %w", rev, p.top, err)
	}
	return out, nil
}

func short(id string) string { return id[:min(len(id), 12)] }

// trees are the trees an export writes.
type trees struct {
	headTree string // HEAD's (the empty tree when HEAD is unborn)
	base     string // headTree with the project's uncommitted work
	next     string // base with the changes
}

// build writes the trees into the private index (and the object
// directory) that env names; tmp is the private directory, which also
// holds the work tree the changed files are copied to.
//
// The files go through update-index --add from that work tree rather than
// through hash-object: one git command for them all, and the blobs, modes
// and symlinks are what git add would make of them, with the clean filters
// and end-of-line conversion their attributes ask for, read from the
// .gitattributes the changes hold or else from the private index (the
// base tree's); hash-object --stdin-paths reads attributes from the work
// tree only, and one hash-object per file costs a process each.
func (p *Repo) build(ctx context.Context, tmp string, env []string, head string, changes []Change) (trees, error) {
	var t trees
	run := func(stdin io.Reader, args ...string) (string, error) {
		b, err := p.r.run(ctx, cmd{dir: p.top, args: args, env: env, stdin: stdin})
		return strings.TrimSuffix(string(b), "\n"), err
	}
	readArgs := []string{"read-tree", "--empty"}
	if head != "" {
		readArgs = []string{"read-tree", head}
	}
	if _, err := run(nil, readArgs...); err != nil {
		return t, fmt.Errorf("read HEAD into a private index: %w", err)
	}
	var err error
	if t.headTree, err = run(nil, "write-tree"); err != nil {
		return t, fmt.Errorf("write HEAD's tree: %w", err)
	}

	// The baseline: every path of the project that git status lists is
	// taken from the working tree as git add would (filters, modes,
	// symlinks, a file that became a directory).
	work, err := p.uncommitted(ctx)
	if err != nil {
		return t, err
	}
	t.base = t.headTree
	if len(work) > 0 {
		if _, err := run(bytes.NewReader(work), "update-index", "--add", "--remove", "--replace", "-z", "--stdin"); err != nil {
			return t, fmt.Errorf("hash the project's uncommitted work: %w", err)
		}
		if t.base, err = run(nil, "write-tree"); err != nil {
			return t, fmt.Errorf("write the tree of the project's uncommitted work: %w", err)
		}
	}

	// The changes: deletions, then the files, taken by update-index from
	// a private work tree that holds them at their paths.
	var removes, adds bytes.Buffer
	var writes []Change
	for _, c := range changes {
		if err := checkPath(c.Path); err != nil {
			return t, err
		}
		if GitPath(c.Path) {
			continue
		}
		switch c.Kind {
		case Deleted:
			removes.WriteString(p.prefix + c.Path)
			removes.WriteByte(0)
		case Added, Modified:
			writes = append(writes, c)
			adds.WriteString(p.prefix + c.Path)
			adds.WriteByte(0)
		default:
			return t, fmt.Errorf("%w: change %q has no kind", ErrInvalid, c.Path)
		}
	}
	if removes.Len() > 0 {
		if _, err := run(&removes, "update-index", "--force-remove", "-z", "--stdin"); err != nil {
			return t, fmt.Errorf("remove the deleted paths from the private index: %w", err)
		}
	}
	if len(writes) > 0 {
		tree := filepath.Join(tmp, "tree")
		if err := p.materialize(ctx, tree, writes); err != nil {
			return t, err
		}
		wenv := append(append([]string(nil), env...), "GIT_DIR="+p.gitDir, "GIT_WORK_TREE="+tree)
		if _, err := p.r.run(ctx, cmd{dir: tree, args: []string{"update-index", "--add", "--replace", "-z", "--stdin"}, env: wenv, stdin: &adds}); err != nil {
			return t, fmt.Errorf("add the changed files to the private index: %w", err)
		}
	}
	if t.next, err = run(nil, "write-tree"); err != nil {
		return t, fmt.Errorf("write the tree of the changes: %w", err)
	}
	return t, nil
}

// uncommitted lists the paths of the project's part of the working tree
// that differ from HEAD (git status: modified, deleted, untracked and not
// ignored), relative to the top level, each ended by a NUL.
func (p *Repo) uncommitted(ctx context.Context) ([]byte, error) {
	spec := strings.TrimSuffix(p.prefix, "/")
	if spec == "" {
		spec = "."
	}
	out, err := p.r.run(ctx, cmd{dir: p.top, args: []string{"status", "--porcelain", "-z", "--untracked-files=all", "--no-renames", "--ignore-submodules=none", "--", spec}})
	if err != nil {
		return nil, fmt.Errorf("list the project's uncommitted work: %w", err)
	}
	var paths bytes.Buffer
	for _, e := range bytes.Split(out, []byte{0}) {
		if len(e) < 4 || e[2] != ' ' {
			continue
		}
		paths.Write(e[3:])
		paths.WriteByte(0)
	}
	return paths.Bytes(), nil
}

// materialize writes the files of cs under tree at their paths in the
// repository: a regular file's content and executable bit, a symlink's
// target. git reads them from there as it reads a work tree.
func (p *Repo) materialize(ctx context.Context, tree string, cs []Change) error {
	if err := mkdirs(filepath.Dir(tree), tree); err != nil {
		return fmt.Errorf("make a private work tree: %w", err)
	}
	for _, c := range cs {
		if err := ctx.Err(); err != nil {
			return err
		}
		dst := filepath.Join(tree, filepath.FromSlash(p.prefix+c.Path))
		if err := mkdirs(tree, filepath.Dir(dst)); err != nil {
			return fmt.Errorf("copy %s: %w", c.Path, err)
		}
		if c.Mode == Symlink {
			if err := os.Symlink(c.Target, dst); err != nil {
				return fmt.Errorf("copy %s: %w", c.Path, err)
			}
			continue
		}
		if err := copyContent(c, dst); err != nil {
			return fmt.Errorf("copy %s: %w", c.Path, err)
		}
	}
	return nil
}

// mkdirs makes dir and its missing parents up to root, readable by all
// whatever the umask: git may run as another user.
func mkdirs(root, dir string) error {
	if dir == root {
		return nil
	}
	if _, err := os.Lstat(dir); err == nil {
		return nil
	}
	if err := mkdirs(root, filepath.Dir(dir)); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	return os.Chmod(dir, 0o755)
}

// copyContent writes a regular file's content to dst, readable by all,
// executable when c's mode is.
func copyContent(c Change, dst string) error {
	var rc io.ReadCloser
	var err error
	switch {
	case c.Open != nil:
		rc, err = c.Open()
	case c.HostPath != "":
		rc, err = os.OpenFile(c.HostPath, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	default:
		err = fmt.Errorf("%w: no content given", ErrInvalid)
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, rc)
	mode := os.FileMode(0o644)
	if c.Mode == Executable {
		mode = 0o755
	}
	if cerr := f.Chmod(mode); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// countFiles is how many paths differ between two trees.
func (p *Repo) countFiles(ctx context.Context, env []string, a, b string) (int, error) {
	out, err := p.r.run(ctx, cmd{dir: p.top, env: env, args: []string{"diff-tree", "-r", "--no-renames", "--name-only", "-z", a, b}})
	if err != nil {
		return 0, fmt.Errorf("count the paths the export changes: %w", err)
	}
	return bytes.Count(out, []byte{0}), nil
}

// identity is the environment that gives commits an author and a
// committer when the repository's config names none: cellbox's, so that
// an export never fails for lack of one.
func (p *Repo) identity(ctx context.Context) []string {
	var env []string
	if name, _ := p.r.output(ctx, p.top, "config", "--get", "user.name"); name == "" {
		env = append(env, "GIT_AUTHOR_NAME=cellbox", "GIT_COMMITTER_NAME=cellbox")
	}
	if email, _ := p.r.output(ctx, p.top, "config", "--get", "user.email"); email == "" {
		env = append(env, "GIT_AUTHOR_EMAIL=cellbox@localhost", "GIT_COMMITTER_EMAIL=cellbox@localhost")
	}
	return env
}

// commitTree writes a commit of tree (parent "": none). It is never
// signed: the daemon cannot ask for a passphrase.
func (p *Repo) commitTree(ctx context.Context, env []string, tree, parent, msg string) (string, error) {
	args := []string{"commit-tree", "--no-gpg-sign", tree}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	args = append(args, "-F", "-")
	if !strings.HasSuffix(msg, "\n") {
		msg += "\n"
	}
	b, err := p.r.run(ctx, cmd{dir: p.top, args: args, env: env, stdin: strings.NewReader(msg)})
	if err != nil {
		return "", fmt.Errorf("write a commit: %w", err)
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}
