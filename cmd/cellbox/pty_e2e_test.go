package main

// End-to-end tests of terminals (PROTOCOL.md §5) over the real binary, on
// stdio and websocket. The client is pty_client_test.go's.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/cellbox-dev/cellbox/protocol"
)

// ptyProject is a project directory for overlay workspaces, with files
// the tests cat.
func ptyProject(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	raw := make([]byte, 1<<20)
	_, _ = rand.Read(raw)
	if err := os.WriteFile(filepath.Join(dir, "random.bin"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func (c *ptyClient) openWorkspace(t testing.TB, root, name string) string {
	t.Helper()
	var ws protocol.WorkspaceInfo
	c.mustCall(t, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: root, Name: name}, &ws)
	return ws.WorkspaceID
}

// sleepMark is a `sleep` argument no other process on the host has.
func sleepMark() string { return fmt.Sprintf("1000.%06d", time.Now().UnixNano()%1000000) }

// countHostProcs counts the host's processes whose command line is argv.
func countHostProcs(argv ...string) int {
	want := strings.Join(argv, "\x00") + "\x00"
	n := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && string(b) == want {
			n++
		}
	}
	return n
}

// waitHostProcs waits up to 10 s for countHostProcs(argv...) to be want,
// and returns the last count.
func waitHostProcs(want int, argv ...string) int {
	n := countHostProcs(argv...)
	for deadline := time.Now().Add(10 * time.Second); n != want && time.Now().Before(deadline); n = countHostProcs(argv...) {
		time.Sleep(10 * time.Millisecond)
	}
	return n
}

// TestPtyEndToEnd: a shell's output, stty size before and after resize,
// exit codes and death by signal, close killing children, a full-screen
// program, invalid UTF-8 and base64, and bad ids and sizes.
func TestPtyEndToEnd(t *testing.T) {
	project := ptyProject(t)
	raw, _ := os.ReadFile(filepath.Join(project, "random.bin"))
	ptyTransports(t, func(t *testing.T, dial func() *ptyClient) {
		c := dial()
		ws := c.openWorkspace(t, project, "e2e")

		t.Run("shell, stty size and resize", func(t *testing.T) {
			id := c.open(t, protocol.PtyOpenParams{WorkspaceID: ws})
			c.write(t, id, "echo hello $((6*7)); stty size\r")
			c.waitText(t, id, "hello 42\n24 80\n")
			c.mustCall(t, protocol.MethodPtyResize, protocol.PtyResizeParams{PtyID: id, Cols: 132, Rows: 43}, nil)
			c.write(t, id, "stty size; echo $TERM\r")
			c.waitText(t, id, "43 132\nxterm-256color\n")
			var stats protocol.DaemonStats
			c.mustCall(t, protocol.MethodDaemonStats, struct{}{}, &stats)
			if stats.Ptys != 1 {
				t.Errorf("daemon/stats ptys = %d, want 1", stats.Ptys)
			}
			c.write(t, id, "exit 7\r")
			if got := c.waitExit(t, id); got.ExitCode != 7 || got.Signal != "" {
				t.Fatalf("pty/exit %+v, want exit code 7", got)
			}
			// An ended terminal is NotFound to write and resize, closable.
			wantCode(t, c.call(t, protocol.MethodPtyWrite, protocol.PtyWriteParams{PtyID: id, Data: "x"}, nil), protocol.CodeNotFound)
			c.mustCall(t, protocol.MethodPtyClose, protocol.PtyIDParams{PtyID: id}, nil)
		})

		t.Run("death by signal", func(t *testing.T) {
			id := c.open(t, protocol.PtyOpenParams{WorkspaceID: ws, Command: []string{"sh", "-c", "echo bye; kill -KILL $$"}})
			if got := c.waitExit(t, id); got.ExitCode != 137 || got.Signal != "SIGKILL" {
				t.Fatalf("pty/exit %+v, want 137 SIGKILL", got)
			}
			c.waitText(t, id, "bye\n")
		})

		t.Run("close kills the process group and children", func(t *testing.T) {
			mark := sleepMark()
			id := c.open(t, protocol.PtyOpenParams{WorkspaceID: ws})
			c.write(t, id, "sleep "+mark+" & sleep "+mark+" & (sleep "+mark+" &) ; echo started\r")
			c.waitText(t, id, "started\n")
			// The shell has forked them; each runs sleep once it has exec'd.
			if n := waitHostProcs(3, "sleep", mark); n != 3 {
				t.Fatalf("%d sleeps running, want 3", n)
			}
			c.mustCall(t, protocol.MethodPtyClose, protocol.PtyIDParams{PtyID: id}, nil)
			if got := c.waitExit(t, id); got.Signal != "SIGKILL" || got.ExitCode != 137 {
				t.Fatalf("pty/exit after close %+v", got)
			}
			// Killed, they may take a moment to be gone; unkilled, they
			// would sleep 1000 s.
			if n := waitHostProcs(0, "sleep", mark); n != 0 {
				t.Fatalf("%d sleeps left after pty/close", n)
			}
			wantCode(t, c.call(t, protocol.MethodPtyWrite, protocol.PtyWriteParams{PtyID: id, Data: "x"}, nil), protocol.CodeNotFound)
		})

		t.Run("full-screen program", func(t *testing.T) {
			prog := []string{"vi", "notes.txt"}
			if _, err := os.Stat("/usr/bin/vi"); err != nil {
				prog = []string{"top"}
			}
			id := c.open(t, protocol.PtyOpenParams{WorkspaceID: ws, Command: prog, Cols: 100, Rows: 30})
			c.waitText(t, id, "\x1b[?1049h") // the alternate screen
			// The screen is drawn: the program reads its keys now.
			if prog[0] == "vi" {
				c.waitText(t, id, "notes.txt")
			} else {
				c.waitText(t, id, "PID")
			}
			if prog[0] == "vi" {
				c.write(t, id, "\x1b:q\r")
			} else {
				c.write(t, id, "q")
			}
			if got := c.waitExit(t, id); got.ExitCode != 0 {
				t.Fatalf("%s exit %+v; output %q", prog[0], got, tail(c.text(id), 300))
			}
			c.waitText(t, id, "\x1b[?1049l") // back to the main screen
		})

		t.Run("invalid UTF-8 and split sequences", func(t *testing.T) {
			id := c.open(t, protocol.PtyOpenParams{WorkspaceID: ws, Command: []string{"sh", "-c",
				`stty raw; printf 'a\342\202'; sleep 0.1; printf '\254b\360\237'; sleep 0.1; printf '\230\200 bad:\377\376.'; sleep 0.1; printf '\342'`}})
			c.waitExit(t, id)
			if got, want := c.text(id), "a€b😀 bad:\uFFFD\uFFFD.\uFFFD"; got != want {
				t.Fatalf("output %q, want %q", got, want)
			}
			if st := c.state(id); len(st.chunks) < 4 {
				t.Fatalf("%d chunks %q: the writes were meant to arrive apart", len(st.chunks), st.chunks)
			}
		})

		t.Run("base64 byte-exact", func(t *testing.T) {
			id := c.open(t, protocol.PtyOpenParams{WorkspaceID: ws, Encoding: protocol.EncodingBase64, Command: []string{"sh", "-c", "stty raw -echo; cat random.bin"}})
			c.waitExit(t, id)
			if got := c.decoded(t, id); !bytes.Equal(got, raw) {
				t.Fatalf("got %d bytes, want random.bin's %d byte for byte", len(got), len(raw))
			}
			// Input is base64 too.
			id = c.open(t, protocol.PtyOpenParams{WorkspaceID: ws, Encoding: protocol.EncodingBase64, Command: []string{"sh", "-c", "stty raw -echo; echo ready; head -c 4 | od -An -tx1"}})
			for deadline := time.Now().Add(10 * time.Second); !strings.Contains(string(c.decoded(t, id)), "ready"); {
				if time.Now().After(deadline) {
					t.Fatal("no ready")
				}
				time.Sleep(5 * time.Millisecond)
			}
			wantCode(t, c.call(t, protocol.MethodPtyWrite, protocol.PtyWriteParams{PtyID: id, Data: "not base64!"}, nil), protocol.CodeInvalidParams)
			c.write(t, id, base64.StdEncoding.EncodeToString([]byte{0xff, 0x00, 0x7f, 0x80}))
			c.waitExit(t, id)
			if got := strings.TrimSpace(strings.TrimPrefix(string(c.decoded(t, id)), "ready\n")); got != "ff 00 7f 80" {
				t.Fatalf("od of the bytes written: %q", got)
			}
		})

		t.Run("bad ids and sizes", func(t *testing.T) {
			const nope = "pty-0000000000000000"
			for _, m := range []struct {
				method string
				params any
			}{
				{protocol.MethodPtyWrite, protocol.PtyWriteParams{PtyID: nope, Data: "x"}},
				{protocol.MethodPtyResize, protocol.PtyResizeParams{PtyID: nope, Cols: 80, Rows: 24}},
				{protocol.MethodPtyAttach, protocol.PtyAttachParams{PtyID: nope}},
				{protocol.MethodPtyAck, protocol.PtyAckParams{PtyID: nope, Seq: 1}},
				{protocol.MethodPtyClose, protocol.PtyIDParams{PtyID: nope}},
				{protocol.MethodPtyOpen, protocol.PtyOpenParams{WorkspaceID: "ws-000000000000", Cols: 80, Rows: 24}},
				{protocol.MethodPtyOpen, protocol.PtyOpenParams{KernelID: "k-1", Cols: 80, Rows: 24}},
			} {
				wantCode(t, c.call(t, m.method, m.params, nil), protocol.CodeNotFound)
			}
			id := c.open(t, protocol.PtyOpenParams{WorkspaceID: ws, Command: []string{"sleep", "60"}})
			for _, m := range []struct {
				method string
				params any
				field  string
			}{
				{protocol.MethodPtyOpen, protocol.PtyOpenParams{WorkspaceID: ws, Cols: 0, Rows: 0}, `"cols"`},
				{protocol.MethodPtyOpen, protocol.PtyOpenParams{WorkspaceID: ws, Cols: 100000, Rows: 100000}, `"cols"`},
				{protocol.MethodPtyOpen, protocol.PtyOpenParams{WorkspaceID: ws, Cols: 80, Rows: 0}, `"rows"`},
				{protocol.MethodPtyOpen, protocol.PtyOpenParams{WorkspaceID: ws, Cols: 80, Rows: 24, Encoding: "utf16"}, `"encoding"`},
				{protocol.MethodPtyOpen, protocol.PtyOpenParams{WorkspaceID: ws, Cols: 80, Rows: 24, Command: []string{"no-such-program"}}, "no-such-program"},
				{protocol.MethodPtyResize, protocol.PtyResizeParams{PtyID: id, Cols: 0, Rows: 0}, `"cols"`},
				{protocol.MethodPtyResize, protocol.PtyResizeParams{PtyID: id, Cols: 100000, Rows: 100000}, `"cols"`},
				{protocol.MethodPtyResize, protocol.PtyResizeParams{PtyID: id, Cols: 80, Rows: 1001}, `"rows"`},
				{protocol.MethodPtyResize, protocol.PtyResizeParams{Cols: 80, Rows: 24}, `"ptyId"`},
				{protocol.MethodPtyAttach, protocol.PtyAttachParams{PtyID: id, FromSeq: new(int64(-1))}, `"fromSeq"`},
				{protocol.MethodPtyAck, protocol.PtyAckParams{PtyID: id, Seq: 1 << 40}, `"seq"`},
			} {
				msg := wantCode(t, c.call(t, m.method, m.params, nil), protocol.CodeInvalidParams)
				if !strings.Contains(msg, m.field) {
					t.Errorf("%s %+v: message %q does not name %s", m.method, m.params, msg, m.field)
				}
			}
			wantCode(t, c.call(t, protocol.MethodPtyOpen, protocol.PtyOpenParams{WorkspaceID: ws, Cols: 80, Rows: 24, Cwd: "../.."}, nil), protocol.CodePathOutsideWorkspace)
			c.mustCall(t, protocol.MethodPtyClose, protocol.PtyIDParams{PtyID: id}, nil)
		})

		t.Run("scratch workspace of its own", func(t *testing.T) {
			id := c.open(t, protocol.PtyOpenParams{Command: []string{"sh", "-c", "pwd; ls -A | wc -l"}})
			c.waitExit(t, id)
			if got := c.text(id); got != "/workspace\n0\n" {
				t.Fatalf("a terminal without a workspace: %q", got)
			}
		})
		c.check(t, "")
	})
}

// bigFile writes n bytes of base64 text in 76-column lines (what
// `head -c N /dev/urandom | base64` makes) and returns its SHA-256.
func bigFile(t testing.TB, path string, n int) [32]byte {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	w := bufio.NewWriterSize(io.MultiWriter(f, h), 1<<20)
	rng := mrand.NewChaCha8([32]byte{1})
	line := make([]byte, 77)
	src := make([]byte, 57)
	for written := 0; written < n; {
		_, _ = rng.Read(src)
		base64.StdEncoding.Encode(line, src)
		line[76] = '\n'
		k := min(len(line), n-written)
		_, _ = w.Write(line[:k])
		written += k
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// TestPtyBigOutput: 100 MB through the terminal arrive complete and in
// order, acknowledged as a client does, on both transports.
func TestPtyBigOutput(t *testing.T) {
	const size = 100_000_000
	project := t.TempDir()
	want := bigFile(t, filepath.Join(project, "big.txt"), size)
	ptyTransports(t, func(t *testing.T, dial func() *ptyClient) {
		c := dial()
		c.keep = false
		ws := c.openWorkspace(t, project, "big")
		start := time.Now()
		id := c.open(t, protocol.PtyOpenParams{WorkspaceID: ws, Command: []string{"sh", "-c", "stty -onlcr -echo; cat big.txt"}})
		// Meanwhile the daemon answers other requests promptly.
		slowest := make(chan time.Duration, 1)
		go func() {
			var worst time.Duration
			for c.state(id).exit == nil {
				t0 := time.Now()
				if err := c.call(t, protocol.MethodDaemonStats, struct{}{}, nil); err != nil {
					break
				}
				worst = max(worst, time.Since(t0))
				time.Sleep(20 * time.Millisecond)
			}
			slowest <- worst
		}()
		if got := c.waitExit(t, id); got.ExitCode != 0 {
			t.Fatalf("cat exit %+v", got)
		}
		// Responsive, not starved: a bound that holds on a loaded
		// machine (the figure itself is printed; bench/pty.sh measures).
		if worst := <-slowest; worst > 5*time.Second {
			t.Errorf("daemon/stats took up to %v during the flood", worst)
		} else {
			t.Logf("daemon/stats took at most %v during the flood", worst)
		}
		st := c.state(id)
		var got [32]byte
		copy(got[:], st.hash.Sum(nil))
		if st.bytes != size || got != want {
			t.Fatalf("received %d bytes with SHA-256 %x, want %d with %x", st.bytes, got, size, want)
		}
		t.Logf("%d MB in %v (%d chunks): %.0f MB/s", size/1_000_000, time.Since(start).Round(time.Millisecond), st.next-1, size/1e6/time.Since(start).Seconds())
	})
}

// TestPtySlowClient: a client that does not acknowledge makes the daemon
// stop reading (the program blocks: its output stops), with the daemon's
// memory bounded; acks let it go on; another terminal of the same client
// is not slowed; a websocket client that stops reading its socket does not
// grow the daemon's memory either.
func TestPtySlowClient(t *testing.T) {
	p := startListen(t)
	c := wsPtyClient(t, p)
	var before protocol.DaemonStats
	c.mustCall(t, protocol.MethodDaemonStats, struct{}{}, &before)

	// `yes` floods; the client takes the notifications but never acks.
	stuck := c.open(t, protocol.PtyOpenParams{Command: []string{"sh", "-c", "yes 'a flood of output that nobody acknowledges'"}})
	c.mu.Lock()
	c.noAck[stuck] = true
	c.mu.Unlock()
	stalled := func() int64 {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			a := c.state(stuck).bytes
			time.Sleep(300 * time.Millisecond)
			if b := c.state(stuck).bytes; a == b && b > 0 {
				return b
			}
			if time.Now().After(deadline) {
				t.Fatal("output to a client that does not ack never stopped")
			}
		}
	}
	got := stalled()
	if got > 1<<20 {
		t.Fatalf("%d bytes went out unacknowledged before the terminal paused", got)
	}
	// Another terminal of the same client runs to the end meanwhile.
	other := c.open(t, protocol.PtyOpenParams{Command: []string{"sh", "-c", "stty -onlcr; seq 1 200000 | tail -c 14"}})
	if c.waitExit(t, other); !strings.HasSuffix(c.text(other), "199999\n200000\n") {
		t.Fatalf("the other terminal: %q", c.text(other))
	}
	// A window for output that goes on despite the pause: nothing must
	// arrive, which no condition can show.
	time.Sleep(500 * time.Millisecond)
	if now := c.state(stuck).bytes; now != got {
		t.Fatalf("the paused terminal sent %d more bytes without acks", now-got)
	}
	var stats protocol.DaemonStats
	c.mustCall(t, protocol.MethodDaemonStats, struct{}{}, &stats)
	t.Logf("paused after %d bytes; daemon memory %d MB before, %d MB while paused", got, before.MemoryBytes>>20, stats.MemoryBytes>>20)
	if stats.MemoryBytes > before.MemoryBytes+64<<20 {
		t.Fatalf("daemon memory grew from %d to %d MB", before.MemoryBytes>>20, stats.MemoryBytes>>20)
	}
	// Acks resume the output, until the next pause.
	c.ackNow(t, stuck)
	deadline := time.Now().Add(5 * time.Second)
	for c.state(stuck).bytes == got {
		if time.Now().After(deadline) {
			t.Fatal("an ack did not resume the output")
		}
		time.Sleep(5 * time.Millisecond)
	}
	stalled()

	// A raw websocket client that opens a flood and reads nothing.
	raw, _, err := p.dial(t, http.Header{"Authorization": {"Bearer " + p.token}})
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","id":2,"method":"pty/open","params":{"cols":80,"rows":24,"command":["yes"]}}`,
	} {
		if err := raw.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	// Its terminal runs.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c.mustCall(t, protocol.MethodDaemonStats, struct{}{}, &stats)
		if stats.Ptys == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon/stats ptys = %d, want 2", stats.Ptys)
		}
	}
	// Meanwhile the daemon's memory must not grow: sampled for a while,
	// since no condition says it never will.
	for range 5 {
		time.Sleep(300 * time.Millisecond)
		c.mustCall(t, protocol.MethodDaemonStats, struct{}{}, &stats)
		if stats.MemoryBytes > before.MemoryBytes+64<<20 {
			t.Fatalf("daemon memory grew from %d to %d MB with a client that does not read", before.MemoryBytes>>20, stats.MemoryBytes>>20)
		}
	}
	c.check(t, stuck)
}

