package kernel

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// The driver's event pipe is reachable from the code it runs: everything
// read from it is untrusted input. These tests forge events from real
// python code and check the daemon stays bounded and the kernel usable.
// They also run as the unprivileged user (TestRealDriversAsUser).

// findEventFD is python that finds the driver's event pipe: the write end
// of a pipe above fd 2.
const findEventFD = `
import os, json, threading
def _evfd():
    for f in os.listdir('/proc/self/fd'):
        n = int(f)
        if n < 3: continue
        try:
            if not os.readlink('/proc/self/fd/%d' % n).startswith('pipe:'): continue
            with open('/proc/self/fdinfo/%d' % n) as fi:
                flags = int(fi.read().split('flags:')[1].split()[0], 8)
        except (OSError, IndexError, ValueError):
            continue
        if flags & 3 == 1:
            return n
    raise SystemExit('no event pipe found')
EVFD = _evfd()
def forge(ev, times=1):
    line = (json.dumps(ev) + '\n').encode()
    for _ in range(times):
        os.write(EVFD, line)
`

func realPythonKernel(t *testing.T, limits *protocol.Limits) (*Manager, *Kernel, *sink) {
	t.Helper()
	m := newRealManager(t)
	s := &sink{}
	k, err := m.Start(context.Background(), protocol.KernelStartParams{Language: "python", Limits: limits}, s)
	if err != nil {
		t.Fatal(err)
	}
	return m, k, s
}

func runPy(t *testing.T, k *Kernel, s *sink, id, code string, ask Asker) *protocol.ExecuteResult {
	t.Helper()
	res, err := k.Execute(context.Background(), ExecRequest{Params: protocol.KernelExecuteParams{ExecutionID: id, Code: code, AllowStdin: ask != nil}, Sink: s, Ask: ask})
	if err != nil {
		t.Fatalf("execute %s: %v", id, err)
	}
	return res
}

// TestForgedInputFlood: 100,000 forged input requests while the client
// takes its time to answer: the client is asked one at a time, the daemon
// starts no goroutine per event, and the kernel goes on.
func TestForgedInputFlood(t *testing.T) {
	_, k, s := realPythonKernel(t, nil)
	runPy(t, k, s, "setup", findEventFD, nil)
	var asking, most, asked atomic.Int64
	ask := func(ctx context.Context, _ protocol.KernelInputRequestParams) (string, error) {
		n := asking.Add(1)
		defer asking.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		asked.Add(1)
		<-ctx.Done() // a user who does not answer until the code ends
		return "", ctx.Err()
	}
	before := runtime.NumGoroutine()
	var peak atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				if n := int64(runtime.NumGoroutine()); n > peak.Load() {
					peak.Store(n)
				}
			}
		}
	}()
	res := runPy(t, k, s, "flood", `forge({"ev": "input", "id": "flood", "prompt": "x"}, 100000)
print("forged")`, ask)
	close(stop)
	wg.Wait()
	if res.Status != protocol.ExecutionStatusOK {
		t.Fatalf("the flooding execution: %+v", res)
	}
	if most.Load() > 1 {
		t.Errorf("%d input requests waited for the client at once, want at most 1", most.Load())
	}
	if g := peak.Load() - int64(before); g > 200 {
		t.Errorf("goroutines grew by %d during the flood (forged events each took one)", g)
	}
	if res := runPy(t, k, s, "after", "print(6*7)", nil); res.Status != protocol.ExecutionStatusOK || !strings.Contains(textOf(s.of("after")), "42") {
		t.Fatalf("the kernel after the flood: %+v %+v", res, s.of("after"))
	}
}

// TestForgedOutputs: outputs forged for another execution, or between
// executions, are dropped (not sent, not kept for replay), and an output
// over the kernel's output limit is never read whole.
func TestForgedOutputs(t *testing.T) {
	const limit = 1 << 20
	_, k, s := realPythonKernel(t, &protocol.Limits{OutputBytes: limit})
	runPy(t, k, s, "setup", findEventFD+`
go = threading.Event()
def later():
    go.wait()
    forge({"ev": "display", "id": "setup", "data": {"text/plain": "stale"}})
    forge({"ev": "display", "id": "other", "data": {"text/plain": "forged"}})
    forge({"ev": "display", "id": "run2", "data": {"text/plain": "x" * (30 << 20)}})
T = threading.Thread(target=later); T.start()`, nil)
	res := runPy(t, k, s, "run2", `go.set(); T.join(); print("joined")`, nil)
	if res.Status != protocol.ExecutionStatusOK {
		t.Fatalf("run2: %+v", res)
	}
	s.mu.Lock()
	outs := append([]protocol.KernelOutputParams(nil), s.outs...)
	s.mu.Unlock()
	var total int64
	for _, o := range outs {
		if o.Kind == protocol.OutputKindDisplay {
			t.Errorf("a forged display reached the client: execution %s %q", o.ExecutionID, fmt.Sprint(o.Data)[:min(60, len(fmt.Sprint(o.Data)))])
		}
		total += outputSize(&o)
	}
	if total > 2*limit {
		t.Errorf("the client got %d bytes of outputs; the output limit is %d", total, limit)
	}
	if got := textOf(s.of("run2")); !strings.Contains(got, "dropped") || !strings.Contains(got, "joined") {
		t.Errorf("run2's output %q: want the note that an oversized output was dropped, and the print", got)
	}
	k.out.mu.Lock()
	replay := k.out.replayN
	k.out.mu.Unlock()
	if replay > 4*limit {
		t.Errorf("%d bytes kept for replay", replay)
	}
}

// TestForgedReplies: replies nobody asked for, and duplicates of a real
// one, while completions are pending: nothing waits on them, and restart
// and shutdown complete.
func TestForgedReplies(t *testing.T) {
	m, k, s := realPythonKernel(t, nil)
	runPy(t, k, s, "setup", findEventFD+`
stop = threading.Event()
def spam():
    while not stop.is_set():
        for i in range(1, 40):
            forge({"ev": "reply", "id": "r%d" % i, "result": {"matches": ["forged"], "cursorStart": 0, "cursorEnd": 0}}, 2)
S = threading.Thread(target=spam, daemon=True); S.start()`, nil)
	for range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := k.Complete(ctx, "pri", 3)
		cancel()
		if err != nil && !strings.Contains(err.Error(), "deadline") {
			t.Logf("complete: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := k.Execute(ctx, ExecRequest{Params: protocol.KernelExecuteParams{ExecutionID: "stop", Code: "stop.set(); S.join()"}, Sink: s}); err != nil {
		t.Fatalf("the kernel is wedged after forged replies: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- k.Restart(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("restart: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("restart hung after forged replies")
	}
	if res := runPy(t, k, s, "after", "print(1)", nil); res.Status != protocol.ExecutionStatusOK {
		t.Fatalf("after restart: %+v", res)
	}
	go func() { done <- m.Shutdown(context.Background(), k.ID()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("shutdown hung after forged replies")
	}
}

func textOf(outs []protocol.KernelOutputParams) string {
	var b strings.Builder
	for _, o := range outs {
		b.WriteString(o.Text)
	}
	return b.String()
}
