package jupyterbridge

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The bridge's tests run it in the test process, outside a sandbox, with a
// real kernel (Debian's python3-ipykernel; CI installs it), and read what
// it writes as the manager does: events with the stream bytes before each.

// ipykernel is the kernelspec of Debian's ipykernel, or a skip.
func ipykernel(t *testing.T) Config {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import ipykernel_launcher").Run(); err != nil {
		t.Skipf("ipykernel is not installed (apt-get install python3-ipykernel): %v", err)
	}
	return Config{Name: "python3", Argv: []string{"/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"}}
}

// item is what the manager would deliver: stream text or an event.
type item struct {
	stream string // "stdout" or "stderr" for text
	text   string
	ev     map[string]any
}

// harness runs a bridge with pipes in place of the manager's.
type harness struct {
	t          *testing.T
	reqW       *os.File
	interrupts chan os.Signal
	exit       chan int

	mu     sync.Mutex
	items  []item
	out    syncBuf
	errb   syncBuf
	pid    int
	change chan struct{}
}

type syncBuf struct {
	mu sync.Mutex
	b  []byte
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = append(s.b, p...)
	return len(p), nil
}

func (s *syncBuf) bytes(from, to int64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	to = min(to, int64(len(s.b)))
	if from >= to {
		return ""
	}
	return string(s.b[from:to])
}

func startHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	reqR, reqW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	evR, evW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, reqW: reqW, interrupts: make(chan os.Signal, 4), exit: make(chan int, 1), change: make(chan struct{}, 1)}
	w := &wire{ev: evW, out: &h.out, err: &h.errb}
	environ := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + t.TempDir(), "LANG=C.UTF-8", "TMPDIR=/tmp"}
	go func() {
		code := run(context.Background(), cfg, env{environ: environ, dir: t.TempDir(), tmp: "/tmp"}, reqR, w, h.interrupts)
		evW.Close()
		h.exit <- code
	}()
	go h.read(evR)
	t.Cleanup(func() {
		reqW.Close()
		select {
		case <-h.exit:
		case <-time.After(10 * time.Second):
			t.Errorf("the bridge did not end when its request pipe closed")
		}
	})
	ready := h.wait(func(it item) bool { return it.ev != nil && it.ev["ev"] == "ready" }, 60*time.Second)
	h.pid = int(ready.ev["pid"].(float64))
	return h
}

// read takes events as the manager does: the stream bytes up to an
// event's counts come before it.
func (h *harness) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var outAt, errAt int64
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			h.t.Errorf("bad event %q: %v", sc.Bytes(), err)
			continue
		}
		h.mu.Lock()
		for _, s := range []struct {
			name string
			buf  *syncBuf
			at   *int64
			key  string
		}{{"stdout", &h.out, &outAt, "stdoutBytes"}, {"stderr", &h.errb, &errAt, "stderrBytes"}} {
			n := int64(ev[s.key].(float64))
			if text := s.buf.bytes(*s.at, n); text != "" {
				h.items = append(h.items, item{stream: s.name, text: text})
			}
			*s.at = max(*s.at, n)
		}
		h.items = append(h.items, item{ev: ev})
		h.mu.Unlock()
		select {
		case h.change <- struct{}{}:
		default:
		}
	}
}

func (h *harness) send(req map[string]any) {
	h.t.Helper()
	b, _ := json.Marshal(req)
	if _, err := h.reqW.Write(append(b, '\n')); err != nil {
		h.t.Fatal(err)
	}
}

// wait waits for an item that ok accepts and returns it.
func (h *harness) wait(ok func(item) bool, d time.Duration) item {
	h.t.Helper()
	deadline := time.Now().Add(d)
	seen := 0
	for {
		h.mu.Lock()
		items := append([]item(nil), h.items[seen:]...)
		h.mu.Unlock()
		for _, it := range items {
			seen++
			if ok(it) {
				return it
			}
		}
		select {
		case <-h.change:
		case code := <-h.exit:
			h.exit <- code
			h.t.Fatalf("the bridge exited with %d; stderr %q; items %+v", code, h.errb.bytes(0, 1<<30), h.all())
		case <-time.After(time.Until(deadline)):
			h.t.Fatalf("no such item within %v; items %+v; stderr %q", d, h.all(), h.errb.bytes(0, 1<<20))
		}
	}
}

