package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/sandbox/sandboxtest"
)

// filesEnv is a Manager and a project for the changes, commit, discard
// and checkpoint tests.
type filesEnv struct {
	*attackEnv
}

func newFilesEnv(t *testing.T, files map[string]string) *filesEnv {
	t.Helper()
	e := newAttackEnv(t)
	for name := range projectFiles {
		os.RemoveAll(filepath.Join(e.project, name))
	}
	os.RemoveAll(filepath.Join(e.project, "sub"))
	writeTree(t, e.project, files)
	return &filesEnv{e}
}

// writeTree writes files (a value starting with "->" makes a symlink).
func writeTree(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sh runs a shell script in w and fails the test if it fails.
func sh(t testing.TB, w *Workspace, script string) string {
	t.Helper()
	r := runIn(t, w, protocol.Limits{}, "sh", "-ec", script)
	if r.Status.Code != 0 {
		t.Fatalf("script failed (exit %d): %s\nstderr: %s", r.Status.Code, script, r.Stderr)
	}
	return string(r.Stdout)
}

// changeList prints changes one a line: "kind path [size] [binary]".
func changeList(cs []protocol.Change) string {
	var lines []string
	for _, c := range cs {
		l := string(c.Kind) + " " + c.Path
		if c.Size != nil {
			l += fmt.Sprintf(" %d", *c.Size)
		}
		if c.Binary {
			l += " binary"
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}

func mustChanges(t *testing.T, w *Workspace) []protocol.Change {
	t.Helper()
	cs, err := w.Changes(context.Background())
	if err != nil {
		t.Fatalf("Changes: %v", err)
	}
	return cs
}

func wantChanges(t *testing.T, w *Workspace, want ...string) {
	t.Helper()
	want = append([]string(nil), want...)
	sort.Strings(want)
	lines := strings.Split(changeList(mustChanges(t, w)), "\n")
	sort.Strings(lines)
	got := strings.Join(lines, "\n")
	if got != strings.Join(want, "\n") {
		t.Fatalf("changes:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}

var shapesProject = map[string]string{
	"keep.txt":          "keep\n",
	"mod.txt":           "old\n",
	"gone.txt":          "gone\n",
	"tree/a.txt":        "a\n",
	"tree/sub/b.txt":    "b\n",
	"tree/sub/deep/c":   "c\n",
	"opq/x.txt":         "x\n",
	"opq/y.txt":         "y\n",
	"ren.txt":           "renamed\n",
	"mode.sh":           "#!/bin/sh\n",
	"same.txt":          "same\n",
	"touched.txt":       "touched\n",
	"f2d":               "file that becomes a directory\n",
	"d2f/inner.txt":     "inner\n",
	"link":              "->keep.txt",
	"relink":            "->keep.txt",
	"partial/stay.txt":  "stay\n",
	"partial/leave.txt": "leave\n",
}

// shapesScript makes every kind of change.
const shapesScript = `
echo new > mod.txt
rm gone.txt
rm -rf tree
rm -rf opq && mkdir opq && echo z > opq/z.txt
mv ren.txt renamed.txt
chmod 755 mode.sh
chmod 600 same.txt && chmod 644 same.txt
touch -d '2001-01-01' touched.txt
printf 'a\000b' > bin.dat
printf '\377\376bad utf8' > latin.txt
: > empty.txt
mkdir -p 'with space' && echo u > 'with space/ünï ✓.txt'
rm f2d && mkdir f2d && echo in > f2d/x
rm -rf d2f && echo now a file > d2f
ln -sf mod.txt relink
ln -s keep.txt newlink
mkdir emptydir
mkfifo fifo
rm partial/leave.txt
`

var shapesWant = []string{
	"modified mod.txt 4",
	"deleted gone.txt",
	"deleted tree/a.txt",
	"deleted tree/sub/b.txt",
	"deleted tree/sub/deep/c",
	"deleted opq/x.txt",
	"deleted opq/y.txt",
	"added opq/z.txt 2",
	"deleted ren.txt",
	"added renamed.txt 8",
	"modified mode.sh 10",
	"added bin.dat 3 binary",
	"added latin.txt 10 binary",
	"added empty.txt 0",
	"added with space/ünï ✓.txt 2",
	"deleted f2d",
	"added f2d/x 3",
	"deleted d2f/inner.txt",
	"added d2f 11",
	"modified relink 7",
	"added newlink 8",
	"deleted partial/leave.txt",
}

// TestChangesShapes: every shape of change the upper layer can hold is
// reported as the protocol says, and what is not a change is not.
func TestChangesShapes(t *testing.T) {
	e := newFilesEnv(t, shapesProject)
	w := e.open(t, "shapes")
	wantChanges(t, w)
	sh(t, w, shapesScript)
	wantChanges(t, w, shapesWant...)
	// A scan is repeatable, and the project was not touched.
	wantChanges(t, w, shapesWant...)
	if b, _ := os.ReadFile(filepath.Join(e.project, "mod.txt")); string(b) != "old\n" {
		t.Fatalf("the project changed: %q", b)
	}
	// Written back to the same bytes: no longer a change.
	sh(t, w, "echo old > mod.txt")
	wantChanges(t, w, slicesWithout(shapesWant, "modified mod.txt 4")...)
}

// TestChangesShapesAsUnprivilegedUser re-runs the file tests as
// CELLBOX_TEST_USER.
func TestChangesShapesAsUnprivilegedUser(t *testing.T) {
	if sandboxtest.AsTestUser() {
		t.Skip("this is the re-run as the unprivileged user")
	}
	sandboxtest.RunAsTestUser(t, "^(TestChangesShapes|TestCommit|TestDiscard|TestCheckpoint|TestDiff)")
}

func slicesWithout(s []string, drop string) []string {
	var out []string
	for _, x := range s {
		if x != drop {
			out = append(out, x)
		}
	}
	return out
}

// TestDiff: unified diffs with labels, /dev/null for added and deleted
// files, mode lines, binary files without a diff, and the size cap.
func TestDiff(t *testing.T) {
	e := newFilesEnv(t, map[string]string{"a.txt": "one\ntwo\nthree\n", "gone.txt": "bye\n", "big.txt": "x\n", "m.sh": "echo\n"})
	w := e.open(t, "diff")
	sh(t, w, `printf 'one\nTWO\nthree\n' > a.txt; rm gone.txt; echo hi > new.txt; printf '\000\001' > b.bin; chmod 755 m.sh
head -c 9000000 /dev/zero | tr '\000' 'y' > big.txt`)
	files, err := w.Diff(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]protocol.FileDiff{}
	for _, f := range files {
		got[f.Path] = f
	}
	want := map[string]string{
		"a.txt":    "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n",
		"gone.txt": "--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n",
		"new.txt":  "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hi\n",
		"m.sh":     "old mode 100644\nnew mode 100755\n",
		"b.bin":    "",
		"big.txt":  "--- a/big.txt\n+++ b/big.txt\n\\ cellbox: diff omitted: the file is 9000000 bytes, over the 8388608-byte diff limit\n",
	}
	if len(got) != len(want) {
		t.Fatalf("diff files = %+v", files)
	}
	for p, d := range want {
		if got[p].Diff != d {
			t.Errorf("diff of %s:\n%q\nwant\n%q", p, got[p].Diff, d)
		}
	}
	if !got["b.bin"].Binary || got["a.txt"].Binary {
		t.Errorf("binary flags: %+v", files)
	}
	only, err := w.Diff(context.Background(), []string{"a.txt"})
	if err != nil || len(only) != 1 || only[0].Path != "a.txt" {
		t.Fatalf("diff of one path = %+v, %v", only, err)
	}
	if _, err := w.Diff(context.Background(), []string{"../x"}); err == nil || !strings.Contains(err.Error(), ErrPathOutside.Error()) {
		t.Fatalf("diff of ../x: %v", err)
	}
}

// TestCommit: a commit applies every change to the project (content, mode,
// deletions of nested trees, new parents, renames, symlinks), after which
// nothing is a change; the project's files are whole and no temporary file
// is left.
func TestCommit(t *testing.T) {
	e := newFilesEnv(t, shapesProject)
	if os.Geteuid() == 0 {
		// A project of another user: what the root daemon creates in it
		// must be that user's.
		if err := filepath.Walk(e.project, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, 1234, 1235)
		}); err != nil {
			t.Fatal(err)
		}
	}
	w := e.open(t, "commit")
	sh(t, w, shapesScript+"chmod 4755 renamed.txt\n")
	var calls int
	res, err := w.Commit(context.Background(), nil, func(done, total int) { calls++ })
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if len(res.Conflicts) != 0 || len(res.Applied) != len(shapesWant) || calls != len(shapesWant) {
		t.Fatalf("commit = %+v (progress %d calls), want %d applied", res, calls, len(shapesWant))
	}
	// The workspace and the project agree now: listing both gives the
	// same tree (but for the setuid bit, cleared, and the fifo and the
	// empty directory, never committed).
	view := sh(t, w, "find . -path ./fifo -prune -o -path ./emptydir -prune -o -printf '%y %m %p %l\\n' | sort; cat mod.txt d2f f2d/x")
	host := findTree(t, e.project)
	view = sortLines(strings.Replace(view, "f 4755 ./renamed.txt", "f 755 ./renamed.txt", 1))
	if view != sortLines(host+"new\nnow a file\nin\n") {
		t.Fatalf("after the commit the view is\n%s\nand the project\n%s", view, host)
	}
	for _, p := range []string{"tree", "opq/x.txt", "gone.txt", "d2f/inner.txt"} {
		if _, err := os.Lstat(filepath.Join(e.project, p)); !os.IsNotExist(err) && !errors.Is(err, syscall.ENOTDIR) {
			t.Errorf("%s still in the project: %v", p, err)
		}
	}
	if got := changeList(mustChanges(t, w)); got != "modified renamed.txt 8" {
		t.Fatalf("changes after commit:\n%s\nwant only the setuid file", got)
	}
	// The new files belong to their directory's owner.
	dst := statT(t, e.project)
	for _, p := range []string{"with space", "with space/ünï ✓.txt", "mod.txt", "newlink"} {
		st := statT(t, filepath.Join(e.project, p))
		if st.Uid != dst.Uid || st.Gid != dst.Gid {
			t.Errorf("committed %s owned by %d:%d, want the project's %d:%d", p, st.Uid, st.Gid, dst.Uid, dst.Gid)
		}
	}
	if leftovers := tempFiles(t, e.project); len(leftovers) > 0 {
		t.Fatalf("temporary files left in the project: %v", leftovers)
	}
	// Edited again after the commit, the file commits without conflict.
	sh(t, w, "echo newer >> mod.txt")
	res, err = w.Commit(context.Background(), []string{"mod.txt"}, nil)
	if err != nil || len(res.Applied) != 1 || len(res.Conflicts) != 0 {
		t.Fatalf("second commit = %+v, %v", res, err)
	}
}

// TestCommitLongNames: two names that share their first 120 bytes each
// commit their own content (their temporary files once had one name, and
// the reviewed file got the other's content).
func TestCommitLongNames(t *testing.T) {
	e := newFilesEnv(t, map[string]string{"keep.txt": "keep\n"})
	w := e.open(t, "longnames")
	stem := strings.Repeat("n", 130)
	sh(t, w, "printf reviewed > "+stem+"_config.txt; printf other > "+stem+"_secret.txt")
	res, err := w.Commit(context.Background(), nil, nil)
	if err != nil || len(res.Applied) != 2 || len(res.Conflicts) != 0 {
		t.Fatalf("commit = %+v, %v", res, err)
	}
	for name, want := range map[string]string{stem + "_config.txt": "reviewed", stem + "_secret.txt": "other"} {
		b, err := os.ReadFile(filepath.Join(e.project, name))
		if err != nil || string(b) != want {
			t.Errorf("committed …%s = %q, %v; want %q", name[125:], b, err, want)
		}
	}
	if leftovers := tempFiles(t, e.project); len(leftovers) > 0 {
		t.Fatalf("temporary files left in the project: %v", leftovers)
	}
}

// TestCommitModesAndOutsideLinks: what code in the sandbox made
// world-writable is committed with the user's umask, and symlinks that
// would point outside the project are conflicts that say so, while one that
// stays inside is committed.
func TestCommitModesAndOutsideLinks(t *testing.T) {
	e := newFilesEnv(t, map[string]string{"keep.txt": "keep\n"})
	w := e.open(t, "modes")
	sh(t, w, `mkdir -p open/inner && printf x > open/inner/f.txt && chmod 0777 open open/inner && chmod 0666 open/inner/f.txt
ln -s /etc sub; ln -s ../../etc up; ln -s /workspace/keep.txt abs; mkdir -p d && ln -s ../keep.txt d/ok`)
	res, err := w.Commit(context.Background(), nil, nil)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	conflicts := map[string]string{}
	for _, c := range res.Conflicts {
		conflicts[c.Path] = c.Reason
	}
	for _, p := range []string{"sub", "up", "abs"} {
		if !strings.Contains(conflicts[p], "outside") {
			t.Errorf("symlink %s: conflict %q, want one that says it leaves the project", p, conflicts[p])
		}
		if _, err := os.Lstat(filepath.Join(e.project, p)); !os.IsNotExist(err) {
			t.Errorf("symlink %s was committed", p)
		}
	}
	if l, err := os.Readlink(filepath.Join(e.project, "d/ok")); err != nil || l != "../keep.txt" {
		t.Errorf("the symlink inside the project: %q, %v", l, err)
	}
	if umask&0o002 == 0 {
		t.Fatalf("the test runs with umask %#o, which lets others write: run it with the usual 022 or 002", umask)
	}
	for p, mode := range map[string]os.FileMode{"open": 0o777, "open/inner": 0o777, "open/inner/f.txt": 0o666} {
		want := mode &^ os.FileMode(umask)
		fi, err := os.Stat(filepath.Join(e.project, p))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("committed %s has mode %v (%v), want %v (umask %#o)", p, fi.Mode().Perm(), err, want, umask)
		}
	}
}

// TestDiffForgedNames: a file name with newlines cannot forge the header
// or hunk lines of a diff: the name is quoted as git quotes it.
func TestDiffForgedNames(t *testing.T) {
	e := newFilesEnv(t, map[string]string{"keep.txt": "keep\n"})
	w := e.open(t, "forged")
	sh(t, w, `printf 'real\n' > "$(printf 'x\n+++ evil.txt\n@@ -0,0 +1 @@\n+forged')"`)
	files, err := w.Diff(context.Background(), nil)
	if err != nil || len(files) != 1 {
		t.Fatalf("diff = %+v, %v", files, err)
	}
	d := files[0].Diff
	want := "--- /dev/null\n+++ \"b/x\\n+++ evil.txt\\n@@ -0,0 +1 @@\\n+forged\"\n@@ -0,0 +1 @@\n+real\n"
	if d != want {
		t.Fatalf("diff of a name with newlines:\n%q\nwant\n%q", d, want)
	}
	for _, line := range strings.Split(d, "\n") {
		if line == "+++ evil.txt" || line == "+forged" {
			t.Fatalf("the name forged the line %q in\n%s", line, d)
		}
	}
}

func findTree(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = "./" + rel
		if rel == "./." {
			rel = "."
		}
		typ, link := "f", ""
		switch {
		case fi.IsDir():
			typ = "d"
		case fi.Mode()&os.ModeSymlink != 0:
			typ = "l"
			link, _ = os.Readlink(p)
		}
		mode := fi.Mode().Perm()
		if fi.Mode()&os.ModeSetuid != 0 {
			mode |= 0o4000
		}
		lines = append(lines, fmt.Sprintf("%s %o %s %s", typ, mode, rel, link))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

func tempFiles(t testing.TB, root string) []string {
	var out []string
	_ = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.Contains(fi.Name(), ".cellbox-tmp-") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestCommitConflicts: a project file changed after the workspace saw it,
// changed after the copy-up but before any scan, or created where the
// workspace adds one, is a conflict and left alone; the rest applies.
func TestCommitConflicts(t *testing.T) {
	e := newFilesEnv(t, map[string]string{"seen.txt": "v1\n", "unseen.txt": "v1\n", "ok.txt": "v1\n", "touch.txt": "v1\n"})
	w := e.open(t, "conflicts")
	sh(t, w, "echo ws > seen.txt; echo ws > ok.txt; echo ws > added.txt; echo ws > touch.txt")
	wantChanges(t, w, "modified seen.txt 3", "modified ok.txt 3", "added added.txt 3", "modified touch.txt 3")
	sh(t, w, "echo ws > unseen.txt")
	// The project's unseen.txt must change after the copy-up: written
	// until its ctime is past the upper entry's birth time (timestamps
	// move in clock ticks).
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, filepath.Join(w.UpperDir(), "unseen.txt"), unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &stx); err != nil {
		t.Fatal(err)
	}
	btime := stx.Btime.Sec*1e9 + int64(stx.Btime.Nsec)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		unseen := filepath.Join(e.project, "unseen.txt")
		if err := os.WriteFile(unseen, []byte("outside\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(unseen, &st); err != nil {
			t.Fatal(err)
		}
		if stx.Mask&unix.STATX_BTIME == 0 || st.Ctim.Nano() > btime {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the project's unseen.txt keeps a ctime of %d, not past the copy-up's %d", st.Ctim.Nano(), btime)
		}
	}
	writeTree(t, e.project, map[string]string{"added.txt": "outside\n"})
	if err := os.WriteFile(filepath.Join(e.project, "seen.txt"), []byte("outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Touched, same bytes: not a conflict.
	now := time.Now()
	if err := os.Chtimes(filepath.Join(e.project, "touch.txt"), now, now); err != nil {
		t.Fatal(err)
	}
	res, err := w.Commit(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.Applied, ",") != "ok.txt,touch.txt" || len(res.Conflicts) != 3 {
		t.Fatalf("commit = %+v", res)
	}
	for _, c := range res.Conflicts {
		if c.Reason == "" {
			t.Errorf("conflict without a reason: %+v", c)
		}
		if b, _ := os.ReadFile(filepath.Join(e.project, c.Path)); string(b) != "outside\n" {
			t.Errorf("%s was overwritten: %q", c.Path, b)
		}
	}
	// Discarding takes the project's version; the conflict is gone.
	if _, err := w.Discard(context.Background(), []string{"seen.txt"}); err != nil {
		t.Fatal(err)
	}
	sh(t, w, "echo again > seen.txt")
	res, err = w.Commit(context.Background(), []string{"seen.txt"}, nil)
	if err != nil || len(res.Applied) != 1 {
		t.Fatalf("commit after discard = %+v, %v", res, err)
	}
}

// TestCommitSymlinkEscape: a project directory swapped for a symlink to a
// directory outside the project after the workspace saw it is not followed.
func TestCommitSymlinkEscape(t *testing.T) {
	e := newFilesEnv(t, map[string]string{"d/a.txt": "a\n"})
	outside := t.TempDir()
	w := e.open(t, "escape")
	sh(t, w, "echo ws > d/a.txt; echo ws > d/new.txt")
	wantChanges(t, w, "modified d/a.txt 3", "added d/new.txt 3")
	if err := os.Rename(filepath.Join(e.project, "d"), filepath.Join(outside, "d")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "d"), filepath.Join(e.project, "d")); err != nil {
		t.Fatal(err)
	}
	res, err := w.Commit(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// d/a.txt and d/new.txt cannot be reached without following d; the
	// symlink d itself (the workspace has a directory there) is newer
	// than the workspace's copy.
	if len(res.Applied) != 0 || len(res.Conflicts) != 3 {
		t.Fatalf("commit through a symlink = %+v", res)
	}
	if _, err := os.Readlink(filepath.Join(e.project, "d")); err != nil {
		t.Fatalf("the symlink was removed: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "d", "a.txt")); string(b) != "a\n" {
		t.Fatalf("the commit wrote outside the project: %q", b)
	}
	if _, err := os.Stat(filepath.Join(outside, "d", "new.txt")); !os.IsNotExist(err) {
		t.Fatalf("the commit created a file outside the project: %v", err)
	}
}

// TestDiscard: discarding one path, then the rest, through the live mount
// while a program keeps a file of the workspace open; the view then equals
// the project and nothing is a change.
func TestDiscard(t *testing.T) {
	e := newFilesEnv(t, shapesProject)
	w := e.open(t, "discard")
	before := sh(t, w, "find . -printf '%y %m %p %l\\n' | sort; cat mod.txt")
	sh(t, w, shapesScript)
	done, err := w.Discard(context.Background(), []string{"mod.txt", "tree"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(done, ",") != "mod.txt,tree/a.txt,tree/sub/b.txt,tree/sub/deep/c" {
		t.Fatalf("discarded %v", done)
	}
	want := slicesWithout(shapesWant, "modified mod.txt 4")
	for _, p := range []string{"deleted tree/a.txt", "deleted tree/sub/b.txt", "deleted tree/sub/deep/c"} {
		want = slicesWithout(want, p)
	}
	wantChanges(t, w, want...)
	done, err = w.Discard(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != len(want) {
		t.Fatalf("discarded %v, want %d paths", done, len(want))
	}
	wantChanges(t, w)
	// A directory the project lacks goes whole, even empty; a FIFO the
	// code made elsewhere is not a change and stays.
	after := sh(t, w, "rm fifo; test ! -e emptydir; find . -printf '%y %m %p %l\\n' | sort; cat mod.txt")
	if after != before {
		t.Fatalf("after discard the view is\n%s\nwant\n%s", after, before)
	}
	if host := findTree(t, e.project); !strings.HasPrefix(before, host) {
		t.Fatalf("the project changed:\n%s", host)
	}
}

// TestCheckpointRestore: a checkpoint keeps the changes; restore brings
// them back after more work (kept as before-restore); delete and the bound.
func TestCheckpointRestore(t *testing.T) {
	e := newFilesEnv(t, shapesProject)
	e.m.opts.MaxCheckpoints = 3
	w := e.open(t, "checkpoint")
	sh(t, w, shapesScript)
	state1 := sh(t, w, "find . -path ./fifo -prune -o -printf '%y %m %p %l\\n' | sort; cat mod.txt f2d/x")
	cp, err := w.Checkpoint(context.Background(), "one", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Name != "one" || cp.Files != len(shapesWant) || cp.Bytes == 0 || !strings.HasPrefix(cp.CheckpointID, "cp-") {
		t.Fatalf("checkpoint = %+v", cp)
	}
	sh(t, w, "echo later > mod.txt; echo later > later.txt; rm keep.txt; rm -rf f2d; echo x > opq/x.txt; rm bin.dat")
	state2 := sh(t, w, "find . -path ./fifo -prune -o -printf '%y %m %p %l\\n' | sort; cat mod.txt")
	if err := w.Restore(context.Background(), cp.CheckpointID, nil); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, w, "find . -path ./fifo -prune -o -printf '%y %m %p %l\\n' | sort; cat mod.txt f2d/x"); got != state1 {
		t.Fatalf("after restore:\n%s\nwant\n%s", got, state1)
	}
	wantChanges(t, w, shapesWant...)
	cps, err := w.Checkpoints()
	if err != nil || len(cps) != 2 || cps[0].CheckpointID != cp.CheckpointID || cps[1].Name != "before-restore" {
		t.Fatalf("checkpoints = %+v, %v", cps, err)
	}
	if err := w.Restore(context.Background(), cps[1].CheckpointID, nil); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, w, "find . -path ./fifo -prune -o -printf '%y %m %p %l\\n' | sort; cat mod.txt"); got != state2 {
		t.Fatalf("after restoring before-restore:\n%s\nwant\n%s", got, state2)
	}
	// The bound (3): the oldest go first.
	for i := range 3 {
		if _, err := w.Checkpoint(context.Background(), fmt.Sprint("n", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	cps, _ = w.Checkpoints()
	var names []string
	for _, c := range cps {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "n0,n1,n2" {
		t.Fatalf("after 6 checkpoints with a bound of 3: %v", names)
	}
	if err := w.DeleteCheckpoint(context.Background(), cps[1].CheckpointID); err != nil {
		t.Fatal(err)
	}
	if err := w.DeleteCheckpoint(context.Background(), cps[1].CheckpointID); err == nil || !strings.Contains(err.Error(), ErrNotFound.Error()) {
		t.Fatalf("deleting twice: %v", err)
	}
	if err := w.Restore(context.Background(), "cp-../../x", nil); err == nil || !strings.Contains(err.Error(), ErrNotFound.Error()) {
		t.Fatalf("restore of a bad id: %v", err)
	}
	cps, _ = w.Checkpoints()
	if len(cps) != 2 {
		t.Fatalf("after a delete: %+v", cps)
	}
}

func statT(t *testing.T, p string) *syscall.Stat_t {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t)
}

func sortLines(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

// TestCommitNamesNotUTF8: a name that is not valid UTF-8 (it used to
// reach a client with U+FFFD in place of its bytes, unreviewable and
// unnameable, yet committed) is carried quoted as git quotes it, and so is
// a name that begins with `"`: each can be listed, read, diffed,
// checkpointed and restored, discarded and committed by the name the client
// got, and commit writes exactly its bytes into the project.
func TestCommitNamesNotUTF8(t *testing.T) {
	e := newFilesEnv(t, map[string]string{"keep.txt": "keep\n"})
	w := e.open(t, "not-utf8")
	sh(t, w, `printf secret > "$(printf 'bad\377name')"; printf q > '"q".txt'; printf fine > good.txt; printf drop > "$(printf 'drop\376')"`)
	const bad, quoted, drop = `"bad\377name"`, `"\"q\".txt"`, `"drop\376"`
	wantChanges(t, w, "added "+bad+" 6", "added "+quoted+" 1", "added good.txt 4", "added "+drop+" 4")

	r, err := w.FsRead(protocol.FsReadParams{Path: bad})
	if err != nil || r.Content != "secret" {
		t.Fatalf("fs/read %s = %+v, %v", bad, r, err)
	}
	l, err := w.FsList(protocol.FsListParams{})
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, en := range l.Entries {
		listed[en.Path] = true
	}
	if !listed[bad] || !listed[quoted] {
		t.Fatalf("fs/list = %+v, want %s and %s", l.Entries, bad, quoted)
	}
	files, err := w.Diff(context.Background(), []string{bad})
	if err != nil || len(files) != 1 || files[0].Path != bad || !strings.Contains(files[0].Diff, `+++ "b/bad\377name"`) {
		t.Fatalf("diff of %s = %+v, %v", bad, files, err)
	}

	// A checkpoint keeps the name's bytes: restored after a rewrite, the
	// same file holds its old content.
	cp, err := w.Checkpoint(context.Background(), "names", nil)
	if err != nil {
		t.Fatal(err)
	}
	sh(t, w, `printf changed > "$(printf 'bad\377name')"`)
	if err := w.Restore(context.Background(), cp.CheckpointID, nil); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, w, `cat "$(printf 'bad\377name')"; ls | wc -l`); got != "secret5\n" {
		t.Fatalf("after restore: %q, want the old content and five names", got)
	}

	discarded, err := w.Discard(context.Background(), []string{drop})
	if err != nil || len(discarded) != 1 || discarded[0] != drop {
		t.Fatalf("discard %s = %q, %v", drop, discarded, err)
	}
	res, err := w.Commit(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(res.Applied)
	if len(res.Conflicts) != 0 || strings.Join(res.Applied, " ") != quoted+" "+bad+" good.txt" {
		t.Fatalf("commit = %+v", res)
	}
	for name, want := range map[string]string{"bad\xffname": "secret", `"q".txt`: "q"} {
		if b, err := os.ReadFile(filepath.Join(e.project, name)); err != nil || string(b) != want {
			t.Fatalf("project %q = %q, %v; want %q", name, b, err, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(e.project, "drop\xfe")); !os.IsNotExist(err) {
		t.Fatalf("the discarded name reached the project: %v", err)
	}
	if cs := mustChanges(t, w); len(cs) != 0 {
		t.Fatalf("changes after the commit: %s", changeList(cs))
	}
}
