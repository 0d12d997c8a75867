package godriver

import (
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestSplitUnits(t *testing.T) {
	code := "import \"fmt\"\n\nx := 1; y := 2\nfunc f() {\n\tfmt.Println(x)\n}\nfunc() { f() }()\nfunc (p *P) M() int { return 1 }\nx"
	var got []string
	for _, u := range splitUnits(code) {
		got = append(got, u.text)
	}
	want := []string{`import "fmt"`, "x := 1;", "y := 2", "func f() {\n\tfmt.Println(x)\n}", "func() { f() }()", "func (p *P) M() int { return 1 }", "x"}
	if !slices.Equal(got, want) {
		t.Fatalf("units = %q\nwant %q", got, want)
	}
	decl := []bool{true, false, false, true, false, true, false}
	for i, u := range splitUnits(code) {
		if isDecl(u) != decl[i] {
			t.Errorf("isDecl(%q) = %v", u.text, !decl[i])
		}
	}
	if u := splitUnits(code)[3]; u.line != 4 || u.col != 1 {
		t.Errorf("func f at %d:%d, want 4:1", u.line, u.col)
	}
}

func TestParseCell(t *testing.T) {
	p, errs := parseCell("import (\n\t\"fmt\"\n\tstr \"strings\"\n)\nvar (\n\ta = 1\n\tb, c = \"x\", 2.5\n)\nconst (\n\tK = iota\n\tL\n)\ntype T struct{}\nfunc (T) M() {}\nn := 3\nfmt.Println(str.ToUpper(\"a\"), n)\na + n", "<cell-1>", 1)
	if errs != nil {
		t.Fatal(errs)
	}
	var keys [][]string
	for _, d := range p.decls {
		keys = append(keys, d.keys)
	}
	want := [][]string{{"import:fmt"}, {"import:str"}, {"a"}, {"b", "c"}, {"K", "L"}, {"T"}, {"T.M"}}
	if len(keys) != len(want) {
		t.Fatalf("keys = %q, want %q", keys, want)
	}
	for i := range want {
		if !slices.Equal(keys[i], want[i]) {
			t.Fatalf("keys = %q, want %q", keys, want)
		}
	}
	if len(p.stmts) != 3 || !p.show || p.showCall {
		t.Fatalf("stmts = %+v show=%v call=%v", p.stmts, p.show, p.showCall)
	}
	if d := p.decls[3]; d.prefix != "var" || d.line != 7 || d.col != 2 || d.varType != "" || d.varInit != `"x", 2.5` {
		t.Fatalf("b, c = %+v", d)
	}
	if got := inferType(p.decls[3].varInit, 1, 2); got != "float64" {
		t.Fatalf("type of c = %q", got)
	}

	// A syntax error names the cell's line.
	_, errs = parseCell("x := 1\nfunc f( {", "/src/a.go", 10)
	if len(errs) == 0 || !strings.HasPrefix(errs[0], "/src/a.go:11:") {
		t.Fatalf("errors = %q", errs)
	}
	// fmt.Println's value is not shown; a method call's may be.
	for code, show := range map[string]bool{"fmt.Println(1)": false, "s.Len()": true, "x": true, "x := 1": false, "panic(1)": false} {
		p, errs := parseCell(code, "c", 1)
		if errs != nil || p.show != show {
			t.Errorf("%q: show = %v (%v), want %v", code, p != nil && p.show, errs, show)
		}
	}
}

// TestProgram: a name declared again replaces the one before; the
// program's imports are only those it uses; positions are the cells'.
func TestProgram(t *testing.T) {
	pr := &program{}
	for i, code := range []string{
		"import \"fmt\"\nimport \"os\"\nfunc f() int { return 1 }\nvar v = 2",
		"func f() string { return \"s\" }\ntype T int",
	} {
		p, errs := parseCell(code, "c", 1)
		if errs != nil {
			t.Fatalf("cell %d: %v", i, errs)
		}
		pr = pr.merged(p)
	}
	p, errs := parseCell("fmt.Println(f(), v)\nx := T(1)\nx", "<cell-3>", 1)
	if errs != nil {
		t.Fatal(errs)
	}
	src := pr.source(p, "<cell-3>", genOptions{show: true})
	if strings.Count(src, "func f()") != 1 || !strings.Contains(src, `return "s"`) {
		t.Fatalf("f was not replaced:\n%s", src)
	}
	if strings.Contains(src, `"os"`) || !strings.Contains(src, `"fmt"`) {
		t.Fatalf("imports:\n%s", src)
	}
	if !strings.Contains(src, "_ = x") || !strings.Contains(src, "cellbox_show(/*line <cell-3>:3:1*/x") {
		t.Fatalf("main:\n%s", src)
	}
	fset := token.NewFileSet()
	if _, err := parser.ParseFile(fset, "main.go", src, 0); err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
}

func TestIsComplete(t *testing.T) {
	for code, want := range map[string]string{
		"x := 1":               "complete",
		"func f() {":           "incomplete",
		"s := `raw":            "incomplete",
		"/* open":              "incomplete",
		"}":                    "invalid",
		"fmt.Println(\"a\")\n": "complete",
	} {
		if got := isComplete(code)["status"]; got != want {
			t.Errorf("isComplete(%q) = %v, want %s", code, got, want)
		}
	}
}

func TestPanicFailure(t *testing.T) {
	stack := "goroutine 1 [running]:\nruntime/debug.Stack()\n\t/usr/local/go/src/runtime/debug/stack.go:26 +0x5e\nmain.cellbox_recover()\n\t/tmp/cellbox-go/kernel-1/cellbox.go:40 +0x1\npanic({0x1, 0x2})\n\t/usr/local/go/src/runtime/panic.go:783 +0x132\nmain.f(...)\n\t<cell-2>:3\nmain.main()\n\t<cell-4>:2 +0x5b\n"
	f := panicFailure(`"runtime error" "index out of range [5] with length 0" ` + strconvQuote(stack))
	if f == nil || f.ename != "runtime error" {
		t.Fatalf("failure = %+v", f)
	}
	want := []string{"panic: index out of range [5] with length 0", "<cell-2>:3 in main.f", "<cell-4>:2 in main.main"}
	if !slices.Equal(f.traceback, want) {
		t.Fatalf("traceback = %q, want %q", f.traceback, want)
	}
	for _, bad := range []string{"", `"a"`, `"a" "b"`, `x y z`} {
		if panicFailure(bad) != nil {
			t.Errorf("panicFailure(%q) is not nil", bad)
		}
	}
}

func TestComplete(t *testing.T) {
	k := &kernel{prog: &program{}, goroot: "/usr/local/go"}
	p, _ := parseCell("import \"strings\"\nfunc greet() {}", "c", 1)
	k.prog = k.prog.merged(p)
	got := k.complete("gre", 3)
	if m := got["matches"].([]string); !slices.Contains(m, "greet") {
		t.Fatalf("complete gre = %v", got)
	}
	got = k.complete("x := strings.ToU", 16)
	if m := got["matches"].([]string); !slices.Contains(m, "ToUpper") || got["cursorStart"] != 13 {
		t.Fatalf("complete strings.ToU = %v", got)
	}
}

// FuzzCell: no input makes the parser, the merger or the generator panic,
// and what parses generates a program that parses.
func FuzzCell(f *testing.F) {
	for _, s := range []string{"x := 1", "import \"fmt\"\nfmt.Println(1)", "func main() { println(1) }", "var (\n a = 1\n)", "func (", "type T[", "`", "/*", "func() {}()", "x", "const ( A = iota; B )"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, code string) {
		p, errs := parseCell(code, "<cell-1>", 1)
		_ = isComplete(code)
		k := &kernel{prog: &program{}}
		_ = k.complete(code, len(code)/2)
		if errs != nil {
			return
		}
		pr := (&program{}).merged(p)
		_ = pr.source(p, "<cell-1>", genOptions{show: true})
		_ = locals(p)
	})
}

func strconvQuote(s string) string { return strconv.Quote(s) }
