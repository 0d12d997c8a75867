package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// TestKernelMagics: the IPython forms a python kernel understands
// (PROTOCOL.md §8), each run in a real kernel through the daemon: `!cmd`
// (streamed live), `x = !cmd`, `%cd`, `%env`, `%time`, `%%time`,
// `%timeit`, `%%timeit`, `%matplotlib`, `obj?`, `obj??`, `%pip` (its usage;
// installs are §9's tests), unknown magics, and the python they must leave alone.
func TestKernelMagics(t *testing.T) {
	p := startStdio(t)
	c := p.client()
	c.initialize(t)
	kid := startKernel(t, c, protocol.KernelStartParams{Language: "python"}).KernelID

	// ok runs code, which must end ok, and returns its stdout and result.
	ok := func(t *testing.T, code string) (stdout, result string, outs []protocol.KernelOutputParams) {
		t.Helper()
		res, outs := execute(t, c, kid, code)
		wantOK(t, res, outs)
		return streamText(outs, protocol.StreamStdout), resultText(t, outs), outs
	}
	// usageError runs code, which must fail with a UsageError of evalue
	// (IPython's one line, no traceback).
	usageError := func(t *testing.T, code string) string {
		t.Helper()
		res, outs := execute(t, c, kid, code)
		if res.Status != protocol.ExecutionStatusError || res.Error == nil || res.Error.Ename != "UsageError" {
			t.Fatalf("%q: %+v %+v, want a UsageError", code, res, outs)
		}
		if tb := res.Error.Traceback; len(tb) != 1 || tb[0] != "UsageError: "+res.Error.Evalue {
			t.Fatalf("%q: traceback %q", code, tb)
		}
		return res.Error.Evalue
	}
	// displayText is the text/plain of the one display of outs.
	displayText := func(t *testing.T, outs []protocol.KernelOutputParams) string {
		t.Helper()
		ds := ofKind(outs, protocol.OutputKindDisplay)
		if len(ds) != 1 {
			t.Fatalf("%d displays, want 1: %+v", len(ds), outs)
		}
		s, _ := ds[0].Data["text/plain"].(string)
		return s
	}

	t.Run("shell", func(t *testing.T) {
		if out, _, _ := ok(t, "!echo hi"); out != "hi\n" {
			t.Fatalf("!echo hi: stdout %q", out)
		}
		// In order with the cell's prints, stderr on stderr, inside blocks,
		// with IPython's {expression} and $name expansion.
		res, outs := execute(t, c, kid, "print('before')\n!echo middle; echo oops >&2\nprint('after')")
		wantOK(t, res, outs)
		if out, errOut := streamText(outs, protocol.StreamStdout), streamText(outs, protocol.StreamStderr); out != "before\nmiddle\nafter\n" || errOut != "oops\n" {
			t.Fatalf("stdout %q, stderr %q", out, errOut)
		}
		if out, _, _ := ok(t, "name = 'cellbox'\nfor i in range(2):\n    !echo {name.upper()} $name {i}"); out != "CELLBOX cellbox 0\nCELLBOX cellbox 1\n" {
			t.Fatalf("expansion: stdout %q", out)
		}
		if _, r, _ := ok(t, "!exit 3\n_exit_code"); r != "3" {
			t.Fatalf("_exit_code = %q", r)
		}
	})

	t.Run("shell streams live", func(t *testing.T) {
		// The command's first line reaches the client while it still runs;
		// an interrupt stops it and the rest of the cell.
		const execID = "magics-live"
		done := make(chan protocol.ExecuteResult, 1)
		go func() {
			r, _, err := tryRun(t, c, kid, "print('before')\n!echo started; sleep 60; echo never\nprint('after')", withID(execID))
			if err != nil {
				t.Errorf("execute: %v", err)
			}
			done <- r
		}()
		finished := false
		defer func() { // should the test fail first, the execution must not outlive it
			if !finished && c.call(t, protocol.MethodKernelInterrupt, protocol.KernelIDParams{KernelID: kid}, nil) == nil {
				<-done
			}
		}()
		waitOutput(t, c, execID, "before\nstarted\n")
		c.mustCall(t, protocol.MethodKernelInterrupt, protocol.KernelIDParams{KernelID: kid}, nil)
		select {
		case r := <-done:
			finished = true
			if r.Status != protocol.ExecutionStatusInterrupted {
				t.Fatalf("interrupted !sleep: %+v", r)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("an interrupt did not stop !sleep")
		}
		if out := streamText(outputsOf(t, c, execID), protocol.StreamStdout); out != "before\nstarted\n" {
			t.Fatalf("stdout %q", out)
		}
	})

	t.Run("shell assign", func(t *testing.T) {
		if _, r, _ := ok(t, "x = !printf 'a\\nb\\n'\nx"); r != "['a', 'b']" {
			t.Fatalf("x = !printf: %q", r)
		}
		if _, r, _ := ok(t, "x.n, x.s, len(x)"); r != `('a\nb', 'a b', 2)` {
			t.Fatalf("x.n, x.s: %q", r)
		}
		if _, r, _ := ok(t, "!!echo hi; echo there >&2"); r != "['hi', 'there']" {
			t.Fatalf("!!: %q", r)
		}
	})

	t.Run("traceback lines", func(t *testing.T) {
		res, _ := execute(t, c, kid, "x = 1\n!true\n1/0", withSource("/p/nb.py", 10))
		if res.Status != protocol.ExecutionStatusError || res.Error.Ename != "ZeroDivisionError" {
			t.Fatalf("error = %+v", res)
		}
		if tb := strings.Join(res.Error.Traceback, "\n"); !strings.Contains(tb, `"/p/nb.py", line 12`) || !strings.Contains(tb, "    1/0") {
			t.Fatalf("traceback:\n%s", tb)
		}
		res, _ = execute(t, c, kid, "!true\ny = (1 +\n!2)")
		if res.Status != protocol.ExecutionStatusError || res.Error.Ename != "SyntaxError" || !strings.Contains(strings.Join(res.Error.Traceback, "\n"), "line 3") {
			t.Fatalf("a ! inside brackets is python's: %+v", res.Error)
		}
	})

	t.Run("python untouched", func(t *testing.T) {
		out, _, _ := ok(t, "a, b = 1, 2\nprint(a != b, 7 % 2, 'hi?', {'!x': 1}['!x'], '%d%%' % 5)\n"+
			"s = '''\n!echo no\n%nomagic\nwhat?\n'''\nprint(s, end='')\nt = (3\n% 2)\nprint(t)")
		if want := "True 1 hi? 1 5%\n\n!echo no\n%nomagic\nwhat?\n1\n"; out != want {
			t.Fatalf("stdout %q, want %q", out, want)
		}
	})

	t.Run("cd", func(t *testing.T) {
		if out, r, _ := ok(t, "%cd /tmp\nimport os\nos.getcwd()"); out != "/tmp\n" || r != "'/tmp'" {
			t.Fatalf("%%cd /tmp: stdout %q, result %q", out, r)
		}
		if out, _, _ := ok(t, "!pwd"); out != "/tmp\n" {
			t.Fatalf("!pwd after %%cd: %q", out)
		}
		if out, _, _ := ok(t, "%cd -"); out != "/workspace\n" {
			t.Fatalf("%%cd -: %q", out)
		}
		out, _, _ := ok(t, "%cd")
		if _, home, _ := ok(t, "os.environ['HOME']"); "'"+strings.TrimSuffix(out, "\n")+"'" != home || home == "'/workspace'" {
			t.Fatalf("%%cd: stdout %q, HOME %s", out, home)
		}
		ok(t, "%cd -q /workspace")
	})

	t.Run("env", func(t *testing.T) {
		if out, r, _ := ok(t, "%env CELLBOX_MAGIC=bar\nimport os\nos.environ['CELLBOX_MAGIC']"); out != "env: CELLBOX_MAGIC=bar\n" || r != "'bar'" {
			t.Fatalf("%%env N=v: stdout %q, result %q", out, r)
		}
		if out, _, _ := ok(t, "%env CELLBOX_MAGIC baz\n!echo $CELLBOX_MAGIC"); out != "env: CELLBOX_MAGIC=baz\nbaz\n" {
			t.Fatalf("%%env N v: stdout %q", out)
		}
		if _, r, _ := ok(t, "%env CELLBOX_MAGIC"); r != "'baz'" {
			t.Fatalf("%%env N: %q", r)
		}
		if _, r, _ := ok(t, "%env"); !strings.Contains(r, "'CELLBOX_MAGIC': 'baz'") {
			t.Fatalf("%%env: %q", r)
		}
		if e := usageError(t, "%env CELLBOX_NOT_SET"); e != "Environment does not have key: CELLBOX_NOT_SET" {
			t.Fatalf("%%env of a missing name: %q", e)
		}
	})

	times := regexp.MustCompile(`^CPU times: user [\d.]+ [mµn]?s, sys: [\d.]+ [mµn]?s, total: [\d.]+ [mµn]?s\nWall time: [\d.]+ [mµn]?s\n$`)
	t.Run("time", func(t *testing.T) {
		if out, r, _ := ok(t, "%time 1+1"); !times.MatchString(out) || r != "2" {
			t.Fatalf("%%time 1+1: stdout %q, result %q", out, r)
		}
		if out, r, _ := ok(t, "%time y = 5\ny"); !times.MatchString(out) || r != "5" {
			t.Fatalf("%%time y = 5: stdout %q, result %q", out, r)
		}
		if out, r, _ := ok(t, "%%time\nx = 20\n!echo in the cell\nx * 2 + 2"); !strings.HasPrefix(out, "in the cell\n") || !times.MatchString(strings.TrimPrefix(out, "in the cell\n")) || r != "42" {
			t.Fatalf("%%%%time: stdout %q, result %q", out, r)
		}
	})

	t.Run("timeit", func(t *testing.T) {
		perLoop := func(runs, loops string) *regexp.Regexp {
			// IPython's warning comes first when the slowest run took over four times the
			// fastest, which a loaded machine can cause even for pass.
			return regexp.MustCompile(`^(The slowest run took [\d.]+ times longer than the fastest\. This could mean that an intermediate result is being cached\.\n)?[\d.]+ [mµn]?s ± [\d.]+ [mµn]?s per loop \(mean ± std\. dev\. of ` + runs + `, ` + loops + ` each\)\n$`)
		}
		if out, _, _ := ok(t, "%timeit -n 3 -r 2 pass"); !perLoop("2 runs", "3 loops").MatchString(out) {
			t.Fatalf("%%timeit: %q", out)
		}
		if out, _, _ := ok(t, "%%timeit -n 2 -r 1 n = 10\nsum(range(n))"); !perLoop("1 run", "2 loops").MatchString(out) {
			t.Fatalf("%%%%timeit: %q", out)
		}
		if out, r, _ := ok(t, "t = %timeit -o -q -n 4 -r 3 pass\nt.loops, t.repeat, len(t.timings)"); out != "" || r != "(4, 3, 3)" {
			t.Fatalf("%%timeit -o -q: stdout %q, result %q", out, r)
		}
		if e := usageError(t, "%timeit -x 1"); e != "option -x not recognized" {
			t.Fatalf("%%timeit -x: %q", e)
		}
	})

	t.Run("matplotlib", func(t *testing.T) {
		// The code chose another backend; %matplotlib inline brings figures back.
		_, _, outs := ok(t, "import matplotlib\nmatplotlib.use('agg')\n%matplotlib inline\n%matplotlib\nimport matplotlib.pyplot as plt\nplt.plot([1, 3, 2]);")
		ds := ofKind(outs, protocol.OutputKindDisplay)
		if len(ds) != 1 || !strings.HasPrefix(ds[0].Data["image/png"].(string), "iVBOR") {
			t.Fatalf("figure after %%matplotlib inline: %+v", outs)
		}
		if out := streamText(outs, protocol.StreamStdout); out != "" {
			t.Fatalf("%%matplotlib printed %q", out)
		}
	})

	t.Run("config", func(t *testing.T) {
		// What VS Code's Jupyter extension sends when a kernel starts.
		_, r, outs := ok(t, "%config Completer.use_jedi = False\n%config InlineBackend.figure_formats = ['png']\n1+1")
		if r != "2" || streamText(outs, protocol.StreamStderr) != "" {
			t.Fatalf("%%config: result %q, outputs %+v", r, outs)
		}
	})

	t.Run("help", func(t *testing.T) {
		if _, r, outs := ok(t, "len?"); !strings.Contains(displayText(t, outs), "Return the number of items") || r != "" {
			t.Fatalf("len?: %+v", outs)
		}
		ok(t, "def f(a):\n    \"Add one.\"\n    return a + 1")
		if _, _, outs := ok(t, "f??"); !strings.Contains(displayText(t, outs), "def f(a):\n    \"Add one.\"\n    return a + 1") {
			t.Fatalf("f??: %+v", outs)
		}
		if _, _, outs := ok(t, "?f"); !strings.Contains(displayText(t, outs), "Add one.") || strings.Contains(displayText(t, outs), "return a + 1") {
			t.Fatalf("?f: %+v", outs)
		}
		if out, _, _ := ok(t, "nosuch?"); out != "Object `nosuch` not found.\n" {
			t.Fatalf("nosuch?: %q", out)
		}
	})

	t.Run("pip", func(t *testing.T) {
		// %pip runs pip of the workspace's environment (installs: see
		// network_e2e_linux_test.go); without arguments it says how.
		if e := usageError(t, "print('before')\n%pip\nprint('after')"); !strings.Contains(e, "usage: %pip install") {
			t.Fatalf("%%pip: %q", e)
		}
	})

	t.Run("unknown magic", func(t *testing.T) {
		if e := usageError(t, "%nosuch"); e != "Line magic function `%nosuch` not found." {
			t.Fatalf("%%nosuch: %q", e)
		}
		if e := usageError(t, "%%nosuch\n1"); e != "Cell magic `%%nosuch` not found." {
			t.Fatalf("%%%%nosuch: %q", e)
		}
	})

	t.Run("isComplete", func(t *testing.T) {
		for code, want := range map[string]protocol.IsCompleteStatus{
			"!ls": "complete", "%time": "complete", "len?": "complete", "x = !ls": "complete",
			"for f in x:\n    !ls": "incomplete", "%%time\nx = 1": "incomplete", "%%time\nx = 1\n": "complete",
		} {
			var ic protocol.KernelIsCompleteResult
			c.mustCall(t, protocol.MethodKernelIsComplete, protocol.KernelIsCompleteParams{KernelID: kid, Code: code}, &ic)
			if ic.Status != want {
				t.Fatalf("isComplete(%q) = %+v, want %s", code, ic, want)
			}
		}
	})
}
