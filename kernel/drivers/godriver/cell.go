package godriver

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"go/types"
	"path"
	"slices"
	"strconv"
	"strings"
)

// A cell is split into units: its top-level declarations and statements, in
// the order written. A unit is what lies between two semicolons (written or
// automatic) outside brackets. One that begins with import, type, var,
// const, or func followed by a name or a receiver and a name, is a
// declaration; anything else is a statement of the cell's main.

// unit is a piece of a cell's text, where it began in the cell.
type unit struct {
	text      string
	line, col int // 1-based, in the cell
}

// decl is an accumulated top-level declaration.
type decl struct {
	keys []string // the names it declares ("T.M" for a method; "import:path" for a blank import)
	// prefix is the keyword of a spec taken out of a group ("var"), put
	// on a line of its own before text.
	prefix    string
	text      string // "import ...", "func ...", "var ...", or a spec
	file      string // the name the cell's positions take (//line)
	line, col int
	// importPath and importName are set for an import.
	importPath, importName string
	// varNames and varType describe a var declaration (variables).
	varNames []string
	varType  string
	varInit  string
	// kind is the token of a GenDecl or "func".
	kind string
}

// parsed is a cell split and understood.
type parsed struct {
	decls []*decl
	stmts []unit
	// userMain is the body of a func main the cell declared: its statements
	// run after the cell's others.
	userMain *unit
	// show: the last statement is an expression whose value is the
	// cell's result; showCall: it is a call, which may have no value.
	show, showCall bool
}

// header is put before a unit to parse it on its own, on the unit's first
// line so that positions keep their line.
const header = "package main;"

// splitUnits cuts the code into units.
func splitUnits(code string) []unit {
	var s scanner.Scanner
	fset := token.NewFileSet()
	f := fset.AddFile("", -1, len(code))
	s.Init(f, []byte(code), func(token.Position, string) {}, 0)
	var out []unit
	depth := 0
	start := -1
	cut := func(end int) {
		if start < 0 {
			return
		}
		if end > len(code) {
			end = len(code)
		}
		text := strings.TrimRight(code[start:end], " \t\r\n")
		if strings.TrimSpace(text) != "" {
			p := f.Position(f.Pos(start))
			out = append(out, unit{text: text, line: p.Line, col: p.Column})
		}
		start = -1
	}
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		off := f.Offset(pos)
		switch tok {
		case token.LPAREN, token.LBRACK, token.LBRACE:
			depth++
		case token.RPAREN, token.RBRACK, token.RBRACE:
			if depth > 0 {
				depth--
			}
		case token.SEMICOLON:
			if depth == 0 {
				end := off
				if lit == ";" {
					end++ // a written semicolon stays with its unit
				}
				cut(end)
				continue
			}
		}
		if start < 0 {
			start = off
		}
	}
	cut(len(code))
	return out
}

// isDecl says whether a unit is a top-level declaration.
func isDecl(u unit) bool {
	var s scanner.Scanner
	fset := token.NewFileSet()
	f := fset.AddFile("", -1, len(u.text))
	s.Init(f, []byte(u.text), func(token.Position, string) {}, 0)
	_, tok, _ := s.Scan()
	switch tok {
	case token.IMPORT, token.TYPE, token.VAR, token.CONST:
		return true
	case token.FUNC:
	default:
		return false
	}
	_, tok, _ = s.Scan()
	switch tok {
	case token.IDENT:
		return true
	case token.LPAREN: // a receiver, or a literal's parameters
	default:
		return false
	}
	for depth := 1; depth > 0; {
		_, tok, _ = s.Scan()
		switch tok {
		case token.LPAREN:
			depth++
		case token.RPAREN:
			depth--
		case token.EOF:
			return false
		}
	}
	_, tok, _ = s.Scan()
	return tok == token.IDENT
}

