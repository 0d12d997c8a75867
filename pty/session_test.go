package pty

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
	"github.com/cellbox-dev/cellbox/workspace/sandbox/sandboxtest"
)

func TestMain(m *testing.M) {
	if sandbox.Main() {
		return
	}
	os.Exit(m.Run())
}

// env is a terminal manager over a real workspace manager, with a project
// directory for overlay workspaces.
type env struct {
	ws      *workspace.Manager
	m       *Manager
	project string
}

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	project := t.TempDir()
	ws, err := workspace.NewManager(workspace.Options{StateDir: t.TempDir(), DefaultRoot: project})
	if err != nil {
		t.Fatal(err)
	}
	opts.Workspaces = ws
	m := NewManager(opts)
	t.Cleanup(func() {
		m.Close()
		for _, info := range ws.List() {
			_ = ws.CloseWorkspace(context.Background(), info.WorkspaceID, true)
		}
		ws.Close()
	})
	return &env{ws: ws, m: m, project: project}
}

// workspace opens an overlay workspace over the project.
func (e *env) workspace(t *testing.T, name string) string {
	t.Helper()
	w, err := e.ws.Open(context.Background(), protocol.WorkspaceOpenParams{Root: e.project, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return w.ID()
}

func (e *env) open(t *testing.T, p protocol.PtyOpenParams, k Sink) *Session {
	t.Helper()
	if p.Cols == 0 {
		p.Cols, p.Rows = 80, 24
	}
	s, err := e.m.Open(context.Background(), p, k)
	if err != nil {
		t.Fatalf("open %v: %v", p.Command, err)
	}
	return s
}

// sink records what a terminal sends it and checks seqs have no gap.
type sink struct {
	mu     sync.Mutex
	data   []byte // decoded
	chunks []protocol.PtyOutputParams
	next   int64 // the seq it expects, 0 before the first
	err    error
	exit   chan protocol.PtyExitParams
	enc    protocol.Encoding
	ack    func(p protocol.PtyOutputParams) // called after each chunk, when set
}

func newSink() *sink { return &sink{exit: make(chan protocol.PtyExitParams, 1)} }

func (k *sink) PtyOutput(p protocol.PtyOutputParams) error {
	k.mu.Lock()
	if k.next != 0 && p.Seq != k.next && k.err == nil {
		k.err = fmt.Errorf("got seq %d, want %d", p.Seq, k.next)
	}
	if !utf8.ValidString(p.Data) && k.err == nil {
		k.err = fmt.Errorf("seq %d: invalid UTF-8 %q", p.Seq, p.Data)
	}
	k.next = p.Seq + 1
	k.chunks = append(k.chunks, p)
	if k.enc == protocol.EncodingBase64 {
		b, err := base64.StdEncoding.DecodeString(p.Data)
		if err != nil && k.err == nil {
			k.err = err
		}
		k.data = append(k.data, b...)
	} else {
		k.data = append(k.data, p.Data...)
	}
	ack := k.ack
	k.mu.Unlock()
	if ack != nil {
		ack(p)
	}
	return nil
}

func (k *sink) PtyExit(p protocol.PtyExitParams) error {
	select {
	case k.exit <- p:
	default:
	}
	return nil
}

func (k *sink) text() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return strings.ReplaceAll(string(k.data), "\r\n", "\n")
}

func (k *sink) lastSeq() int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.next - 1
}

func (k *sink) check(t *testing.T) {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil {
		t.Fatal(k.err)
	}
}

