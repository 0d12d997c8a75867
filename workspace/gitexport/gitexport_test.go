package gitexport

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/workspace/sandbox/sandboxtest"
)

// The tests run real git on repositories in temporary directories, with
// HOME pointing at an empty directory so that no config of the machine's
// user decides the outcome.

func setup(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	t.Setenv("HOME", t.TempDir())
}

// gitIn runs git in dir and returns its stdout; a failure fails the test.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitTry(dir, nil, args...)
	if err != nil {
		t.Fatalf("git %s in %s: %v", strings.Join(args, " "), dir, err)
	}
	return out
}

func gitTry(dir string, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Stdin = stdin
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LC_ALL=C", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_DATE=2020-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2020-01-01T00:00:00Z"}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), errors.New(strings.TrimSpace(stderr.String()) + ": " + err.Error())
	}
	return string(out), nil
}

// newRepo makes a repository with files committed on main (a value
// "->target" is a symlink), identity configured unless anonymous.
func newRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	gitIn(t, dir, "init", "-q", "-b", "main")
	gitIn(t, dir, "config", "user.name", "Ada")
	gitIn(t, dir, "config", "user.email", "ada@example.com")
	if len(files) > 0 {
		writeFiles(t, dir, files)
		gitIn(t, dir, "add", "-A")
		gitIn(t, dir, "commit", "-q", "-m", "initial")
	}
	return dir
}

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		os.Remove(p)
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
}

// snapshot is everything of a repository the user works with: the
// working tree's files (content, mode, link targets), the index's and
// HEAD's bytes, git status and the current branch.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	s := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == ".git" {
			return filepath.SkipDir
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			s["tree:"+rel] = "-> " + l
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s["tree:"+rel] = info.Mode().String() + " " + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"index", "HEAD"} {
		b, err := os.ReadFile(filepath.Join(dir, ".git", f))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		s[".git/"+f] = string(b)
		if f == "index" {
			s[".git/"+f] = fmt.Sprintf("%d bytes, sha256 %x", len(b), sha256.Sum256(b))
		}
	}
	s["status"] = gitIn(t, dir, "--no-optional-locks", "status", "--porcelain", "--untracked-files=all")
	s["branch"] = gitIn(t, dir, "symbolic-ref", "HEAD")
	return s
}

func wantSame(t *testing.T, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed: %.300q, was %.300q", k, after[k], v)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s appeared: %q", k, after[k])
		}
	}
}

func content(s string) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(s)), nil }
}

func add(path, s string) Change {
	return Change{Path: path, Kind: Added, Open: content(s)}
}

func open(t *testing.T, dir string) *Repo {
	t.Helper()
	r, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return r
}

// lsTree is the tree of rev: "mode path content" a line (content: the
// blob's, a symlink's target).
func lsTree(t *testing.T, dir, rev string) string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(gitIn(t, dir, "ls-tree", "-r", rev)), "\n") {
		if l == "" {
			continue
		}
		meta, path, _ := strings.Cut(l, "\t")
		f := strings.Fields(meta)
		lines = append(lines, f[0]+" "+path+" "+gitIn(t, dir, "cat-file", "blob", f[2]))
	}
	return strings.Join(lines, "\n")
}

// nameStatus is what commit changes against its parent (or the empty tree).
func nameStatus(t *testing.T, dir, a, b string) string {
	t.Helper()
	return strings.TrimSpace(gitIn(t, dir, "diff-tree", "-r", "--no-renames", "--name-status", a, b))
}

