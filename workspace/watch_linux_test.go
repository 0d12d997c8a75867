package workspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// watchLog collects what a Watch delivers.
type watchLog struct {
	mu       sync.Mutex
	batches  []WatchBatch
	changed  chan struct{} // capacity 1
	hold     chan struct{} // when set, deliver waits on it
	held     chan struct{} // deliver is waiting on hold (capacity 1)
	overflow int
	// sync, when set, creates (or removes) syncName in the watched tree:
	// step's barrier. Events are handled in order, so once its change is
	// delivered, so are those of everything done before it.
	sync     func(t *testing.T, create bool)
	syncName string
}

// syncIn makes l's barrier a file name that code in w's sandbox creates
// and removes.
func (l *watchLog) syncIn(w *Workspace, name string) *watchLog {
	l.syncName = name
	l.sync = func(t *testing.T, create bool) {
		if create {
			sh(t, w, "touch "+name)
		} else {
			sh(t, w, "rm "+name)
		}
	}
	return l
}

func newWatchLog() *watchLog {
	return &watchLog{changed: make(chan struct{}, 1), held: make(chan struct{}, 1)}
}

func (l *watchLog) deliver(b WatchBatch) {
	if l.hold != nil {
		select {
		case l.held <- struct{}{}:
		default:
		}
		<-l.hold
	}
	l.mu.Lock()
	l.batches = append(l.batches, b)
	if b.Overflow {
		l.overflow++
	}
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// since folds the changes delivered from batch i on, one entry per path,
// as a client applying them in order would see them.
func (l *watchLog) since(i int) (map[string]protocol.FileChangeType, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	net := map[string]protocol.FileChangeType{}
	for _, b := range l.batches[i:] {
		for _, c := range b.Changes {
			net[c.Path] = coalesce(net[c.Path], c.Type)
		}
	}
	for p, t := range net {
		if t == "" {
			delete(net, p)
		}
	}
	return net, len(l.batches)
}

func (l *watchLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.batches)
}

// step runs do, waits until everything it did has been delivered (l's
// barrier), and checks that the changes since it fold to want (or to one
// of also).
func (l *watchLog) step(t *testing.T, name string, do func(), want changes, also ...changes) {
	t.Helper()
	if l.sync == nil {
		t.Fatal("a watchLog's step needs its barrier (syncIn)")
	}
	from := l.count()
	do()
	l.barrier(t, name, from)
	got, _ := l.since(from)
	delete(got, l.syncName)
	if maps.Equal(got, want) || slices.ContainsFunc(also, func(c changes) bool { return maps.Equal(got, c) }) {
		return
	}
	if len(also) > 0 {
		t.Fatalf("%s: the watch reported %v, want %v or one of %v", name, got, want, also)
	}
	t.Fatalf("%s: the watch reported %v, want %v", name, got, want)
}

