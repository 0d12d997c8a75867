package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// TestKernelJavaScript: declarations persist and can be declared again
// (cells are re-run), top-level await, results, errors with a source-mapped
// stack, require from the workspace's node_modules, display, completion.
func TestKernelJavaScript(t *testing.T) {
	p := startStdio(t)
	c := p.client()
	c.initialize(t)
	kid := startKernel(t, c, protocol.KernelStartParams{Language: "javascript"}).KernelID

	for _, step := range []struct{ code, want string }{
		{"let a = 1\nconst o = { k: 'v' }\nclass P { hi() { return 'hi ' + a } }", ""},
		{"let a = 2", ""}, // a cell run again declares again
		{"new P().hi()", "'hi 2'"},
		{"o", "{ k: 'v' }"},
		{"await new Promise(r => setTimeout(() => r(5), 10))", "5"},
		{"'ünï ✓'", "'ünï ✓'"},
		{"undefined", ""},
	} {
		res, outs := execute(t, c, kid, step.code)
		wantOK(t, res, outs)
		if got := resultText(t, outs); got != step.want {
			t.Fatalf("%q: result %q, want %q", step.code, got, step.want)
		}
	}

	res, outs := execute(t, c, kid, "let q = 1;\nnull.x", withSource("/home/me/app.js", 10))
	if res.Status != protocol.ExecutionStatusError || res.Error.Ename != "TypeError" {
		t.Fatalf("error = %+v", res.Error)
	}
	tb := strings.Join(res.Error.Traceback, "\n")
	if !strings.Contains(tb, "/home/me/app.js:11") || strings.Contains(tb, "driver") {
		t.Fatalf("stack = %s", tb)
	}
	if len(ofKind(outs, protocol.OutputKindError)) != 1 {
		t.Fatalf("error outputs = %+v", outs)
	}

	// A package of the workspace's node_modules.
	res, outs = execute(t, c, kid, `const fs = require('fs')
fs.mkdirSync('node_modules/greet', { recursive: true })
fs.writeFileSync('node_modules/greet/index.js', "module.exports = n => 'hi ' + n")`)
	wantOK(t, res, outs)
	if _, outs = execute(t, c, kid, "require('greet')('you')"); resultText(t, outs) != "'hi you'" {
		t.Fatalf("require from node_modules: %+v", outs)
	}

	res, outs = execute(t, c, kid, "display({'text/html': '<b>b</b>'}, {displayId: 'd'})\ndisplay({'text/html': '<i>i</i>'}, {displayId: 'd', update: true})")
	wantOK(t, res, outs)
	if ds := ofKind(outs, protocol.OutputKindDisplay); len(ds) != 2 || ds[0].Data["text/html"] != "<b>b</b>" || !ds[1].Update || ds[1].DisplayID != "d" {
		t.Fatalf("displays = %+v", ds)
	}

	// A rejection nobody awaits does not take the kernel down.
	// It is reported, as the cell's error or, once the cell is done, on
	// stderr; then the kernel runs on.
	if res, _ = execute(t, c, kid, "Promise.reject(new Error('later')); 1"); res.Status != protocol.ExecutionStatusError {
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			var text strings.Builder
			for _, o := range kernelOutputs(t, c, "") {
				text.WriteString(o.Text)
			}
			if strings.Contains(text.String(), "Uncaught (in promise)") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the unhandled rejection was not reported: %+v", res)
			}
		}
	}
	if _, outs = execute(t, c, kid, "a"); resultText(t, outs) != "2" {
		t.Fatalf("after an unhandled rejection: %+v", outs)
	}

	var comp protocol.KernelCompleteResult
	c.mustCall(t, protocol.MethodKernelComplete, protocol.KernelCompleteParams{KernelID: kid, Code: "Math.fl", CursorPos: 7}, &comp)
	if !slices.Contains(comp.Matches, "floor") && !slices.Contains(comp.Matches, "Math.floor") {
		t.Fatalf("complete Math.fl = %+v", comp)
	}
	c.mustCall(t, protocol.MethodKernelComplete, protocol.KernelCompleteParams{KernelID: kid, Code: "o.", CursorPos: 2}, &comp)
	if !slices.Contains(comp.Matches, "k") && !slices.Contains(comp.Matches, "o.k") {
		t.Fatalf("complete o. = %+v", comp)
	}
	var ic protocol.KernelIsCompleteResult
	c.mustCall(t, protocol.MethodKernelIsComplete, protocol.KernelIsCompleteParams{KernelID: kid, Code: "function f() {"}, &ic)
	if ic.Status != protocol.IsCompleteStatusIncomplete {
		t.Fatalf("isComplete of an open function = %+v", ic)
	}
}

