package kernel

import (
	"strings"
)

// esbuild drops an expression statement that folds to a primitive
// ('a' + 'b', 1 === 1, typeof x of a literal): the value of a cell's last
// expression would be lost. tsTranspile wraps that expression as
// `Array.of((EXPR\n))[0]` first, which esbuild keeps and which has the same value;
// lastExpression finds it. Its scanner is the javascript driver's
// top-level scanner (drivers/driver.js) in small: strings, templates,
// comments, regular expressions and brackets, and the automatic-semicolon
// rule at depth 0. When it guesses wrong, the wrapped cell fails to
// transpile and the cell is transpiled as written.

// tsToken is a token: its kind ('n' name, 'p' punctuation, 't' template,
// 'v' another value: number, string, regular expression), text (for names
// and punctuation), byte offsets, and whether a line break comes before it.
type tsToken struct {
	kind byte
	text string
	s, e int
	nl   bool
}

var tsPunct = []string{">>>=", "...", "===", "!==", "**=", "<<=", ">>=", ">>>", "&&=", "||=", "??=",
	"=>", "==", "!=", "<=", ">=", "&&", "||", "??", "?.", "++", "--", "+=", "-=", "*=", "/=", "%=",
	"&=", "|=", "^=", "<<", ">>", "**"}

// beforeExpr are the names after which `/` starts a regular expression
// and which cannot end an expression.
var beforeExpr = map[string]bool{"return": true, "typeof": true, "instanceof": true, "in": true, "of": true,
	"new": true, "delete": true, "void": true, "throw": true, "case": true, "do": true, "else": true,
	"yield": true, "await": true, "extends": true, "as": true, "satisfies": true, "keyof": true}

func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || c >= 0x80 || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// tsTokens returns the tokens of code from i (those of template
// substitutions left out) and where it stopped: the end, or with nested
// (a template substitution) after its closing brace.
func tsTokens(code string, i int, nested bool) (toks []tsToken, end int) {
	nl, depth := false, 0
	push := func(kind byte, s, e int) int {
		t := tsToken{kind: kind, s: s, e: e, nl: nl}
		if kind == 'n' || kind == 'p' {
			t.text = code[s:e]
		}
		toks = append(toks, t)
		nl = false
		return e
	}
	regexOK := func() bool {
		if len(toks) == 0 {
			return true
		}
		switch p := toks[len(toks)-1]; p.kind {
		case 'p':
			return p.text != ")" && p.text != "]" && p.text != "++" && p.text != "--"
		case 'n':
			return beforeExpr[p.text]
		}
		return false
	}
	for i < len(code) {
		c := code[i]
		switch {
		case c == '\n' || c == '\r':
			nl = true
			i++
		case c == ' ' || c == '\t' || c == '\f' || c == '\v':
			i++
		case strings.HasPrefix(code[i:], "//") || (i == 0 && strings.HasPrefix(code, "#!")):
			j := strings.IndexAny(code[i:], "\r\n")
			if j < 0 {
				j = len(code) - i
			}
			i += j
		case strings.HasPrefix(code[i:], "/*"):
			e := len(code)
			if j := strings.Index(code[i+2:], "*/"); j >= 0 {
				e = i + 2 + j + 2
			}
			if strings.ContainsAny(code[i:e], "\r\n") {
				nl = true
			}
			i = e
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(code) && code[j] != c && code[j] != '\n' {
				if code[j] == '\\' {
					j++
				}
				j++
			}
			i = push('v', i, min(j+1, len(code)))
		case c == '`':
			j := i + 1
			for j < len(code) && code[j] != '`' {
				switch {
				case code[j] == '\\':
					j += 2
				case code[j] == '$' && j+1 < len(code) && code[j+1] == '{':
					_, j = tsTokens(code, j+2, true)
				default:
					j++
				}
			}
			i = push('t', i, min(j+1, len(code)))
		case c == '/' && regexOK():
			j, class := i+1, false
			for ; j < len(code) && code[j] != '\n'; j++ {
				switch {
				case code[j] == '\\':
					j++
				case code[j] == '[':
					class = true
				case code[j] == ']':
					class = false
				case code[j] == '/' && !class:
					goto done
				}
			}
		done:
			j++
			for j < len(code) && isIdentByte(code[j]) {
				j++
			}
			i = push('v', i, min(j, len(code)))
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(code) && code[i+1] >= '0' && code[i+1] <= '9':
			j := i + 1
			for j < len(code) && (isIdentByte(code[j]) || code[j] == '.') {
				j++
			}
			i = push('v', i, j)
		case isIdentByte(c) || c == '#' || c == '\\':
			j := i + 1
			for j < len(code) && (isIdentByte(code[j]) || code[j] == '\\') {
				j++
			}
			i = push('n', i, j)
		default:
			n := 1
			for _, p := range tsPunct {
				if strings.HasPrefix(code[i:], p) {
					n = len(p)
					break
				}
			}
			if c == '{' {
				depth++
			} else if c == '}' {
				if nested && depth == 0 {
					return toks, i + 1
				}
				depth--
			}
			i = push('p', i, i+n)
		}
	}
	return toks, i
}

