package godriver

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// program is the kernel's state: the top-level declarations of the cells
// run so far, in order. A cell's program is these, the cell's own, and a
// main of the cell's statements.
type program struct {
	decls []*decl
}

// merged is the program with a cell's declarations added: one that
// declares a name again replaces the one before.
func (pr *program) merged(p *parsed) *program {
	out := &program{decls: slices.Clone(pr.decls)}
	for _, d := range p.decls {
		out.decls = slices.DeleteFunc(out.decls, func(old *decl) bool {
			for _, k := range d.keys {
				if slices.Contains(old.keys, k) {
					return true
				}
			}
			return false
		})
		out.decls = append(out.decls, d)
	}
	return out
}

// generated names the positions of the code the driver adds.
const generated = "cellbox-generated.go"

// genOptions are a build's choices: whether to show the last expression
// and the imports to leave out (their path).
type genOptions struct {
	show bool
	drop map[string]bool
}

// source is main.go of a cell's program: the imports the code uses, the
// declarations, and main running the cell's statements. Positions are the
// cells' (line directives), so errors and stacks name cell lines.
func (pr *program) source(p *parsed, file string, o genOptions) string {
	var body strings.Builder
	at := func(f string, l, c int) string { return fmt.Sprintf("/*line %s:%d:%d*/", f, l, c) }
	for _, d := range pr.decls {
		if d.importPath != "" {
			continue
		}
		if d.prefix != "" {
			body.WriteString(d.prefix + " ")
		}
		body.WriteString(at(d.file, d.line, d.col) + d.text + "\n")
	}
	body.WriteString(at(generated, 1, 1) + "\nfunc main() {\n\tdefer cellbox_recover()\n")
	stmts := p.stmts
	var shown *unit
	if o.show && p.show && len(stmts) > 0 {
		shown = &stmts[len(stmts)-1]
		stmts = stmts[:len(stmts)-1]
	}
	for _, u := range stmts {
		body.WriteString(at(file, u.line, u.col) + u.text + "\n")
	}
	body.WriteString(at(generated, 2, 1) + "\n")
	if p.userMain != nil {
		body.WriteString("func() " + at(file, p.userMain.line, p.userMain.col) + p.userMain.text + "()\n" + at(generated, 3, 1) + "\n")
	}
	for _, name := range locals(p) {
		body.WriteString("_ = " + name + "\n")
	}
	if shown != nil {
		body.WriteString("cellbox_show(" + at(file, shown.line, shown.col) + shown.text + ",\n" + at(generated, 4, 1) + ")\n")
	}
	body.WriteString("}\n")

	used := usedNames(body.String())
	var out strings.Builder
	out.WriteString("package main\n\n")
	declared := map[string]bool{}
	for _, d := range pr.decls {
		for _, k := range d.keys {
			declared[k] = true
		}
		if d.importPath == "" || o.drop[d.importPath] {
			continue
		}
		declared[d.importName] = true
		if d.importName != "_" && d.importName != "." && !used[d.importName] {
			continue
		}
		if d.prefix != "" {
			out.WriteString(d.prefix + " ")
		}
		out.WriteString(at(d.file, d.line, d.col) + d.text + "\n")
	}
	// A standard package the code uses without importing it is imported,
	// as goimports (and so gonb) would: fmt.Println(x) in a cell runs.
	var missing []string
	for name := range used {
		if path, ok := stdImports[name]; ok && !declared[name] && !o.drop[path] {
			missing = append(missing, path)
		}
	}
	sort.Strings(missing)
	for _, path := range missing {
		out.WriteString(at(generated, 5, 1) + "import " + strconv.Quote(path) + "\n")
	}
	out.WriteString(body.String())
	return out.String()
}