// waitStdout waits until the bridge has written text to its stdout.
func (h *harness) waitStdout(text string, d time.Duration) {
	h.t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(d)
	for !strings.Contains(h.out.bytes(0, 1<<40), text) {
		select {
		case <-tick.C:
		case <-deadline:
			h.t.Fatalf("stdout never held %q: %q", text, h.out.bytes(0, 1<<40))
		}
	}
}

func (h *harness) all() []item {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]item(nil), h.items...)
}

var execN int

// begin sends an execute request and returns its id and where its items
// begin.
func (h *harness) begin(code string, extra map[string]any) (string, int) {
	h.t.Helper()
	execN++
	id := fmt.Sprintf("x%d", execN)
	req := map[string]any{"op": "execute", "id": id, "code": code, "storeHistory": true}
	for k, v := range extra {
		req[k] = v
	}
	h.mu.Lock()
	from := len(h.items)
	h.mu.Unlock()
	h.send(req)
	return id, from
}

// finish waits for the done of id and returns the execution's items from
// from on, its done last.
func (h *harness) finish(id string, from int) []item {
	h.t.Helper()
	h.wait(func(it item) bool { return it.ev != nil && it.ev["ev"] == "done" && it.ev["id"] == id }, 60*time.Second)
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []item
	for _, it := range h.items[from:] {
		if it.ev != nil && it.ev["id"] != id {
			continue
		}
		out = append(out, it)
	}
	return out
}

// execute runs code and returns the items of the execution, its done last.
func (h *harness) execute(code string, extra map[string]any) []item {
	h.t.Helper()
	return h.finish(h.begin(code, extra))
}

// reply sends a request and waits for its reply.
func (h *harness) reply(req map[string]any) map[string]any {
	h.t.Helper()
	h.send(req)
	return h.wait(func(it item) bool { return it.ev != nil && it.ev["ev"] == "reply" && it.ev["id"] == req["id"] }, 30*time.Second).ev
}

func doneOf(items []item) map[string]any { return items[len(items)-1].ev }

func eventsOf(items []item, ev string) []map[string]any {
	var out []map[string]any
	for _, it := range items {
		if it.ev != nil && it.ev["ev"] == ev {
			out = append(out, it.ev)
		}
	}
	return out
}

func streamOf(items []item, name string) string {
	var b strings.Builder
	for _, it := range items {
		if it.stream == name {
			b.WriteString(it.text)
		}
	}
	return b.String()
}

