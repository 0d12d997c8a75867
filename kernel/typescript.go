package kernel

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf16"

	"github.com/evanw/esbuild/pkg/api"

	"github.com/cellbox-dev/cellbox/protocol"
)

// TypeScript kernels run the javascript driver. The daemon transpiles each
// cell with esbuild before the driver gets it (tsTransform): types are
// erased, never checked. The driver maps the lines and columns of stack
// frames back to the cell's TypeScript through the request's sourceMap
// (drivers/README.md).

// tsOptions transpile one cell. verbatimModuleSyntax keeps imports whose
// names only later cells use (esbuild would drop them as unused); the
// format is left as written, so `await` and `import` at the top level
// stay for the driver, which handles them as in javascript.
var tsOptions = api.TransformOptions{
	Loader:         api.LoaderTS,
	Target:         api.ESNext,
	Sourcemap:      api.SourceMapExternal,
	SourcesContent: api.SourcesContentExclude,
	Sourcefile:     "cell.ts",
	TsconfigRaw:    `{"compilerOptions":{"verbatimModuleSyntax":true}}`,
	LogLevel:       api.LogLevelSilent,
}

// maxSourceMapSegments bounds a cell's source map (a segment per token or
// so; a cell this big is megabytes of code).
const maxSourceMapSegments = 1 << 20

// cellSyntaxError is a cell that does not parse: the driver reports it as
// the cell's SyntaxError, as it does javascript's own.
type cellSyntaxError struct {
	Message string `json:"message"`
	// Line is 1-based in the cell; Column is 0-based in UTF-16 units of
	// LineText, as JavaScript counts.
	Line     int    `json:"line"`
	Column   int    `json:"column"`
	LineText string `json:"lineText"`
}

// tsTranspiled is a cell of TypeScript as JavaScript.
type tsTranspiled struct {
	code string
	// lines holds, per line of code (0-based), its segments as flat
	// triples: generated column, TypeScript line, TypeScript column (all
	// 0-based, columns in UTF-16 units), generated columns ascending.
	lines [][]int
	err   *cellSyntaxError
}

// tsTranspile transpiles a cell. A cell that does not parse has err set.
// Its last expression is wrapped first (wrapLast), so that esbuild keeps
// it; if the wrapped cell does not transpile, the cell is transpiled as
// written.
func tsTranspile(code string) tsTranspiled {
	if w, at, ok := wrapLast(code); ok {
		if t := transpileOnce(w); t.err == nil {
			unshift(t.lines, code, at, len(wrapOpen))
			return t
		}
	}
	return transpileOnce(code)
}

// unshift maps the source columns of a wrapped cell back to the cell: n
// bytes (ASCII) were inserted at offset at.
func unshift(lines [][]int, code string, at, n int) {
	line := strings.Count(code[:at], "\n")
	col := utf16Len(code[strings.LastIndexByte(code[:at], '\n')+1 : at])
	for _, seg := range lines {
		for j := 0; j+2 < len(seg); j += 3 {
			if seg[j+1] == line && seg[j+2] >= col {
				seg[j+2] = max(col, seg[j+2]-n)
			}
		}
	}
}

func transpileOnce(code string) tsTranspiled {
	r := api.Transform(code, tsOptions)
	if len(r.Errors) > 0 {
		return tsTranspiled{err: tsSyntaxError(code, r.Errors[0])}
	}
	var sm struct {
		Mappings string `json:"mappings"`
	}
	var lines [][]int
	if err := json.Unmarshal(r.Map, &sm); err == nil {
		lines, _ = decodeMappings(sm.Mappings, maxSourceMapSegments)
	}
	return tsTranspiled{code: string(r.Code), lines: lines}
}

// tsSyntaxError is esbuild's message as the cell's SyntaxError.
func tsSyntaxError(code string, m api.Message) *cellSyntaxError {
	e := &cellSyntaxError{Message: m.Text, Line: 1}
	if l := m.Location; l != nil {
		e.Line = max(l.Line, 1)
		e.LineText = l.LineText
		col := min(max(l.Column, 0), len(l.LineText)) // bytes
		e.Column = utf16Len(l.LineText[:col])
	} else if first, _, _ := strings.Cut(code, "\n"); first != "" {
		e.LineText = first
	}
	return e
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s { // (a byte that is not UTF-8 is one U+FFFD)
		n += utf16.RuneLen(r)
	}
	return n
}

// tsTransform is the typescript kernel's driverSpec.transform: an execute
// request's code becomes JavaScript with its source map, or a syntax error.
// esbuild runs in m's helper (tsworker.go): a cell it cannot take is the
// cell's error.
func tsTransform(m *Manager, r *request) {
	if r.Op != "execute" {
		return
	}
	a, err := m.ts.do(tsJob{Op: "transpile", Code: r.Code})
	switch {
	case err != nil:
		r.Code, r.SyntaxError = "", &cellSyntaxError{Message: err.Error(), Line: 1}
	case a.Err != nil:
		r.Code, r.SyntaxError = "", a.Err
	default:
		r.Code, r.SourceMap = a.Code, a.Lines
	}
}

