package main

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	"github.com/cellbox-dev/cellbox/protocol"
)

// TestKernelPython: what a Jupyter user expects of the python kernel:
// results, rich output (pandas, matplotlib, _repr_*_), display updates,
// source-mapped tracebacks without driver frames, fd 1 from C, completion,
// inspect, isComplete, variables, the memory limit.
func TestKernelPython(t *testing.T) {
	p := startStdio(t)
	c := p.client()
	c.initialize(t)
	kid := startKernel(t, c, protocol.KernelStartParams{Language: "python", Limits: &protocol.Limits{MemoryBytes: 1 << 30}}).KernelID

	// The last expression is the result; None and a trailing ; show nothing.
	res, outs := execute(t, c, kid, "x = 40\nx + 2")
	wantOK(t, res, outs)
	if got := resultText(t, outs); got != "42" {
		t.Fatalf("result = %q", got)
	}
	for _, code := range []string{"None", "x;", "print('p')"} {
		_, outs = execute(t, c, kid, code)
		if len(ofKind(outs, protocol.OutputKindResult)) != 0 {
			t.Fatalf("%q gave a result: %+v", code, outs)
		}
	}
	if _, outs = execute(t, c, kid, "'ünïcödé ✓'"); resultText(t, outs) != "'ünïcödé ✓'" {
		t.Fatalf("unicode result = %q", resultText(t, outs))
	}
	// Top-level await.
	if _, outs = execute(t, c, kid, "import asyncio\nawait asyncio.sleep(0.01)\n7"); resultText(t, outs) != "7" {
		t.Fatalf("top-level await: %+v", outs)
	}

	// fd 1 from C (os.write goes straight to the descriptor), in order with print.
	res, outs = execute(t, c, kid, "import os\nprint('before', flush=True)\nos.write(1, b'from C\\n')\nprint('after')")
	wantOK(t, res, outs)
	if got := streamText(outs, protocol.StreamStdout); got != "before\nfrom C\nafter\n" {
		t.Fatalf("stdout = %q", got)
	}

	// Rich reprs and display updates.
	res, outs = execute(t, c, kid, `class Card:
    def _repr_html_(self): return '<b>card</b>'
    def _repr_markdown_(self): return '**card**'
h = display(Card(), display_id='d1')
print('between')
update_display('<i>new</i>', display_id='d1')
Card()`)
	wantOK(t, res, outs)
	ds := ofKind(outs, protocol.OutputKindDisplay)
	if len(ds) != 2 || ds[0].Data["text/html"] != "<b>card</b>" || ds[0].Data["text/markdown"] != "**card**" || ds[0].DisplayID != "d1" || ds[0].Update {
		t.Fatalf("display = %+v", ds)
	}
	if !ds[1].Update || ds[1].DisplayID != "d1" {
		t.Fatalf("display update = %+v", ds[1])
	}
	if r := ofKind(outs, protocol.OutputKindResult); len(r) != 1 || r[0].Data["text/html"] != "<b>card</b>" {
		t.Fatalf("rich result = %+v", r)
	}
	if outs[0].Kind != protocol.OutputKindDisplay || outs[1].Kind != protocol.OutputKindStream || outs[2].Kind != protocol.OutputKindDisplay {
		t.Fatalf("order of display, print, update: %+v", outs)
	}

	// pandas as text/html, a matplotlib figure as image/png (CI installs both).
	res, outs = execute(t, c, kid, "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})")
	wantOK(t, res, outs)
	if r := ofKind(outs, protocol.OutputKindResult); len(r) != 1 || !strings.Contains(r[0].Data["text/html"].(string), "<table") {
		t.Fatalf("DataFrame result = %+v", r)
	}
	res, outs = execute(t, c, kid, "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('t')")
	wantOK(t, res, outs)
	var png []byte
	for _, o := range ofKind(outs, protocol.OutputKindDisplay) {
		if s, ok := o.Data["image/png"].(string); ok {
			png, _ = base64.StdEncoding.DecodeString(s)
		}
	}
	if len(png) < 1000 || string(png[1:4]) != "PNG" {
		t.Fatalf("no figure as image/png: %+v", outs)
	}

	// Errors: the traceback points at the editor's file and line, with no
	// driver frames.
	res, outs = execute(t, c, kid, "y = 1\nundefined_name", withSource("/home/me/project/analysis.py", 40))
	if res.Status != protocol.ExecutionStatusError || res.Error.Ename != "NameError" {
		t.Fatalf("error = %+v", res)
	}
	tb := strings.Join(res.Error.Traceback, "\n")
	if !strings.Contains(tb, "/home/me/project/analysis.py") || !strings.Contains(tb, "line 41") || strings.Contains(tb, "driver") {
		t.Fatalf("traceback = %s", tb)
	}
	if e := ofKind(outs, protocol.OutputKindError); len(e) != 1 || e[0].Error == nil || e[0].Error.Ename != "NameError" {
		t.Fatalf("error output = %+v", outs)
	}
	res, _ = execute(t, c, kid, "def f(:\n  pass", withSource("/p/x.py", 10))
	if res.Status != protocol.ExecutionStatusError || res.Error.Ename != "SyntaxError" || !strings.Contains(strings.Join(res.Error.Traceback, "\n"), "line 10") {
		t.Fatalf("syntax error = %+v", res.Error)
	}

	// Completion, inspect, isComplete, variables.
	var comp protocol.KernelCompleteResult
	c.mustCall(t, protocol.MethodKernelComplete, protocol.KernelCompleteParams{KernelID: kid, Code: "import os\nos.pa", CursorPos: 15}, &comp)
	if !slices.Contains(comp.Matches, "path") && !slices.Contains(comp.Matches, "os.path") || comp.CursorEnd != 15 {
		t.Fatalf("complete = %+v", comp)
	}
	var insp protocol.KernelInspectResult
	c.mustCall(t, protocol.MethodKernelInspect, protocol.KernelInspectParams{KernelID: kid, Code: "len", CursorPos: 3}, &insp)
	if !insp.Found || !strings.Contains(insp.Data["text/plain"].(string), "len(") {
		t.Fatalf("inspect = %+v", insp)
	}
	for code, want := range map[string]protocol.IsCompleteStatus{"x = 1": "complete", "for i in x:": "incomplete", "x = = 1": "invalid"} {
		var ic protocol.KernelIsCompleteResult
		c.mustCall(t, protocol.MethodKernelIsComplete, protocol.KernelIsCompleteParams{KernelID: kid, Code: code}, &ic)
		if ic.Status != want {
			t.Fatalf("isComplete(%q) = %+v, want %s", code, ic, want)
		}
	}
	var vars protocol.KernelVariablesResult
	c.mustCall(t, protocol.MethodKernelVariables, protocol.KernelIDParams{KernelID: kid}, &vars)
	var found bool
	for _, v := range vars.Variables {
		if v.Name == "x" && v.Type == "int" && v.Summary == "40" {
			found = true
		}
		if v.Name == "display" || v.Name == "os" {
			t.Fatalf("variables list %q", v.Name)
		}
	}
	if !found {
		t.Fatalf("variables = %+v", vars)
	}

	// The memory limit: an allocation over it fails in the code, and the
	// kernel lives on.
	res, _ = execute(t, c, kid, "big = bytearray(2 << 30)")
	if res.Status != protocol.ExecutionStatusError || res.Error.Ename != "MemoryError" {
		t.Fatalf("allocation over memoryBytes: %+v", res)
	}
	if _, outs = execute(t, c, kid, "x"); resultText(t, outs) != "40" {
		t.Fatalf("kernel after MemoryError: %+v", outs)
	}
}