func TestCommitExactTree(t *testing.T) {
	setup(t)
	dir := newRepo(t, map[string]string{"keep.txt": "keep\n", "mod.txt": "old\n", "gone.txt": "gone\n", "run.sh": "#!/bin/sh\n", "link": "->keep.txt"})
	head := strings.TrimSpace(gitIn(t, dir, "rev-parse", "HEAD"))
	before := snapshot(t, dir)
	changes := []Change{
		add("new/deep/file.txt", "new\n"),
		{Path: "mod.txt", Kind: Modified, Open: content("new\n")},
		{Path: "gone.txt", Kind: Deleted},
		{Path: "tool", Kind: Added, Mode: Executable, Open: content("#!/bin/sh\necho hi\n")},
		{Path: "run.sh", Kind: Modified, Mode: Regular, Open: content("#!/bin/sh\n")}, // the exec bit dropped
		{Path: "link", Kind: Modified, Mode: Symlink, Target: "new/deep/file.txt"},
		{Path: "newlink", Kind: Added, Mode: Symlink, Target: "../outside"},
		{Path: "caf\xe9.txt", Kind: Added, Open: content("latin-1 name\n")},
		{Path: ".git/config", Kind: Added, Open: content("never\n")},
	}
	res, err := open(t, dir).Commit(context.Background(), changes, Options{Branch: "cellbox/try", Message: "the sandbox's work"})
	if err != nil {
		t.Fatal(err)
	}
	wantSame(t, before, snapshot(t, dir))
	if res.Baseline != "" || res.Files != 8 {
		t.Errorf("result %+v: want no baseline, 8 files", res)
	}
	if got := strings.TrimSpace(gitIn(t, dir, "rev-parse", "refs/heads/cellbox/try")); got != res.Commit {
		t.Fatalf("branch at %s, want %s", got, res.Commit)
	}
	if got := strings.TrimSpace(gitIn(t, dir, "rev-parse", res.Commit+"^")); got != head {
		t.Errorf("parent %s, want HEAD %s", got, head)
	}
	if got := gitIn(t, dir, "log", "-1", "--format=%an <%ae>%n%B", res.Commit); got != "Ada <ada@example.com>\nthe sandbox's work\n\n" {
		t.Errorf("commit:\n%s", got)
	}
	want := strings.Join([]string{
		`100644 "caf\351.txt" latin-1 name` + "\n",
		"100644 keep.txt keep\n",
		"120000 link new/deep/file.txt",
		"100644 mod.txt new\n",
		"100644 new/deep/file.txt new\n",
		"120000 newlink ../outside",
		"100644 run.sh #!/bin/sh\n",
		"100755 tool #!/bin/sh\necho hi\n",
	}, "\n")
	if got := lsTree(t, dir, res.Commit); got != want {
		t.Errorf("tree:\n%s\nwant:\n%s", got, want)
	}
}

func TestCommitSubdirectory(t *testing.T) {
	setup(t)
	dir := newRepo(t, map[string]string{"top.txt": "top\n", "sub/a.txt": "a\n"})
	// Uncommitted work outside the project is not the project's.
	writeFiles(t, dir, map[string]string{"top.txt": "edited outside\n", "other/untracked": "x\n"})
	before := snapshot(t, dir)
	r := open(t, filepath.Join(dir, "sub"))
	if r.Prefix() != "sub/" {
		t.Fatalf("prefix %q", r.Prefix())
	}
	res, err := r.Commit(context.Background(), []Change{add("b.txt", "b\n"), {Path: "a.txt", Kind: Deleted}}, Options{Branch: "x"})
	if err != nil {
		t.Fatal(err)
	}
	wantSame(t, before, snapshot(t, dir))
	if res.Baseline != "" {
		t.Errorf("baseline %s: the work outside the project is not the project's", res.Baseline)
	}
	if got := nameStatus(t, dir, "HEAD", res.Commit); got != "D\tsub/a.txt\nA\tsub/b.txt" {
		t.Errorf("commit changes:\n%s", got)
	}
}

func TestCommitUnbornHead(t *testing.T) {
	setup(t)
	t.Run("empty", func(t *testing.T) {
		dir := newRepo(t, nil)
		before := snapshot(t, dir)
		res, err := open(t, dir).Commit(context.Background(), []Change{add("a.txt", "a\n")}, Options{Branch: "first"})
		if err != nil {
			t.Fatal(err)
		}
		wantSame(t, before, snapshot(t, dir))
		if res.Baseline != "" || gitIn(t, dir, "rev-list", "--parents", "-1", res.Commit) != res.Commit+"\n" {
			t.Errorf("%+v: want a root commit and no baseline", res)
		}
		if got := lsTree(t, dir, res.Commit); got != "100644 a.txt a\n" {
			t.Errorf("tree %q", got)
		}
	})
	t.Run("untracked work", func(t *testing.T) {
		dir := newRepo(t, nil)
		writeFiles(t, dir, map[string]string{"mine.txt": "mine\n"})
		before := snapshot(t, dir)
		res, err := open(t, dir).Commit(context.Background(), []Change{add("a.txt", "a\n")}, Options{Branch: "first"})
		if err != nil {
			t.Fatal(err)
		}
		wantSame(t, before, snapshot(t, dir))
		if res.Baseline == "" || gitIn(t, dir, "rev-list", "--parents", "-1", res.Baseline) != res.Baseline+"\n" {
			t.Fatalf("%+v: want a root baseline", res)
		}
		if got := nameStatus(t, dir, res.Baseline, res.Commit); got != "A\ta.txt" {
			t.Errorf("commit changes %q", got)
		}
		if got := lsTree(t, dir, res.Baseline); got != "100644 mine.txt mine\n" {
			t.Errorf("baseline tree %q", got)
		}
	})
}