// TestBridgeIPython drives ipykernel through the bridge: results, streams
// in order with displays, one error output, display updates, clear, input
// from the request's stdin and from the manager, complete, inspect,
// isComplete, variables refused, an interrupt, and the kernel's death.
func TestBridgeIPython(t *testing.T) {
	h := startHarness(t, ipykernel(t))

	items := h.execute("print('a')\n1+1", nil)
	if d := doneOf(items); d["status"] != "ok" {
		t.Fatalf("done = %+v", d)
	}
	if items[0].stream != "stdout" || items[0].text != "a\n" {
		t.Fatalf("first item = %+v", items)
	}
	if r := eventsOf(items, "result"); len(r) != 1 || r[0]["data"].(map[string]any)["text/plain"] != "2" {
		t.Fatalf("result = %+v", items)
	}

	// Streams and displays keep their order.
	items = h.execute("from IPython.display import display, update_display, clear_output\nprint('one', flush=True)\ndisplay({'text/plain': 'D'}, raw=True, display_id='d1')\nprint('two', flush=True)\nupdate_display({'text/plain': 'E'}, raw=True, display_id='d1')\nclear_output(wait=True)", nil)
	var kinds []string
	for _, it := range items {
		switch {
		case it.stream != "":
			kinds = append(kinds, it.stream+":"+it.text)
		default:
			kinds = append(kinds, it.ev["ev"].(string))
		}
	}
	if strings.Join(kinds, ",") != "stdout:one\n,display,stdout:two\n,display,clear,done" {
		t.Fatalf("order = %q", kinds)
	}
	ds := eventsOf(items, "display")
	if ds[0]["displayId"] != "d1" || ds[0]["update"] == true || ds[1]["update"] != true || ds[1]["displayId"] != "d1" {
		t.Fatalf("displays = %+v", ds)
	}
	if c := eventsOf(items, "clear"); c[0]["wait"] != true {
		t.Fatalf("clear = %+v", c)
	}

	// An error: one error output, plain text, status error.
	items = h.execute("1/0", nil)
	d := doneOf(items)
	errs := eventsOf(items, "error")
	if d["status"] != "error" || len(errs) != 1 || errs[0]["ename"] != "ZeroDivisionError" {
		t.Fatalf("error: done %+v, errors %+v", d, errs)
	}
	for _, line := range errs[0]["traceback"].([]any) {
		if strings.ContainsRune(line.(string), 0x1b) || strings.Contains(line.(string), "\n") {
			t.Fatalf("traceback line %q", line)
		}
	}
	if e := d["error"].(map[string]any); e["ename"] != "ZeroDivisionError" {
		t.Fatalf("done error = %+v", e)
	}

	// Input: the request's stdin first, then the manager.
	id, from := h.begin("a = input('first? ')\nb = input('second? ')\nprint(a + '|' + b)", map[string]any{"stdin": "fed\n", "allowStdin": true})
	ask := h.wait(func(it item) bool { return it.ev != nil && it.ev["ev"] == "input" && it.ev["id"] == id }, 30*time.Second).ev
	if ask["prompt"] != "second? " {
		t.Fatalf("input event = %+v", ask)
	}
	h.send(map[string]any{"op": "input", "id": id, "value": "typed"})
	items = h.finish(id, from)
	if d := doneOf(items); d["status"] != "ok" || !strings.HasSuffix(streamOf(items, "stdout"), "fed|typed\n") {
		t.Fatalf("input: %+v", items)
	}
	// Without allowStdin nor stdin, input() fails at once (as in Jupyter).
	items = h.execute("input()", nil)
	if d := doneOf(items); d["status"] != "error" || d["error"].(map[string]any)["ename"] != "StdinNotImplementedError" {
		t.Fatalf("input without stdin: %+v", items)
	}

	// Completion, inspection, isComplete, variables.
	rep := h.reply(map[string]any{"op": "complete", "id": "c1", "code": "import os\nos.pa", "cursorPos": 15})
	res, _ := rep["result"].(map[string]any)
	if res == nil || res["cursorEnd"] != float64(15) || !slices.Contains(anyStrings(res["matches"]), "path") && !slices.Contains(anyStrings(res["matches"]), "os.path") {
		t.Fatalf("complete = %+v", rep)
	}
	rep = h.reply(map[string]any{"op": "inspect", "id": "i1", "code": "len", "cursorPos": 3})
	res, _ = rep["result"].(map[string]any)
	if res == nil || res["found"] != true || !strings.Contains(res["data"].(map[string]any)["text/plain"].(string), "Signature: len(obj, /)") {
		t.Fatalf("inspect = %+v", rep)
	}
	rep = h.reply(map[string]any{"op": "inspect", "id": "i2", "code": "no_such_name_here", "cursorPos": 5})
	if res, _ = rep["result"].(map[string]any); res == nil || res["found"] != false {
		t.Fatalf("inspect of nothing = %+v", rep)
	}
	for code, want := range map[string]string{"x = 1": "complete", "for i in x:": "incomplete", "x = = 1": "invalid"} {
		rep = h.reply(map[string]any{"op": "isComplete", "id": "ic-" + code, "code": code})
		if res, _ = rep["result"].(map[string]any); res == nil || res["status"] != want {
			t.Fatalf("isComplete(%q) = %+v", code, rep)
		}
	}
	if rep = h.reply(map[string]any{"op": "variables", "id": "v1"}); rep["error"] == nil {
		t.Fatalf("variables = %+v", rep)
	}

	// An interrupt: the manager's SIGINT to the bridge's process group
	// (which the kernel, in a group of its own, does not get) reaches the
	// kernel through the bridge.
	if pg, err := syscall.Getpgid(h.pid); err != nil || pg != h.pid {
		t.Fatalf("the kernel's process group is %d (%v), want its own", pg, err)
	}
	id, from = h.begin("import time\nprint('sleeping', flush=True)\ntime.sleep(60)", nil)
	h.waitStdout("sleeping", 30*time.Second)
	start := time.Now()
	h.interrupts <- syscall.SIGINT
	items = h.finish(id, from)
	if d := doneOf(items); d["status"] != "interrupted" || len(eventsOf(items, "error")) != 1 || time.Since(start) > 30*time.Second {
		t.Fatalf("interrupt: %+v", items)
	}
	if items = h.execute("'still here'", nil); doneOf(items)["status"] != "ok" {
		t.Fatalf("after the interrupt: %+v", items)
	}
	// A SIGINT right after the request, which the bridge may take before
	// it has read the request and the kernel would ignore before it runs
	// the code, still interrupts it.
	for range 5 {
		id, from = h.begin("import time\ntime.sleep(60)", nil)
		h.interrupts <- syscall.SIGINT
		if d := doneOf(h.finish(id, from)); d["status"] != "interrupted" {
			t.Fatalf("an early interrupt: %+v", d)
		}
	}

	// The kernel dies: the bridge says so on stderr and exits with its code.
	h.send(map[string]any{"op": "execute", "id": "die", "code": "import os\nos._exit(3)"})
	select {
	case code := <-h.exit:
		h.exit <- code
		if code != 3 || !strings.Contains(h.errb.bytes(0, 1<<20), "exited with code 3") {
			t.Fatalf("exit %d, stderr %q", code, h.errb.bytes(0, 1<<20))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the bridge did not exit when its kernel died")
	}
	if err := syscall.Kill(h.pid, 0); err == nil {
		t.Fatalf("the kernel (pid %d) is still there", h.pid)
	}
}

func anyStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// irkernel is the kernelspec of Debian's IRkernel, or a skip.
func irkernel(t *testing.T) Config {
	t.Helper()
	if err := exec.Command("R", "--slave", "-e", "library(IRkernel)").Run(); err != nil {
		t.Skipf("IRkernel is not installed (apt-get install r-cran-irkernel): %v", err)
	}
	return Config{Name: "ir", Argv: []string{"R", "--slave", "-e", "IRkernel::main()", "--args", "{connection_file}"}}
}

// TestBridgeIRkernel drives IRkernel, which sends a value as display_data
// and ends an interrupted execution with status "abort".
func TestBridgeIRkernel(t *testing.T) {
	h := startHarness(t, irkernel(t))
	items := h.execute("cat('hi\\n')\n1+1", nil)
	if d := doneOf(items); d["status"] != "ok" || streamOf(items, "stdout") != "hi\n" {
		t.Fatalf("1+1: %+v", items)
	}
	if ds := eventsOf(items, "display"); len(ds) != 1 || ds[0]["data"].(map[string]any)["text/plain"] != "[1] 2" {
		t.Fatalf("1+1 display: %+v", items)
	}
	items = h.execute("stop('boom')", nil)
	if d := doneOf(items); d["status"] != "error" || len(eventsOf(items, "error")) != 1 || !strings.Contains(eventsOf(items, "error")[0]["evalue"].(string), "boom") {
		t.Fatalf("stop: %+v", items)
	}
	id, from := h.begin("cat('sleeping\\n'); Sys.sleep(60)", nil)
	h.waitStdout("sleeping", 30*time.Second)
	start := time.Now()
	h.interrupts <- syscall.SIGINT
	items = h.finish(id, from)
	if d := doneOf(items); d["status"] != "interrupted" || len(eventsOf(items, "error")) != 1 || time.Since(start) > 30*time.Second {
		t.Fatalf("interrupt: %+v", items)
	}
	if items = h.execute("x <- 5; x", nil); doneOf(items)["status"] != "ok" {
		t.Fatalf("after the interrupt: %+v", items)
	}
}

// TestBridgeOversizedOutput: an output over the size limit of a message
// closes the iopub connection; the bridge says so, subscribes anew, and the
// kernel goes on.
func TestBridgeOversizedOutput(t *testing.T) {
	h := startHarness(t, ipykernel(t))
	items := h.execute("import sys\nsys.stdout.write('x' * (70 << 20))\nsys.stdout.flush()", nil)
	if d := doneOf(items); d["status"] != "ok" {
		t.Fatalf("done = %+v", d)
	}
	if !strings.Contains(h.errb.bytes(0, 1<<20), "it was dropped") {
		t.Fatalf("stderr %q", h.errb.bytes(0, 1<<20))
	}
	for i := 0; ; i++ {
		items = h.execute("print('after')\n6*7", nil)
		if streamOf(items, "stdout") == "after\n" && len(eventsOf(items, "result")) == 1 {
			break
		}
		// The new subscription may miss what the kernel published before
		// it was in place.
		if i == 20 {
			t.Fatalf("after the oversized output: %+v", items)
		}
	}
}

// TestBridgeInterruptMessage: a kernel whose interrupt_mode is "message"
// is interrupted by an interrupt_request.
func TestBridgeInterruptMessage(t *testing.T) {
	cfg := ipykernel(t)
	cfg.InterruptMode = "message"
	h := startHarness(t, cfg)
	id, from := h.begin("import time\nprint('sleeping', flush=True)\ntime.sleep(60)", nil)
	h.waitStdout("sleeping", 30*time.Second)
	h.interrupts <- syscall.SIGINT
	items := h.finish(id, from)
	if d := doneOf(items); d["status"] != "interrupted" {
		t.Fatalf("interrupt by message: %+v", items)
	}
	// An interrupt that comes before the kernel began the execution is
	// held until it says busy.
	id, from = h.begin("import time\ntime.sleep(60)", nil)
	h.interrupts <- syscall.SIGINT
	if d := doneOf(h.finish(id, from)); d["status"] != "interrupted" {
		t.Fatalf("an early interrupt: %+v", d)
	}
}

// TestBridgePendingTimeout: a request the kernel does not answer in time
// (it is busy: ipykernel takes shell requests one at a time) gets an error
// reply and gives its place up, so that later requests are not refused as
// too many.
func TestBridgePendingTimeout(t *testing.T) {
	cfg := ipykernel(t)
	old := pendingTimeout
	pendingTimeout = 500 * time.Millisecond
	t.Cleanup(func() { pendingTimeout = old })
	h := startHarness(t, cfg)
	id, from := h.begin("import time\nprint('sleeping', flush=True)\ntime.sleep(60)", nil)
	h.waitStdout("sleeping", 30*time.Second)
	for round := range 2 {
		for i := range maxPending {
			h.send(map[string]any{"op": "complete", "id": fmt.Sprintf("c%d-%d", round, i), "code": "import os\nos.pa", "cursorPos": 15})
		}
		for i := range maxPending {
			id := fmt.Sprintf("c%d-%d", round, i)
			rep := h.wait(func(it item) bool { return it.ev != nil && it.ev["ev"] == "reply" && it.ev["id"] == id }, 30*time.Second).ev
			if e, _ := rep["error"].(string); e != "the kernel did not answer within 500ms" {
				t.Fatalf("complete %s while the kernel is busy = %+v", id, rep)
			}
		}
	}
	h.interrupts <- syscall.SIGINT
	if d := doneOf(h.finish(id, from)); d["status"] != "interrupted" {
		t.Fatalf("done = %+v", d)
	}
	// The late replies are dropped; the kernel answers in time again, once
	// it has answered the stale requests (one at a time: slow on a loaded
	// machine, hence a deadline, not a count).
	deadline := time.Now().Add(2 * time.Minute)
	for i := 0; ; i++ {
		rep := h.reply(map[string]any{"op": "isComplete", "id": fmt.Sprintf("i%d", i), "code": "x = 1"})
		if rep["error"] == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("isComplete after the timeouts = %+v", rep)
		}
	}
	for _, it := range h.all() {
		if it.ev != nil && it.ev["ev"] == "reply" && strings.HasPrefix(it.ev["id"].(string), "c") && it.ev["error"] == nil {
			t.Fatalf("a reply after the timeout was forwarded: %+v", it.ev)
		}
	}
}