func isP(t tsToken, texts ...string) bool {
	if t.kind != 'p' {
		return false
	}
	for _, x := range texts {
		if t.text == x {
			return true
		}
	}
	return false
}

// blockStatement are the names whose statement ends at its closing brace.
var blockStatement = map[string]bool{"if": true, "for": true, "while": true, "do": true, "try": true, "switch": true,
	"with": true, "else": true, "catch": true, "finally": true, "class": true, "function": true}

// lastExpression returns the byte span of the cell's last top-level
// statement when it looks like an expression statement (without a
// trailing `;`).
func lastExpression(code string) (s, e int, ok bool) {
	toks, _ := tsTokens(code, 0, false)
	endsExpr := func(t tsToken) bool {
		if t.kind != 'p' {
			return !(t.kind == 'n' && beforeExpr[t.text])
		}
		return isP(t, ")", "]", "}", "++", "--")
	}
	startsStmt := func(t tsToken) bool {
		switch t.kind {
		case 'n':
			return t.text != "in" && t.text != "instanceof" && t.text != "as" && t.text != "satisfies"
		case 'p':
			return isP(t, "{", "!", "~", "++", "--")
		}
		return t.kind != 't'
	}
	last, depth, block := -1, 0, false
	for i, t := range toks {
		if depth == 0 {
			start := i == 0
			if i > 0 {
				p := toks[i-1]
				start = isP(p, ";") || isP(p, "}") && block || (t.nl || isP(p, "}")) && endsExpr(p) && startsStmt(t)
			}
			if start {
				last = i
				block = isP(t, "{") || t.kind == 'n' && (blockStatement[t.text] || t.text == "async")
			}
		}
		switch {
		case isP(t, "(", "[", "{"):
			depth++
		case isP(t, ")", "]", "}"):
			depth--
		}
	}
	if last < 0 || depth != 0 || !tsExprStart(toks, last) {
		return 0, 0, false
	}
	end := len(toks) - 1
	if isP(toks[end], ";") {
		if end == last {
			return 0, 0, false
		}
		end--
	}
	return toks[last].s, toks[end].e, true
}

// notExpression are the names that start a statement other than an
// expression (TypeScript's declarations too).
var notExpression = map[string]bool{"if": true, "for": true, "while": true, "do": true, "try": true, "switch": true,
	"with": true, "else": true, "catch": true, "finally": true, "return": true, "throw": true, "break": true,
	"continue": true, "debugger": true, "import": true, "export": true, "case": true, "default": true,
	"var": true, "let": true, "const": true, "class": true, "function": true, "using": true}

// tsDeclaration are the names that declare when a name follows on the
// same line (`type A = ...`; `type` alone is an identifier).
var tsDeclaration = map[string]bool{"type": true, "interface": true, "enum": true, "namespace": true, "module": true,
	"declare": true, "abstract": true, "async": true, "global": true}

// tsExprStart says whether the statement at toks[i] is an expression
// statement.
func tsExprStart(toks []tsToken, i int) bool {
	t := toks[i]
	switch t.kind {
	case 'p':
		return !isP(t, "{", ";", "}", ")", "]", "@") // (@: a decorated class)
	case 'n':
		if notExpression[t.text] {
			return false
		}
		if i+1 < len(toks) {
			n := toks[i+1]
			if n.kind == 'p' && n.text == ":" { // a label
				return false
			}
			if tsDeclaration[t.text] && n.kind == 'n' && !n.nl {
				return false
			}
		}
	}
	return true
}

// wrapOpen begins the wrapper. It starts with a name, so it neither
// continues the statement before it (as `[` or `(` on a new line would)
// nor ends a statement whose body it is (as a `;` would: `if (c)\n  x`).
const wrapOpen = "Array.of(("

// wrapLast wraps the cell's last expression statement so that esbuild
// keeps it: it returns the wrapped code and the offset of the wrapper's
// opening, or ok false when there is no last expression.
func wrapLast(code string) (wrapped string, at int, ok bool) {
	s, e, ok := lastExpression(code)
	if !ok {
		return "", 0, false
	}
	return code[:s] + wrapOpen + code[s:e] + "\n))[0]" + code[e:], s, true
}