// parseCell splits a cell and parses its declarations. file names the
// cell's positions; line is its first line there. A syntax error comes back
// as a list of lines "file:line:col: message".
func parseCell(code, file string, line int) (*parsed, []string) {
	p := &parsed{}
	var errs []string
	for _, u := range splitUnits(code) {
		u.line += line - 1
		if !isDecl(u) {
			p.stmts = append(p.stmts, u)
			continue
		}
		ds, um, e := parseDecl(u, file)
		errs = append(errs, e...)
		if um != nil {
			p.userMain = um
		}
		p.decls = append(p.decls, ds...)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if errs := checkStmts(p, file); len(errs) > 0 {
		return nil, errs
	}
	return p, nil
}

// directive is the //line comment that gives the next line file:line:col.
func directive(file string, line, col int) string {
	return fmt.Sprintf("//line %s:%d:%d\n", file, line, col)
}

// parseUnit parses "package main;" + a unit's declaration(s), with the
// unit's positions.
func parseUnit(u unit, file string) (*ast.File, *token.FileSet, []byte, []string) {
	src := []byte(header + fmt.Sprintf("/*line %s:%d:%d*/", file, u.line, u.col) + u.text + "\n")
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, parser.SkipObjectResolution)
	if err != nil {
		return nil, nil, nil, syntaxErrors(err)
	}
	return f, fset, src, nil
}

// syntaxErrors renders a parser's errors one a line (the first ten).
func syntaxErrors(err error) []string {
	var out []string
	if list, ok := err.(scanner.ErrorList); ok {
		for i, e := range list {
			if i == 10 {
				out = append(out, fmt.Sprintf("(and %d more)", len(list)-10))
				break
			}
			out = append(out, e.Error())
		}
		return out
	}
	return []string{err.Error()}
}

// parseDecl turns a declaration unit into the declarations it holds: the
// specs of an import, var or type group one by one (a const group stays
// whole: iota), a func main as the cell's main.
func parseDecl(u unit, file string) ([]*decl, *unit, []string) {
	f, fset, src, errs := parseUnit(u, file)
	if errs != nil {
		return nil, nil, errs
	}
	text := func(n ast.Node) string {
		return string(src[fset.Position(n.Pos()).Offset:fset.Position(n.End()).Offset])
	}
	at := func(n ast.Node) (int, int) {
		p := fset.Position(n.Pos()) // adjusted by the directive
		return p.Line, p.Column
	}
	var out []*decl
	var userMain *unit
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			l, c := at(d)
			key := d.Name.Name
			if d.Recv != nil && len(d.Recv.List) == 1 {
				key = recvName(d.Recv.List[0].Type) + "." + key
			} else if key == "main" && d.Body != nil {
				bl, bc := at(d.Body)
				body := text(d.Body)
				userMain = &unit{text: body, line: bl, col: bc}
				continue
			} else if key == "init" || key == "_" {
				key = fmt.Sprintf("%s#%s:%d", key, file, l)
			}
			out = append(out, &decl{keys: []string{key}, text: text(d), file: file, line: l, col: c, kind: "func"})
		case *ast.GenDecl:
			if d.Tok == token.CONST || !d.Lparen.IsValid() {
				l, c := at(d)
				out = append(out, genDecl(d.Tok, d.Specs, "", text(d), file, l, c))
				continue
			}
			for _, s := range d.Specs {
				l, c := at(s)
				out = append(out, genDecl(d.Tok, []ast.Spec{s}, d.Tok.String(), text(s), file, l, c))
			}
		}
	}
	return out, userMain, nil
}

