package godriver

import (
	"context"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// byteOffset is the byte offset of a cursor given in code points.
func byteOffset(code string, cursor int) int {
	if cursor <= 0 {
		return 0
	}
	n := 0
	for i := range code {
		if n == cursor {
			return i
		}
		n++
	}
	return len(code)
}

func isIdentRune(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// wordAt is the identifier that ends at byte offset end (its start), and
// the identifier before a dot just before it ("fmt" of "fmt.Pr").
func wordAt(code string, end int) (start int, qual string) {
	start = end
	for start > 0 {
		r, size := utf8.DecodeLastRuneInString(code[:start])
		if !isIdentRune(r) {
			break
		}
		start -= size
	}
	if start > 0 && code[start-1] == '.' {
		q := start - 1
		for q > 0 {
			r, size := utf8.DecodeLastRuneInString(code[:q])
			if !isIdentRune(r) {
				break
			}
			q -= size
		}
		qual = code[q : start-1]
	}
	return start, qual
}

// runes is the length of s in code points.
func runes(s string) int { return utf8.RuneCountInString(s) }

var keywords = []string{"break", "case", "chan", "const", "continue", "default", "defer", "else", "fallthrough",
	"for", "func", "go", "goto", "if", "import", "interface", "map", "package", "range", "return", "select",
	"struct", "switch", "type", "var"}

var builtins = []string{"append", "bool", "byte", "cap", "clear", "close", "complex", "complex128", "complex64",
	"copy", "delete", "error", "false", "float32", "float64", "imag", "int", "int16", "int32", "int64", "int8",
	"iota", "len", "make", "max", "min", "new", "nil", "panic", "print", "println", "real", "recover", "rune",
	"string", "true", "uint", "uint16", "uint32", "uint64", "uint8", "uintptr", "any", "comparable"}

// imports are the packages the cells imported and the code imports, by
// name.
func (k *kernel) imports(code string) map[string]string {
	out := map[string]string{}
	k.mu.Lock()
	for _, d := range k.prog.decls {
		if d.importPath != "" {
			out[d.importName] = d.importPath
		}
	}
	k.mu.Unlock()
	if p, errs := parseCell(code, "<complete>", 1); errs == nil {
		for _, d := range p.decls {
			if d.importPath != "" {
				out[d.importName] = d.importPath
			}
		}
	}
	return out
}

// complete completes a name: a package's exported names after "pkg.",
// else the cells' declarations, imports, keywords and builtins.
func (k *kernel) complete(code string, cursor int) map[string]any {
	end := byteOffset(code, cursor)
	start, qual := wordAt(code, end)
	prefix := code[start:end]
	var names []string
	if qual != "" {
		if p, ok := k.imports(code)[qual]; ok {
			names = k.packageNames(p)
		}
	} else {
		k.mu.Lock()
		for _, d := range k.prog.decls {
			for _, key := range d.keys {
				if !strings.ContainsAny(key, ".:#") {
					names = append(names, key)
				}
			}
		}
		k.mu.Unlock()
		for n := range k.imports(code) {
			names = append(names, n)
		}
		names = append(names, keywords...)
		names = append(names, builtins...)
	}
	matches := []string{}
	for _, n := range names {
		if strings.HasPrefix(n, prefix) && !slices.Contains(matches, n) {
			matches = append(matches, n)
		}
	}
	sort.Strings(matches)
	return map[string]any{"matches": matches, "cursorStart": runes(code[:start]), "cursorEnd": runes(code[:end])}
}

// packageDir is where a package's source is: the standard library's in
// GOROOT, the kernel's module's in its directory.
func (k *kernel) packageDir(path string) string {
	k.mu.Lock()
	modDir, modPath := k.modDir, k.modPath
	k.mu.Unlock()
	switch {
	case modPath != "" && (path == modPath || strings.HasPrefix(path, modPath+"/")):
		return filepath.Join(modDir, strings.TrimPrefix(path, modPath))
	case !strings.Contains(strings.SplitN(path, "/", 2)[0], ".") && k.goroot != "":
		return filepath.Join(k.goroot, "src", path)
	}
	return ""
}

// packageNames are a package's exported top-level names, from its source.
func (k *kernel) packageNames(path string) []string {
	dir := k.packageDir(path)
	if dir == "" {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	fset := token.NewFileSet()
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			continue
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					out = append(out, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							out = append(out, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								out = append(out, n.Name)
							}
						}
					}
				}
			}
		}
	}
	return out
}

