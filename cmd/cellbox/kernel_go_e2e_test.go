package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// TestKernelGo: the go language, playground style. Declarations (import,
// func, type, var, const) persist across cells and can be declared again;
// a cell's statements run as main; a last expression is the result;
// compile errors and panics name the cells' lines (and the editor's file
// with source); a busy loop is interrupted; a package of the workspace's
// module imports; restart forgets the declarations.
func TestKernelGo(t *testing.T) {
	p := startStdio(t)
	c := p.client()
	init := c.initialize(t)
	var goLang *protocol.LanguageCapability
	for i, l := range init.Capabilities.Languages {
		if l.ID == "go" {
			goLang = &init.Capabilities.Languages[i]
		}
	}
	if goLang == nil || !goLang.Available || !slices.Contains(goLang.FileExtensions, ".go") {
		t.Fatalf("languages: go = %+v", goLang)
	}
	kid := startKernel(t, c, protocol.KernelStartParams{Language: "go"}).KernelID

	// The first cell waits for the packages every program needs: compiled
	// on the host into the user's shared build cache by the first go
	// kernel (tens of seconds on a loaded machine), found there later.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var first protocol.ExecuteResult
	if _, err := c.conn.Call(ctx, protocol.MethodKernelExecute, protocol.KernelExecuteParams{KernelID: kid, Code: "1", ExecutionID: "go-first"}, &first); err != nil {
		t.Fatalf("first cell: %v", err)
	}
	if outs := outputsOf(t, c, "go-first"); first.Status != protocol.ExecutionStatusOK || resultText(t, outs) != "1" {
		t.Fatalf("first cell: %+v %+v", first, outs)
	}

	// The user's shared build cache, filled on the host, is in the
	// sandbox, read-only.
	if cache, err := os.UserCacheDir(); err == nil {
		shared := filepath.Join(cache, "cellbox", "go-build")
		res, outs := execute(t, c, kid, fmt.Sprintf("import \"fmt\"\nimport \"os\"\n_, err := os.Stat(%q)\nwerr := os.WriteFile(%q, nil, 0o644)\nfmt.Println(err == nil, werr != nil)", filepath.Join(shared, "cellbox-ready"), filepath.Join(shared, "x")))
		wantOK(t, res, outs)
		if got := streamText(outs, protocol.StreamStdout); got != "true true\n" {
			t.Fatalf("the shared build cache (ready, read-only) = %q", got)
		}
	}

	for _, step := range []struct{ code, stdout, result string }{
		{"import \"fmt\"\nfmt.Println(\"hi\", 1+1)", "hi 2\n", ""},
		{"type P struct{ N string }\nfunc (p P) Hi() string { return \"hi \" + p.N }\nvar a = 1\nconst K = \"k\"", "", ""},
		{"import \"strings\"\nfunc up(s string) string { return strings.ToUpper(s) }", "", ""},
		{"fmt.Println(P{\"you\"}.Hi(), a, K, up(\"x\"))", "hi you 1 k X\n", ""},
		{"var a = 2", "", ""}, // a name declared again replaces the one before
		{"a * 10", "", "20"},
		{"x := []int{1, 2}\nx", "", "[1 2]"},
		{"P{\"me\"}.Hi()", "", `"hi me"`},
		{"up(\"ünï ✓\")", "", `"ÜNÏ ✓"`},
		{"func f() (int, error) { return 3, nil }\nf()", "", "3 <nil>"},
		{"func g() {}\ng()", "", ""},                                   // no value: nothing shown
		{"import \"os\"\nn := 0", "", ""},                              // unused import and variable
		{"strconv.Itoa(6*7) + strings.Repeat(\"!\", 2)", "", `"42!!"`}, // standard packages imported as used
		{"var sort = 1\nsort + 1", "", "2"},                            // unless the name is the code's own
	} {
		res, outs := execute(t, c, kid, step.code)
		wantOK(t, res, outs)
		if got := streamText(outs, protocol.StreamStdout); got != step.stdout {
			t.Fatalf("%q: stdout %q, want %q", step.code, got, step.stdout)
		}
		if got := resultText(t, outs); got != step.result {
			t.Fatalf("%q: result %q, want %q", step.code, got, step.result)
		}
	}

	// A compile error names the line of the editor's file; the cell's
	// declarations are not kept.
	res, outs := execute(t, c, kid, "func broken() int { return 1 }\nfmt.Println(nope)", withSource("/home/me/main.go", 10))
	if res.Status != protocol.ExecutionStatusError || res.Error.Ename != "CompileError" || !strings.Contains(res.Error.Evalue, "undefined: nope") {
		t.Fatalf("compile error = %+v", res.Error)
	}
	if tb := strings.Join(res.Error.Traceback, "\n"); !strings.Contains(tb, "/home/me/main.go:11:13") || strings.Contains(tb, "cellbox") {
		t.Fatalf("compile error traceback = %s", tb)
	}
	if len(ofKind(outs, protocol.OutputKindError)) != 1 {
		t.Fatalf("error outputs = %+v", outs)
	}
	if res, _ = execute(t, c, kid, "broken()"); res.Status != protocol.ExecutionStatusError || !strings.Contains(res.Error.Evalue, "undefined: broken") {
		t.Fatalf("a declaration of a failed cell was kept: %+v", res)
	}

	// A runtime panic: the stack's frames are the cells' lines.
	res, _ = execute(t, c, kid, "func at(s []int, i int) int {\n\treturn s[i]\n}")
	if res.Status != protocol.ExecutionStatusOK {
		t.Fatalf("func at: %+v", res)
	}
	atCell := res.ExecutionCount
	res, _ = execute(t, c, kid, "fmt.Println(\"before\")\nat(nil, 5)")
	if res.Status != protocol.ExecutionStatusError || res.Error.Ename != "runtime error" || !strings.Contains(res.Error.Evalue, "index out of range [5]") {
		t.Fatalf("panic = %+v", res.Error)
	}
	tb := strings.Join(res.Error.Traceback, "\n")
	if !strings.Contains(tb, "<cell-"+strconv.Itoa(atCell)+">:2 in main.at") || !strings.Contains(tb, "<cell-"+strconv.Itoa(res.ExecutionCount)+">:2 in main.main") || strings.Contains(tb, "runtime/") {
		t.Fatalf("panic traceback = %s", tb)
	}

	// Interrupt: a busy loop stops; the kernel goes on.
	done := make(chan protocol.ExecuteResult, 1)
	go func() {
		res, _, _ := tryRun(t, c, kid, "fmt.Println(\"looping\")\nfor {\n}", withID("go-int"))
		done <- res
	}()
	waitOutput(t, c, "go-int", "looping\n")
	c.mustCall(t, protocol.MethodKernelInterrupt, protocol.KernelIDParams{KernelID: kid}, nil)
	select {
	case res := <-done:
		if res.Status != protocol.ExecutionStatusInterrupted {
			t.Fatalf("interrupted loop = %+v", res)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("interrupt did not stop the loop")
	}
	if _, outs = execute(t, c, kid, "a"); resultText(t, outs) != "2" {
		t.Fatalf("after the interrupt: %+v", outs)
	}

	// A package of the workspace's module.
	res, outs = execute(t, c, kid, `os.MkdirAll("/workspace/greet", 0o755)
os.WriteFile("/workspace/go.mod", []byte("module example.com/proj\n\ngo 1.22\n"), 0o644)
os.WriteFile("/workspace/greet/greet.go", []byte("package greet\n\n// Hello greets.\nfunc Hello(n string) string { return \"hello \" + n }\n"), 0o644)`)
	wantOK(t, res, outs)
	res, outs = execute(t, c, kid, "import \"example.com/proj/greet\"\ngreet.Hello(\"go\")")
	wantOK(t, res, outs)
	if got := resultText(t, outs); got != `"hello go"` {
		t.Fatalf("import from the workspace's module: %q %+v", got, outs)
	}

	var comp protocol.KernelCompleteResult
	c.mustCall(t, protocol.MethodKernelComplete, protocol.KernelCompleteParams{KernelID: kid, Code: "strings.ToU", CursorPos: 11}, &comp)
	if !slices.Contains(comp.Matches, "ToUpper") || comp.CursorStart != 8 {
		t.Fatalf("complete strings.ToU = %+v", comp)
	}
	c.mustCall(t, protocol.MethodKernelComplete, protocol.KernelCompleteParams{KernelID: kid, Code: "x := u", CursorPos: 6}, &comp)
	if !slices.Contains(comp.Matches, "up") {
		t.Fatalf("complete u = %+v", comp)
	}
	c.mustCall(t, protocol.MethodKernelComplete, protocol.KernelCompleteParams{KernelID: kid, Code: "greet.H", CursorPos: 7}, &comp)
	if !slices.Contains(comp.Matches, "Hello") {
		t.Fatalf("complete greet.H = %+v", comp)
	}
	var insp protocol.KernelInspectResult
	c.mustCall(t, protocol.MethodKernelInspect, protocol.KernelInspectParams{KernelID: kid, Code: "strings.ToUpper", CursorPos: 10}, &insp)
	if !insp.Found || !strings.Contains(insp.Data["text/plain"].(string), "func ToUpper(s string) string") {
		t.Fatalf("inspect strings.ToUpper = %+v", insp)
	}
	c.mustCall(t, protocol.MethodKernelInspect, protocol.KernelInspectParams{KernelID: kid, Code: "up", CursorPos: 1}, &insp)
	if !insp.Found || !strings.Contains(insp.Data["text/plain"].(string), "func up(s string) string") {
		t.Fatalf("inspect up = %+v", insp)
	}
	var ic protocol.KernelIsCompleteResult
	c.mustCall(t, protocol.MethodKernelIsComplete, protocol.KernelIsCompleteParams{KernelID: kid, Code: "func f() {"}, &ic)
	if ic.Status != protocol.IsCompleteStatusIncomplete {
		t.Fatalf("isComplete of an open func = %+v", ic)
	}
	var vars protocol.KernelVariablesResult
	c.mustCall(t, protocol.MethodKernelVariables, protocol.KernelIDParams{KernelID: kid}, &vars)
	if i := slices.IndexFunc(vars.Variables, func(v protocol.Variable) bool { return v.Name == "a" }); i < 0 || vars.Variables[i].Type != "int" || vars.Variables[i].Summary != "2" {
		t.Fatalf("variables = %+v", vars.Variables)
	}

	// Restart: the declarations are gone.
	c.mustCall(t, protocol.MethodKernelRestart, protocol.KernelIDParams{KernelID: kid}, nil)
	if res, _ = execute(t, c, kid, "a"); res.Status != protocol.ExecutionStatusError || !strings.Contains(res.Error.Evalue, "undefined: a") {
		t.Fatalf("after restart: %+v", res)
	}
	res, outs = execute(t, c, kid, "import \"fmt\"\nfmt.Print(\"again\")")
	wantOK(t, res, outs)
	if streamText(outs, protocol.StreamStdout) != "again" {
		t.Fatalf("after restart: %+v", outs)
	}
}
