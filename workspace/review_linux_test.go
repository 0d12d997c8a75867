package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/sandbox/sandboxtest"
)

// Renames and ignored paths in workspace/changes and diff, and the
// hand-off to git (gitexport_linux.go), with real git.

// TestReviewAsUnprivilegedUser re-runs these tests as CELLBOX_TEST_USER.
func TestReviewAsUnprivilegedUser(t *testing.T) {
	if sandboxtest.AsTestUser() {
		t.Skip("this is the re-run as the unprivileged user")
	}
	sandboxtest.RunAsTestUser(t, "^(TestChangesRenames|TestChangesIgnored|TestExportGit|TestExportPatchPlain)$")
}

func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
}

// git runs git in dir with a clean environment and no user config.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=T", "-c", "user.email=t@example.com"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "LC_ALL=C", "GIT_CONFIG_NOSYSTEM=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// gitProject makes the project a repository with its files committed.
func gitProject(t *testing.T, dir string) {
	t.Helper()
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "initial")
}

func listChanges(t *testing.T, w *Workspace, o ChangeOptions) ([]protocol.Change, int) {
	t.Helper()
	cs, n, err := w.ListChanges(context.Background(), o)
	if err != nil {
		t.Fatalf("ListChanges: %v", err)
	}
	return cs, n
}

// renameList prints changes as "kind path [<- from | -> to]" a line.
func renameList(cs []protocol.Change) string {
	var lines []string
	for _, c := range cs {
		l := string(c.Kind) + " " + c.Path
		if c.RenamedFrom != "" {
			l += " <- " + c.RenamedFrom
		}
		if c.RenamedTo != "" {
			l += " -> " + c.RenamedTo
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}

// TestChangesRenames: a deleted and an added file of the same content are
// a rename; the same base name wins among equal contents; an empty file,
// a changed content or another type is no rename.
func TestChangesRenames(t *testing.T) {
	e := newFilesEnv(t, map[string]string{
		"a.txt": "alpha\n", "dir/b.txt": "bravo\n", "c.txt": "charlie\n",
		"twin": "same\n", "x/copy": "same\n", "empty": "", "link": "->a.txt",
		"mod.txt": "m\n", "f.txt": "->mod.txt",
	})
	w := e.open(t, "renames")
	sh(t, w, `mv a.txt moved-a.txt
mkdir new && mv dir/b.txt new/b.txt
mv c.txt c2.txt && echo more >> c2.txt
rm twin x/copy && mkdir y && echo same > y/copy
mv empty empty2
mv link link2
echo changed > mod.txt
rm f.txt && printf mod.txt > g.txt`)
	cs, _ := listChanges(t, w, ChangeOptions{})
	want := strings.Join([]string{
		"deleted a.txt -> moved-a.txt",
		"deleted c.txt",
		"added c2.txt",
		"deleted dir/b.txt -> new/b.txt",
		"deleted empty",
		"added empty2",
		"deleted f.txt",
		"added g.txt",
		"deleted link -> link2",
		"added link2 <- link",
		"modified mod.txt",
		"added moved-a.txt <- a.txt",
		"added new/b.txt <- dir/b.txt",
		"deleted twin",
		"deleted x/copy -> y/copy",
		"added y/copy <- x/copy",
	}, "\n")
	if got := renameList(cs); got != want {
		t.Fatalf("changes:\n%s\nwant:\n%s", got, want)
	}
}

// TestChangesIgnored: in a git repository, the changes of ignored paths
// (added or deleted) and of .git are left out and counted unless asked
// for, in changes and in diff.
func TestChangesIgnored(t *testing.T) {
	needGit(t)
	e := newFilesEnv(t, map[string]string{".gitignore": "build/\n*.log\n", "src.txt": "s\n"})
	gitProject(t, e.project)
	writeTree(t, e.project, map[string]string{"old.log": "an ignored file of the user's\n"})
	w := e.open(t, "ignored")
	sh(t, w, `mkdir build && echo o > build/out.o
echo l > run.log
echo s2 > src.txt
rm old.log
echo x > .git/cellbox-test`)
	cs, hidden := listChanges(t, w, ChangeOptions{})
	if got := renameList(cs); got != "modified src.txt" || hidden != 4 {
		t.Fatalf("changes:\n%s\n%d hidden; want src.txt only, 4 hidden", got, hidden)
	}
	if cs := mustChanges(t, w); len(cs) != 1 {
		t.Fatalf("Changes lists %d, want 1 (ignored left out)", len(cs))
	}
	cs, hidden = listChanges(t, w, ChangeOptions{Ignored: true})
	want := "added .git/cellbox-test\nadded build/out.o\ndeleted old.log\nadded run.log\nmodified src.txt"
	if got := renameList(cs); got != want || hidden != 0 {
		t.Fatalf("changes with ignored:\n%s\n%d hidden; want:\n%s", got, hidden, want)
	}
	for _, tt := range []struct {
		o    ChangeOptions
		want int
	}{{ChangeOptions{}, 1}, {ChangeOptions{Ignored: true}, 5}, {ChangeOptions{Paths: []string{"build"}}, 0}, {ChangeOptions{Paths: []string{"build"}, Ignored: true}, 1}} {
		files, err := w.DiffChanges(context.Background(), tt.o)
		if err != nil || len(files) != tt.want {
			t.Errorf("DiffChanges(%+v): %d files, %v; want %d", tt.o, len(files), err, tt.want)
		}
	}
}

// projectState is what of a repository the user sees: status, index and
// HEAD bytes, the working tree's files.
func projectState(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(git(t, dir, "--no-optional-locks", "status", "--porcelain", "--untracked-files=all"))
	for _, f := range []string{".git/index", ".git/HEAD"} {
		c, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(f + ":" + string(c) + "\n")
	}
	var names []string
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Name() == ".git" {
			return filepath.SkipDir
		}
		if err == nil && !info.IsDir() {
			c, _ := os.ReadFile(p)
			names = append(names, p+" "+info.Mode().String()+" "+string(c))
		}
		return nil
	})
	sort.Strings(names)
	b.WriteString(strings.Join(names, "\n"))
	return b.String()
}