// waitText waits until the output contains want.
func (k *sink) waitText(t *testing.T, want string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := k.text()
		if strings.Contains(got, want) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("output %q lacks %q", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (k *sink) waitExit(t *testing.T) protocol.PtyExitParams {
	t.Helper()
	select {
	case p := <-k.exit:
		k.check(t)
		return p
	case <-time.After(10 * time.Second):
		t.Fatalf("no pty/exit; output %q", k.text())
		return protocol.PtyExitParams{}
	}
}

// autoAck makes k acknowledge each chunk as it gets it, as a client that
// keeps up does. The first output can come before Open returns.
func autoAck(t *testing.T, m *Manager, k *sink) {
	k.ack = func(p protocol.PtyOutputParams) {
		s, err := m.Get(p.PtyID)
		if err == nil {
			err = s.Ack(k, p.Seq)
		}
		if err != nil {
			t.Errorf("ack %d: %v", p.Seq, err)
		}
	}
}

// TestSessionBasics: commands, the default shell, exit codes and signals,
// sizes, SIGWINCH, input, env and cwd.
func TestSessionBasics(t *testing.T) {
	e := newEnv(t, Options{})
	wsID := e.workspace(t, "basics")
	if err := os.MkdirAll(filepath.Join(e.project, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}

	t.Run("command output and exit code", func(t *testing.T) {
		k := newSink()
		s := e.open(t, protocol.PtyOpenParams{WorkspaceID: wsID, Command: []string{"sh", "-c", "echo hello $((6*7)); tty; pwd; echo $TERM $FOO; exit 3"},
			Env: map[string]string{"FOO": "bar"}, Cwd: "sub"}, k)
		if got := k.waitExit(t); got.ExitCode != 3 || got.Signal != "" {
			t.Fatalf("exit %+v, want code 3", got)
		}
		out := k.text()
		for _, want := range []string{"hello 42\n", "/dev/pts/", "/workspace/sub\n", "xterm-256color bar\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("output %q lacks %q", out, want)
			}
		}
		if s.Exit() == nil || e.m.Len() != 0 {
			t.Fatalf("after exit: %v, %d running", s.Exit(), e.m.Len())
		}
		if err := s.Write("x"); !errors.Is(err, ErrExited) {
			t.Fatalf("write after exit: %v", err)
		}
	})

	t.Run("default shell", func(t *testing.T) {
		k := newSink()
		s := e.open(t, protocol.PtyOpenParams{WorkspaceID: wsID}, k)
		if err := s.Write("echo shell=$SHELL; exit 5\r"); err != nil {
			t.Fatal(err)
		}
		if got := k.waitExit(t); got.ExitCode != 5 {
			t.Fatalf("exit %+v, output %q", got, k.text())
		}
		if !strings.Contains(k.text(), "shell=/") {
			t.Fatalf("output %q", k.text())
		}
	})

	t.Run("death by signal", func(t *testing.T) {
		k := newSink()
		e.open(t, protocol.PtyOpenParams{WorkspaceID: wsID, Command: []string{"sh", "-c", "kill -SEGV $$"}}, k)
		if got := k.waitExit(t); got.ExitCode != 139 || got.Signal != "SIGSEGV" {
			t.Fatalf("exit %+v, want 139 SIGSEGV", got)
		}
	})

	t.Run("resize and SIGWINCH", func(t *testing.T) {
		k := newSink()
		// perl installs its handler whatever the disposition it started with.
		s := e.open(t, protocol.PtyOpenParams{WorkspaceID: wsID, Cols: 100, Rows: 30, Command: []string{"perl", "-e",
			`$| = 1; system("stty size"); $SIG{WINCH} = sub { print "winch\n"; system("stty size") }; print "ready\n"; sleep 1 while 1`}}, k)
		k.waitText(t, "30 100\nready\n")
		if err := s.Resize(120, 40); err != nil {
			t.Fatal(err)
		}
		k.waitText(t, "winch\n40 120\n")
		for _, bad := range [][2]int{{0, 0}, {100000, 100000}, {80, 0}, {1001, 24}} {
			if err := s.Resize(bad[0], bad[1]); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `field "`) {
				t.Errorf("resize %v: %v, want ErrInvalid naming the field", bad, err)
			}
		}
		if err := e.m.CloseSession(context.Background(), s.ID()); err != nil {
			t.Fatal(err)
		}
		if got := k.waitExit(t); got.Signal != "SIGKILL" || got.ExitCode != 137 {
			t.Fatalf("exit after close %+v", got)
		}
		if _, err := e.m.Get(s.ID()); !errors.Is(err, ErrNotFound) {
			t.Fatalf("closed terminal still there: %v", err)
		}
	})

	t.Run("input in order", func(t *testing.T) {
		k := newSink()
		s := e.open(t, protocol.PtyOpenParams{WorkspaceID: wsID, Command: []string{"sh", "-c", "stty -echo; echo ready; exec cat"}}, k)
		k.waitText(t, "ready\n")
		var want strings.Builder
		want.WriteString("ready\n")
		for i := range 500 {
			line := fmt.Sprintf("line %d\n", i)
			want.WriteString(line)
			if err := s.Write(line); err != nil {
				t.Fatal(err)
			}
		}
		k.waitText(t, "line 499\n")
		if got := k.text(); got != want.String() {
			t.Fatalf("echoed input out of order or lost: %.200q", got)
		}
		if err := s.Write("\x04"); err != nil { // ^D: cat sees end of file
			t.Fatal(err)
		}
		if got := k.waitExit(t); got.ExitCode != 0 {
			t.Fatalf("exit %+v", got)
		}
	})

	t.Run("bad params", func(t *testing.T) {
		for _, tt := range []struct {
			p    protocol.PtyOpenParams
			want error
		}{
			{protocol.PtyOpenParams{WorkspaceID: wsID, Cols: 0, Rows: 0}, ErrInvalid},
			{protocol.PtyOpenParams{WorkspaceID: wsID, Cols: 100000, Rows: 100000}, ErrInvalid},
			{protocol.PtyOpenParams{WorkspaceID: wsID, Cols: 80, Rows: 24, Encoding: "latin1"}, ErrInvalid},
			{protocol.PtyOpenParams{WorkspaceID: wsID, Cols: 80, Rows: 24, Env: map[string]string{"A=B": "c"}}, ErrInvalid},
			{protocol.PtyOpenParams{WorkspaceID: wsID, Cols: 80, Rows: 24, Cwd: "../.."}, workspace.ErrPathOutside},
			{protocol.PtyOpenParams{WorkspaceID: wsID, Cols: 80, Rows: 24, Cwd: "/etc"}, workspace.ErrPathOutside},
			{protocol.PtyOpenParams{WorkspaceID: wsID, Cols: 80, Rows: 24, Command: []string{"no-such-program"}}, ErrStart},
			{protocol.PtyOpenParams{WorkspaceID: wsID, Cols: 80, Rows: 24, Cwd: "nope"}, ErrStart},
			{protocol.PtyOpenParams{WorkspaceID: "ws-nope", Cols: 80, Rows: 24}, workspace.ErrNotFound},
		} {
			if _, err := e.m.Open(context.Background(), tt.p, newSink()); !errors.Is(err, tt.want) {
				t.Errorf("open %+v: %v, want %v", tt.p, err, tt.want)
			}
		}
		if _, err := e.m.Get("pty-nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("get unknown: %v", err)
		}
		if e.m.Len() != 0 {
			t.Errorf("%d running after failed opens", e.m.Len())
		}
	})
}

// TestSessionScratchAndClose: without a workspace a terminal gets its own,
// discarded when it ends; close kills the whole tree.
func TestSessionScratchAndClose(t *testing.T) {
	e := newEnv(t, Options{})
	k := newSink()
	// A unique duration names the background sleep among the host's processes.
	mark := fmt.Sprintf("1000.%d", time.Now().UnixNano()%1000000)
	s := e.open(t, protocol.PtyOpenParams{Command: []string{"sh", "-c", "sleep " + mark + " & sleep " + mark + " & echo started; wait"}}, k)
	k.waitText(t, "started\n")
	// sh prints before its children have exec'd sleep: wait for them.
	if n := waitProcs(t, "sleep\x00"+mark+"\x00", 2); n != 2 {
		t.Fatalf("%d background sleeps running, want 2", n)
	}
	wsID := s.Workspace().ID()
	if len(e.ws.List()) != 1 {
		t.Fatalf("workspaces %v, want the terminal's own", e.ws.List())
	}
	if err := e.m.CloseSession(context.Background(), s.ID()); err != nil {
		t.Fatal(err)
	}
	if got := k.waitExit(t); got.Signal != "SIGKILL" {
		t.Fatalf("exit %+v", got)
	}
	if n := waitProcs(t, "sleep\x00"+mark+"\x00", 0); n != 0 {
		t.Fatalf("%d background sleeps left after close", n)
	}
	if _, err := e.ws.Get(wsID); err == nil {
		t.Fatalf("the terminal's own workspace %s is still open", wsID)
	}
}

// waitProcs polls, for up to 10 s, until want of the host's processes have
// the command line cmdline, and returns the last count.
func waitProcs(t *testing.T, cmdline string, want int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := countProcs(t, cmdline)
		if n == want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// countProcs counts the host's processes whose command line is cmdline.
func countProcs(t *testing.T, cmdline string) int {
	t.Helper()
	n := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && string(b) == cmdline {
			n++
		}
	}
	return n
}

// TestSessionOutput: UTF-8 across chunks, invalid bytes, base64 byte for
// byte, and a big output complete and in order.
func TestSessionOutput(t *testing.T) {
	e := newEnv(t, Options{})
	wsID := e.workspace(t, "output")

	t.Run("utf8 straddling writes and invalid bytes", func(t *testing.T) {
		k := newSink()
		e.open(t, protocol.PtyOpenParams{WorkspaceID: wsID, Command: []string{"sh", "-c",
			`stty raw; printf 'a\342\202'; sleep 0.2; printf '\254b\360\237'; sleep 0.2; printf '\230\200 bad:\377\376.'`}}, k)
		k.waitExit(t)
		if got, want := k.text(), "a€b😀 bad:\uFFFD\uFFFD."; got != want {
			t.Fatalf("output %q, want %q", got, want)
		}
		k.mu.Lock()
		n := len(k.chunks)
		k.mu.Unlock()
		if n < 3 {
			t.Fatalf("%d chunks; the writes were meant to arrive apart", n)
		}
	})

	t.Run("base64 byte-exact", func(t *testing.T) {
		raw := make([]byte, 300<<10)
		_, _ = rand.Read(raw)
		if err := os.WriteFile(filepath.Join(e.project, "random.bin"), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		k := newSink()
		k.enc = protocol.EncodingBase64
		autoAck(t, e.m, k)
		s := e.open(t, protocol.PtyOpenParams{WorkspaceID: wsID, Encoding: protocol.EncodingBase64, Command: []string{"sh", "-c", "stty raw -echo; cat random.bin"}}, k)
		if got := k.waitExit(t); got.ExitCode != 0 {
			t.Fatalf("exit %+v", got)
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		if !bytes.Equal(k.data, raw) {
			t.Fatalf("got %d bytes, want the file's %d byte for byte", len(k.data), len(raw))
		}
		if err := s.Write("not base64!"); !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrExited) {
			t.Fatalf("bad base64 input: %v", err)
		}
	})

	t.Run("big output complete and in order", func(t *testing.T) {
		k := newSink()
		autoAck(t, e.m, k)
		e.open(t, protocol.PtyOpenParams{WorkspaceID: wsID, Command: []string{"sh", "-c", "stty -onlcr; seq 1 300000"}}, k)
		k.waitExit(t)
		var want strings.Builder
		for i := 1; i <= 300000; i++ {
			fmt.Fprintf(&want, "%d\n", i)
		}
		k.mu.Lock()
		got, chunks := string(k.data), len(k.chunks)
		k.mu.Unlock()
		if got != want.String() {
			t.Fatalf("got %d bytes, want %d", len(got), want.Len())
		}
		t.Logf("%d bytes in %d chunks", len(got), chunks)
	})
}

// TestSessionFlowControl: a sink that does not ack stops the reader (the
// program blocks), acks let it go on; a detached terminal reads on into its
// ring; attach replays from a seq and says when the ring dropped.
func TestSessionFlowControl(t *testing.T) {
	e := newEnv(t, Options{ScrollbackBytes: 200 << 10})
	wsID := e.workspace(t, "flow")

	slow := newSink()
	// A counter that says how far it got: it blocks on write when paused.
	s := e.open(t, protocol.PtyOpenParams{WorkspaceID: wsID, Command: []string{"sh", "-c", "i=0; while :; do i=$((i+1)); echo line $i; done"}}, slow)
	waitPaused := func() int64 {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			s.mu.Lock()
			paused, un := s.paused, s.unackedLocked()
			s.mu.Unlock()
			if paused {
				if un < DefaultHighWater || un > DefaultHighWater+ChunkBytes+chunkOverhead {
					t.Fatalf("paused with %d unacknowledged", un)
				}
				return slow.lastSeq()
			}
			if time.Now().After(deadline) {
				t.Fatal("the reader never paused for a sink that does not ack")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	seq := waitPaused()
	// A window for output that goes on despite the pause: nothing must
	// arrive, which no condition can show.
	time.Sleep(300 * time.Millisecond)
	if got := slow.lastSeq(); got != seq {
		t.Fatalf("output went on while paused: seq %d -> %d", seq, got)
	}
	// Acks let it go on until the next pause.
	if err := s.Ack(slow, seq); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for slow.lastSeq() == seq && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if slow.lastSeq() == seq {
		t.Fatal("an ack did not resume the output")
	}
	seq = waitPaused()
	if err := s.Ack(slow, seq+1000); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ack past the last seq: %v", err)
	}

	// A second viewer attaches from an old seq: the ring (200 KiB) dropped
	// it; it gets what the ring holds, then the live output.
	viewer := newSink()
	res, err := s.Attach(viewer, new(int64(1)))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Dropped || res.FirstSeq <= 1 || res.FirstSeq > seq {
		t.Fatalf("attach from 1 after a lot of output: %+v (last seq %d)", res, seq)
	}
	viewer.mu.Lock()
	first := viewer.chunks[0].Seq
	viewer.mu.Unlock()
	if first != res.FirstSeq || viewer.lastSeq() != seq {
		t.Fatalf("replay %d..%d, want %d..%d", first, viewer.lastSeq(), res.FirstSeq, seq)
	}
	// Attach from a recent seq that the ring holds: nothing dropped.
	third := newSink()
	if res, err := s.Attach(third, new(seq-2)); err != nil || res.Dropped || res.FirstSeq != seq-2 || third.lastSeq() != seq {
		t.Fatalf("attach from %d: %+v %v, replayed up to %d", seq-2, res, err, third.lastSeq())
	}

	// Detached from every sink, the terminal reads on into its ring.
	s.Detach(slow)
	s.Detach(viewer)
	s.Detach(third)
	deadline = time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		last, oldest := s.seq, s.ring.oldest()
		s.mu.Unlock()
		if oldest > seq+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a detached terminal stopped reading at seq %d", last)
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.mu.Lock()
	ringBytes := s.ring.bytes
	s.mu.Unlock()
	if ringBytes > 200<<10 {
		t.Fatalf("ring holds %d bytes, over its 200 KiB", ringBytes)
	}
	late := newSink()
	res, err = s.Attach(late, new(seq+1))
	if err != nil || !res.Dropped {
		t.Fatalf("attach after the ring moved on: %+v %v", res, err)
	}
	slow.check(t)
	viewer.check(t)
	late.check(t)
	if err := s.Ack(newSink(), 1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ack from a sink that is not attached: %v", err)
	}
}

// TestSessionOtherTerminalsNotSlowed: one terminal paused by a sink that
// does not ack does not slow another.
func TestSessionOtherTerminalsNotSlowed(t *testing.T) {
	e := newEnv(t, Options{})
	wsID := e.workspace(t, "two")
	stuck := newSink()
	e.open(t, protocol.PtyOpenParams{WorkspaceID: wsID, Command: []string{"yes"}}, stuck)
	k := newSink()
	autoAck(t, e.m, k)
	e.open(t, protocol.PtyOpenParams{WorkspaceID: wsID, Command: []string{"sh", "-c", "stty -onlcr; seq 1 100000"}}, k)
	k.waitExit(t)
	if !strings.HasSuffix(k.text(), "\n100000\n") {
		t.Fatalf("the second terminal's output ends %q", k.text()[max(0, len(k.text())-20):])
	}
}

// TestSessionLimits: per workspace and per daemon.
func TestSessionLimits(t *testing.T) {
	e := newEnv(t, Options{MaxPtys: 3, MaxPerWorkspace: 2})
	a, b := e.workspace(t, "a"), e.workspace(t, "b")
	sleep := []string{"sleep", "60"}
	var open []*Session
	for _, ws := range []string{a, a} {
		open = append(open, e.open(t, protocol.PtyOpenParams{WorkspaceID: ws, Command: sleep}, newSink()))
	}
	if _, err := e.m.Open(context.Background(), protocol.PtyOpenParams{WorkspaceID: a, Command: sleep, Cols: 80, Rows: 24}, newSink()); !errors.Is(err, ErrLimit) {
		t.Fatalf("third terminal in a workspace: %v, want ErrLimit", err)
	}
	open = append(open, e.open(t, protocol.PtyOpenParams{WorkspaceID: b, Command: sleep}, newSink()))
	if _, err := e.m.Open(context.Background(), protocol.PtyOpenParams{WorkspaceID: b, Command: sleep, Cols: 80, Rows: 24}, newSink()); !errors.Is(err, ErrLimit) {
		t.Fatalf("fourth terminal in the daemon: %v, want ErrLimit", err)
	}
	if e.m.Len() != 3 {
		t.Fatalf("Len %d, want 3", e.m.Len())
	}
	// Closing one makes room.
	if err := e.m.CloseSession(context.Background(), open[0].ID()); err != nil {
		t.Fatal(err)
	}
	e.open(t, protocol.PtyOpenParams{WorkspaceID: a, Command: sleep}, newSink())

	// A terminal that ends gives its place back before pty/exit goes out:
	// a client opening one on the exit, at the limit, is not refused.
	k := &exitHook{sink: newSink()}
	k.onExit = func() {
		s, err := e.m.Open(context.Background(), protocol.PtyOpenParams{WorkspaceID: b, Command: sleep, Cols: 80, Rows: 24}, newSink())
		if err == nil {
			t.Cleanup(func() { _ = e.m.CloseSession(context.Background(), s.ID()) })
		}
		k.openErr = err
	}
	if err := e.m.CloseSession(context.Background(), open[2].ID()); err != nil {
		t.Fatal(err)
	}
	e.open(t, protocol.PtyOpenParams{WorkspaceID: b, Command: []string{"true"}}, k)
	k.waitExit(t)
	if k.openErr != nil {
		t.Fatalf("a terminal opened on pty/exit, at the limit: %v", k.openErr)
	}
}

// exitHook is a sink that runs onExit as pty/exit is delivered, before it
// returns.
type exitHook struct {
	*sink
	onExit  func()
	openErr error
}

func (k *exitHook) PtyExit(p protocol.PtyExitParams) error {
	k.onExit()
	return k.sink.PtyExit(p)
}

// TestSessionOwnership: the opener's CloseOpenedBy ends its terminals even
// with other viewers; a viewer's does not; DetachAll leaves them running.
func TestSessionOwnership(t *testing.T) {
	e := newEnv(t, Options{})
	wsID := e.workspace(t, "own")
	opener, viewer := newSink(), newSink()
	s := e.open(t, protocol.PtyOpenParams{WorkspaceID: wsID, Command: []string{"sh", "-c", "echo hi; sleep 60"}}, opener)
	if _, err := s.Attach(viewer, nil); err != nil {
		t.Fatal(err)
	}
	viewer.waitText(t, "hi\n")
	e.m.DetachAll(opener)
	e.m.CloseOpenedBy(context.Background(), viewer)
	if s.Exit() != nil {
		t.Fatal("a viewer's shutdown or the opener's detach ended the terminal")
	}
	e.m.CloseOpenedBy(context.Background(), opener)
	if got := viewer.waitExit(t); got.Signal != "SIGKILL" {
		t.Fatalf("exit %+v", got)
	}
	select {
	case p := <-opener.exit:
		t.Fatalf("a detached opener got %+v", p)
	default:
	}
}

// TestSessionCtrlC: ^C interrupts the terminal's foreground program.
func TestSessionCtrlC(t *testing.T) {
	e := newEnv(t, Options{})
	k := newSink()
	// A unique duration, to find this sleep among the host's processes.
	secs := fmt.Sprintf("30.%09d", time.Now().UnixNano()%1e9)
	s := e.open(t, protocol.PtyOpenParams{Command: []string{"sh", "-c", "grep SigIgn /proc/self/status; echo ready; sleep " + secs + "; echo survived"}}, k)
	out := k.waitText(t, "ready\n")
	var ignored uint64
	if _, err := fmt.Sscanf(out[strings.Index(out, "SigIgn:"):], "SigIgn:\t%x", &ignored); err != nil {
		t.Fatalf("SigIgn in %q: %v", out, err)
	}
	if ignored&(1<<(syscall.SIGINT-1)) != 0 {
		_ = e.m.CloseSession(context.Background(), s.ID())
		t.Fatalf("the terminal's program starts with SIGINT ignored (SigIgn %#x): ^C cannot interrupt it", ignored)
	}
	// ^C once sleep runs. Sooner, the shell's child may take SIGINT
	// between fork and exec, while it still has the shell's handler: then
	// sleep runs on and the shell, whose child did not die of SIGINT,
	// waits for it, as shells do.
	want := "sleep\x00" + secs + "\x00"
	for deadline := time.Now().Add(10 * time.Second); !hostProcRuns(want); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("sleep %s never ran; output %q", secs, k.text())
		}
	}
	if err := s.Write("\x03"); err != nil {
		t.Fatal(err)
	}
	if got := k.waitExit(t); got.Signal != "SIGINT" || got.ExitCode != 130 {
		t.Fatalf("after ^C: %+v, output %q", got, k.text())
	}
}

// hostProcRuns: a process of the host has the command line cmdline.
func hostProcRuns(cmdline string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && string(b) == cmdline {
			return true
		}
	}
	return false
}

