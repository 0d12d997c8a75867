package kernel

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cellbox-dev/cellbox/protocol"
)

// segmentAt is the source position of a generated one as the driver finds
// it (drivers/driver.js mapSource): the segment at or before the column.
func segmentAt(lines [][]int, line, col int) (srcLine, srcCol int, ok bool) {
	if line >= len(lines) {
		return 0, 0, false
	}
	seg := lines[line]
	if len(seg) < 3 {
		return 0, 0, false
	}
	k := 0
	for j := 0; j+2 < len(seg) && seg[j] <= col; j += 3 {
		k = j
	}
	return seg[k+1], seg[k+2] + max(0, col-seg[k]), true
}

func TestTSTranspile(t *testing.T) {
	code := "type Id = string\ninterface User {\n  id: Id\n}\nimport { a } from 'm'\nconst u: User = { id: 'x' }\nthrow new Error(u.id)\n"
	tr := tsTranspile(code)
	if tr.err != nil {
		t.Fatal(tr.err)
	}
	// Types are gone, the import that no line uses stays, and the code is
	// not a module wrapped in anything.
	if strings.Contains(tr.code, "interface") || strings.Contains(tr.code, ": User") || !strings.Contains(tr.code, `import { a } from "m"`) {
		t.Fatalf("code = %q", tr.code)
	}
	js := strings.Split(tr.code, "\n")
	th := slices.IndexFunc(js, func(l string) bool { return strings.HasPrefix(l, "throw") })
	if th < 0 {
		t.Fatalf("no throw in %q", tr.code)
	}
	// "throw" is line 7 (0-based 6) of the TypeScript; "u.id" at column 16.
	if l, c, ok := segmentAt(tr.lines, th, 0); !ok || l != 6 || c != 0 {
		t.Fatalf("throw maps to %d:%d %v, want 6:0", l, c, ok)
	}
	col := strings.Index(js[th], "u.id")
	if l, c, ok := segmentAt(tr.lines, th, col); !ok || l != 6 || c != strings.Index("throw new Error(u.id)", "u.id") {
		t.Fatalf("u.id maps to %d:%d %v", l, c, ok)
	}
}

func TestTSTranspileSyntaxError(t *testing.T) {
	for _, tc := range []struct {
		code      string
		line, col int
		text      string
	}{
		{"let ok = 1\nlet bad: = 2\n", 2, 9, "let bad: = 2"},
		{"const s = 'ü🙂'; let x: = 1", 1, 24, "const s = 'ü🙂'; let x: = 1"}, // UTF-16 columns
		{"function f(", 1, 11, "function f("},
	} {
		tr := tsTranspile(tc.code)
		if tr.err == nil {
			t.Fatalf("%q transpiled: %q", tc.code, tr.code)
		}
		if tr.err.Line != tc.line || tr.err.Column != tc.col || tr.err.LineText != tc.text || tr.err.Message == "" {
			t.Fatalf("%q: error %+v, want line %d column %d text %q", tc.code, tr.err, tc.line, tc.col, tc.text)
		}
	}
	m := &Manager{}
	defer m.ts.close()
	r := &request{Op: "execute", Code: "let x: = 1"}
	tsTransform(m, r)
	if r.Code != "" || r.SyntaxError == nil || r.SourceMap != nil {
		t.Fatalf("transform of a syntax error = %+v", r)
	}
	r = &request{Op: "execute", Code: "let x: number = 1\nx"}
	tsTransform(m, r)
	if r.SyntaxError != nil || strings.Contains(r.Code, "number") || len(r.SourceMap) < 2 {
		t.Fatalf("transform = %+v", r)
	}
}

func TestTSIsComplete(t *testing.T) {
	for code, want := range map[string]protocol.KernelIsCompleteResult{
		"let x: number = 1":                 {Status: protocol.IsCompleteStatusComplete},
		"await f()":                         {Status: protocol.IsCompleteStatusComplete},
		"import { a } from 'm'":             {Status: protocol.IsCompleteStatusComplete},
		"function f<T>(a: T): T {":          {Status: protocol.IsCompleteStatusIncomplete, Indent: "  "},
		"interface A {\n  b: {":             {Status: protocol.IsCompleteStatusIncomplete, Indent: "    "},
		"const s = `a ${'{'}":               {Status: protocol.IsCompleteStatusIncomplete},
		"f('(' /* ( */, // (\n":             {Status: protocol.IsCompleteStatusIncomplete, Indent: "  "},
		"let x: = 1":                        {Status: protocol.IsCompleteStatusInvalid},
		"let x = 1 }":                       {Status: protocol.IsCompleteStatusInvalid},
		"":                                  {Status: protocol.IsCompleteStatusComplete},
		"class A { private x: number = 1 }": {Status: protocol.IsCompleteStatusComplete},
	} {
		if got := tsIsCompleteHere(code); got != want {
			t.Errorf("tsIsComplete(%q) = %+v, want %+v", code, got, want)
		}
	}
	// The same through the helper the daemon asks.
	m := &Manager{}
	defer m.ts.close()
	if got := tsIsComplete(m, "function f<T>(a: T): T {"); got.Status != protocol.IsCompleteStatusIncomplete {
		t.Errorf("through the helper: %+v", got)
	}
}