func TestCommitBranchNames(t *testing.T) {
	setup(t)
	dir := newRepo(t, map[string]string{"a": "a\n"})
	gitIn(t, dir, "checkout", "-q", "-b", "other")
	gitIn(t, dir, "checkout", "-q", "main") // @{-1} now names "other"
	r := open(t, dir)
	for _, b := range []string{"", "bad..name", "-x", "HEAD", "@{-1}", "a b", "x.lock", "end/", "main"} {
		_, err := r.Commit(context.Background(), []Change{add("n", "n\n")}, Options{Branch: b})
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("branch %q: %v, want ErrInvalid", b, err)
		}
	}
	if got := gitIn(t, dir, "for-each-ref", "--format=%(refname)"); got != "refs/heads/main\nrefs/heads/other\n" {
		t.Errorf("refs after refused exports:\n%s", got)
	}
}

func TestCommitCheckedOutElsewhere(t *testing.T) {
	setup(t)
	dir := newRepo(t, map[string]string{"a": "a\n"})
	wt := filepath.Join(t.TempDir(), "wt")
	gitIn(t, dir, "worktree", "add", "-q", "-b", "side", wt)
	_, err := open(t, dir).Commit(context.Background(), []Change{add("n", "n\n")}, Options{Branch: "side"})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), wt) {
		t.Fatalf("export to a branch another worktree has: %v", err)
	}
	// From the linked worktree, its own branch is the current one; main is
	// the other worktree's.
	for _, b := range []string{"side", "main"} {
		if _, err := open(t, wt).Commit(context.Background(), []Change{add("n", "n\n")}, Options{Branch: b}); !errors.Is(err, ErrInvalid) {
			t.Errorf("from the worktree, branch %s: %v, want ErrInvalid", b, err)
		}
	}
	res, err := open(t, wt).Commit(context.Background(), []Change{add("n", "n\n")}, Options{Branch: "from-wt"})
	if err != nil || nameStatus(t, dir, "side", res.Commit) != "A\tn" {
		t.Fatalf("export from a linked worktree: %+v, %v", res, err)
	}
}

