package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/cellbox-dev/cellbox/protocol"
)

// didChange is fs/didChange with the overflow extension (rpc/fs_watch.go).
type didChange struct {
	protocol.FsDidChangeParams
	Overflow bool `json:"overflow"`
}

// didChanges returns the fs/didChange notifications of watch id that c
// received, from its note from on, and the count of its notes.
func (c *client) didChanges(t testing.TB, id string, from int) ([]didChange, int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []didChange
	for _, n := range c.notes[from:] {
		if n.method != protocol.MethodFsDidChange {
			continue
		}
		var d didChange
		if err := json.Unmarshal(n.params, &d); err != nil {
			t.Fatalf("fs/didChange params %s: %v", n.params, err)
		}
		if d.WatchID == id {
			out = append(out, d)
		}
	}
	return out, len(c.notes)
}

func (c *client) noteCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.notes)
}

// fold applies notifications in order, one entry per path, as a client
// keeping a file tree would: what changed in all, given what it knew.
func fold(ds []didChange) map[string]protocol.FileChangeType {
	net := map[string]protocol.FileChangeType{}
	for _, d := range ds {
		for _, ch := range d.Changes {
			prev, t := net[ch.Path], ch.Type
			switch {
			case prev == "":
			case prev == protocol.FileChangeCreated && t == protocol.FileChangeDeleted:
				t = ""
			case prev == protocol.FileChangeCreated:
				t = prev
			case prev == protocol.FileChangeDeleted && t != protocol.FileChangeDeleted:
				t = protocol.FileChangeChanged
			case t != protocol.FileChangeDeleted:
				t = protocol.FileChangeChanged
			}
			net[ch.Path] = t
			if t == "" {
				delete(net, ch.Path)
			}
		}
	}
	return net
}

// expectChanges runs do, then waits until the watch's notifications since
// fold to want, and a little more to see that nothing else comes.
func (c *client) expectChanges(t *testing.T, id, name string, do func(), want map[string]protocol.FileChangeType) []didChange {
	t.Helper()
	from := c.noteCount()
	do()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ds, _ := c.didChanges(t, id, from)
		if got := fold(ds); maps.Equal(got, want) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%s: fs/didChange reported %v, want %v", name, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	ds, _ := c.didChanges(t, id, from)
	if got := fold(ds); !maps.Equal(got, want) {
		t.Fatalf("%s: fs/didChange reported %v, want %v", name, got, want)
	}
	for _, d := range ds {
		if d.WorkspaceID == "" || d.Overflow {
			t.Fatalf("%s: notification %+v", name, d)
		}
	}
	return ds
}

type changeMap = map[string]protocol.FileChangeType

