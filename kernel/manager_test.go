package kernel

import (
	"context"
	_ "embed"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// These tests drive the manager in a real sandbox with a probe driver
// (testdata/probe_driver.py) that takes commands instead of code, so each
// test makes the exact interleaving of output bytes and events it needs.
// The real drivers are tested end to end in cmd/cellbox.

//go:embed testdata/probe_driver.py
var probeDriver string

func TestMain(m *testing.M) {
	if sandbox.Main() {
		return
	}
	drivers["probe"] = driverSpec{argv: []string{"python3", "-c", probeDriver}}
	os.Exit(m.Run())
}

type sink struct {
	mu       sync.Mutex
	outs     []protocol.KernelOutputParams
	statuses []protocol.KernelStatusParams
}

func (s *sink) KernelOutput(o protocol.KernelOutputParams) error {
	s.mu.Lock()
	s.outs = append(s.outs, o)
	s.mu.Unlock()
	return nil
}

func (s *sink) KernelStatus(p protocol.KernelStatusParams) error {
	s.mu.Lock()
	s.statuses = append(s.statuses, p)
	s.mu.Unlock()
	return nil
}

func (s *sink) of(execID string) []protocol.KernelOutputParams {
	s.mu.Lock()
	defer s.mu.Unlock()
	var r []protocol.KernelOutputParams
	for _, o := range s.outs {
		if o.ExecutionID == execID {
			r = append(r, o)
		}
	}
	return r
}

// has reports whether some stream output holds text.
func (s *sink) has(text string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.outs {
		if o.Kind == protocol.OutputKindStream && strings.Contains(o.Text, text) {
			return true
		}
	}
	return false
}

func newTestManager(t *testing.T, opts Options) *Manager {
	t.Helper()
	ws, err := workspace.NewManager(workspace.Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ws.Close)
	opts.Workspaces = ws
	opts.Languages = func() []Language { return []Language{{ID: "probe", Available: true, Version: "1"}} }
	m := NewManager(opts)
	t.Cleanup(m.Close)
	return m
}

// newRealManager is a kernel manager of the host's languages, with
// workspaces in a temporary state dir.
func newRealManager(t *testing.T) *Manager {
	t.Helper()
	ws, err := workspace.NewManager(workspace.Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ws.Close)
	m := NewManager(Options{Workspaces: ws, Languages: func() []Language { return DetectLanguages(context.Background()) }})
	t.Cleanup(m.Close)
	return m
}

func execProbe(t *testing.T, k *Kernel, s *sink, code string) (*protocol.ExecuteResult, []protocol.KernelOutputParams) {
	t.Helper()
	res, err := k.Execute(context.Background(), ExecRequest{Params: protocol.KernelExecuteParams{KernelID: k.id, Code: code}, Sink: s})
	if err != nil {
		t.Fatalf("execute %q: %v", code, err)
	}
	return res, s.of(res.ExecutionID)
}

// TestOrderAndTruncation: bytes on fds 1 and 2 written before an event
// reach the client before it; a flood is whole; the output limit keeps the
// head and marks the cut.
func TestOrderAndTruncation(t *testing.T) {
	m := newTestManager(t, Options{})
	s := &sink{}
	k, err := m.Start(context.Background(), protocol.KernelStartParams{Language: "probe"}, s)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if i == 10 {
			// Bytes the driver does not count (C code writing to fd 1)
			// must not shift the order of later executions.
			execProbe(t, k, s, "rawout uncounted")
		}
		res, outs := execProbe(t, k, s, "out a; err b; display c; out d; display e")
		var got []string
		for _, o := range outs {
			switch o.Kind {
			case protocol.OutputKindStream:
				got = append(got, string(o.Name)+":"+strings.TrimSpace(o.Text))
			case protocol.OutputKindDisplay:
				got = append(got, "display:"+o.Data["text/plain"].(string))
			}
		}
		want := "stdout:a stderr:b display:c stdout:d display:e"
		if strings.Join(got, " ") != want || res.Status != protocol.ExecutionStatusOK || *res.CPUMs != 1 || res.PeakMemoryBytes != 1234 {
			t.Fatalf("order = %q, want %q; result %+v", strings.Join(got, " "), want, res)
		}
	}
	res, outs := execProbe(t, k, s, "flood 300000")
	var b strings.Builder
	for _, o := range outs {
		b.WriteString(o.Text)
	}
	if n := strings.Count(b.String(), "\n"); n != 300000 || res.OutputTruncated {
		t.Fatalf("flood: %d lines", n)
	}

	small, err := m.Start(context.Background(), protocol.KernelStartParams{Language: "probe", Limits: &protocol.Limits{OutputBytes: 1000}}, s)
	if err != nil {
		t.Fatal(err)
	}
	res, outs = execProbe(t, small, s, "flood 100000; fail after")
	var kept int
	for _, o := range outs {
		if o.Kind == protocol.OutputKindStream && o.Name == protocol.StreamStdout {
			kept += len(o.Text)
		}
	}
	last := outs[len(outs)-1]
	if !res.OutputTruncated || kept > 1000 || kept < 900 || last.Kind != protocol.OutputKindError || res.Status != protocol.ExecutionStatusError {
		t.Fatalf("truncated %v, kept %d, last %+v", res.OutputTruncated, kept, last)
	}
	if !strings.Contains(outs[len(outs)-2].Text, "output truncated") {
		t.Fatalf("no marker: %+v", outs[len(outs)-2])
	}
}