// TestPtyReattach: a terminal survives a websocket disconnect; a new
// connection attaches from a seq and gets what was produced meanwhile, with
// no gap; a second viewer sees the same output; the scrollback says when it
// dropped; the opener's shutdown ends the terminal for every viewer.
func TestPtyReattach(t *testing.T) {
	p := startListen(t)
	a := wsPtyClient(t, p)
	id := a.open(t, protocol.PtyOpenParams{Command: []string{"sh", "-c", "i=0; while [ $i -lt 30 ]; do i=$((i+1)); echo tick $i; sleep 0.05; done; echo done; sleep 60"}})
	a.waitText(t, id, "tick 3\n")
	_ = a.conn.Close() // the browser tab goes away
	last := a.state(id).next - 1

	// Output goes on meanwhile. Any length of the gap will do: the ticks
	// are checked once the program is done.
	time.Sleep(500 * time.Millisecond)
	b := wsPtyClient(t, p)
	var stats protocol.DaemonStats
	b.mustCall(t, protocol.MethodDaemonStats, struct{}{}, &stats)
	if stats.Ptys != 1 {
		t.Fatalf("after the disconnect: %d terminals, want 1", stats.Ptys)
	}
	var res protocol.PtyAttachResult
	b.mustCall(t, protocol.MethodPtyAttach, protocol.PtyAttachParams{PtyID: id, FromSeq: new(last + 1)}, &res)
	if res.Dropped || res.FirstSeq != last+1 {
		t.Fatalf("attach from %d: %+v", last+1, res)
	}
	b.waitText(t, id, "done\n")
	// What a saw, then what b got from the seq after it: every tick once.
	full := a.text(id) + b.text(id)
	for i := 1; i <= 30; i++ {
		if n := strings.Count(full, fmt.Sprintf("tick %d\n", i)); n != 1 {
			t.Fatalf("tick %d seen %d times across the reconnect:\n%s", i, n, full)
		}
	}
	b.check(t, id)

	// A second viewer replays everything, then both see new output.
	v := wsPtyClient(t, p)
	v.mustCall(t, protocol.MethodPtyAttach, protocol.PtyAttachParams{PtyID: id}, &res)
	if res.Dropped || res.FirstSeq != 1 {
		t.Fatalf("attach without fromSeq: %+v", res)
	}
	if got := v.text(id); !strings.HasPrefix(got, "tick 1\n") || !strings.HasSuffix(got, "done\n") {
		t.Fatalf("second viewer's replay: %q", got)
	}

	// The ring (1 MiB) drops what a detached terminal printed beyond it.
	mark := sleepMark()
	big := b.open(t, protocol.PtyOpenParams{Command: []string{"sh", "-c", "echo start; sleep 0.3; yes | head -c 3000000; echo end; sleep " + mark}})
	b.waitText(t, big, "start\n")
	_ = b.conn.Close()
	// The 3 MB are written once the shell sleeps; the daemon has read all
	// but what the terminal's buffer holds.
	if n := waitHostProcs(1, "sleep", mark); n != 1 {
		t.Fatalf("the detached terminal's program never got to its end (%d sleeps)", n)
	}
	v.mustCall(t, protocol.MethodPtyAttach, protocol.PtyAttachParams{PtyID: big, FromSeq: new(int64(1))}, &res)
	if !res.Dropped || res.FirstSeq <= 2 {
		t.Fatalf("attach from 1 after 3 MB: %+v", res)
	}
	v.waitText(t, big, "\nend\n")
	if st := v.state(big); st.bytes > 1<<20 {
		t.Fatalf("replayed %d bytes from a 1 MiB ring", st.bytes)
	}

	// The opener (b) dropped without shutdown: its terminals run on. A new
	// connection opens one, v attaches; the opener's shutdown ends it for v.
	o := wsPtyClient(t, p)
	own := o.open(t, protocol.PtyOpenParams{Command: []string{"sleep", "60"}})
	v.mustCall(t, protocol.MethodPtyAttach, protocol.PtyAttachParams{PtyID: own}, nil)
	v.mustCall(t, protocol.MethodDaemonStats, struct{}{}, &stats)
	if stats.Ptys != 3 {
		t.Fatalf("%d terminals running, want 3", stats.Ptys)
	}
	o.mustCall(t, protocol.MethodShutdown, nil, nil)
	if got := v.waitExit(t, own); got.Signal != "SIGKILL" {
		t.Fatalf("after the opener's shutdown: %+v", got)
	}
	v.mustCall(t, protocol.MethodDaemonStats, struct{}{}, &stats)
	if stats.Ptys != 2 {
		t.Fatalf("%d terminals running after the opener's shutdown, want 2", stats.Ptys)
	}
}