// TestPtyAsUnprivilegedUser re-runs the terminal tests as the user
// CELLBOX_TEST_USER names. Run as root:
//
//	CELLBOX_TEST_USER=cellboxtest CGO_ENABLED=0 go test ./pty/ -run Unprivileged -v
func TestPtyAsUnprivilegedUser(t *testing.T) {
	if sandboxtest.AsTestUser() {
		t.Skip("this is the re-run as the unprivileged user")
	}
	sandboxtest.RunAsTestUser(t, "^TestSession")
}

// TestCullIdle: a terminal no client is attached to and that has been idle
// for --cull-idle is closed; one a client watches, or one that talks, is not.
func TestCullIdle(t *testing.T) {
	e := newEnv(t, Options{CullIdle: 300 * time.Millisecond})
	watched, quiet, chatty := newSink(), newSink(), newSink()
	w := e.open(t, protocol.PtyOpenParams{Command: []string{"sleep", "30"}}, watched)
	q := e.open(t, protocol.PtyOpenParams{Command: []string{"sleep", "30"}}, quiet)
	c := e.open(t, protocol.PtyOpenParams{Command: []string{"sh", "-c", "while :; do echo tick; sleep 0.1; done"}}, chatty)
	q.Detach(quiet)
	c.Detach(chatty)
	select {
	case <-q.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("an idle, detached terminal was not culled")
	}
	for _, s := range []*Session{w, c} {
		select {
		case <-s.Done():
			t.Fatalf("terminal %s was culled while watched or busy", s.ID())
		default:
		}
	}
}