// barrier makes and removes l's barrier file and waits until both
// changes are delivered after batch from: then so is everything done
// before it. Made, it is seen as created; removed, as deleted, in a later
// batch (created then deleted in one batch would fold to nothing).
func (l *watchLog) barrier(t *testing.T, name string, from int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	wait := func(typ protocol.FileChangeType, from int) int {
		t.Helper()
		for {
			if i := l.find(from, l.syncName, typ); i >= 0 {
				return i
			}
			if time.Now().After(deadline) {
				got, _ := l.since(from)
				t.Fatalf("%s: the barrier %s was not reported %s; the watch reported %v", name, l.syncName, typ, got)
			}
			select {
			case <-l.changed:
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	l.sync(t, true)
	made := wait(created, from)
	l.sync(t, false)
	wait(deleted, made+1)
}

// find returns the index of the first batch from i on that reports p as
// typ, or -1.
func (l *watchLog) find(i int, p string, typ protocol.FileChangeType) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ; i < len(l.batches); i++ {
		for _, c := range l.batches[i].Changes {
			if c.Path == p && c.Type == typ {
				return i
			}
		}
	}
	return -1
}

type changes = map[string]protocol.FileChangeType

const (
	created = protocol.FileChangeCreated
	changed = protocol.FileChangeChanged
	deleted = protocol.FileChangeDeleted
)

// TestWatchOverlay: writes by code in the sandbox (seen in the upper
// layer: new files, copied-up project files, whiteouts, opaque and
// copied-up directories, trees made before their watch) and edits to the
// project from outside (reported when the view shows them).
func TestWatchOverlay(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "watch")
	// The sandbox has run before the watch: what it wrote then is no change.
	sh(t, w, "echo before > before.txt; rm gone.txt")
	log := newWatchLog().syncIn(w, "watch-sync")
	wt, err := w.Watch(WatchOptions{}, log.deliver)
	if err != nil {
		t.Fatal(err)
	}
	defer wt.Close()
	in := func(script string) func() { return func() { sh(t, w, script) } }
	outside := func(f func() error) func() {
		return func() {
			if err := f(); err != nil {
				t.Fatal(err)
			}
		}
	}
	project := func(p string) string { return filepath.Join(e.project, p) }

	log.step(t, "a new file", in("echo a > new.txt"), changes{"new.txt": created})
	log.step(t, "a project file written (copied up)", in("echo b >> hello.txt"), changes{"hello.txt": changed})
	log.step(t, "a project file in a project directory (the directory is copied up, no change)",
		in("echo c >> sub/data.txt"), changes{"sub/data.txt": changed})
	log.step(t, "a project file deleted (a whiteout)", in("rm sub/data.txt"), changes{"sub/data.txt": deleted})
	log.step(t, "a deleted file made again", in("echo again > gone.txt"), changes{"gone.txt": created})
	log.step(t, "a tree made at once", in("mkdir -p n1/n2/n3 && echo x > n1/n2/n3/f && echo y > n1/g"),
		changes{"n1": created, "n1/n2": created, "n1/n2/n3": created, "n1/n2/n3/f": created, "n1/g": created})
	log.step(t, "a file in a new directory", in("echo z > n1/n2/h"), changes{"n1/n2/h": created})
	log.step(t, "a tree moved", in("mv n1 m1"), changes{"n1": deleted, "m1": created, "m1/n2": created,
		"m1/n2/n3": created, "m1/n2/n3/f": created, "m1/n2/h": created, "m1/g": created})
	log.step(t, "a tree deleted", in("rm -r m1"), changes{"m1": deleted, "m1/n2": deleted,
		"m1/n2/n3": deleted, "m1/n2/n3/f": deleted, "m1/n2/h": deleted, "m1/g": deleted})
	// The hub reads the upper layer when it handles an event. If it
	// handles the whiteout rm left after mkdir has put the opaque directory
	// in its place, it sees only that directory: created (README.md,
	// "Watching"); if it saw the whiteout, deleted then created is changed.
	// Either way the client reads sub anew.
	log.step(t, "a project directory replaced (opaque)", in("rm -r sub && mkdir sub && echo n > sub/new"),
		changes{"sub": changed, "sub/new": created}, changes{"sub": created, "sub/new": created})
	log.step(t, "a mode change", in("chmod 600 before.txt"), changes{"before.txt": changed})
	log.step(t, "a write through the daemon's view", func() {
		if _, err := w.FsWrite(protocol.FsWriteParams{Path: "viaview.txt", Content: "v"}); err != nil {
			t.Fatal(err)
		}
	}, changes{"viaview.txt": created})

	// Outside edits: reported where the view shows the project.
	log.step(t, "a new project file", outside(func() error { return os.WriteFile(project("out.txt"), []byte("o"), 0o644) }),
		changes{"out.txt": created})
	log.step(t, "a project file edited", outside(func() error { return os.WriteFile(project("out.txt"), []byte("oo"), 0o644) }),
		changes{"out.txt": changed})
	log.step(t, "a new project tree", outside(func() error {
		if err := os.MkdirAll(project("od/od2"), 0o755); err != nil {
			return err
		}
		return os.WriteFile(project("od/od2/f"), []byte("o"), 0o644)
	}), changes{"od": created, "od/od2": created, "od/od2/f": created})
	log.step(t, "a project file removed", outside(func() error { return os.Remove(project("out.txt")) }),
		changes{"out.txt": deleted})
	// Hidden by the upper layer: a file the sandbox changed, one it
	// deleted, one under the directory it replaced. Then one that shows.
	log.step(t, "edits the view does not show", outside(func() error {
		for _, p := range []string{"hello.txt", "sub/data.txt", "sub/other.txt", "before.txt"} {
			if err := os.WriteFile(project(p), []byte("masked"), 0o644); err != nil {
				return err
			}
		}
		return os.WriteFile(project("shows.txt"), []byte("s"), 0o644)
	}), changes{"shows.txt": created})
}

// TestWatchPlain: scratch and direct workspaces watch their directory.
func TestWatchPlain(t *testing.T) {
	e := newAttackEnv(t)
	for _, mode := range []protocol.WorkspaceMode{protocol.WorkspaceModeScratch, protocol.WorkspaceModeDirect} {
		t.Run(string(mode), func(t *testing.T) {
			w, err := e.m.Open(context.Background(), protocol.WorkspaceOpenParams{Root: e.project, Mode: mode, AllowDirect: true, Name: "plain"})
			if err != nil {
				t.Fatal(err)
			}
			log := newWatchLog().syncIn(w, "watch-sync")
			wt, err := w.Watch(WatchOptions{}, log.deliver)
			if err != nil {
				t.Fatal(err)
			}
			defer wt.Close()
			in := func(script string) func() { return func() { sh(t, w, script) } }
			log.step(t, "a new file", in("echo a > new-"+string(mode)), changes{"new-" + string(mode): created})
			log.step(t, "a tree", in("mkdir -p d/e && echo x > d/e/f"), changes{"d": created, "d/e": created, "d/e/f": created})
			log.step(t, "a write", in("echo y >> d/e/f"), changes{"d/e/f": changed})
			log.step(t, "a tree deleted", in("rm -r d"), changes{"d": deleted, "d/e": deleted, "d/e/f": deleted})
			if mode == protocol.WorkspaceModeDirect {
				log.step(t, "an outside edit", func() {
					if err := os.WriteFile(filepath.Join(e.project, "hello.txt"), []byte("edited"), 0o644); err != nil {
						t.Fatal(err)
					}
				}, changes{"hello.txt": changed})
			}
		})
	}
}

// TestWatchGlobsAndClose: globs select paths; a closed watch delivers
// nothing more; the last one closed drops the workspace's hub.
func TestWatchGlobsAndClose(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "globs")
	for _, bad := range []string{"[", "/abs/*.py", "{a,b"} {
		if _, err := w.Watch(WatchOptions{Globs: []string{bad}}, func(WatchBatch) {}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("glob %q: %v, want ErrInvalid", bad, err)
		}
	}
	py, all := newWatchLog().syncIn(w, "watch-sync.py"), newWatchLog().syncIn(w, "watch-sync")
	wpy, err := w.Watch(WatchOptions{Globs: []string{"**/*.py", "docs/*"}}, py.deliver)
	if err != nil {
		t.Fatal(err)
	}
	wall, err := w.Watch(WatchOptions{}, all.deliver)
	if err != nil {
		t.Fatal(err)
	}
	py.step(t, "globs", func() { sh(t, w, "mkdir -p x/y docs/sub; touch a.py x/y/b.py c.txt docs/r.md docs/sub/s.md") },
		changes{"a.py": created, "x/y/b.py": created, "docs/r.md": created, "docs/sub": created})
	wpy.Close()
	n := py.count()
	all.barrier(t, "before the next step", all.count()) // all has what py's step did
	all.step(t, "after one watch closed", func() { sh(t, w, "touch d.py") }, changes{"d.py": created})
	if py.count() != n {
		t.Fatalf("a closed watch got a batch")
	}
	wall.Close()
	w.m.hubsMu.Lock()
	_, open := w.m.hubs[w]
	w.m.hubsMu.Unlock()
	if open {
		t.Fatal("the hub outlived its last watch")
	}

	// A workspace that closes ends its watches.
	last := newWatchLog()
	wl, err := w.Watch(WatchOptions{}, last.deliver)
	if err != nil {
		t.Fatal(err)
	}
	w.CloseWatches()
	sh(t, w, "touch after-close")
	time.Sleep(200 * time.Millisecond)
	if last.count() != 0 {
		t.Fatal("a watch of a closed workspace got a batch")
	}
	wl.Close()
}

