package workspace

// Attacks on the daemon's walks of the workspace's files: FIFOs, trees
// deeper than PATH_MAX, renames over the user's edits (the suite:
// attack_linux_test.go).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// TestAttackFifoSwap: code swaps a changed file with a FIFO it holds open,
// in a loop (renameat2 RENAME_EXCHANGE), so that the daemon opens the FIFO
// where it expects the file. Changes, diff, checkpoint, commit and discard
// each answer (the file as a conflict, or skipped), and the workspace is
// not left locked.
func TestAttackFifoSwap(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "fifo-swap")
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	script := pyPrelude + `
import threading
N = 100
for i in range(N):
    open("/workspace/f%d.txt" % i, "w").write("changed %d\n" % i)
    os.mkfifo("/workspace/p%d" % i)
    os.open("/workspace/p%d" % i, os.O_RDWR)  # held open: a reader would wait forever
stop = False
def swap():
    while not stop:
        for i in range(N):
            libc.syscall(316, -100, ("/workspace/f%d.txt" % i).encode(), -100, ("/workspace/p%d" % i).encode(), 2)
threading.Thread(target=swap, daemon=True).start()
print("swapping", flush=True)
sys.stdin.read()
`
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := w.Spawn(ctx, ProcSpec{Argv: []string{"python3", "-c", script}, Stdin: inR, Stdout: outW, Stderr: outW, Limits: limits(t, protocol.Limits{})})
	inR.Close()
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	sc := bufio.NewScanner(outR)
	if !sc.Scan() || sc.Text() != "swapping" {
		t.Fatalf("the swapper said %q", sc.Text())
	}
	ops := []struct {
		name string
		f    func(context.Context) error
	}{
		{"changes", func(ctx context.Context) error { _, err := w.Changes(ctx); return err }},
		{"diff", func(ctx context.Context) error { _, err := w.Diff(ctx, nil); return err }},
		{"checkpoint", func(ctx context.Context) error { _, err := w.Checkpoint(ctx, "swap", nil); return err }},
		{"commit", func(ctx context.Context) error { _, err := w.Commit(ctx, nil, nil); return err }},
		{"discard", func(ctx context.Context) error { _, err := w.Discard(ctx, nil); return err }},
	}
	for round := range 40 {
		for _, op := range ops {
			if round < 39 && op.name != "diff" && op.name != "changes" {
				continue // the reads many times; the writes once, last
			}
			octx, ocancel := context.WithTimeout(context.Background(), 30*time.Second)
			start := time.Now()
			done := make(chan error, 1)
			go func() { done <- op.f(octx) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				// Still reading the FIFO, cancelled or not: end the swapper
				// (its end of the FIFO closes) so the operation returns.
				_ = p.Kill()
				<-done
				ocancel()
				t.Fatalf("%s hung on the swapped FIFO and ignored its cancellation", op.name)
			}
			ocancel()
			if round == 39 {
				t.Logf("%s under the swap: %v after %v", op.name, err, time.Since(start).Round(time.Millisecond))
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s hung on the swapped FIFO until its deadline", op.name)
			}
		}
	}
	inW.Close()
}

// deepTreeDepth is how deep TestAttackDeepTree's tree goes: its bottom is
// 10,000 bytes below /workspace, more than twice PATH_MAX.
const deepTreeDepth = 5000

// makeDeepTree has code in w make deepTreeDepth nested directories "d"
// (mkdirat and openat from the previous descriptor, so no path it uses is
// long), with bottom.txt at the bottom when withFile.
func makeDeepTree(t *testing.T, w *Workspace, withFile bool) {
	t.Helper()
	file := "False"
	if withFile {
		file = "True"
	}
	r := py(t, w, protocol.Limits{TimeoutMs: 60000}, fmt.Sprintf(`
fd = os.open("/workspace", os.O_RDONLY | os.O_DIRECTORY)
for i in range(%d):
    os.mkdir("d", dir_fd=fd)
    nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    fd = nfd
if %s:
    f = os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(f, b"bottom\n")
    os.close(f)
print("made")
`, deepTreeDepth, file))
	if r.Status.Code != 0 || !strings.Contains(string(r.Stdout), "made") {
		t.Fatalf("making the deep tree: %s %s", outcome(r), stderrTail(r))
	}
}