// TestPtyLimits: 16 terminals per workspace and 64 per daemon; more are
// -32012.
func TestPtyLimits(t *testing.T) {
	p := startStdio(t)
	c := stdioPtyClient(t, p)
	project := t.TempDir()
	n := 0
	for w := range 5 {
		ws := c.openWorkspace(t, project, fmt.Sprintf("limits-%d", w))
		for range 16 {
			if n == 64 {
				break
			}
			c.open(t, protocol.PtyOpenParams{WorkspaceID: ws, Command: []string{"sleep", "60"}})
			n++
		}
		if w == 0 {
			msg := wantCode(t, c.call(t, protocol.MethodPtyOpen, protocol.PtyOpenParams{WorkspaceID: ws, Cols: 80, Rows: 24, Command: []string{"true"}}, nil), protocol.CodeLimitExceeded)
			if !strings.Contains(msg, "workspace") {
				t.Errorf("per-workspace limit message %q", msg)
			}
		}
		if w == 4 {
			msg := wantCode(t, c.call(t, protocol.MethodPtyOpen, protocol.PtyOpenParams{WorkspaceID: ws, Cols: 80, Rows: 24, Command: []string{"true"}}, nil), protocol.CodeLimitExceeded)
			if !strings.Contains(msg, "daemon") {
				t.Errorf("per-daemon limit message %q", msg)
			}
		}
	}
	var stats protocol.DaemonStats
	c.mustCall(t, protocol.MethodDaemonStats, struct{}{}, &stats)
	if stats.Ptys != 64 {
		t.Fatalf("daemon/stats ptys = %d, want 64", stats.Ptys)
	}
	if got := c.init.Capabilities.Limits.MaxPtys; got != 64 {
		t.Errorf("initialize reports maxPtys %d, want 64", got)
	}
	c.mustCall(t, protocol.MethodShutdown, nil, nil)
	_ = c.conn.Notify(context.Background(), protocol.MethodExit, nil)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestPtyInputOrder: pty/write requests sent back to back, without waiting
// for their answers, reach the program in the order sent.
func TestPtyInputOrder(t *testing.T) {
	p := startListen(t)
	ws, _, err := p.dial(t, http.Header{"Authorization": {"Bearer " + p.token}})
	if err != nil {
		t.Fatal(err)
	}
	send := func(msg string) {
		t.Helper()
		if err := ws.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	var ptyID string
	// read reads messages until out contains want, acking output.
	read := func(want string) {
		t.Helper()
		_ = ws.SetReadDeadline(time.Now().Add(15 * time.Second))
		for !strings.Contains(strings.ReplaceAll(out.String(), "\r\n", "\n"), want) {
			_, b, err := ws.ReadMessage()
			if err != nil {
				t.Fatalf("waiting for %q: %v; got %q", want, err, tail(out.String(), 200))
			}
			var m struct {
				ID     *int            `json:"id"`
				Method string          `json:"method"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
				Params json.RawMessage `json:"params"`
			}
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			switch {
			case m.Error != nil:
				t.Fatalf("error reply: %s", b)
			case m.ID != nil && *m.ID == 2:
				var r protocol.PtyOpenResult
				_ = json.Unmarshal(m.Result, &r)
				ptyID = r.PtyID
			case m.Method == protocol.MethodPtyOutput:
				var o protocol.PtyOutputParams
				_ = json.Unmarshal(m.Params, &o)
				out.WriteString(o.Data)
				send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"pty/ack","params":{"ptyId":%q,"seq":%d}}`, 1000000+o.Seq, o.PtyID, o.Seq))
			}
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"pty/open","params":{"cols":80,"rows":24,"command":["sh","-c","stty -echo; echo ready; exec cat"]}}`)
	read("ready\n")
	if ptyID == "" {
		read("ready\n") // the answer came after the output
	}
	var want strings.Builder
	for i := range 300 {
		line := fmt.Sprintf("line %d\n", i)
		want.WriteString(line)
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"pty/write","params":{"ptyId":%q,"data":%q}}`, 10+i, ptyID, line))
	}
	read("line 299\n")
	if got := strings.TrimPrefix(strings.ReplaceAll(out.String(), "\r\n", "\n"), "ready\n"); got != want.String() {
		t.Fatalf("input arrived out of order: %q", got)
	}
}