func TestCommitExistingBranch(t *testing.T) {
	setup(t)
	dir := newRepo(t, map[string]string{"a": "a\n"})
	head := strings.TrimSpace(gitIn(t, dir, "rev-parse", "HEAD"))
	gitIn(t, dir, "branch", "feature") // at HEAD: the export moves it on
	r := open(t, dir)
	res, err := r.Commit(context.Background(), []Change{add("one", "1\n")}, Options{Branch: "feature"})
	if err != nil {
		t.Fatal(err)
	}
	// Now feature is ahead of HEAD: another export would drop that commit.
	_, err = r.Commit(context.Background(), []Change{add("two", "2\n")}, Options{Branch: "feature"})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("second export: %v, want ErrConflict", err)
	}
	if got := strings.TrimSpace(gitIn(t, dir, "rev-parse", "feature")); got != res.Commit {
		t.Fatalf("the refused export moved feature to %s", got)
	}
	res2, err := r.Commit(context.Background(), []Change{add("two", "2\n")}, Options{Branch: "feature", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(gitIn(t, dir, "rev-parse", "feature^")); got != head {
		t.Errorf("forced export's parent %s, want HEAD %s", got, head)
	}
	if got := strings.TrimSpace(gitIn(t, dir, "rev-parse", "feature")); got != res2.Commit {
		t.Errorf("feature at %s, want %s", got, res2.Commit)
	}
}

// TestCommitBaseline: the project's uncommitted work (modified, staged,
// deleted, untracked, a file become a directory) is committed first as it
// is in the working tree, ignored files left out; the branch's last commit
// is exactly the changes.
func TestCommitBaseline(t *testing.T) {
	setup(t)
	dir := newRepo(t, map[string]string{".gitignore": "*.log\nbuild/\n", "mod.txt": "old\n", "staged.txt": "s\n", "del.txt": "d\n", "f2d": "file\n", "same.txt": "same\n"})
	head := strings.TrimSpace(gitIn(t, dir, "rev-parse", "HEAD"))
	writeFiles(t, dir, map[string]string{"mod.txt": "user edit\n", "staged.txt": "staged\n", "new/untracked.txt": "u\n", "x.log": "ignored\n", "build/out": "ignored\n", "run.sh": "#!/bin/sh\n", "ulink": "->mod.txt"})
	gitIn(t, dir, "add", "staged.txt")
	os.Remove(filepath.Join(dir, "del.txt"))
	os.Remove(filepath.Join(dir, "f2d"))
	writeFiles(t, dir, map[string]string{"f2d/inner": "inner\n"})
	// same.txt is touched, not changed: a git status that may write the
	// index would refresh its entry.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "same.txt"), later, later); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)

	changes := []Change{
		{Path: "mod.txt", Kind: Modified, Open: content("user edit\nsandbox line\n")},
		{Path: "new/untracked.txt", Kind: Deleted},
		add("sandbox.txt", "s\n"),
	}
	res, err := open(t, dir).Commit(context.Background(), changes, Options{Branch: "sandbox"})
	if err != nil {
		t.Fatal(err)
	}
	wantSame(t, before, snapshot(t, dir))
	if res.Baseline == "" {
		t.Fatal("no baseline commit for the uncommitted work")
	}
	if got := strings.TrimSpace(gitIn(t, dir, "rev-parse", res.Baseline+"^")); got != head {
		t.Errorf("baseline's parent %s, want HEAD", got)
	}
	if got := gitIn(t, dir, "log", "-1", "--format=%B", res.Baseline); got != BaselineMessage+"\n\n" {
		t.Errorf("baseline message %q", got)
	}
	if got, want := nameStatus(t, dir, head, res.Baseline), "D\tdel.txt\nD\tf2d\nA\tf2d/inner\nM\tmod.txt\nA\tnew/untracked.txt\nA\trun.sh\nM\tstaged.txt\nA\tulink"; got != want {
		t.Errorf("baseline changes:\n%s\nwant:\n%s", got, want)
	}
	if got := lsTree(t, dir, res.Baseline); !strings.Contains(got, "100755 run.sh") || !strings.Contains(got, "120000 ulink mod.txt") || !strings.Contains(got, "100644 mod.txt user edit\n") {
		t.Errorf("baseline tree:\n%s", got)
	}
	if got, want := nameStatus(t, dir, res.Baseline, res.Commit), "M\tmod.txt\nD\tnew/untracked.txt\nA\tsandbox.txt"; got != want {
		t.Errorf("the commit's own changes:\n%s\nwant exactly the sandbox's:\n%s", got, want)
	}
	if res.Files != 3 {
		t.Errorf("files %d, want 3", res.Files)
	}
}

func TestCommitNothing(t *testing.T) {
	setup(t)
	dir := newRepo(t, map[string]string{"a": "a\n"})
	_, err := open(t, dir).Commit(context.Background(), []Change{{Path: "a", Kind: Modified, Open: content("a\n")}}, Options{Branch: "x"})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("an export that changes nothing: %v", err)
	}
	if _, err := gitTry(dir, nil, "rev-parse", "--verify", "-q", "refs/heads/x"); err == nil {
		t.Error("the branch was written")
	}
}

func TestNotRepository(t *testing.T) {
	setup(t)
	dir := t.TempDir()
	if _, err := Open(context.Background(), dir); !errors.Is(err, ErrNotRepository) {
		t.Fatalf("Open of a plain directory: %v", err)
	}
	// A .git that is no repository.
	if err := os.WriteFile(filepath.Join(dir, ".git"), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), dir); !errors.Is(err, ErrNotRepository) && !errors.Is(err, ErrInvalid) {
		t.Fatalf("Open under a bad .git: %v", err)
	}
}

// TestNoIdentity: with no user configured anywhere, commits are cellbox's.
func TestNoIdentity(t *testing.T) {
	setup(t)
	dir := newRepo(t, map[string]string{"a": "a\n"})
	gitIn(t, dir, "config", "--unset", "user.name")
	gitIn(t, dir, "config", "--unset", "user.email")
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1") // not passed to git: the runner's environment is its own
	res, err := open(t, dir).Commit(context.Background(), []Change{add("n", "n\n")}, Options{Branch: "anon"})
	if err != nil {
		t.Fatal(err)
	}
	if got := gitIn(t, dir, "log", "-1", "--format=%an <%ae> %cn <%ce>", res.Commit); got != "cellbox <cellbox@localhost> cellbox <cellbox@localhost>\n" {
		t.Errorf("identity %q", got)
	}
}