// TestStreamUTF8: bytes that are not UTF-8 become one U+FFFD each, as in
// a terminal (protocol.UTF8Chunker), and a sequence cut by an event is
// carried to the output after it, whole.
func TestStreamUTF8(t *testing.T) {
	m := newTestManager(t, Options{})
	s := &sink{}
	k, err := m.Start(context.Background(), protocol.KernelStartParams{Language: "probe"}, s)
	if err != nil {
		t.Fatal(err)
	}
	// 61 ff fe fd 62 is a\xff\xfe\xfdb; e2 82 | ac is € cut by the display.
	_, outs := execProbe(t, k, s, "bytes 61fffefd62e282; display x; bytes ac0a")
	var got []string
	text := ""
	for _, o := range outs {
		switch o.Kind {
		case protocol.OutputKindStream:
			text += o.Text
		case protocol.OutputKindDisplay:
			got, text = append(got, text, "display"), ""
		}
	}
	got = append(got, text)
	want := []string{"a\uFFFD\uFFFD\uFFFDb", "display", "€\n"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("stream around the display: %q, want %q", got, want)
	}
}

// TestInputAndDeath: an input event asks the client, or gives end of file
// when the client cannot answer; a driver that exits is dead with the
// reason until restarted; code that ignores SIGINT is restarted after the
// grace period on timeout.
func TestInputAndDeath(t *testing.T) {
	m := newTestManager(t, Options{Grace: 300 * time.Millisecond})
	s := &sink{}
	k, err := m.Start(context.Background(), protocol.KernelStartParams{Language: "probe"}, s)
	if err != nil {
		t.Fatal(err)
	}
	ask := func(_ context.Context, p protocol.KernelInputRequestParams) (string, error) {
		return "v:" + p.Prompt, nil
	}
	res, err := k.Execute(context.Background(), ExecRequest{Params: protocol.KernelExecuteParams{Code: "input q", AllowStdin: true}, Sink: s, Ask: ask})
	if err != nil || s.of(res.ExecutionID)[0].Text != "value v:q\n" {
		t.Fatalf("input: %v %+v", err, s.of(res.ExecutionID))
	}
	res, err = k.Execute(context.Background(), ExecRequest{Params: protocol.KernelExecuteParams{Code: "input q"}, Sink: s, Ask: ask})
	if err != nil || s.of(res.ExecutionID)[0].Text != "eof\n" {
		t.Fatalf("input without allowStdin: %v %+v", err, s.of(res.ExecutionID))
	}

	res, err = k.Execute(context.Background(), ExecRequest{Params: protocol.KernelExecuteParams{Code: "out x; ignoreint", TimeoutMs: 200}, Sink: s})
	if err != nil || res.Status != protocol.ExecutionStatusTimeout || res.Error.Ename != "KernelRestarted" {
		t.Fatalf("ignoring SIGINT: %v %+v", err, res)
	}
	if res.ExecutionCount != 3 {
		t.Fatalf("count before the restart = %d", res.ExecutionCount)
	}
	res, _ = execProbe(t, k, s, "out after")
	if res.ExecutionCount != 1 {
		t.Fatalf("count after the restart = %d", res.ExecutionCount)
	}

	_, err = k.Execute(context.Background(), ExecRequest{Params: protocol.KernelExecuteParams{Code: "exit 3"}, Sink: s})
	if err == nil || !strings.Contains(err.Error(), "exited with code 3") {
		t.Fatalf("exit: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for k.Info().State != protocol.KernelStateDead && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := k.Execute(context.Background(), ExecRequest{Params: protocol.KernelExecuteParams{Code: "out x"}, Sink: s}); !errors.Is(err, ErrDead) {
		t.Fatalf("a dead kernel's execute: %v", err)
	}
	if err := k.Interrupt(); !errors.Is(err, ErrDead) || !strings.Contains(err.Error(), "exited with code 3") {
		t.Fatalf("a dead kernel's interrupt: %v", err)
	}
	if err := k.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	if res, _ := execProbe(t, k, s, "out back"); res.Status != protocol.ExecutionStatusOK {
		t.Fatalf("after restart: %+v", res)
	}
	if err := m.Shutdown(context.Background(), k.id); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(k.id); err == nil {
		t.Fatal("shut down kernel still listed")
	}
}

// TestExecuteDuringRestart: an execution sent while the kernel restarts
// waits for the new interpreter (it does not fail on the old one), and a
// second restart request answers when the first is done.
func TestExecuteDuringRestart(t *testing.T) {
	m := newTestManager(t, Options{})
	s := &sink{}
	k, err := m.Start(context.Background(), protocol.KernelStartParams{Language: "probe", Env: map[string]string{"PROBE_START_DELAY": "0.3"}}, s)
	if err != nil {
		t.Fatal(err)
	}
	execProbe(t, k, s, "out before")
	restarted := make(chan error, 2)
	go func() { restarted <- k.Restart(context.Background()) }()
	deadline := time.Now().Add(5 * time.Second)
	for k.Info().State != protocol.KernelStateStarting && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if st := k.Info().State; st != protocol.KernelStateStarting {
		t.Fatalf("state during the restart = %s", st)
	}
	go func() { restarted <- k.Restart(context.Background()) }()
	res, outs := execProbe(t, k, s, "out after")
	if res.Status != protocol.ExecutionStatusOK || res.ExecutionCount != 1 || len(outs) != 1 || outs[0].Text != "after\n" {
		t.Fatalf("execution sent during a restart: %+v %+v", res, outs)
	}
	for range 2 {
		if err := <-restarted; err != nil {
			t.Fatal(err)
		}
	}
}

// stalledSink is a client that stops reading: its first output blocks
// until release is closed.
type stalledSink struct {
	sink
	once    sync.Once
	stalled chan struct{}
	release chan struct{}
}

func (s *stalledSink) KernelOutput(o protocol.KernelOutputParams) error {
	s.once.Do(func() { close(s.stalled) })
	<-s.release
	return s.sink.KernelOutput(o)
}

// TestStalledSinkHoldsUpNoOneElse: while one attached client does not read
// (its delivery blocks), kernel/list, kernel/detach of another client and
// the cull check still answer at once (ARCHITECTURE.md constraint 8).
func TestStalledSinkHoldsUpNoOneElse(t *testing.T) {
	m := newTestManager(t, Options{})
	other := &sink{}
	k, err := m.Start(context.Background(), protocol.KernelStartParams{Language: "probe"}, other)
	if err != nil {
		t.Fatal(err)
	}
	st := &stalledSink{stalled: make(chan struct{}), release: make(chan struct{})}
	if err := k.Attach(st, nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = k.Execute(context.Background(), ExecRequest{Params: protocol.KernelExecuteParams{Code: "out x"}, Sink: other})
	}()
	select {
	case <-st.stalled:
	case <-time.After(30 * time.Second):
		t.Fatal("the stalled client never got output")
	}
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		_ = k.Info()
		_ = m.List()
		_ = k.idleFor()
		k.Detach(other)
	}()
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		close(st.release)
		t.Fatal("kernel/list, detach or the cull check waited for a client that does not read")
	}
	close(st.release)
	<-done
}