// TestWatchLimit: the inotify watch limit gives a clear ErrLimit when a
// watch starts, and an overflow (rescan) when it is hit later. The limit is
// lowered in a user namespace of the test's own (user.max_inotify_watches
// is per user namespace, and counts in every ancestor), so the host's is
// untouched.
func TestWatchLimit(t *testing.T) {
	if os.Getenv("CELLBOX_TEST_WATCH_LIMIT") == "" {
		cmd := exec.Command("/proc/self/exe", "-test.run=^TestWatchLimit$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "CELLBOX_TEST_WATCH_LIMIT=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("in a user namespace: %v\n%s", err, out)
		}
		return
	}
	if err := os.WriteFile("/proc/sys/user/max_inotify_watches", []byte("8"), 0); err != nil {
		t.Skipf("cannot set user.max_inotify_watches in a user namespace: %v", err)
	}
	root := t.TempDir()
	for i := range 10 {
		if err := os.Mkdir(filepath.Join(root, fmt.Sprint("d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A scratch workspace over root; watching needs no sandbox.
	w := &Workspace{m: &Manager{log: slog.New(slog.DiscardHandler), hubs: map[*Workspace]*watchHub{}}, id: "ws-limit", root: root, mode: protocol.WorkspaceModeScratch}
	_, err := w.Watch(WatchOptions{}, func(WatchBatch) {})
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "max_user_watches") {
		t.Fatalf("watching 11 directories under a limit of 8: %v, want ErrLimit naming fs.inotify.max_user_watches", err)
	}
	for i := range 5 {
		os.Remove(filepath.Join(root, fmt.Sprint("d", i)))
	}
	log := newWatchLog()
	wt, err := w.Watch(WatchOptions{}, log.deliver)
	if err != nil {
		t.Fatalf("watching 6 directories under a limit of 8: %v", err)
	}
	defer wt.Close()
	if err := os.MkdirAll(filepath.Join(root, "n1/n2/n3/n4"), 0o755); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		log.mu.Lock()
		n := log.overflow
		log.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no overflow when new directories could not be watched")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWatchOverflow: a watch whose client does not take its batches keeps
// a bounded queue, then says overflow instead of growing; it goes on.
func TestWatchOverflow(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "overflow")
	log := newWatchLog().syncIn(w, "watch-sync")
	log.hold = make(chan struct{})
	wt, err := w.Watch(WatchOptions{Queue: 10}, log.deliver)
	if err != nil {
		t.Fatal(err)
	}
	defer wt.Close()
	// The first batch holds the sender; the rest pile up behind it.
	sh(t, w, "touch first")
	select {
	case <-log.held:
	case <-time.After(10 * time.Second):
		t.Fatal("no first batch")
	}
	sh(t, w, "for i in $(seq 1 100); do touch f$i; done")
	// The hub handles the 100 creations: past 10 queued, the watch
	// overflows.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		wt.mu.Lock()
		over := wt.overflow
		wt.mu.Unlock()
		if over {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("100 new files did not overflow a queue of 10")
		}
	}
	close(log.hold)
	deadline := time.Now().Add(10 * time.Second)
	for log.count() < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	log.mu.Lock()
	bs := slices.Clone(log.batches)
	log.mu.Unlock()
	if len(bs) < 2 || bs[0].Overflow || !bs[1].Overflow || len(bs[1].Changes) != 10 {
		t.Fatalf("batches %+v, want [first] then 10 changes with overflow", bs)
	}
	// What the hub still had of the 100 goes out now; then a new change
	// is delivered as usual.
	log.barrier(t, "the rest of the 100", log.count())
	log.step(t, "after an overflow", func() { sh(t, w, "touch later") }, changes{"later": created})
}

// TestWatchBurst: 10,000 files written at once are each reported, in a
// bounded number of batches (one per interval at most).
func TestWatchBurst(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "burst")
	log := newWatchLog().syncIn(w, "watch-sync")
	wt, err := w.Watch(WatchOptions{}, log.deliver)
	if err != nil {
		t.Fatal(err)
	}
	defer wt.Close()
	const n = 10000
	want := changes{"burst": created}
	for i := range n {
		want[fmt.Sprintf("burst/f%d", i)] = created
	}
	start := time.Now()
	log.step(t, "10,000 files", func() {
		sh(t, w, fmt.Sprintf(`python3 -c "import os
os.mkdir('burst')
for i in range(%d):
    with open('burst/f%%d' %% i, 'w') as f: f.write(str(i))"`, n))
	}, want)
	took := time.Since(start)
	if max := int(took/watchInterval) + 2; log.count() > max {
		t.Fatalf("%d batches in %v, want at most %d", log.count(), took, max)
	}
	if log.overflow > 0 {
		t.Fatal("the burst overflowed")
	}
	t.Logf("%d files reported in %d batches over %v", n, log.count(), took.Round(time.Millisecond))
}

func TestCoalesce(t *testing.T) {
	for _, tt := range []struct {
		seq  string
		want protocol.FileChangeType
	}{
		{"created changed", created},
		{"created changed deleted", ""},
		{"created deleted created", created},
		{"changed changed", changed},
		{"changed deleted", deleted},
		{"deleted created", changed},
		{"deleted created changed", changed},
		{"deleted changed", changed},
		{"created created", created},
		{"deleted deleted", deleted},
	} {
		var got protocol.FileChangeType
		for _, s := range strings.Fields(tt.seq) {
			got = coalesce(got, protocol.FileChangeType(s))
		}
		if got != tt.want {
			t.Errorf("%s: %q, want %q", tt.seq, got, tt.want)
		}
	}
}
