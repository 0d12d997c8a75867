package main

import (
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Ruby and R take TestKernelEveryLanguage's steps too (output, state,
// errors, stdin both ways, interrupts, restart, exit).
func init() {
	allLanguages = append(allLanguages, "ruby", "r")
	snippets["r"] = langCode{
		print: "cat('héllo 🌍\\n')", slowLoop: "while (TRUE) {}", sleep: "Sys.sleep(60)",
		setVar: "marker <- 'kept'", getVar: "cat(marker, '\\n', sep = '')", fail: "stop('no')", exit3: "quit(status = 3)",
		readLine: "n <- readline('name? ')\ncat('got', n, '\\n')", started: "cat('started\\n')",
	}
	snippets["ruby"] = langCode{
		print: "puts 'héllo 🌍'", slowLoop: "loop {}", sleep: "sleep 60",
		setVar: "marker = 'kept'", getVar: "puts marker", fail: "1 / 0", exit3: "exit 3",
		readLine: "print 'name? '\nputs \"got #{gets}\"", started: "puts 'started'\n$stdout.flush",
	}
}

// TestKernelRuby: locals, methods and classes persist; results as inspect
// (and to_html); errors with a source-mapped backtrace without driver
// frames; stdin through gets, $stdin.gets and STDIN.read; completion,
// inspect, isComplete, variables.
func TestKernelRuby(t *testing.T) {
	p := startStdio(t)
	c := p.client()
	c.initialize(t)
	kid := startKernel(t, c, protocol.KernelStartParams{Language: "ruby"}).KernelID

	for _, step := range []struct{ code, want string }{
		{"x = 40\ndef twice(n) = n * 2\nclass Card\n  def to_html = '<b>card</b>'\nend\nx + 2", "42"},
		{"twice(x)", "80"},
		{"'ünï ✓'", `"ünï ✓"`},
		{"{a: [1, nil]}", "{:a=>[1, nil]}"},
		{"nil", ""},
		{"x;", ""},
		{"puts 'p'", ""},
	} {
		res, outs := execute(t, c, kid, step.code)
		wantOK(t, res, outs)
		if got := resultText(t, outs); got != step.want {
			t.Fatalf("%q: result %q, want %q", step.code, got, step.want)
		}
	}
	res, outs := execute(t, c, kid, "Card.new")
	wantOK(t, res, outs)
	if r := ofKind(outs, protocol.OutputKindResult); len(r) != 1 || r[0].Data["text/html"] != "<b>card</b>" || !strings.HasPrefix(r[0].Data["text/plain"].(string), "#<Card") {
		t.Fatalf("rich result = %+v", r)
	}

	// stdout and stderr, in order with the result.
	res, outs = execute(t, c, kid, "puts 'out'\n$stderr.puts 'err'\np 1\n:sym")
	wantOK(t, res, outs)
	if streamText(outs, protocol.StreamStdout) != "out\n1\n" || streamText(outs, protocol.StreamStderr) != "err\n" || outs[len(outs)-1].Kind != protocol.OutputKindResult {
		t.Fatalf("streams = %+v", outs)
	}

	// Errors: the backtrace points at the editor's file and line, through
	// a method of an earlier cell, with no driver frames.
	res, outs = execute(t, c, kid, "def boom = raise(ArgumentError, 'bad')", withSource("/home/me/lib.rb", 5))
	wantOK(t, res, outs)
	res, outs = execute(t, c, kid, "y = 1\nboom", withSource("/home/me/app.rb", 40))
	if res.Status != protocol.ExecutionStatusError || res.Error.Ename != "ArgumentError" || res.Error.Evalue != "bad" {
		t.Fatalf("error = %+v", res)
	}
	tb := strings.Join(res.Error.Traceback, "\n")
	if !strings.Contains(tb, "/home/me/lib.rb:5:in `boom'") || !strings.Contains(tb, "/home/me/app.rb:41") || strings.Contains(tb, "-e:") || strings.Contains(tb, "CellboxDriver") {
		t.Fatalf("traceback = %s", tb)
	}
	if e := ofKind(outs, protocol.OutputKindError); len(e) != 1 || e[0].Error == nil || e[0].Error.Ename != "ArgumentError" {
		t.Fatalf("error output = %+v", outs)
	}
	res, _ = execute(t, c, kid, "a = 1\n  a + )", withSource("/p/x.rb", 10))
	if res.Status != protocol.ExecutionStatusError || res.Error.Ename != "SyntaxError" || !strings.Contains(strings.Join(res.Error.Traceback, "\n"), "/p/x.rb:11") {
		t.Fatalf("syntax error = %+v", res.Error)
	}

	// stdin: gets, $stdin.gets, STDIN.read from the request's string.
	res, outs = execute(t, c, kid, "[gets, $stdin.gets(chomp: true), STDIN.read]", withStdin("one\ntwo\nthree\nfour\n", false))
	wantOK(t, res, outs)
	if got := resultText(t, outs); got != `["one\n", "two", "three\nfour\n"]` {
		t.Fatalf("stdin = %q", got)
	}
	if _, outs = execute(t, c, kid, "gets"); len(ofKind(outs, protocol.OutputKindResult)) != 0 {
		t.Fatalf("gets without stdin is not nil: %+v", outs)
	}

	var comp protocol.KernelCompleteResult
	c.mustCall(t, protocol.MethodKernelComplete, protocol.KernelCompleteParams{KernelID: kid, Code: "x.ti", CursorPos: 4}, &comp)
	if !slices.Contains(comp.Matches, "times") || comp.CursorStart != 2 || comp.CursorEnd != 4 {
		t.Fatalf("complete x.ti = %+v", comp)
	}
	c.mustCall(t, protocol.MethodKernelComplete, protocol.KernelCompleteParams{KernelID: kid, Code: "twi", CursorPos: 3}, &comp)
	if !slices.Contains(comp.Matches, "twice") || comp.CursorStart != 0 {
		t.Fatalf("complete twi = %+v", comp)
	}
	c.mustCall(t, protocol.MethodKernelComplete, protocol.KernelCompleteParams{KernelID: kid, Code: "Car", CursorPos: 3}, &comp)
	if !slices.Contains(comp.Matches, "Card") {
		t.Fatalf("complete Car = %+v", comp)
	}
	var insp protocol.KernelInspectResult
	c.mustCall(t, protocol.MethodKernelInspect, protocol.KernelInspectParams{KernelID: kid, Code: "twice(", CursorPos: 6, DetailLevel: 1}, &insp)
	if text, _ := insp.Data["text/plain"].(string); !insp.Found || !strings.Contains(text, "twice(n)") || !strings.Contains(text, "def twice(n) = n * 2") {
		t.Fatalf("inspect twice = %+v", insp)
	}
	c.mustCall(t, protocol.MethodKernelInspect, protocol.KernelInspectParams{KernelID: kid, Code: "x", CursorPos: 1}, &insp)
	if text, _ := insp.Data["text/plain"].(string); !insp.Found || !strings.Contains(text, "Integer") || !strings.Contains(text, "40") {
		t.Fatalf("inspect x = %+v", insp)
	}
	for code, want := range map[string]protocol.IsCompleteStatus{
		"x = 1": "complete", "def f(a)": "incomplete", "[1,": "incomplete", "s = 'open": "incomplete",
		"x = = 1": "invalid", "end": "invalid",
	} {
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
		if v.Name == "x" && v.Type == "Integer" && v.Summary == "40" {
			found = true
		}
		if v.Name == "_" || strings.Contains(v.Name, "Cellbox") {
			t.Fatalf("variables list %q", v.Name)
		}
	}
	if !found {
		t.Fatalf("variables = %+v", vars)
	}
}

// TestKernelR: values through repr (a data.frame as text/html), a plot as
// image/png, messages and warnings on stderr, errors with a traceback of
// the cells' lines mapped through source, stdin through readline and
// readLines("stdin"), completion, inspect, isComplete, variables.
func TestKernelR(t *testing.T) {
	p := startStdio(t)
	c := p.client()
	c.initialize(t)
	kid := startKernel(t, c, protocol.KernelStartParams{Language: "r"}).KernelID

	for _, step := range []struct{ code, want string }{
		{"x <- 40\ntwice <- function(n) n * 2\nx + 2", "[1] 42"},
		{"twice(x)", "[1] 80"},
		{"'ünï ✓'", `[1] "ünï ✓"`},
		{"invisible(1)", ""},
		{"x;", ""},
		{"cat('p\\n')", ""},
	} {
		res, outs := execute(t, c, kid, step.code)
		wantOK(t, res, outs)
		if got := resultText(t, outs); got != step.want {
			t.Fatalf("%q: result %q, want %q", step.code, got, step.want)
		}
	}

	res, outs := execute(t, c, kid, "data.frame(a = 1:2, b = c('x', 'y'))")
	wantOK(t, res, outs)
	if r := ofKind(outs, protocol.OutputKindResult); len(r) != 1 || !strings.Contains(r[0].Data["text/html"].(string), "<table") || !strings.Contains(r[0].Data["text/plain"].(string), "a b") {
		t.Fatalf("data.frame result = %+v", r)
	}
	res, outs = execute(t, c, kid, "plot(1:10)\ncat('after\\n')")
	wantOK(t, res, outs)
	var png []byte
	for _, o := range ofKind(outs, protocol.OutputKindDisplay) {
		if s, ok := o.Data["image/png"].(string); ok {
			png, _ = base64.StdEncoding.DecodeString(s)
		}
	}
	if len(png) < 1000 || string(png[1:4]) != "PNG" {
		t.Fatalf("no plot as image/png: %+v", outs)
	}

	// Output, messages and warnings in order; values before the last are displays.
	res, outs = execute(t, c, kid, "cat('out\\n')\nmessage('note')\n1\nwarning('careful')\n2")
	wantOK(t, res, outs)
	if streamText(outs, protocol.StreamStdout) != "out\n" || !strings.Contains(streamText(outs, protocol.StreamStderr), "note\n") ||
		!strings.Contains(streamText(outs, protocol.StreamStderr), "careful") || resultText(t, outs) != "[1] 2" {
		t.Fatalf("streams = %+v", outs)
	}
	if ds := ofKind(outs, protocol.OutputKindDisplay); len(ds) != 1 || ds[0].Data["text/plain"] != "[1] 1" {
		t.Fatalf("displays = %+v", ds)
	}

	// Errors: the traceback names the editor's file and line, then the
	// line of a function of an earlier cell.
	res, outs = execute(t, c, kid, "boom <- function() {\n  stop('bad')\n}", withSource("/home/me/lib.R", 5))
	wantOK(t, res, outs)
	res, outs = execute(t, c, kid, "y <- 1\nboom()", withSource("/home/me/app.R", 40))
	if res.Status != protocol.ExecutionStatusError || res.Error.Evalue != "bad" {
		t.Fatalf("error = %+v", res)
	}
	tb := strings.Join(res.Error.Traceback, "\n")
	if !strings.Contains(tb, "/home/me/app.R:41: boom()") || !strings.Contains(tb, "/home/me/lib.R:6: stop(") || strings.Contains(tb, "evaluate") {
		t.Fatalf("traceback = %s", tb)
	}
	if e := ofKind(outs, protocol.OutputKindError); len(e) != 1 {
		t.Fatalf("error output = %+v", outs)
	}
	res, _ = execute(t, c, kid, "a <- 1\n  a + )", withSource("/p/x.R", 10))
	if res.Status != protocol.ExecutionStatusError || !strings.Contains(strings.Join(res.Error.Traceback, "\n"), "/p/x.R:11:") {
		t.Fatalf("syntax error = %+v", res.Error)
	}

	res, outs = execute(t, c, kid, "c(readline(), readLines('stdin', n = 1), readLines(file('stdin')))", withStdin("one\ntwo\nthree\nfour\n", false))
	wantOK(t, res, outs)
	if got := resultText(t, outs); got != `[1] "one"   "two"   "three" "four" ` {
		t.Fatalf("stdin = %q", got)
	}

	var comp protocol.KernelCompleteResult
	c.mustCall(t, protocol.MethodKernelComplete, protocol.KernelCompleteParams{KernelID: kid, Code: "y <- twi", CursorPos: 8}, &comp)
	if !slices.Contains(comp.Matches, "twice") || comp.CursorStart != 5 || comp.CursorEnd != 8 {
		t.Fatalf("complete twi = %+v", comp)
	}
	var insp protocol.KernelInspectResult
	c.mustCall(t, protocol.MethodKernelInspect, protocol.KernelInspectParams{KernelID: kid, Code: "twice(", CursorPos: 6}, &insp)
	if text, _ := insp.Data["text/plain"].(string); !insp.Found || !strings.Contains(text, "twice(n)") {
		t.Fatalf("inspect twice = %+v", insp)
	}
	c.mustCall(t, protocol.MethodKernelInspect, protocol.KernelInspectParams{KernelID: kid, Code: "paste", CursorPos: 5}, &insp)
	if text, _ := insp.Data["text/plain"].(string); !insp.Found || !strings.Contains(text, "Concatenate") {
		t.Fatalf("inspect paste = %+v", insp)
	}
	for code, want := range map[string]protocol.IsCompleteStatus{
		"x <- 1": "complete", "f <- function() {": "incomplete", "c(1,": "incomplete", "s <- 'open": "incomplete",
		"x <- <- 1": "invalid", "1 + )": "invalid",
	} {
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
		if v.Name == "x" && v.Type == "numeric" && v.Summary == "num 40" {
			found = true
		}
	}
	if !found {
		t.Fatalf("variables = %+v", vars)
	}
}

// TestKernelROutput: R's output goes straight to the pipes: 100,000 lines
// arrive whole and in order (in a few large chunks), output shows while the cell still runs,
// printing in a loop, messages and warnings keep their streams, output
// written before an error comes before it, and a plot changed by a later
// expression replaces its display.
func TestKernelROutput(t *testing.T) {
	p := startStdio(t)
	c := p.client()
	c.initialize(t)
	var ws protocol.WorkspaceInfo
	c.mustCall(t, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: t.TempDir()}, &ws)
	kid := startKernel(t, c, protocol.KernelStartParams{Language: "r", WorkspaceID: ws.WorkspaceID}).KernelID

	res, outs := execute(t, c, kid, "cat(paste0(0:99999, '\\n'), sep = '')")
	wantOK(t, res, outs)
	var want strings.Builder
	for i := range 100000 {
		want.WriteString(strconv.Itoa(i) + "\n")
	}
	if got := streamText(outs, protocol.StreamStdout); got != want.String() || res.OutputTruncated {
		t.Fatalf("flood: %d bytes (want %d), truncated %v", len(got), want.Len(), res.OutputTruncated)
	}
	// R writes each line through at once; the manager gathers them.
	if n := len(ofKind(outs, protocol.OutputKindStream)); n > 1000 {
		t.Fatalf("flood: %d stream outputs for 100,000 lines", n)
	}

	// Live: the cell prints, then waits for a file that another kernel of
	// the workspace makes once the print has arrived.
	sh := startKernel(t, c, protocol.KernelStartParams{Language: "bash", WorkspaceID: ws.WorkspaceID}).KernelID
	done := make(chan protocol.ExecuteResult, 1)
	go func() {
		res, _, err := tryRun(t, c, kid, "cat('first\\n')\nwhile (!file.exists('go-on')) Sys.sleep(0.01)\ncat('second\\n')", withID("r-live"))
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	waitOutput(t, c, "r-live", "first\n")
	if strings.Contains(streamText(kernelOutputs(t, c, "r-live"), protocol.StreamStdout), "second") {
		t.Fatal("second printed before the file was made")
	}
	res, outs = execute(t, c, sh, "touch go-on")
	wantOK(t, res, outs)
	if res = <-done; res.Status != protocol.ExecutionStatusOK {
		t.Fatalf("live cell: %+v", res)
	}
	// The same within one top-level expression.
	go func() {
		res, _, err := tryRun(t, c, kid, "local({\n  cat('one\\n')\n  while (!file.exists('go-on-2')) Sys.sleep(0.01)\n  cat('two\\n')\n})", withID("r-live-2"))
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	waitOutput(t, c, "r-live-2", "one\n")
	res, outs = execute(t, c, sh, "touch go-on-2")
	wantOK(t, res, outs)
	if res = <-done; res.Status != protocol.ExecutionStatusOK || streamText(kernelOutputs(t, c, "r-live-2"), protocol.StreamStdout) != "one\ntwo\n" {
		t.Fatalf("live expression: %+v %+v", res, kernelOutputs(t, c, "r-live-2"))
	}

	res, outs = execute(t, c, kid, "for (i in 1:3) print(i)\n'last'")
	wantOK(t, res, outs)
	if got := streamText(outs, protocol.StreamStdout); got != "[1] 1\n[1] 2\n[1] 3\n" || resultText(t, outs) != `[1] "last"` || outs[len(outs)-1].Kind != protocol.OutputKindResult {
		t.Fatalf("print in a loop: %+v", outs)
	}

	// Messages and warnings on stderr, the warning deferred to the end of
	// its top-level expression as Rscript prints it; with warn = 1 at once.
	res, outs = execute(t, c, kid, "f <- function() { cat('a\\n'); message('m'); warning('w'); cat('b\\n') }\nf()\ncat('c\\n')")
	wantOK(t, res, outs)
	if streamText(outs, protocol.StreamStdout) != "a\nb\nc\n" || streamText(outs, protocol.StreamStderr) != "m\nWarning message:\nIn f() : w\n" {
		t.Fatalf("message and warning: %+v", outs)
	}
	res, outs = execute(t, c, kid, "options(warn = 1)\nf()\nwarning('top')\noptions(warn = 0)\nfor (i in 1:2) warning(i)")
	wantOK(t, res, outs)
	if got := streamText(outs, protocol.StreamStderr); got != "m\nWarning in f() : w\nWarning: top\nWarning messages:\n1: 1\n2: 2\n" {
		t.Fatalf("warnings: %q", got)
	}

	// Output before an error comes before it, and the error ends the cell.
	res, outs = execute(t, c, kid, "cat('partial')\nstop('broke')\ncat('never')")
	if res.Status != protocol.ExecutionStatusError || res.Error.Evalue != "broke" || len(outs) != 2 ||
		outs[0].Text != "partial" || outs[1].Kind != protocol.OutputKindError || outs[1].Error.Traceback[0] != "Error: broke" {
		t.Fatalf("output then error: %+v %+v", res, outs)
	}

	// A plot, then a line on it: the display is updated. A new page is a
	// new display, also within one expression.
	res, outs = execute(t, c, kid, "plot(1:10)\nabline(h = 5)\nfor (i in 1:2) plot(i)")
	wantOK(t, res, outs)
	ds := ofKind(outs, protocol.OutputKindDisplay)
	if len(ds) != 4 || ds[0].DisplayID == "" || ds[1].DisplayID != ds[0].DisplayID || ds[0].Update || !ds[1].Update ||
		ds[2].DisplayID == ds[0].DisplayID || ds[3].DisplayID == ds[2].DisplayID || ds[2].Update || ds[3].Update {
		t.Fatalf("plot displays: %d, want 4 (the second an update of the first)", len(ds))
	}
	for _, d := range ds {
		if png, _ := base64.StdEncoding.DecodeString(d.Data["image/png"].(string)); len(png) < 1000 || string(png[1:4]) != "PNG" {
			t.Fatalf("not a png: %+v", d)
		}
	}
}