// TestKernelBash: the shell's state persists, the last command's status
// decides ok or error, and an interrupt stops the running command and the
// rest of the cell, not the shell.
func TestKernelBash(t *testing.T) {
	p := startStdio(t)
	c := p.client()
	c.initialize(t)
	kid := startKernel(t, c, protocol.KernelStartParams{Language: "bash"}).KernelID

	for _, step := range []struct{ code, want string }{
		{"cd /tmp && mkdir -p d && cd d", ""},
		{"pwd", "/tmp/d\n"},
		{"greet() { echo \"hi $1\"; }\nexport V=exported\ndeclare -A m=([k]=v)", ""},
		{"greet you; bash -c 'echo $V'; echo ${m[k]}", "hi you\nexported\nv\n"},
		{"echo 'ünï ✓'", "ünï ✓\n"},
	} {
		res, outs := execute(t, c, kid, step.code)
		wantOK(t, res, outs)
		if got := streamText(outs, protocol.StreamStdout); got != step.want {
			t.Fatalf("%q: stdout %q, want %q", step.code, got, step.want)
		}
	}
	res, outs := execute(t, c, kid, "ls /nonexistent")
	if res.Status != protocol.ExecutionStatusError || !strings.Contains(streamText(outs, protocol.StreamStderr), "No such file") {
		t.Fatalf("failing command: %+v %+v", res, outs)
	}
	if res, _ = execute(t, c, kid, "false; true"); res.Status != protocol.ExecutionStatusOK {
		t.Fatalf("the last command decides: %+v", res)
	}

	// Interrupt: the sleep and the rest of the cell stop; the shell stays.
	done := make(chan []protocol.KernelOutputParams, 1)
	go func() {
		_, outs, _ := tryRun(t, c, kid, "echo started; sleep 30; echo after", withID("bash-int"))
		done <- outs
	}()
	waitOutput(t, c, "bash-int", "started\n")
	c.mustCall(t, protocol.MethodKernelInterrupt, protocol.KernelIDParams{KernelID: kid}, nil)
	select {
	case outs := <-done:
		if strings.Contains(streamText(outs, protocol.StreamStdout), "after") {
			t.Fatalf("the rest of the cell ran after an interrupt: %+v", outs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("interrupt did not stop sleep")
	}
	if _, outs = execute(t, c, kid, "pwd; greet again"); streamText(outs, protocol.StreamStdout) != "/tmp/d\nhi again\n" {
		t.Fatalf("shell after the interrupt: %+v", outs)
	}

	var comp protocol.KernelCompleteResult
	c.mustCall(t, protocol.MethodKernelComplete, protocol.KernelCompleteParams{KernelID: kid, Code: "gree", CursorPos: 4}, &comp)
	if !slices.Contains(comp.Matches, "greet") {
		t.Fatalf("complete gree = %+v", comp)
	}
	for code, want := range map[string]protocol.IsCompleteStatus{"echo hi": "complete", "if true; then": "incomplete", "echo 'open": "incomplete"} {
		var ic protocol.KernelIsCompleteResult
		c.mustCall(t, protocol.MethodKernelIsComplete, protocol.KernelIsCompleteParams{KernelID: kid, Code: code}, &ic)
		if ic.Status != want {
			t.Fatalf("isComplete(%q) = %+v, want %s", code, ic, want)
		}
	}
	var vars protocol.KernelVariablesResult
	c.mustCall(t, protocol.MethodKernelVariables, protocol.KernelIDParams{KernelID: kid}, &vars)
	names := []string{}
	for _, v := range vars.Variables {
		names = append(names, v.Name)
	}
	if !slices.Contains(names, "V") || !slices.Contains(names, "m") || slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "__cb") || n == "BASH_VERSION" }) {
		t.Fatalf("variables = %v", names)
	}
}

// TestKernelKilledByMemoryLimit: a kernel that dies of its memory limit is
// dead with the reason "killed: memory limit", and restarts.
func TestKernelKilledByMemoryLimit(t *testing.T) {
	p := startStdio(t)
	c := p.client()
	c.initialize(t)
	kid := startKernel(t, c, protocol.KernelStartParams{Language: "javascript", Limits: &protocol.Limits{MemoryBytes: 2 << 30}}).KernelID
	_, _, err := tryRun(t, c, kid, "const hog = []; while (true) hog.push(new Array(1e6).fill(1.5))")
	msg := wantCode(t, err, protocol.CodeKernelDead)
	if !strings.Contains(msg, "killed: memory limit") {
		t.Fatalf("KernelDead message = %q", msg)
	}
	if st := waitStatus(t, c, kid, protocol.KernelStateDead, 0); st.Reason != "killed: memory limit" {
		t.Fatalf("dead reason = %q", st.Reason)
	}
	c.mustCall(t, protocol.MethodKernelRestart, protocol.KernelIDParams{KernelID: kid}, nil)
	if _, outs := execute(t, c, kid, "1 + 1"); resultText(t, outs) != "2" {
		t.Fatalf("after restart: %+v", outs)
	}
}