// openFDs counts the test process's (the daemon's) open descriptors.
func openFDs() int {
	es, _ := os.ReadDir("/proc/self/fd")
	return len(es)
}

// peakDuring runs fn and returns how far the process's open descriptors
// and its heap and stacks grew at most while it ran, sampled every 2 ms.
func peakDuring(fn func()) (fds int, mem uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseMem, baseFDs := ms.HeapAlloc+ms.StackInuse, openFDs()
	peakMem, peakFDs := baseMem, baseFDs
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peakMem = max(peakMem, ms.HeapAlloc+ms.StackInuse)
		peakFDs = max(peakFDs, openFDs())
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			sample()
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	fn()
	close(stop)
	<-done
	sample()
	return peakFDs - baseFDs, peakMem - baseMem
}

// TestAttackDeepTree: code makes a tree 5,000 directories deep with a file
// at the bottom, far below PATH_MAX. changes walks it with a bounded number
// of descriptors and bounded memory; diff, checkpoint and restore handle
// the file; discard (by the top directory's path, and of everything)
// removes the whole tree, so the user can always roll back.
func TestAttackDeepTree(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "deep")
	ctx := context.Background()
	upperHasTree := func() bool {
		_, err := os.Lstat(filepath.Join(w.UpperDir(), "d"))
		return err == nil
	}
	cpEmpty, err := w.Checkpoint(ctx, "empty", nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	makeDeepTree(t, w, true)
	t.Logf("code made %d nested directories in %v", deepTreeDepth, time.Since(start).Round(time.Millisecond))
	deep := strings.Repeat("d/", deepTreeDepth) + "bottom.txt"

	var cs []protocol.Change
	start = time.Now()
	fds, mem := peakDuring(func() { cs, err = w.Changes(ctx) })
	t.Logf("changes of the deep tree: %v, descriptors +%d at most, heap and stacks +%.1f MiB at most", time.Since(start).Round(time.Millisecond), fds, float64(mem)/(1<<20))
	if err != nil {
		t.Fatalf("Changes: %v", err)
	}
	if len(cs) != 1 || cs[0].Path != deep || cs[0].Kind != protocol.ChangeKindAdded {
		t.Fatalf("changes: %d, want the one file at the bottom", len(cs))
	}
	if fds >= 200 {
		t.Errorf("changes opened %d descriptors at once, want fewer than 200", fds)
	}
	if mem >= 16<<20 {
		t.Errorf("changes grew the heap and stacks by %d MiB, want less than 16", mem>>20)
	}

	diffs, err := w.Diff(ctx, nil)
	if err != nil || len(diffs) != 1 || !strings.Contains(diffs[0].Diff, "+bottom") {
		t.Fatalf("Diff: %v, %d diffs", err, len(diffs))
	}
	cpDeep, err := w.Checkpoint(ctx, "deep", nil)
	if err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	if cpDeep.Files != 1 {
		t.Fatalf("the checkpoint holds %d files, want 1", cpDeep.Files)
	}
	// Back to before the tree: the file and every directory above it go.
	if err := w.Restore(ctx, cpEmpty.CheckpointID, nil); err != nil {
		t.Fatalf("Restore (empty): %v", err)
	}
	if cs := mustChanges(t, w); len(cs) != 0 || upperHasTree() {
		t.Fatalf("after restoring the empty checkpoint: %d changes, tree left: %v", len(cs), upperHasTree())
	}
	// And forward again.
	if err := w.Restore(ctx, cpDeep.CheckpointID, nil); err != nil {
		t.Fatalf("Restore (deep): %v", err)
	}
	if cs := mustChanges(t, w); len(cs) != 1 || cs[0].Path != deep {
		t.Fatalf("after restoring the deep checkpoint: %d changes", len(cs))
	}
	r := py(t, w, protocol.Limits{}, fmt.Sprintf(`
fd = os.open("/workspace", os.O_RDONLY | os.O_DIRECTORY)
for i in range(%d):
    nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    fd = nfd
f = os.open("bottom.txt", os.O_RDONLY, dir_fd=fd)
print(os.read(f, 100).decode(), end="")
`, deepTreeDepth))
	if string(r.Stdout) != "bottom\n" {
		t.Fatalf("the restored file reads %q (%s)", r.Stdout, stderrTail(r))
	}

	// Discard by the top directory's path.
	start = time.Now()
	done, err := w.Discard(ctx, []string{"d"})
	if err != nil {
		t.Fatalf("Discard d: %v", err)
	}
	t.Logf("discard of the deep tree: %v", time.Since(start).Round(time.Millisecond))
	if len(done) != 1 || done[0] != deep || upperHasTree() {
		t.Fatalf("discard d: %d paths, tree left: %v", len(done), upperHasTree())
	}
	// Only directories, no change to list: discard of everything still
	// removes them.
	makeDeepTree(t, w, false)
	if cs := mustChanges(t, w); len(cs) != 0 {
		t.Fatalf("empty directories listed as %d changes", len(cs))
	}
	if _, err := w.Discard(ctx, nil); err != nil {
		t.Fatalf("Discard: %v", err)
	}
	if upperHasTree() {
		t.Fatal("discard of everything left the deep tree")
	}
	if r := runIn(t, w, protocol.Limits{}, "true"); r.Status.Code != 0 {
		t.Fatalf("the workspace no longer runs code: %s", outcome(r))
	}
}