// TestExportGit: the workspace's changes, not the ignored ones, become a
// commit on a branch on top of a baseline of the user's uncommitted work;
// the project is untouched; the errors map to the workspace's sentinels.
func TestExportGit(t *testing.T) {
	needGit(t)
	e := newFilesEnv(t, map[string]string{".gitignore": "build/\n", "tracked.txt": "t\n", "gone.txt": "g\n", "ren.txt": "r\n", "tool.sh": "echo\n"})
	gitProject(t, e.project)
	writeTree(t, e.project, map[string]string{"tracked.txt": "t\nuser's edit\n", "mine.txt": "untracked\n"})
	w := e.open(t, "export")
	sh(t, w, `echo new > added.txt
echo sandbox >> tracked.txt
rm gone.txt
mv ren.txt ren2.txt
chmod +x tool.sh
ln -s added.txt lnk
mkdir build && echo o > build/o`)
	before := projectState(t, e.project)
	ctx := context.Background()
	res, err := w.ExportGit(ctx, protocol.WorkspaceExportGitParams{WorkspaceID: w.ID(), Branch: "sandbox/work"})
	if err != nil {
		t.Fatal(err)
	}
	if after := projectState(t, e.project); after != before {
		t.Fatalf("the export touched the project:\n%s\nwas:\n%s", after, before)
	}
	if res.Baseline == "" || res.Files != 7 || res.Branch != "sandbox/work" {
		t.Fatalf("result %+v: want a baseline and 7 files", res)
	}
	if got := strings.TrimSpace(git(t, e.project, "diff-tree", "-r", "--no-renames", "--name-status", "HEAD", res.Baseline)); got != "A\tmine.txt\nM\ttracked.txt" {
		t.Errorf("baseline:\n%s", got)
	}
	want := "A\tadded.txt\nD\tgone.txt\nA\tlnk\nD\tren.txt\nA\tren2.txt\nM\ttool.sh\nM\ttracked.txt"
	if got := strings.TrimSpace(git(t, e.project, "diff-tree", "-r", "--no-renames", "--name-status", res.Baseline, res.Commit)); got != want {
		t.Errorf("commit:\n%s\nwant:\n%s", got, want)
	}
	if got := git(t, e.project, "show", res.Commit+":tracked.txt"); got != "t\nuser's edit\nsandbox\n" {
		t.Errorf("tracked.txt in the commit: %q", got)
	}
	if got := git(t, e.project, "ls-tree", res.Commit, "tool.sh", "lnk"); !strings.HasPrefix(got, "120000 ") || !strings.Contains(got, "\n100755 ") {
		t.Errorf("modes in the commit:\n%s", got)
	}
	if got := git(t, e.project, "log", "-1", "--format=%s", res.Commit); !strings.Contains(got, "cellbox: the changes of workspace export") {
		t.Errorf("default message %q", got)
	}

	// paths and ignored choose the changes.
	res, err = w.ExportGit(ctx, protocol.WorkspaceExportGitParams{WorkspaceID: w.ID(), Branch: "only", Paths: []string{"added.txt", "build"}, Ignored: true, Message: "two files"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(git(t, e.project, "diff-tree", "-r", "--name-status", res.Baseline, res.Commit)); got != "A\tadded.txt\nA\tbuild/o" {
		t.Errorf("commit of paths with ignored:\n%s", got)
	}
	for _, tt := range []struct {
		p    protocol.WorkspaceExportGitParams
		want error
	}{
		{protocol.WorkspaceExportGitParams{Branch: "sandbox/work"}, ErrConflict}, // exists, elsewhere than HEAD
		{protocol.WorkspaceExportGitParams{Branch: "main"}, ErrInvalid},          // checked out
		{protocol.WorkspaceExportGitParams{Branch: "bad..name"}, ErrInvalid},
		{protocol.WorkspaceExportGitParams{Branch: "x", Paths: []string{"build"}}, ErrInvalid}, // only ignored: nothing
	} {
		if _, err := w.ExportGit(ctx, tt.p); !errors.Is(err, tt.want) {
			t.Errorf("ExportGit(%+v): %v, want %v", tt.p, err, tt.want)
		}
	}
	if after := projectState(t, e.project); after != before {
		t.Fatalf("the exports touched the project")
	}

	// A project that is no repository.
	plain := newFilesEnv(t, map[string]string{"a": "a\n"})
	pw := plain.open(t, "plain")
	sh(t, pw, "echo b > b")
	if _, err := pw.ExportGit(ctx, protocol.WorkspaceExportGitParams{Branch: "x"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not a git repository") {
		t.Errorf("ExportGit of a plain project: %v", err)
	}
}

// TestExportPatchPlain: the patch of a project that is no repository is
// git's format, which git apply takes onto a copy of the project, with the
// binary files named and left out.
func TestExportPatchPlain(t *testing.T) {
	needGit(t)
	e := newFilesEnv(t, map[string]string{"a.txt": "one\ntwo\nthree\n", "gone.txt": "bye\n", "m.sh": "echo\n", "nonl.txt": "x", "sp ace.txt": "s\n", "bin.dat": "\x00\x01"})
	copyDir := t.TempDir()
	if out, err := exec.Command("cp", "-a", e.project+"/.", copyDir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	w := e.open(t, "patch")
	sh(t, w, `printf 'one\nTWO\nthree\n' > a.txt
rm gone.txt
chmod 755 m.sh
printf 'y' > nonl.txt
echo new > 'sp ace.txt'
mkdir -p d && echo deep > d/new.txt
: > empty.txt
ln -s a.txt lnk
printf '\000\002' > bin.dat
printf 'caf\351\n' > latin.txt`)
	res, err := w.ExportPatch(context.Background(), protocol.WorkspaceExportPatchParams{WorkspaceID: w.ID()})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Patch, "# binary file not included: bin.dat\n# binary file not included: latin.txt\n") || res.Files != 8 {
		t.Fatalf("%d files, patch:\n%s", res.Files, res.Patch)
	}
	for _, args := range [][]string{{"apply", "--check"}, {"apply"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = copyDir
		cmd.Stdin = strings.NewReader(res.Patch)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s\npatch:\n%s", args[0], err, out, res.Patch)
		}
	}
	want := map[string]string{"a.txt": "one\nTWO\nthree\n", "nonl.txt": "y", "sp ace.txt": "new\n", "d/new.txt": "deep\n", "empty.txt": "", "m.sh": "echo\n", "bin.dat": "\x00\x01"}
	for name, c := range want {
		if b, err := os.ReadFile(filepath.Join(copyDir, name)); err != nil || string(b) != c {
			t.Errorf("%s after apply: %q, %v; want %q", name, b, err, c)
		}
	}
	if fi, err := os.Stat(filepath.Join(copyDir, "m.sh")); err != nil || fi.Mode()&0o100 == 0 {
		t.Errorf("m.sh not executable after apply")
	}
	if l, err := os.Readlink(filepath.Join(copyDir, "lnk")); err != nil || l != "a.txt" {
		t.Errorf("lnk after apply: %q, %v", l, err)
	}
	if _, err := os.Stat(filepath.Join(copyDir, "gone.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("gone.txt still there after apply")
	}
}

// TestExportPatchLimit: a patch travels whole in one JSON string, so one
// over maxPatchBytes is refused (ErrLimit, before the big side is read
// whole) and a big binary file is left out as any binary file is; the
// daemon's memory stays bounded by the limit, whatever code wrote.
func TestExportPatchLimit(t *testing.T) {
	e := newFilesEnv(t, map[string]string{"small.txt": "s\n"})
	w := e.open(t, "limit")
	mib := maxPatchBytes>>20 + 4
	sh(t, w, fmt.Sprintf("head -c %dM /dev/zero > big.bin", mib))
	res, err := w.ExportPatch(context.Background(), protocol.WorkspaceExportPatchParams{WorkspaceID: w.ID()})
	if err != nil || !strings.Contains(res.Patch, "# binary file not included: big.bin\n") {
		t.Fatalf("a big binary file: %v", err)
	}
	sh(t, w, fmt.Sprintf("rm big.bin; head -c %dM /dev/zero | tr '\\000' 'a' > big.txt", mib))
	if _, err := w.ExportPatch(context.Background(), protocol.WorkspaceExportPatchParams{WorkspaceID: w.ID()}); !errors.Is(err, ErrLimit) {
		t.Fatalf("a patch over the limit: %v, want ErrLimit", err)
	}
}