// stdImports are the standard packages a cell may use without importing
// them, by the name it uses them by.
var stdImports = map[string]string{
	"bufio": "bufio", "bytes": "bytes", "cmp": "cmp", "context": "context", "errors": "errors",
	"fmt": "fmt", "io": "io", "iter": "iter", "log": "log", "maps": "maps", "math": "math",
	"os": "os", "path": "path", "reflect": "reflect", "regexp": "regexp", "slices": "slices",
	"sort": "sort", "strconv": "strconv", "strings": "strings", "sync": "sync", "time": "time",
	"unicode": "unicode", "utf8": "unicode/utf8", "json": "encoding/json", "base64": "encoding/base64",
	"hex": "encoding/hex", "csv": "encoding/csv", "filepath": "path/filepath", "rand": "math/rand/v2",
	"big": "math/big", "bits": "math/bits", "cmplx": "math/cmplx", "http": "net/http", "url": "net/url",
	"exec": "os/exec", "signal": "os/signal", "atomic": "sync/atomic", "heap": "container/heap",
	"list": "container/list", "sha256": "crypto/sha256", "md5": "crypto/md5", "fs": "io/fs",
	"template": "text/template", "tabwriter": "text/tabwriter", "debug": "runtime/debug", "runtime": "runtime",
}

// usedNames are the identifiers that qualify a selector (pkg.Name) in
// src: the packages it may use.
func usedNames(src string) map[string]bool {
	used := map[string]bool{}
	f, err := parser.ParseFile(token.NewFileSet(), "", "package main\n"+src, parser.SkipObjectResolution)
	if f == nil {
		return used
	}
	_ = err // a partial tree is enough; the compiler reports the error
	ast.Inspect(f, func(n ast.Node) bool {
		if s, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := s.X.(*ast.Ident); ok {
				used[id.Name] = true
			}
		}
		return true
	})
	return used
}

// locals are the variables the cell's statements declare at main's top
// level: each gets a `_ = x`, so that a variable the cell does not use
// again is not an error.
func locals(p *parsed) []string {
	var b strings.Builder
	b.WriteString("package main; func _() {\n")
	for _, u := range p.stmts {
		b.WriteString(u.text + "\n")
	}
	b.WriteString("}\n")
	f, err := parser.ParseFile(token.NewFileSet(), "", b.String(), parser.SkipObjectResolution)
	if err != nil || len(f.Decls) == 0 {
		return nil
	}
	fn, ok := f.Decls[0].(*ast.FuncDecl)
	if !ok || fn.Body == nil {
		return nil
	}
	var out []string
	add := func(e ast.Expr) {
		if id, ok := e.(*ast.Ident); ok && id.Name != "_" && !slices.Contains(out, id.Name) {
			out = append(out, id.Name)
		}
	}
	for _, s := range fn.Body.List {
		switch s := s.(type) {
		case *ast.AssignStmt:
			if s.Tok == token.DEFINE {
				for _, e := range s.Lhs {
					add(e)
				}
			}
		case *ast.DeclStmt:
			if g, ok := s.Decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
				for _, sp := range g.Specs {
					for _, n := range sp.(*ast.ValueSpec).Names {
						add(n)
					}
				}
			}
		}
	}
	return out
}

// helperSource is the driver's part of every program: the result of the
// last expression and a panic go to fd 3 (a pipe to the driver) as
// quoted lines.
const helperSource = `package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"syscall"
)

var cellbox_out = os.NewFile(3, "cellbox")

func init() { syscall.CloseOnExec(3) }

func cellbox_show(v ...any) {
	s := ""
	for i, x := range v {
		if i > 0 {
			s += " "
		}
		if str, ok := x.(string); ok {
			s += strconv.Quote(str)
		} else {
			s += fmt.Sprintf("%v", x)
		}
	}
	if len(v) == 0 {
		return
	}
	fmt.Fprintf(cellbox_out, "result %s\n", strconv.Quote(s))
}

func cellbox_recover() {
	r := recover()
	if r == nil {
		return
	}
	ename := "panic"
	if _, ok := r.(interface{ RuntimeError() }); ok {
		ename = "runtime error"
	}
	fmt.Fprintf(cellbox_out, "panic %s %s %s\n", strconv.Quote(ename), strconv.Quote(fmt.Sprint(r)), strconv.Quote(string(debug.Stack())))
	os.Stdout.Sync()
	os.Exit(2)
}
`