// TestWatchEndToEnd: fs/watch over the wire reports what code in the
// sandbox writes (new files, project files changed and deleted, trees
// made at once), edits to the project from outside, the daemon's own
// writes; globs select; fs/unwatch stops the notifications.
func TestWatchEndToEnd(t *testing.T) {
	fsTransports(t, func(t *testing.T, c *client) {
		project := fsProject(t)
		ws := openWorkspace(t, c, project, "watch")
		var all, py protocol.FsWatchResult
		c.mustCall(t, protocol.MethodFsWatch, protocol.FsWatchParams{WorkspaceID: ws}, &all)
		c.mustCall(t, protocol.MethodFsWatch, protocol.FsWatchParams{WorkspaceID: ws, Globs: []string{"**/*.py"}}, &py)
		if all.WatchID == "" || py.WatchID == "" || all.WatchID == py.WatchID {
			t.Fatalf("fs/watch = %+v, %+v", all, py)
		}
		var stats protocol.DaemonStats
		c.mustCall(t, protocol.MethodDaemonStats, struct{}{}, &stats)
		if stats.Watches != 2 {
			t.Fatalf("daemon/stats watches = %d, want 2", stats.Watches)
		}
		in := func(script string) func() { return func() { sandboxSh(t, c, ws, script) } }
		outside := func(f func() error) func() {
			return func() {
				if err := f(); err != nil {
					t.Fatal(err)
				}
			}
		}
		from := c.noteCount()
		c.expectChanges(t, all.WatchID, "code writes", in("echo n > new.txt; echo m >> hello.txt; rm sub/data.txt; echo 'print(1)' > main.py"),
			changeMap{"new.txt": created, "hello.txt": changed, "sub/data.txt": deleted, "main.py": created})
		c.expectChanges(t, all.WatchID, "a tree made at once", in("mkdir -p pkg/a/b && echo x > pkg/a/b/mod.py && echo y > pkg/README"),
			changeMap{"pkg": created, "pkg/a": created, "pkg/a/b": created, "pkg/a/b/mod.py": created, "pkg/README": created})
		c.expectChanges(t, all.WatchID, "outside edits", outside(func() error {
			if err := os.MkdirAll(filepath.Join(project, "ext/deep"), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(project, "ext/deep/e.py"), []byte("e"), 0o644); err != nil {
				return err
			}
			// hello.txt is the sandbox's own now: an outside edit is hidden.
			return os.WriteFile(filepath.Join(project, "hello.txt"), []byte("hidden"), 0o644)
		}), changeMap{"ext": created, "ext/deep": created, "ext/deep/e.py": created})
		c.expectChanges(t, all.WatchID, "outside deletion", outside(func() error { return os.RemoveAll(filepath.Join(project, "ext")) }),
			changeMap{"ext": deleted, "ext/deep": deleted, "ext/deep/e.py": deleted})
		c.expectChanges(t, all.WatchID, "the daemon's own write", func() {
			c.mustCall(t, protocol.MethodFsWrite, protocol.FsWriteParams{WorkspaceID: ws, Path: "pkg/a/b/mod.py", Content: "z"}, nil)
		}, changeMap{"pkg/a/b/mod.py": changed})
		c.expectChanges(t, all.WatchID, "deletions", in("rm -r pkg new.txt"), changeMap{"pkg": deleted, "pkg/a": deleted,
			"pkg/a/b": deleted, "pkg/a/b/mod.py": deleted, "pkg/README": deleted, "new.txt": deleted})
		// The glob watch saw only the .py files, all along.
		ds, _ := c.didChanges(t, py.WatchID, from)
		if got, want := fold(ds), (changeMap{"main.py": created}); !maps.Equal(got, want) {
			t.Fatalf("the **/*.py watch reported %v, want %v", got, want)
		}
		for _, d := range ds {
			for _, ch := range d.Changes {
				if !strings.HasSuffix(ch.Path, ".py") {
					t.Fatalf("the **/*.py watch reported %q", ch.Path)
				}
			}
		}

		// fs/unwatch: nothing more for that watch; the other goes on.
		c.mustCall(t, protocol.MethodFsUnwatch, protocol.FsUnwatchParams{WatchID: all.WatchID}, nil)
		from = c.noteCount()
		c.expectChanges(t, py.WatchID, "after unwatch", in("echo > after.py; echo > after.txt"), changeMap{"after.py": created})
		if ds, _ := c.didChanges(t, all.WatchID, from); len(ds) != 0 {
			t.Fatalf("an unwatched watch sent %+v", ds)
		}
		wantCode(t, c.call(t, protocol.MethodFsUnwatch, protocol.FsUnwatchParams{WatchID: all.WatchID}, nil), protocol.CodeNotFound)
		wantCode(t, c.call(t, protocol.MethodFsUnwatch, protocol.FsUnwatchParams{WatchID: "watch-nope"}, nil), protocol.CodeNotFound)
		wantCode(t, c.call(t, protocol.MethodFsUnwatch, protocol.FsUnwatchParams{}, nil), protocol.CodeInvalidParams)
		wantCode(t, c.call(t, protocol.MethodFsWatch, protocol.FsWatchParams{WorkspaceID: "ws-nope"}, nil), protocol.CodeNotFound)
		wantCode(t, c.call(t, protocol.MethodFsWatch, protocol.FsWatchParams{WorkspaceID: ws, Globs: []string{"src/[a-"}}, nil), protocol.CodeInvalidParams)
		c.mustCall(t, protocol.MethodDaemonStats, struct{}{}, &stats)
		if stats.Watches != 1 {
			t.Fatalf("daemon/stats watches = %d after one unwatch, want 1", stats.Watches)
		}
	})
}

const (
	created = protocol.FileChangeCreated
	changed = protocol.FileChangeChanged
	deleted = protocol.FileChangeDeleted
)

// TestWatchBurstEndToEnd: 10,000 files written at once by code in the
// sandbox are every one reported, in a bounded number of notifications
// (batches go at least 50 ms apart), with no overflow.
func TestWatchBurstEndToEnd(t *testing.T) {
	p := startStdio(t)
	c := p.client()
	c.initialize(t)
	ws := openWorkspace(t, c, fsProject(t), "burst")
	var w protocol.FsWatchResult
	c.mustCall(t, protocol.MethodFsWatch, protocol.FsWatchParams{WorkspaceID: ws}, &w)
	const n = 10000
	want := changeMap{"burst": created}
	for i := range n {
		want[fmt.Sprintf("burst/f%d", i)] = created
	}
	start := time.Now()
	ds := c.expectChanges(t, w.WatchID, "10,000 files", func() {
		sandboxSh(t, c, ws, fmt.Sprintf(`python3 -c "import os
os.mkdir('burst')
for i in range(%d):
    with open('burst/f%%d' %% i, 'w') as f: f.write(str(i))"`, n))
	}, want)
	took := time.Since(start)
	if bound := int(took/(50*time.Millisecond)) + 2; len(ds) > bound {
		t.Fatalf("%d notifications over %v, want at most %d", len(ds), took, bound)
	}
	t.Logf("%d files reported in %d notifications over %v", n, len(ds), took.Round(time.Millisecond))
}