func TestIgnored(t *testing.T) {
	setup(t)
	dir := newRepo(t, map[string]string{".gitignore": "build/\n*.log\n", "sub/tracked.log": "t\n"})
	gitIn(t, dir, "add", "-f", "sub/tracked.log")
	gitIn(t, dir, "commit", "-q", "-m", "tracked log")
	if err := os.WriteFile(filepath.Join(dir, ".git", "info", "exclude"), []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := open(t, filepath.Join(dir, "sub"))
	got, err := r.Ignored(context.Background(), []string{"a.log", "tracked.log", "build/x/y.o", "src/main.go", "secret", "caf\xe9.log", "new\nline.txt"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"a.log": true, "build/x/y.o": true, "secret": true, "caf\xe9.log": true}
	if len(got) != len(want) {
		t.Errorf("ignored %v, want %v", got, want)
	}
	for p := range want {
		if !got[p] {
			t.Errorf("%q not ignored", p)
		}
	}
}

// TestIgnoredBeyondTheRules: paths in a submodule (checked out or not), in
// a nested repository or below a symlink of the project are not git's to
// judge by the project's rules: they are not ignored, and the others are
// still judged (git alone fails on the first and the third).
func TestIgnoredBeyondTheRules(t *testing.T) {
	setup(t)
	lib := newRepo(t, map[string]string{"lib.txt": "lib\n"})
	dir := newRepo(t, map[string]string{".gitignore": "*.log\n", "proj/keep.txt": "k\n"})
	for _, sm := range []string{"proj/sm", "proj/un"} {
		gitIn(t, dir, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, sm)
	}
	if err := os.Symlink("sm", filepath.Join(dir, "proj", "lnk")); err != nil {
		t.Fatal(err)
	}
	gitIn(t, dir, "add", "proj/lnk")
	gitIn(t, dir, "commit", "-q", "-m", "submodules and a link")
	gitIn(t, dir, "submodule", "deinit", "-q", "proj/un") // not checked out: an empty directory
	gitIn(t, filepath.Join(dir, "proj"), "init", "-q", "nested")

	r := open(t, filepath.Join(dir, "proj"))
	paths := []string{"a.log", "keep.txt", "sm/a.log", "un/a.log", "un/deep/b.log", "lnk/a.log", "nested/a.log", "deep/dir/c.log"}
	got, err := r.Ignored(context.Background(), paths)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"a.log": true, "deep/dir/c.log": true}
	if !maps.Equal(got, want) {
		t.Errorf("ignored %v, want %v", got, want)
	}
	// Without the paths git fails on, the same answer from git alone.
	for _, p := range []string{"un/a.log", "lnk/a.log"} {
		if _, err := gitTry(filepath.Join(dir, "proj"), strings.NewReader("./"+p+"\x00"), "check-ignore", "--stdin", "-z"); err == nil {
			t.Errorf("git check-ignore %s succeeds: the test no longer tries what git fails on", p)
		}
	}
}

// TestPatch: the patch holds the changes against HEAD plus the uncommitted
// work, writes nothing to the repository, and git apply in a copy of the
// project as it is gives the changed files.
func TestPatch(t *testing.T) {
	setup(t)
	dir := newRepo(t, map[string]string{"sub/mod.txt": "one\ntwo\n", "sub/gone.txt": "gone\n", "sub/moved.txt": "a file moved whole\nwith lines\n", "sub/latin.txt": "caf\xe9\n", "top.txt": "top\n"})
	writeFiles(t, dir, map[string]string{"sub/mod.txt": "one\ntwo\nuser\n", "sub/untracked.txt": "u\n"})
	objects := gitIn(t, dir, "count-objects", "-v")
	before := snapshot(t, dir)
	changes := []Change{
		{Path: "mod.txt", Kind: Modified, Open: content("one\ntwo\nuser\nsandbox\n")},
		{Path: "gone.txt", Kind: Deleted},
		{Path: "moved.txt", Kind: Deleted},
		add("dir/moved.txt", "a file moved whole\nwith lines\n"),
		{Path: "latin.txt", Kind: Modified, Open: content("na\xefve\n")},
		add("bin.dat", "\x00\x01\x02binary\xff"),
		{Path: "run.sh", Kind: Added, Mode: Executable, Open: content("#!/bin/sh\n")},
		{Path: "ln", Kind: Added, Mode: Symlink, Target: "mod.txt"},
	}
	patch, files, err := open(t, filepath.Join(dir, "sub")).Patch(context.Background(), changes)
	if err != nil {
		t.Fatal(err)
	}
	wantSame(t, before, snapshot(t, dir))
	if got := gitIn(t, dir, "count-objects", "-v"); got != objects {
		t.Errorf("the patch wrote objects to the repository:\n%s\nwas:\n%s", got, objects)
	}
	if files != 7 {
		t.Errorf("files %d, want 7 (the move is one rename)", files)
	}
	if !strings.Contains(patch, "rename from sub/moved.txt\nrename to sub/dir/moved.txt\n") || !strings.Contains(patch, "GIT binary patch") {
		t.Errorf("patch lacks the rename or a binary patch:\n%s", patch)
	}

	// Apply it to a copy of the project as it is now.
	clone := t.TempDir()
	gitIn(t, clone, "clone", "-q", dir, ".")
	writeFiles(t, clone, map[string]string{"sub/mod.txt": "one\ntwo\nuser\n", "sub/untracked.txt": "u\n"})
	sub := filepath.Join(clone, "sub")
	for _, args := range [][]string{{"apply", "--check"}, {"apply"}} {
		if out, err := gitTry(sub, strings.NewReader(patch), args...); err != nil {
			t.Fatalf("git %s: %v %s\npatch:\n%s", args[0], err, out, patch)
		}
	}
	want := map[string]string{"mod.txt": "one\ntwo\nuser\nsandbox\n", "dir/moved.txt": "a file moved whole\nwith lines\n", "latin.txt": "na\xefve\n",
		"bin.dat": "\x00\x01\x02binary\xff", "run.sh": "#!/bin/sh\n", "untracked.txt": "u\n"}
	for name, c := range want {
		if b, err := os.ReadFile(filepath.Join(sub, name)); err != nil || string(b) != c {
			t.Errorf("%s after apply: %q, %v; want %q", name, b, err, c)
		}
	}
	for _, name := range []string{"gone.txt", "moved.txt"} {
		if _, err := os.Lstat(filepath.Join(sub, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after apply", name)
		}
	}
	if fi, err := os.Stat(filepath.Join(sub, "run.sh")); err != nil || fi.Mode()&0o100 == 0 {
		t.Errorf("run.sh not executable after apply")
	}
	if l, err := os.Readlink(filepath.Join(sub, "ln")); err != nil || l != "mod.txt" {
		t.Errorf("ln after apply: %q, %v", l, err)
	}
}

// TestOwnerOfRepository: a root daemon exporting to a repository of
// another user writes objects and refs as that user, so the user's git can
// go on writing them.
func TestOwnerOfRepository(t *testing.T) {
	setup(t)
	name := os.Getenv("CELLBOX_TEST_USER")
	if os.Geteuid() != 0 || name == "" {
		t.Skip("needs root and CELLBOX_TEST_USER (an unprivileged user)")
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	base, err := os.MkdirTemp("", "cellbox-gitexport-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	dir := filepath.Join(base, "repo")
	os.Mkdir(dir, 0o755)
	gitIn(t, dir, "init", "-q", "-b", "main")
	writeFiles(t, dir, map[string]string{"a": "a\n"})
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "-m", "init")
	if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	}); err != nil {
		t.Fatal(err)
	}
	res, err := open(t, dir).Commit(context.Background(), []Change{add("fresh-content-"+strconv.Itoa(os.Getpid()), "unique content of this run\n")}, Options{Branch: "export"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		filepath.Join(dir, ".git", "objects", res.Commit[:2], res.Commit[2:]),
		filepath.Join(dir, ".git", "refs", "heads", "export"),
		filepath.Join(dir, ".git", "logs", "refs", "heads", "export"),
	} {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		if int(st.Uid) != uid {
			t.Errorf("%s belongs to uid %d, want the repository's owner %d", p, st.Uid, uid)
		}
	}
	// The patch, over uncommitted work of the user's, and the ignore rules.
	writeFiles(t, dir, map[string]string{".gitignore": "*.log\n"})
	os.Lchown(filepath.Join(dir, ".gitignore"), uid, gid)
	patch, files, err := open(t, dir).Patch(context.Background(), []Change{add("b", "b\n")})
	if err != nil || files != 1 || !strings.Contains(patch, "+++ b/b\n") {
		t.Fatalf("Patch as root of the user's repository: %d files, %v:\n%s", files, err, patch)
	}
	if ign, err := open(t, dir).Ignored(context.Background(), []string{"x.log", "b"}); err != nil || !ign["x.log"] || ign["b"] {
		t.Fatalf("Ignored as root of the user's repository: %v, %v", ign, err)
	}
}

// TestCommitAttributes: files are stored as git add would store them: the
// end-of-line conversion the base tree's .gitattributes asks for, or the
// one the changes' own .gitattributes asks for.
func TestCommitAttributes(t *testing.T) {
	setup(t)
	dir := newRepo(t, map[string]string{".gitattributes": "*.txt text eol=lf\n", "sub/.gitattributes": "*.bin -text\n", "a": "a\n"})
	changes := []Change{
		add("crlf.txt", "one\r\ntwo\r\n"),
		add("sub/raw.bin", "one\r\ntwo\r\n"),
		add("new/.gitattributes", "*.md text eol=lf\n"),
		add("new/doc.md", "x\r\n"),
	}
	res, err := open(t, dir).Commit(context.Background(), changes, Options{Branch: "attrs"})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"crlf.txt": "one\ntwo\n", "sub/raw.bin": "one\r\ntwo\r\n", "new/doc.md": "x\n"} {
		if got := gitIn(t, dir, "cat-file", "blob", res.Commit+":"+path); got != want {
			t.Errorf("%s stored as %q, want %q", path, got, want)
		}
	}
}

// TestForeignRepositoryRefused: a daemon of one user is not tricked into
// trusting a .git another user planted above its project (CVE-2022-24765's
// case): git refuses it as the user's own git would, so none of its
// configured programs (a filter's clean command here) runs. Root sets it
// up; the export runs as CELLBOX_TEST_USER (TestForeignRepositoryAsUser).
func TestForeignRepositoryRefused(t *testing.T) {
	setup(t)
	if os.Getenv("CELLBOX_FOREIGN_PROJECT") != "" {
		t.Skip("this is the run as the user (TestForeignRepositoryAsUser)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to plant a .git of another user")
	}
	base, err := os.MkdirTemp("", "cellbox-foreign-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	gitIn(t, base, "init", "-q", "-b", "main")
	// The marker's directory is writable by all, so a filter that ran as
	// the user would leave it.
	if err := os.MkdirAll(filepath.Join(base, "out"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(base, "out"), 0o777); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(base, "out", "filter-ran")
	gitIn(t, base, "config", "filter.x.clean", "touch "+marker+"; cat")
	writeFiles(t, base, map[string]string{".gitattributes": "* filter=x\n", "proj/a.txt": "a\n"})
	if err := os.Chmod(filepath.Join(base, "proj"), 0o777); err != nil {
		t.Fatal(err)
	}
	cmd := sandboxtest.UserCommand(t, "-test.run=^TestForeignRepositoryAsUser$", "-test.v")
	cmd.Env = append(cmd.Env, "CELLBOX_FOREIGN_PROJECT="+filepath.Join(base, "proj"))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestForeignRepositoryAsUser") {
		t.Fatalf("as the user: %v\n%s", err, out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the foreign repository's filter ran")
	}
}

// TestForeignRepositoryAsUser is TestForeignRepositoryRefused's export,
// run as the user.
func TestForeignRepositoryAsUser(t *testing.T) {
	proj := os.Getenv("CELLBOX_FOREIGN_PROJECT")
	if proj == "" {
		t.Skip("run by TestForeignRepositoryRefused")
	}
	t.Setenv("HOME", t.TempDir())
	r, err := Open(context.Background(), proj)
	if err == nil {
		_, err = r.Commit(context.Background(), []Change{add("b.txt", "b\n")}, Options{Branch: "export"})
	}
	if err == nil || !errors.Is(err, ErrInvalid) {
		t.Fatalf("an export into another user's repository: %v, want ErrInvalid (git's dubious ownership)", err)
	}
	t.Logf("refused: %v", err)
}