// inspect shows the declaration of a name of the cells, or `go doc` of a
// package's name (pkg.Name) or of a builtin.
func (k *kernel) inspect(code string, cursor, detail int) map[string]any {
	end := byteOffset(code, cursor)
	for end < len(code) {
		r, size := utf8.DecodeRuneInString(code[end:])
		if !isIdentRune(r) {
			break
		}
		end += size
	}
	start, qual := wordAt(code, end)
	name := code[start:end]
	notFound := map[string]any{"found": false}
	if name == "" {
		return notFound
	}
	if qual == "" {
		k.mu.Lock()
		var text string
		for _, d := range k.prog.decls {
			if slices.Contains(d.keys, name) {
				text = strings.TrimSpace(d.prefix + " " + d.text)
			}
		}
		k.mu.Unlock()
		if text != "" {
			return map[string]any{"found": true, "data": map[string]any{"text/plain": text}}
		}
		if slices.Contains(builtins, name) {
			return k.goDoc("builtin." + name)
		}
		return notFound
	}
	if p, ok := k.imports(code)[qual]; ok {
		return k.goDoc(p + "." + name)
	}
	return notFound
}

// goDoc is `go doc` of a symbol.
func (k *kernel) goDoc(sym string) map[string]any {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := k.goCmd(ctx, "doc", sym)
	var out limitedBuffer
	cmd.Stdout = &out
	if cmd.Run() != nil || out.Len() == 0 {
		return map[string]any{"found": false}
	}
	return map[string]any{"found": true, "data": map[string]any{"text/plain": strings.TrimRight(out.String(), "\n")}}
}

// isComplete: a cell is incomplete while a bracket, a raw string or a
// comment is open, invalid when a bracket closes that was not open.
func isComplete(code string) map[string]any {
	var s scanner.Scanner
	fset := token.NewFileSet()
	f := fset.AddFile("", -1, len(code))
	open := false
	s.Init(f, []byte(code), func(_ token.Position, msg string) {
		if strings.Contains(msg, "not terminated") {
			open = true
		}
	}, scanner.ScanComments)
	depth := 0
	for {
		_, tok, _ := s.Scan()
		if tok == token.EOF {
			break
		}
		switch tok {
		case token.LPAREN, token.LBRACK, token.LBRACE:
			depth++
		case token.RPAREN, token.RBRACK, token.RBRACE:
			depth--
			if depth < 0 {
				return map[string]any{"status": "invalid"}
			}
		}
	}
	if open || depth > 0 {
		return map[string]any{"status": "incomplete", "indent": strings.Repeat("\t", max(depth, 1))}
	}
	return map[string]any{"status": "complete"}
}

// variables are the cells' top-level variables: their type when written
// or evident from the initializer, and the initializer as the summary
// (values are not kept: each cell's program computes them anew).
func (k *kernel) variables() map[string]any {
	k.mu.Lock()
	defer k.mu.Unlock()
	vars := []map[string]any{}
	for _, d := range k.prog.decls {
		for i, n := range d.varNames {
			if n == "_" {
				continue
			}
			typ := d.varType
			if typ == "" {
				typ = inferType(d.varInit, i, len(d.varNames))
			}
			summary := d.varInit
			if len(summary) > 200 {
				summary = summary[:200] + "…"
			}
			vars = append(vars, map[string]any{"name": n, "type": typ, "summary": summary})
		}
	}
	return map[string]any{"variables": vars}
}

// inferType guesses the type of the i-th of n variables from the
// initializers' text: a literal's, a composite literal's, make's, new's.
func inferType(init string, i, n int) string {
	if init == "" {
		return ""
	}
	e, err := parser.ParseExpr(init)
	if n > 1 {
		parts, perr := parser.ParseExpr("f(" + init + ")")
		if perr != nil {
			return ""
		}
		args := parts.(*ast.CallExpr).Args
		if len(args) != n {
			return ""
		}
		e, err = args[i], nil
	}
	if err != nil {
		return ""
	}
	switch e := ast.Unparen(e).(type) {
	case *ast.BasicLit:
		switch e.Kind {
		case token.INT:
			return "int"
		case token.FLOAT:
			return "float64"
		case token.IMAG:
			return "complex128"
		case token.CHAR:
			return "rune"
		case token.STRING:
			return "string"
		}
	case *ast.CompositeLit:
		if e.Type != nil {
			return exprText(e.Type)
		}
	case *ast.UnaryExpr:
		if c, ok := e.X.(*ast.CompositeLit); ok && e.Op == token.AND && c.Type != nil {
			return "*" + exprText(c.Type)
		}
	case *ast.CallExpr:
		if id, ok := e.Fun.(*ast.Ident); ok && len(e.Args) > 0 {
			switch id.Name {
			case "make":
				return exprText(e.Args[0])
			case "new":
				return "*" + exprText(e.Args[0])
			}
		}
	case *ast.Ident:
		if e.Name == "true" || e.Name == "false" {
			return "bool"
		}
	}
	return ""
}

func exprText(e ast.Expr) string { return types.ExprString(e) }
