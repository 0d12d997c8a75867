package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/network"
	"github.com/cellbox-dev/cellbox/workspace/sandbox/sandboxtest"
)

// Incremental checkpoints, the automatic ring and forks. The TestCheckpoint
// tests also run as CELLBOX_TEST_USER (TestChangesShapesAsUnprivilegedUser),
// the TestFork ones by TestForkAsUnprivilegedUser.

// viewState is the view as find and sha256sum print it: every entry's
// type, mode, path and link target, a file's mtime, and the content of
// every regular file. (A checkpoint holds changed files, not directories:
// a restore makes new directories now.)
func viewState(t *testing.T, w *Workspace) string {
	t.Helper()
	return sh(t, w, `find . -path ./fifo -prune -o -type f -printf '%y %m %p %T@\n' -o -printf '%y %m %p %l\n' | sort
find . -type f -print0 | sort -z | xargs -0 -r sha256sum`)
}

// fullState is viewState with every entry's mtime, directories' and
// symlinks' too.
func fullState(t *testing.T, w *Workspace) string {
	t.Helper()
	return sh(t, w, `find . -path ./fifo -prune -o -printf '%y %m %p %l %T@\n' | sort
find . -type f -print0 | sort -z | xargs -0 -r sha256sum`)
}

// baselines is a copy of w's baselines, read under its lock.
func baselines(t *testing.T, w *Workspace) map[string]baseline {
	t.Helper()
	st, unlock, err := w.lockFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	return maps.Clone(st.base)
}