func genDecl(tok token.Token, specs []ast.Spec, prefix, text, file string, l, c int) *decl {
	out := &decl{prefix: prefix, text: text, file: file, line: l, col: c, kind: tok.String()}
	for _, s := range specs {
		switch s := s.(type) {
		case *ast.ImportSpec:
			p, err := strconv.Unquote(s.Path.Value)
			if err != nil {
				p = s.Path.Value
			}
			out.importPath = p
			name := importName(p)
			if s.Name != nil {
				name = s.Name.Name
			}
			out.importName = name
			key := "import:" + name
			if name == "_" || name == "." {
				key = "import:" + name + p
			}
			out.keys = append(out.keys, key)
		case *ast.TypeSpec:
			out.keys = append(out.keys, s.Name.Name)
		case *ast.ValueSpec:
			for _, n := range s.Names {
				if n.Name != "_" {
					out.keys = append(out.keys, n.Name)
				}
			}
			if tok == token.VAR {
				for _, n := range s.Names {
					out.varNames = append(out.varNames, n.Name)
				}
				if s.Type != nil {
					out.varType = types.ExprString(s.Type)
				}
				if len(s.Values) > 0 {
					var vs []string
					for _, v := range s.Values {
						vs = append(vs, types.ExprString(v))
					}
					out.varInit = strings.Join(vs, ", ")
				}
			}
		}
	}
	if len(out.keys) == 0 {
		out.keys = []string{fmt.Sprintf("_#%s:%d", file, l)}
	}
	return out
}

func recvName(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.ParenExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return "?"
		}
	}
}

// importName is the name a package is assumed to have from its path, as
// goimports assumes it: the last element, without a major version
// (/v2, .v3) and a go- prefix, up to a dot or dash.
func importName(p string) string {
	base := path.Base(p)
	if strings.HasPrefix(base, "v") && len(base) > 1 && strings.Trim(base[1:], "0123456789") == "" && strings.Contains(p, "/") {
		base = path.Base(path.Dir(p))
	}
	if i := strings.Index(base, ".v"); i > 0 && strings.Trim(base[i+2:], "0123456789") == "" {
		base = base[:i]
	}
	base = strings.TrimPrefix(base, "go-")
	if i := strings.IndexAny(base, ".-"); i > 0 {
		base = base[:i]
	}
	return base
}

// checkStmts parses the cell's statements as a function body: syntax
// errors, and whether the last one is an expression to show.
func checkStmts(p *parsed, file string) []string {
	if len(p.stmts) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("package main; func _() {\n")
	for _, u := range p.stmts {
		b.WriteString(directive(file, u.line, u.col))
		b.WriteString(u.text)
		b.WriteString("\n")
	}
	b.WriteString("}\n")
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", b.String(), parser.SkipObjectResolution)
	if err != nil {
		return syntaxErrors(err)
	}
	fn, ok := f.Decls[0].(*ast.FuncDecl)
	if !ok || len(fn.Body.List) == 0 {
		return nil
	}
	last, ok := fn.Body.List[len(fn.Body.List)-1].(*ast.ExprStmt)
	if !ok {
		return nil
	}
	// The last unit must be just that expression (not "a; b" on one line).
	if lu := p.stmts[len(p.stmts)-1]; strings.Contains(lu.text, ";") && strings.HasSuffix(strings.TrimSpace(lu.text), ";") {
		return nil
	}
	call, isCall := ast.Unparen(last.X).(*ast.CallExpr)
	if isCall && !showable(call) {
		return nil
	}
	p.show, p.showCall = true, isCall
	return nil
}

// showable says whether a call's value is worth showing: not the calls
// that are made for what they do (printing, panicking, the builtins
// without a value).
func showable(c *ast.CallExpr) bool {
	switch fn := ast.Unparen(c.Fun).(type) {
	case *ast.Ident:
		return !slices.Contains([]string{"print", "println", "panic", "close", "delete", "clear", "copy"}, fn.Name)
	case *ast.SelectorExpr:
		if x, ok := fn.X.(*ast.Ident); ok {
			switch x.Name {
			case "fmt":
				return !strings.HasPrefix(fn.Sel.Name, "Print") && !strings.HasPrefix(fn.Sel.Name, "Fprint")
			case "log":
				return false
			case "os":
				return fn.Sel.Name != "Exit"
			}
		}
	}
	return true
}