// TestAttackRenameOverUserEdit: code appends to notes.txt (a copy-up), the
// user edits the project's notes.txt, then code rewrites the file by a
// rename over it, as sed -i or an editor's save do. The rename's new upper
// entry is born after the user's edit, so the birth-time rule alone would
// take the edited file as what the workspace saw, and commit would
// overwrite the edit. The baseline follows the path from the first time
// the workspace touched it: commit reports a conflict and leaves the edit.
// Without the user's edit, the same steps commit cleanly.
func TestAttackRenameOverUserEdit(t *testing.T) {
	for _, userEdit := range []bool{true, false} {
		t.Run(fmt.Sprintf("userEdit=%v", userEdit), func(t *testing.T) {
			e := newAttackEnv(t)
			notes := filepath.Join(e.project, "notes.txt")
			if err := os.WriteFile(notes, []byte("line 1\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			w := e.open(t, "notes")
			sh(t, w, "echo sandbox >> notes.txt")
			time.Sleep(3 * quotaInterval) // the sandbox still runs
			const edited = "line 1\nthe user's edit\n"
			if userEdit {
				if err := os.WriteFile(notes, []byte(edited), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r := py(t, w, protocol.Limits{}, `
old = open("notes.txt").read()
with open(".notes.txt.tmp", "w") as f:
    f.write(old.replace("sandbox", "sandbox rewrote"))
os.rename(".notes.txt.tmp", "notes.txt")
print("renamed")
`)
			if !strings.Contains(string(r.Stdout), "renamed") {
				t.Fatalf("rename: %s %s", outcome(r), stderrTail(r))
			}
			res, err := w.Commit(context.Background(), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(notes)
			t.Logf("applied %v, conflicts %v; project: %q", res.Applied, res.Conflicts, got)
			if userEdit {
				if len(res.Conflicts) != 1 || res.Conflicts[0].Path != "notes.txt" || len(res.Applied) != 0 {
					t.Fatalf("commit applied %v, conflicts %v: want notes.txt a conflict", res.Applied, res.Conflicts)
				}
				if string(got) != edited {
					t.Fatalf("the user's edit was overwritten: %q", got)
				}
				return
			}
			if len(res.Conflicts) != 0 || len(res.Applied) != 1 {
				t.Fatalf("commit applied %v, conflicts %v: want notes.txt applied", res.Applied, res.Conflicts)
			}
			if string(got) != "line 1\nsandbox rewrote\n" {
				t.Fatalf("the project holds %q", got)
			}
		})
	}
}