// TestTSCellTooDeep: a cell nested deeper than esbuild's recursive parser
// can go overflows its stack, a fatal error no recover catches; it kills
// the helper, not the daemon (this process), and is the cell's
// SyntaxError; the next cell transpiles in a new helper.
func TestTSCellTooDeep(t *testing.T) {
	m := &Manager{}
	defer m.ts.close()
	const depth = 400_000 // 800 KB, within maxCodeBytes
	r := &request{Op: "execute", Code: strings.Repeat("(", depth) + "1" + strings.Repeat(")", depth)}
	tsTransform(m, r)
	if r.SyntaxError == nil || !strings.Contains(r.SyntaxError.Message, "typescript transpiler") || r.Code != "" {
		t.Fatalf("a cell nested %d deep: %+v", depth, r.SyntaxError)
	}
	if got := tsIsComplete(m, strings.Repeat("[", depth)); got.Status != protocol.IsCompleteStatusInvalid {
		t.Fatalf("isComplete of a cell nested %d deep: %+v", depth, got)
	}
	r = &request{Op: "execute", Code: "let x: number = 1\nx"}
	tsTransform(m, r)
	if r.SyntaxError != nil || !strings.Contains(r.Code, "x") {
		t.Fatalf("the next cell: %+v", r)
	}
}

func TestDecodeMappings(t *testing.T) {
	// "AAAA,SAAQ;;AACA" : line 0: [0,0,0] and [9,0,8]; line 1: none;
	// line 2: [0,1,8] (source line +1 from the last, column carried).
	lines, err := decodeMappings("AAAA,SAAQ;;AACA", 100)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int{{0, 0, 0, 9, 0, 8}, nil, {0, 1, 8}}
	if len(lines) != len(want) {
		t.Fatalf("lines = %v", lines)
	}
	for i := range want {
		if !slices.Equal(lines[i], want[i]) {
			t.Fatalf("lines = %v, want %v", lines, want)
		}
	}
	// A one-field segment moves the column but maps nothing; D is -1.
	if lines, err = decodeMappings("C,AAAA,CAAA;AACC,CADD", 100); err != nil || !slices.Equal(lines[0], []int{1, 0, 0, 2, 0, 0}) || !slices.Equal(lines[1], []int{0, 1, 1, 1, 0, 0}) {
		t.Fatalf("lines = %v, %v", lines, err)
	}
	for _, bad := range []string{"A!AA", "AA", "AAAAAA", "g", "gggggggggA", "AADA"} {
		if _, err := decodeMappings(bad, 100); err == nil {
			t.Errorf("decodeMappings(%q) = nil error", bad)
		}
	}
	if _, err := decodeMappings("AAAA,AAAA,AAAA", 2); err == nil {
		t.Error("more segments than the bound: no error")
	}
}

func FuzzTSTranspile(f *testing.F) {
	for _, s := range []string{"let x: number = 1\nx", "interface A {\n", "import a from 'b'", "`${", "enum E { A }", "\xff\xfe", "<T>(x: T) => x", "x = `${'}'}`\n/re/.source;", "'a' + 'b' // c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, code string) {
		if s, e, ok := lastExpression(code); ok && (s < 0 || s > e || e > len(code)) {
			t.Fatalf("lastExpression span %d..%d of %d bytes", s, e, len(code))
		}
		tr := tsTranspile(code)
		if tr.err != nil {
			if tr.err.Line < 1 || tr.err.Column < 0 {
				t.Fatalf("error position %+v", tr.err)
			}
			return
		}
		for _, seg := range tr.lines {
			if len(seg)%3 != 0 {
				t.Fatalf("a line of %d values", len(seg))
			}
		}
		_ = tsIsCompleteHere(code)
	})
}

func FuzzDecodeMappings(f *testing.F) {
	for _, s := range []string{"AAAA,SAAQ;;AACA", "C,AAAA", "gggggggggA", ";;;", "AAAAA"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lines, err := decodeMappings(s, 1000)
		if err != nil {
			return
		}
		for _, seg := range lines {
			for j := 0; j+2 < len(seg); j += 3 {
				if seg[j] < 0 || seg[j+1] < 0 || seg[j+2] < 0 {
					t.Fatalf("negative position in %v", seg)
				}
			}
		}
	})
}