// cpFile is the host path of the file that checkpoint id stores for path.
func cpFile(t *testing.T, w *Workspace, id, path string) string {
	t.Helper()
	dir := filepath.Join(w.checkpointsDir(), id)
	man, err := w.readManifest(id, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range man.Entries {
		if e.Path == path {
			if e.File == "" {
				t.Fatalf("checkpoint %s holds no file for %s: %+v", id, path, e)
			}
			return filepath.Join(dir, "files", e.File)
		}
	}
	t.Fatalf("checkpoint %s has no entry %s", id, path)
	return ""
}

func inode(t *testing.T, p string) uint64 { return statT(t, p).Ino }

func mustCheckpoint(t *testing.T, w *Workspace, name string) protocol.Checkpoint {
	t.Helper()
	cp, err := w.Checkpoint(context.Background(), name, nil)
	if err != nil {
		t.Fatalf("checkpoint %s: %v", name, err)
	}
	return cp
}

func mustAuto(t *testing.T, w *Workspace, name string) protocol.Checkpoint {
	t.Helper()
	cp, err := w.AutoCheckpoint(context.Background(), name)
	if err != nil {
		t.Fatalf("automatic checkpoint %s: %v", name, err)
	}
	return cp
}

func writeView(t *testing.T, w *Workspace, path, content string) {
	t.Helper()
	if _, err := w.FsWrite(protocol.FsWriteParams{Path: path, Content: content, CreateParents: true}); err != nil {
		t.Fatalf("fs/write %s: %v", path, err)
	}
}

// TestCheckpointIncremental: a checkpoint copies only what changed since
// the newest one and hard-links the rest to it; restoring an older
// checkpoint after the newer one and the one it shares files with are
// deleted gives every file back exactly.
func TestCheckpointIncremental(t *testing.T) {
	e := newFilesEnv(t, shapesProject)
	w := e.open(t, "incremental")
	sh(t, w, shapesScript+`
mkdir many; for i in $(seq 0 19); do echo "file $i" > "many/f$i"; done
echo hard > h1 && ln h1 h2`)
	cp1 := mustCheckpoint(t, w, "one")
	files := cp1.Files
	// Every change but the deletions is copied.
	deleted := 0
	for _, c := range mustChanges(t, w) {
		if c.Kind == protocol.ChangeKindDeleted {
			deleted++
		}
	}
	if cp1.Copied != files-deleted || cp1.Copied == 0 {
		t.Fatalf("first checkpoint copied %d of %d files (%d deleted)", cp1.Copied, files, deleted)
	}

	// One file rewritten: one copied, the rest shared by hard link.
	sh(t, w, "echo changed > many/f3")
	cp2 := mustCheckpoint(t, w, "two")
	if cp2.Copied != 1 || cp2.Files != files {
		t.Fatalf("second checkpoint = %+v, want 1 copied of %d", cp2, files)
	}
	if a, b := inode(t, cpFile(t, w, cp1.CheckpointID, "many/f5")), inode(t, cpFile(t, w, cp2.CheckpointID, "many/f5")); a != b {
		t.Fatalf("many/f5 is unchanged, but its stored files are inodes %d and %d", a, b)
	}
	if a, b := inode(t, cpFile(t, w, cp1.CheckpointID, "many/f3")), inode(t, cpFile(t, w, cp2.CheckpointID, "many/f3")); a == b {
		t.Fatal("many/f3 changed, but the second checkpoint shares the first one's file")
	}
	if b, _ := os.ReadFile(cpFile(t, w, cp2.CheckpointID, "many/f3")); string(b) != "changed\n" {
		t.Fatalf("stored many/f3 = %q", b)
	}
	state2 := viewState(t, w)

	// A rename over a file (a new inode), a chmod, a new file: each copied,
	// the rest shared by what the manifest records (as after a restart,
	// with nothing kept in memory).
	st, unlock, err := w.lockFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st.newest = nil
	unlock()
	sh(t, w, "echo new > many/tmp && mv many/tmp many/f7; chmod 600 many/f8; echo added > added.txt")
	cp3 := mustCheckpoint(t, w, "three")
	if cp3.Copied != 3 {
		t.Fatalf("third checkpoint copied %d, want 3 (a rename over, a chmod, a new file)", cp3.Copied)
	}
	if a, b := inode(t, cpFile(t, w, cp2.CheckpointID, "many/f5")), inode(t, cpFile(t, w, cp3.CheckpointID, "many/f5")); a != b {
		t.Fatalf("many/f5 is unchanged, but its stored files are inodes %d and %d", a, b)
	}

	// The older one restored, after the newer one and the one whose files
	// it shares are gone.
	for _, id := range []string{cp3.CheckpointID, cp1.CheckpointID} {
		if err := w.DeleteCheckpoint(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	sh(t, w, "rm -rf many h1 h2 mod.txt; echo other > keep.txt")
	if err := w.Restore(context.Background(), cp2.CheckpointID, nil); err != nil {
		t.Fatal(err)
	}
	// Hard links between changes come back as two files (a checkpoint
	// holds paths); the link count is not compared.
	if got := viewState(t, w); got != state2 {
		t.Fatalf("after restoring the second checkpoint:\n%s\nwant\n%s", got, state2)
	}
}

// TestCheckpointSameSizeInPlace: a file written in place to the same size,
// its mtime set back to what it was (same size, mtime and inode), is
// copied again: its ctime moved.
func TestCheckpointSameSizeInPlace(t *testing.T) {
	e := newFilesEnv(t, map[string]string{"keep.txt": "keep\n"})
	w := e.open(t, "inplace")
	sh(t, w, "printf aaaa > f.txt; printf other > g.txt")
	cp1 := mustCheckpoint(t, w, "one")
	before := statT(t, filepath.Join(w.UpperDir(), "f.txt"))
	r := py(t, w, protocol.Limits{}, `
st = os.stat("f.txt")
with open("f.txt", "r+b") as f:
    f.write(b"bbbb")
os.utime("f.txt", ns=(st.st_atime_ns, st.st_mtime_ns))
`)
	if r.Status.Code != 0 {
		t.Fatalf("python: %s", r.Stderr)
	}
	after := statT(t, filepath.Join(w.UpperDir(), "f.txt"))
	if after.Ino != before.Ino || after.Size != before.Size || after.Mtim != before.Mtim {
		t.Fatalf("the test did not keep the identity but for the ctime: %+v then %+v", before, after)
	}
	cp2 := mustCheckpoint(t, w, "two")
	if cp2.Copied != 1 {
		t.Fatalf("second checkpoint copied %d, want 1 (f.txt)", cp2.Copied)
	}
	if b, _ := os.ReadFile(cpFile(t, w, cp2.CheckpointID, "f.txt")); string(b) != "bbbb" {
		t.Fatalf("stored f.txt = %q, want bbbb", b)
	}
	if err := w.Restore(context.Background(), cp1.CheckpointID, nil); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, w, "cat f.txt"); got != "aaaa" {
		t.Fatalf("restored f.txt = %q", got)
	}
}

// TestCheckpointSettle: a file whose ctime the filesystem's clock does not
// pass in time (stamped in the future) gets no identity, and the state no
// sum: it is copied again and never taken for unchanged.
func TestCheckpointSettle(t *testing.T) {
	e := newFilesEnv(t, nil)
	w := e.open(t, "settle")
	old := settleMax
	settleMax = 20 * time.Millisecond
	defer func() { settleMax = old }()
	future := time.Now().Add(time.Hour).UnixNano()
	us := &upperState{ids: map[string]statID{"a": {CtimeNs: future}, "b": {CtimeNs: 1}}, sum: "x", maxCtime: future}
	if err := w.settle(context.Background(), us); err != nil {
		t.Fatal(err)
	}
	if _, ok := us.ids["a"]; ok || us.sum != "" || len(us.ids) != 1 {
		t.Fatalf("after settle: %+v", us)
	}
	us = &upperState{ids: map[string]statID{"b": {CtimeNs: 1}}, sum: "x", maxCtime: 1}
	if err := w.settle(context.Background(), us); err != nil || us.sum != "x" || len(us.ids) != 1 {
		t.Fatalf("a settled state changed: %+v, %v", us, err)
	}
}

// TestCheckpointAutoReused: an automatic checkpoint is taken only when
// something changed since the newest checkpoint of either kind.
func TestCheckpointAutoReused(t *testing.T) {
	e := newFilesEnv(t, map[string]string{"keep.txt": "keep\n", "p.txt": "project\n"})
	w := e.open(t, "reused")
	sh(t, w, "echo one > a.txt; rm keep.txt")
	a1 := mustAuto(t, w, "before execution 1")
	if a1.Reused || !a1.Auto || a1.Name != "before execution 1" || a1.Files != 2 {
		t.Fatalf("first automatic checkpoint = %+v", a1)
	}
	a2 := mustAuto(t, w, "before execution 2")
	if !a2.Reused || a2.CheckpointID != a1.CheckpointID {
		t.Fatalf("nothing changed, yet the automatic checkpoint = %+v (first %s)", a2, a1.CheckpointID)
	}
	// The newest is a user checkpoint: that one is reused.
	u := mustCheckpoint(t, w, "mine")
	if a := mustAuto(t, w, "x"); !a.Reused || a.CheckpointID != u.CheckpointID || a.Auto {
		t.Fatalf("after a user checkpoint, automatic = %+v, want %s reused", a, u.CheckpointID)
	}
	// Each of these is a change of the workspace, found by stat alone.
	changes := []struct{ what, script string }{
		{"an in-place write of the same size", `python3 -c "
import os
st = os.stat('a.txt')
with open('a.txt', 'r+b') as f: f.write(b'ONE')
os.utime('a.txt', ns=(st.st_atime_ns, st.st_mtime_ns))"`},
		{"a new empty directory", "mkdir d"},
		{"a deletion", "rm p.txt"},
		{"a chmod", "chmod 700 a.txt"},
		{"a symlink", "ln -s a.txt l"},
		{"a file emptied", ": > a.txt"},
	}
	last := u.CheckpointID
	for _, c := range changes {
		sh(t, w, c.script)
		a := mustAuto(t, w, c.what)
		if a.Reused || a.CheckpointID == last {
			t.Fatalf("after %s, the automatic checkpoint = %+v (newest was %s)", c.what, a, last)
		}
		if b := mustAuto(t, w, c.what+" again"); !b.Reused || b.CheckpointID != a.CheckpointID {
			t.Fatalf("nothing changed after %s, yet = %+v", c.what, b)
		}
		last = a.CheckpointID
	}
	// A project file edited from outside where the workspace holds a copy
	// equal to it (not a change before, a change now).
	sh(t, w, "echo project > q.txt")
	writeTree(t, e.project, map[string]string{"q.txt": "project\n"})
	base := mustAuto(t, w, "with q")
	if err := os.WriteFile(filepath.Join(e.project, "q.txt"), []byte("edited!\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if a := mustAuto(t, w, "after the project's edit"); a.Reused || a.CheckpointID == base.CheckpointID {
		t.Fatalf("the project's q.txt changed, yet the automatic checkpoint = %+v", a)
	}
	// Restoring an automatic checkpoint works as any, and keeps the state
	// before it.
	if err := w.Restore(context.Background(), a1.CheckpointID, nil); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, w, "cat a.txt; test ! -e keep.txt; test -e p.txt; test ! -e l && echo ok"); got != "one\nok\n" {
		t.Fatalf("after restoring the first automatic checkpoint: %q", got)
	}
	cps, err := w.Checkpoints()
	if err != nil || cps[len(cps)-1].Name != "before-restore" || cps[len(cps)-1].Auto {
		t.Fatalf("checkpoints after the restore = %+v, %v", cps, err)
	}
}

// TestCheckpointAutoRing: automatic checkpoints keep the newest
// MaxAutoCheckpoints of their own, listed with the user's (oldest first,
// marked auto); the user's are neither counted nor pruned.
func TestCheckpointAutoRing(t *testing.T) {
	e := newFilesEnv(t, map[string]string{"keep.txt": "keep\n"})
	e.m.opts.MaxCheckpoints = 3
	w := e.open(t, "ring")
	writeView(t, w, "u.txt", "user\n")
	u1 := mustCheckpoint(t, w, "user 1")
	writeView(t, w, "u.txt", "user 2\n")
	u2 := mustCheckpoint(t, w, "user 2")
	const taken = DefaultMaxAutoCheckpoints + 5
	for i := range taken {
		writeView(t, w, "counter.txt", fmt.Sprint(i))
		if a := mustAuto(t, w, fmt.Sprint("before execution ", i)); a.Reused {
			t.Fatalf("automatic checkpoint %d reused %s after a change", i, a.CheckpointID)
		}
	}
	cps, err := w.Checkpoints()
	if err != nil {
		t.Fatal(err)
	}
	var user, auto []string
	for _, cp := range cps {
		if cp.Auto {
			auto = append(auto, cp.Name)
		} else {
			user = append(user, cp.CheckpointID)
		}
	}
	if strings.Join(user, ",") != u1.CheckpointID+","+u2.CheckpointID {
		t.Fatalf("user checkpoints = %v, want %s,%s", user, u1.CheckpointID, u2.CheckpointID)
	}
	if len(auto) != DefaultMaxAutoCheckpoints || auto[0] != "before execution 5" || auto[len(auto)-1] != fmt.Sprint("before execution ", taken-1) {
		t.Fatalf("%d automatic checkpoints kept, from %q to %q", len(auto), auto[0], auto[len(auto)-1])
	}
	// The oldest kept restores exactly: its files were shared along the ring.
	oldest := cps[2]
	if err := w.Restore(context.Background(), oldest.CheckpointID, nil); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, w, "cat counter.txt u.txt"); got != "5user 2\n" {
		t.Fatalf("after restoring %q: %q", oldest.Name, got)
	}
}

// TestForkCopiesChanges: a fork starts with exactly the source's changes
// (every shape: whiteouts, opaque directories, symlinks, modes, times, hard
// links, FIFOs), its baselines and its network policy, and the two are
// independent after.
func TestForkCopiesChanges(t *testing.T) {
	e := newFilesEnv(t, shapesProject)
	w := e.open(t, "source")
	rules, err := network.ParseRules([]string{"example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.SetNetwork(protocol.NetworkModeAllowlist, rules); err != nil {
		t.Fatal(err)
	}
	sh(t, w, shapesScript+"echo hard > h1 && ln h1 h2 && chmod 555 'with space'")
	want := changeList(mustChanges(t, w))
	state := fullState(t, w)
	f, err := e.m.Fork(context.Background(), w.ID(), "")
	if err != nil {
		t.Fatal(err)
	}
	if f.Info().Name != "source-fork-1" || f.Info().Root != w.Info().Root || f.ID() == w.ID() {
		t.Fatalf("fork = %+v", f.Info())
	}
	if got := changeList(mustChanges(t, f)); got != want {
		t.Fatalf("fork's changes:\n%s\nwant\n%s", got, want)
	}
	if got := fullState(t, f); got != state {
		t.Fatalf("fork's view:\n%s\nwant\n%s", got, state)
	}
	if got := sh(t, f, "stat -c %h h1; test $(stat -c %i h1) = $(stat -c %i h2) && test -p fifo && echo linked"); got != "2\nlinked\n" {
		t.Fatalf("hard links and the FIFO in the fork: %q", got)
	}
	if p := f.policy(); p.Mode != network.ModeAllowlist || len(p.Rules) != 1 || p.Rules[0].String() != "example.com" {
		t.Fatalf("fork's network policy = %+v", p)
	}
	wb, fb := baselines(t, w), baselines(t, f)
	if len(fb) == 0 || len(fb) != len(wb) {
		t.Fatalf("fork has %d baselines, the source %d", len(fb), len(wb))
	}
	for p, b := range wb {
		if fb[p] != b {
			t.Fatalf("baseline of %s: fork %+v, source %+v", p, fb[p], b)
		}
	}
	// Independent: a write in either is not seen in the other.
	sh(t, f, "echo fork > mod.txt; echo fork-only > fork.txt")
	sh(t, w, "echo source-only > source.txt")
	if got := sh(t, w, "cat mod.txt; test ! -e fork.txt && echo ok"); got != "new\nok\n" {
		t.Fatalf("the source sees the fork's writes: %q", got)
	}
	if got := sh(t, f, "cat mod.txt; test ! -e source.txt && echo ok"); got != "fork\nok\n" {
		t.Fatalf("the fork sees the source's writes: %q", got)
	}
	// Conflicts: the project's file edited after the fork saw it.
	writeTree(t, e.project, map[string]string{"mod.txt.new": "outside\n"})
	if err := os.Rename(filepath.Join(e.project, "mod.txt.new"), filepath.Join(e.project, "mod.txt")); err != nil {
		t.Fatal(err)
	}
	res, err := f.Commit(context.Background(), []string{"mod.txt"}, nil)
	if err != nil || len(res.Conflicts) != 1 || len(res.Applied) != 0 {
		t.Fatalf("commit of mod.txt in the fork = %+v, %v; want a conflict", res, err)
	}
	// Names: the next free N; a name given; a name taken.
	f2, err := e.m.Fork(context.Background(), w.ID(), "")
	if err != nil || f2.Info().Name != "source-fork-2" {
		t.Fatalf("second fork = %+v, %v", f2, err)
	}
	f3, err := e.m.Fork(context.Background(), f.ID(), "try")
	if err != nil || f3.Info().Name != "try" {
		t.Fatalf("fork named try = %+v, %v", f3, err)
	}
	if got := sh(t, f3, "cat mod.txt fork.txt"); got != "fork\nfork-only\n" {
		t.Fatalf("a fork of the fork: %q", got)
	}
	if _, err := e.m.Fork(context.Background(), w.ID(), "try"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a fork named as an existing workspace: %v", err)
	}
	// Checkpoints are not copied.
	mustCheckpoint(t, w, "source's")
	if cps, err := f2.Checkpoints(); err != nil || len(cps) != 0 {
		t.Fatalf("a fork has checkpoints: %+v, %v", cps, err)
	}
	// The fork is on disk: reopened by its name after a close.
	if err := e.m.CloseWorkspace(context.Background(), f.ID(), false); err != nil {
		t.Fatal(err)
	}
	again := e.open(t, "source-fork-1")
	if again.ID() != f.ID() {
		t.Fatalf("reopened fork is %s, want %s", again.ID(), f.ID())
	}
	if got := sh(t, again, "cat fork.txt"); got != "fork-only\n" {
		t.Fatalf("reopened fork: %q", got)
	}
}

// TestForkErrors: only an open overlay workspace forks.
func TestForkErrors(t *testing.T) {
	e := newFilesEnv(t, nil)
	if _, err := e.m.Fork(context.Background(), "ws-000000000000", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("fork of an unknown workspace: %v", err)
	}
	s, err := e.m.Open(context.Background(), protocol.WorkspaceOpenParams{Mode: protocol.WorkspaceModeScratch})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Fork(context.Background(), s.ID(), ""); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "only an overlay workspace") {
		t.Fatalf("fork of a scratch workspace: %v", err)
	}
	d, err := e.m.Open(context.Background(), protocol.WorkspaceOpenParams{Mode: protocol.WorkspaceModeDirect, AllowDirect: true, Root: e.project})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Fork(context.Background(), d.ID(), ""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("fork of a direct workspace: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(e.state, "workspaces"))
	for _, en := range entries {
		if strings.HasPrefix(en.Name(), ".fork") {
			t.Fatalf("a failed fork left %s", en.Name())
		}
	}

	// While a fork is built, its workspace cannot be opened (a second
	// Workspace of one directory); once it is done, it can.
	src, err := e.m.Open(context.Background(), protocol.WorkspaceOpenParams{Root: e.project, Name: "src"})
	if err != nil {
		t.Fatal(err)
	}
	_, name, release, err := e.m.reserveFork(src, "busy")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Open(context.Background(), protocol.WorkspaceOpenParams{Root: e.project, Name: name}); !errors.Is(err, ErrConflict) {
		release()
		t.Fatalf("open of a fork being built: %v, want ErrConflict", err)
	}
	release()
	if _, err := e.m.Open(context.Background(), protocol.WorkspaceOpenParams{Root: e.project, Name: name}); err != nil {
		t.Fatalf("open after the reservation ended: %v", err)
	}
}

// TestForkAsUnprivilegedUser re-runs the fork tests as CELLBOX_TEST_USER.
func TestForkAsUnprivilegedUser(t *testing.T) {
	if sandboxtest.AsTestUser() {
		t.Skip("this is the re-run as the unprivileged user")
	}
	sandboxtest.RunAsTestUser(t, "^TestFork")
}

// TestForkCopyData: a fork's file copy gives the same bytes by each way
// it has: a clone where the filesystem shares blocks, copy_file_range,
// and read and write where neither is possible.
func TestForkCopyData(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	data := make([]byte, 3<<20+17)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []treeCopy{{}, {noClone: true}, {noClone: true, noRange: true}} {
		t.Run(fmt.Sprintf("noClone=%v,noRange=%v", c.noClone, c.noRange), func(t *testing.T) {
			in, err := os.Open(src)
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			dst := filepath.Join(dir, fmt.Sprint("dst-", c.noClone, c.noRange))
			out, err := os.Create(dst)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			n, err := c.copyData(int(in.Fd()), int(out.Fd()), int64(len(data)))
			if err != nil || n != int64(len(data)) {
				t.Fatalf("copied %d bytes, %v; want %d", n, err, len(data))
			}
			if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) {
				t.Fatalf("the copy differs (%d bytes)", len(got))
			}
		})
	}
}

// TestForkDeepTree: an automatic checkpoint's stat walk and a fork's copy
// of a tree 5,000 directories deep keep few descriptors open, and the
// fork holds the file at the bottom.
func TestForkDeepTree(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "deep")
	makeDeepTree(t, w, true)
	deep := strings.Repeat("d/", deepTreeDepth) + "bottom.txt"
	var err error
	fds, _ := peakDuring(func() { _, err = w.AutoCheckpoint(context.Background(), "deep") })
	if err != nil || fds >= 200 {
		t.Fatalf("automatic checkpoint of the deep tree: %v, %d descriptors at once", err, fds)
	}
	var f *Workspace
	fds, _ = peakDuring(func() { f, err = e.m.Fork(context.Background(), w.ID(), "") })
	if err != nil || fds >= 200 {
		t.Fatalf("fork of the deep tree: %v, %d descriptors at once", err, fds)
	}
	if cs := mustChanges(t, f); len(cs) != 1 || cs[0].Path != deep {
		t.Fatalf("the fork's changes: %d", len(cs))
	}
	if a, err := f.AutoCheckpoint(context.Background(), "fork"); err != nil || a.Files != 1 {
		t.Fatalf("automatic checkpoint of the fork: %+v, %v", a, err)
	}
}
