package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

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

// TestTrackAsUnprivilegedUser re-runs the tracker tests as
// CELLBOX_TEST_USER.
func TestTrackAsUnprivilegedUser(t *testing.T) {
	if sandboxtest.AsTestUser() {
		t.Skip("this is the re-run as the unprivileged user")
	}
	sandboxtest.RunAsTestUser(t, "^TestTrack(Overlay|Plain|Bound)$")
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