// TestWatchEndsWithConnection: a connection's watches end when it drops.
func TestWatchEndsWithConnection(t *testing.T) {
	p := startListen(t)
	a, b := wsClientOf(t, p), wsClientOf(t, p)
	a.initialize(t)
	b.initialize(t)
	ws := openWorkspace(t, a, fsProject(t), "drop")
	var w protocol.FsWatchResult
	a.mustCall(t, protocol.MethodFsWatch, protocol.FsWatchParams{WorkspaceID: ws}, &w)
	// Only the connection that made a watch can end it.
	wantCode(t, b.call(t, protocol.MethodFsUnwatch, protocol.FsUnwatchParams{WatchID: w.WatchID}, nil), protocol.CodeNotFound)
	var stats protocol.DaemonStats
	b.mustCall(t, protocol.MethodDaemonStats, struct{}{}, &stats)
	if stats.Watches != 1 {
		t.Fatalf("daemon/stats watches = %d, want 1", stats.Watches)
	}
	_ = a.conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mustCall(t, protocol.MethodDaemonStats, struct{}{}, &stats)
		if stats.Watches == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon/stats watches = %d after the connection dropped", stats.Watches)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BenchmarkWatchLatency (bench/watch.sh): the time from a write by code
// in the sandbox to the fs/didChange that reports it, at the client, over
// stdio. A python program in the sandbox creates files named after the
// time (CLOCK_REALTIME, which the sandbox shares with the host) just
// before it opens them; the client notes when each name arrives.
//
//	isolated     one file every 60-120 ms (saves, a slow build step): each
//	             waits only for the 10 ms a batch gathers
//	steady       one file every 20-40 ms: batches go at least 50 ms apart,
//	             so a write waits for the next one
//	continuous   one file every millisecond for the whole run
func BenchmarkWatchLatency(b *testing.B) {
	testLogLevel = "warn"
	n := 200
	if v, err := strconv.Atoi(os.Getenv("CELLBOX_BENCH_WATCH_N")); err == nil && v > 0 {
		n = v
	}
	p := startStdio(b)
	arrivals := make(chan []string, 1024)
	conn := jsonrpc2.NewConn(headerStream(p.stdout, p.stdin))
	conn.Go(context.Background(), jsonrpc2.AsyncHandler(func(ctx context.Context, req *jsonrpc2.Request) (any, error) {
		if req.Method() == protocol.MethodFsDidChange {
			now := time.Now().UnixNano()
			var d didChange
			if json.Unmarshal(req.Params(), &d) == nil {
				names := []string{strconv.FormatInt(now, 10)}
				for _, ch := range d.Changes {
					names = append(names, ch.Path)
				}
				arrivals <- names
			}
		}
		return nil, nil
	}))
	c := &client{conn: conn}
	c.initialize(b)
	var info protocol.WorkspaceInfo
	c.mustCall(b, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: b.TempDir(), Name: "latency"}, &info)
	ws := info.WorkspaceID
	c.mustCall(b, protocol.MethodFsWatch, protocol.FsWatchParams{WorkspaceID: ws}, nil)
	for _, mode := range []struct {
		name, sleep string
	}{{"isolated", "random.uniform(0.06, 0.12)"}, {"steady", "random.uniform(0.02, 0.04)"}, {"continuous", "0.001"}} {
		for range b.N {
			dir := fmt.Sprintf("%s-%d", mode.name, time.Now().UnixNano())
			script := fmt.Sprintf(`import os, random, time
os.mkdir(%q)
time.sleep(0.2)
for i in range(%d):
    time.sleep(%s)
    open('%s/%%d' %% time.time_ns(), 'w').close()`, dir, n, mode.sleep, dir)
			done := make(chan error, 1)
			go func() {
				var r execReply
				err := c.call(b, "cellboxTest/exec", map[string]any{"workspaceId": ws, "argv": []string{"python3", "-c", script}}, &r)
				if err == nil && r.ExitCode != 0 {
					err = fmt.Errorf("writer: exit %d: %s", r.ExitCode, r.Stderr)
				}
				done <- err
			}()
			var lat []time.Duration
			seen := map[string]bool{}
			deadline := time.After(time.Duration(n)*50*time.Millisecond + 30*time.Second)
			for len(lat) < n {
				select {
				case names := <-arrivals:
					at, _ := strconv.ParseInt(names[0], 10, 64)
					for _, name := range names[1:] {
						ts, ok := strings.CutPrefix(name, dir+"/")
						if !ok || seen[ts] {
							continue
						}
						seen[ts] = true
						wrote, _ := strconv.ParseInt(ts, 10, 64)
						lat = append(lat, time.Duration(at-wrote))
					}
				case <-deadline:
					b.Fatalf("%s: %d of %d writes reported", mode.name, len(lat), n)
				}
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			slices.Sort(lat)
			pct := func(q float64) float64 {
				return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000
			}
			fmt.Printf("watch latency %-10s writes %d  p50 %6.1f ms  p90 %6.1f ms  p99 %6.1f ms  max %6.1f ms\n",
				mode.name, n, pct(0.5), pct(0.9), pct(0.99), pct(1))
			b.ReportMetric(pct(0.5), mode.name+"-p50-ms")
			b.ReportMetric(pct(0.99), mode.name+"-p99-ms")
		}
	}
}