// tsIsComplete is the typescript kernel's driverSpec.isComplete, answered
// by m's helper; a cell the helper cannot take is invalid.
func tsIsComplete(m *Manager, code string) protocol.KernelIsCompleteResult {
	a, err := m.ts.do(tsJob{Op: "isComplete", Code: code})
	if err != nil || a.Complete == nil {
		return protocol.KernelIsCompleteResult{Status: protocol.IsCompleteStatusInvalid}
	}
	return *a.Complete
}

// tsIsCompleteHere parses the cell with esbuild: one that ends too early
// is incomplete. It runs in the helper.
func tsIsCompleteHere(code string) protocol.KernelIsCompleteResult {
	r := api.Transform(code, api.TransformOptions{Loader: api.LoaderTS, LogLevel: api.LogLevelSilent})
	if len(r.Errors) == 0 {
		return protocol.KernelIsCompleteResult{Status: protocol.IsCompleteStatusComplete}
	}
	e := r.Errors[0]
	if !strings.Contains(e.Text, "end of file") && !strings.HasPrefix(e.Text, "Unterminated") {
		return protocol.KernelIsCompleteResult{Status: protocol.IsCompleteStatusInvalid}
	}
	return protocol.KernelIsCompleteResult{Status: protocol.IsCompleteStatusIncomplete, Indent: strings.Repeat("  ", openBrackets(code))}
}

// openBrackets counts the brackets code leaves open, skipping strings,
// templates (not their substitutions) and comments; it is only for an
// indent.
func openBrackets(code string) int {
	depth := 0
	for i := 0; i < len(code); i++ {
		switch c := code[i]; c {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth = max(depth-1, 0)
		case '"', '\'', '`':
			for i++; i < len(code) && code[i] != c; i++ {
				if code[i] == '\\' {
					i++
				} else if code[i] == '\n' && c != '`' {
					break
				}
			}
		case '/':
			switch {
			case strings.HasPrefix(code[i:], "//"):
				if j := strings.IndexByte(code[i:], '\n'); j >= 0 {
					i += j
				} else {
					i = len(code)
				}
			case strings.HasPrefix(code[i:], "/*"):
				if j := strings.Index(code[i+2:], "*/"); j >= 0 {
					i += j + 3
				} else {
					i = len(code)
				}
			}
		}
	}
	return depth
}

// decodeMappings decodes a source map's "mappings" (version 3, one source)
// into per generated line flat triples of generated column, source line
// and source column. Segments without a source are left out; at most max
// segments are decoded.
func decodeMappings(s string, max int) ([][]int, error) {
	var lines [][]int
	var cur []int
	var genCol, srcLine, srcCol int
	var fields [5]int
	n := 0
	for i := 0; i <= len(s); {
		if i == len(s) || s[i] == ';' {
			lines = append(lines, cur)
			cur, genCol = nil, 0
			i++
			continue
		}
		if s[i] == ',' {
			i++
			continue
		}
		k := 0
		for i < len(s) && s[i] != ',' && s[i] != ';' {
			v, next, err := decodeVLQ(s, i)
			if err != nil {
				return nil, err
			}
			if k == len(fields) {
				return nil, fmt.Errorf("source map: a segment at %d has more than 5 fields", i)
			}
			fields[k], k, i = v, k+1, next
		}
		if k != 1 && k != 4 && k != 5 {
			return nil, fmt.Errorf("source map: a segment before %d has %d fields", i, k)
		}
		genCol += fields[0]
		if k == 1 {
			continue
		}
		// (fields[1], the source, is always 0: a cell is one source; a
		// name, fields[4], is not needed)
		srcLine, srcCol = srcLine+fields[2], srcCol+fields[3]
		if genCol < 0 || srcLine < 0 || srcCol < 0 {
			return nil, fmt.Errorf("source map: a negative position before %d", i)
		}
		if n++; n > max {
			return nil, fmt.Errorf("source map: more than %d segments", max)
		}
		cur = append(cur, genCol, srcLine, srcCol)
	}
	return lines, nil
}

// decodeVLQ decodes one base64 VLQ value at s[i:].
func decodeVLQ(s string, i int) (v, next int, err error) {
	shift, acc := 0, 0
	for {
		if i >= len(s) {
			return 0, i, fmt.Errorf("source map: a value ends early")
		}
		d := strings.IndexByte(base64Digits, s[i])
		if d < 0 {
			return 0, i, fmt.Errorf("source map: %q at %d is not base64", s[i], i)
		}
		i++
		if shift > 30 {
			return 0, i, fmt.Errorf("source map: a value before %d is too large", i)
		}
		acc |= (d & 31) << shift
		shift += 5
		if d&32 == 0 {
			break
		}
	}
	if acc&1 != 0 {
		return -(acc >> 1), i, nil
	}
	return acc >> 1, i, nil
}

const base64Digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