func TestTSLastExpression(t *testing.T) {
	for code, want := range map[string]string{
		"'a' + 'b'":                            "'a' + 'b'",
		"let x = 1\nx + 1;":                    "x + 1",
		"let x = 1\nx + 1 // done":             "x + 1",
		"f(1)\n(2)":                            "f(1)\n(2)", // a call, as JavaScript reads it
		"a = 1\n[1, 2].length":                 "a = 1\n[1, 2].length",
		"if (x) {\n  y\n}\n'z'":                "'z'",
		"interface A {\n  b: 1\n}\n1 === 1":    "1 === 1",
		"const s = `${'}'}`\ns":                "s",
		"x = /}/.source\n`t${1}`":              "x = /}/.source\n`t${1}`", // a tagged template
		"class A {}\ntypeof A":                 "typeof A",
		"await f()\n(await g()) as number":     "await f()\n(await g()) as number",
		"x\n  .y":                              "x\n  .y",
		"type\n":                               "type",
		"function f() {}\nf()":                 "f()",
		"{ a: 1 }":                             "",
		"let x = 1":                            "",
		"interface A { b: 1 }":                 "",
		"type A = string":                      "",
		"enum E { A }":                         "",
		"label: for (;;) break label":          "",
		"import a from 'b'":                    "",
		"export const a = 1":                   "",
		"f(":                                   "",
		";":                                    "",
		"":                                     "",
		"// just a comment":                    "",
		"async function f() {}":                "",
		"declare const d: number":              "",
		"abstract class B {}":                  "",
		"x;\n;":                                "",
		"for (const a of b) {}\n":              "",
		"try {} finally {}":                    "",
		"namespace N {}":                       "",
		"`${`":                                 "`${`",
		"'unterminated":                        "'unterminated",
		"a satisfies\nB":                       "a satisfies\nB",
		"new Box<string>('in').get()":          "new Box<string>('in').get()",
		"const f = <T,>(a: T) => a\nf<number>": "f<number>",
	} {
		s, e, ok := lastExpression(code)
		got := ""
		if ok {
			got = code[s:e]
		}
		if got != want {
			t.Errorf("lastExpression(%q) = %q, want %q", code, got, want)
		}
	}
}

// TestTSTranspileKeepsLastValue: esbuild drops an expression statement that
// folds to a primitive; the cell's last one is kept, with its columns.
func TestTSTranspileKeepsLastValue(t *testing.T) {
	for _, code := range []string{"'a' + ('b' as string)", "1 === 1;", "let q = 1\ntypeof 'x' // why"} {
		tr := tsTranspile(code)
		if tr.err != nil || !strings.Contains(tr.code, "Array.of(") {
			t.Errorf("%q: %q %+v", code, tr.code, tr.err)
		}
	}
	// The wrapper neither continues the statement before it (a `[` on a
	// new line would) nor leaves the body of an if (a `;` would).
	if tr := tsTranspile("if (c)\n  'a' + 'b'"); !strings.Contains(tr.code, "if (c)\n  Array.of(") {
		t.Errorf("if: %q", tr.code)
	}
	if tr := tsTranspile("const w: string = await f('x')\nconsole.log(w)"); !strings.Contains(tr.code, "await f(\"x\");\nArray.of(console.log(w))[0]") {
		t.Errorf("after a statement without a semicolon: %q", tr.code)
	}
	tr := tsTranspile("let n: number = 1\n  null!.x")
	js := strings.Split(tr.code, "\n")
	th := slices.IndexFunc(js, func(l string) bool { return strings.Contains(l, ".x") })
	if l, c, ok := segmentAt(tr.lines, th, strings.Index(js[th], "null")); !ok || l != 1 || c != 2 {
		t.Fatalf("null maps to %d:%d %v, want 1:2 (code %q)", l, c, ok, tr.code)
	}
	// Not an expression after all: transpiled as written.
	if tr := tsTranspile("@dec class A {}"); tr.err != nil || strings.Contains(tr.code, "Array.of(") {
		t.Errorf("a decorated class: %q %+v", tr.code, tr.err)
	}
}

// BenchmarkTSTranspile: the daemon's cost per typescript cell (transpile,
// source map decode), for a one-line cell and a 40-line one.
func BenchmarkTSTranspile(b *testing.B) {
	small := "const v7: number = 7 + 1; 'r' + (v7 as number)"
	var big strings.Builder
	for i := range 10 {
		fmt.Fprintf(&big, "interface P%d {\n  x: number\n}\nconst p%d: P%d = { x: %d }\n", i, i, i, i)
	}
	big.WriteString("p1.x + p2.x")
	for _, c := range []struct{ name, code string }{{"one-line", small}, {"40-lines", big.String()}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if tr := tsTranspile(c.code); tr.err != nil {
					b.Fatal(tr.err)
				}
			}
		})
	}
}
