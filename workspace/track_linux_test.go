package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/sandbox/sandboxtest"
)

// trackedList prints what a tracker reported, one "kind path" a line.
func trackedList(cs []protocol.PathChange) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(string(c.Kind) + " " + c.Path + "\n")
	}
	return b.String()
}

// TestTrackOverlay: a tracker reports what code changed between Track and
// End, by any program, relative to the view before: a rename is a
// deletion and an addition, a file made and removed is nothing, a made
// directory is its files, an outside edit to the project is not the
// execution's, and what an earlier execution did is not counted.
func TestTrackOverlay(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "track")
	sh(t, w, "echo earlier > earlier.txt; echo edit > edited.txt")

	tr := w.Track()
	if tr == nil {
		t.Fatal("Track returned nil")
	}
	sh(t, w, `echo a > new.txt
echo b >> hello.txt
rm gone.txt
mkdir -p n1/n2 && echo f > n1/n2/f
echo tmp > tmp.txt && rm tmp.txt
mv earlier.txt renamed.txt
sed -i s/edit/EDIT/ edited.txt
rm -r sub`)
	if err := os.WriteFile(filepath.Join(e.project, "outside.txt"), []byte("o"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, more := tr.End()
	want := `modified hello.txt
modified edited.txt
deleted earlier.txt
deleted gone.txt
added n1/n2/f
added new.txt
added renamed.txt
deleted sub
`
	// rm -r deletes sub/data.txt before sub: the hub sees that first
	// whiteout when it reads sub's events before sub is gone.
	g := trackedList(got)
	if !sameLines(g, want) && !sameLines(g, want+"deleted sub/data.txt\n") || more != 0 {
		t.Errorf("tracked (more %d):\n%s\nwant (any order):\n%s", more, g, want)
	}

	// Nothing done: nothing reported.
	tr = w.Track()
	if got, _ := tr.End(); len(got) != 0 {
		t.Errorf("an execution that wrote nothing reported %s", trackedList(got))
	}
	// The daemon's own writes through the view are code's too (fs/write).
	tr = w.Track()
	if _, err := w.FsWrite(protocol.FsWriteParams{Path: "viaview.txt", Content: "v"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := tr.End(); trackedList(got) != "added viaview.txt\n" {
		t.Errorf("a write through the view: %s", trackedList(got))
	}
}

// TestTrackPlain: a scratch workspace is tracked as its directory.
func TestTrackPlain(t *testing.T) {
	e := newAttackEnv(t)
	w, err := e.m.Open(context.Background(), protocol.WorkspaceOpenParams{Mode: protocol.WorkspaceModeScratch})
	if err != nil {
		t.Fatal(err)
	}
	sh(t, w, "echo 1 > keep.txt")
	tr := w.Track()
	sh(t, w, "echo 2 >> keep.txt; echo 3 > made.txt")
	if got, _ := tr.End(); !sameLines(trackedList(got), "modified keep.txt\nadded made.txt\n") {
		t.Errorf("scratch: %s", trackedList(got))
	}
}

// TestTrackBound: past maxTracked paths the rest are counted.
func TestTrackBound(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "bound")
	tr := w.Track()
	sh(t, w, "mkdir many && cd many && for i in $(seq 1 1200); do : > f$i; done")
	got, more := tr.End()
	if len(got) != maxTracked || more != 200 {
		t.Errorf("1200 files made: %d listed, %d more; want %d and 200", len(got), more, maxTracked)
	}
}

// TestTrackHubsBounded: the hubs kept for attribution alone are bounded
// (each is an inotify instance); a workspace whose hub was let go is
// tracked again with a new one, and a hub with a watch stays.
func TestTrackHubsBounded(t *testing.T) {
	e := newAttackEnv(t)
	var ws []*Workspace
	for i := 0; i < maxTrackedHubs+3; i++ {
		w, err := e.m.Open(context.Background(), protocol.WorkspaceOpenParams{Mode: protocol.WorkspaceModeScratch})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	watched, err := ws[1].Watch(WatchOptions{}, func(WatchBatch) {})
	if err != nil {
		t.Fatal(err)
	}
	defer watched.Close()
	for _, w := range ws {
		w.Track().End()
	}
	e.m.hubsMu.Lock()
	n, first, second := len(e.m.hubs), e.m.hubs[ws[0]], e.m.hubs[ws[1]]
	e.m.hubsMu.Unlock()
	if n != maxTrackedHubs+1 || first != nil || second == nil {
		t.Fatalf("%d hubs (want %d: the bound and the watched one), the oldest kept: %v, the watched one kept: %v", n, maxTrackedHubs+1, first != nil, second != nil)
	}
	tr := ws[0].Track()
	sh(t, ws[0], "echo x > again.txt")
	if got, _ := tr.End(); trackedList(got) != "added again.txt\n" {
		t.Fatalf("a workspace tracked again: %s", trackedList(got))
	}
}

// TestTrackAsUnprivilegedUser re-runs the tracker tests as
// CELLBOX_TEST_USER.
func TestTrackAsUnprivilegedUser(t *testing.T) {
	if sandboxtest.AsTestUser() {
		t.Skip("this is the re-run as the unprivileged user")
	}
	sandboxtest.RunAsTestUser(t, "^TestTrack(Overlay|Plain|Bound|HubsBounded)$")
}

func sameLines(a, b string) bool {
	as, bs := strings.Split(strings.TrimSpace(a), "\n"), strings.Split(strings.TrimSpace(b), "\n")
	if len(as) != len(bs) {
		return false
	}
	set := map[string]int{}
	for _, l := range as {
		set[l]++
	}
	for _, l := range bs {
		if set[l] == 0 {
			return false
		}
		set[l]--
	}
	return true
}

// BenchmarkTrack is what attribution adds to an execution: Track and End
// around nothing written, and around one file written by a program of the
// sandbox (the spawn itself is not counted).
func BenchmarkTrack(b *testing.B) {
	e := newAttackEnv(b)
	w := e.open(b, "bench")
	sh(b, w, "true") // the sandbox runs
	b.Run("nothing-written", func(b *testing.B) {
		if tr := w.Track(); tr == nil {
			b.Fatal("Track returned nil")
		} else {
			tr.End()
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			w.Track().End()
		}
	})
	b.Run("one-file-written", func(b *testing.B) {
		var spent time.Duration
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			tr := w.Track()
			spent += time.Since(t0)
			if _, err := w.FsWrite(protocol.FsWriteParams{Path: "f.txt", Content: strconv.Itoa(i)}); err != nil {
				b.Fatal(err)
			}
			t0 = time.Now()
			if got, _ := tr.End(); len(got) != 1 {
				b.Fatalf("tracked %v", got)
			}
			spent += time.Since(t0)
		}
		b.ReportMetric(float64(spent.Microseconds())/float64(b.N), "track-µs/op")
	})
}
