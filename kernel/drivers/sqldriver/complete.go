package sqldriver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cellbox-dev/cellbox/protocol"
)

// schema is what the driver knows of the database's tables and views, for
// completion and inspect.
type schema struct {
	objects []object
	// pg: the backend is PostgreSQL (its splitter decides isComplete).
	pg bool
	// keywords and functions are the backend's, for completion;
	// namespaces PostgreSQL's schemas.
	keywords, functions, namespaces []string
}

// object is a table or view.
type object struct {
	// name is as a statement names it: PostgreSQL's is qualified by its
	// schema unless the search path finds it; schema is PostgreSQL's and
	// qualified the quoted schema.name.
	name, kind, sql   string
	schema, qualified string
	columns           []column
}

type column struct {
	name, typ string
	notNull   bool
	pk        int
}

const (
	// maxObjects bounds the tables and views read for completion and
	// variables; maxColumns the columns of each.
	maxObjects = 2000
	maxColumns = 500
	// schemaTimeout bounds reading the schema; countTimeout counting one
	// table's or view's rows (a view can be any query).
	schemaTimeout = 2 * time.Second
	countTimeout  = time.Second
)

// refreshSchema reads the schema again (after each execution).
func (d *driver) refreshSchema() {
	ctx, cancel := context.WithTimeout(context.Background(), schemaTimeout)
	defer cancel()
	s, err := d.be.readSchema(ctx)
	if err != nil {
		return // keep what was known: completion is a help, not a verdict
	}
	_, s.pg = d.be.(*pgBackend)
	d.mu.Lock()
	d.schema = s
	d.mu.Unlock()
}

func (d *driver) currentSchema() *schema {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.schema
}

func (s *schema) find(name string) *object {
	for i := range s.objects {
		if strings.EqualFold(s.objects[i].name, name) {
			return &s.objects[i]
		}
	}
	return nil
}

// isComplete is kernel/isComplete: sqlite3_complete, as the sqlite3 shell
// decides whether a line ends the input (a statement needs its semicolon),
// or for PostgreSQL as psql does. A `%connect` line alone is complete.
func isComplete(code string, pg bool) protocol.KernelIsCompleteResult {
	if m, ok := cutMagic(code); ok && strings.TrimSpace(m.rest) == "" {
		return protocol.KernelIsCompleteResult{Status: protocol.IsCompleteStatusComplete}
	}
	complete := Complete
	if pg {
		complete = CompletePG
	}
	if complete(code) {
		return protocol.KernelIsCompleteResult{Status: protocol.IsCompleteStatusComplete}
	}
	return protocol.KernelIsCompleteResult{Status: protocol.IsCompleteStatusIncomplete}
}

// wordAt finds the word (an identifier, possibly after "name.") that ends
// at the cursor, given in code points. It returns the byte offsets of the
// word, the qualifier before the dot ("" if none), and the cursor's byte
// offset.
func wordAt(code string, cursor int) (start, end int, qualifier string) {
	end = byteOffset(code, cursor)
	start = end
	for start > 0 && isIDChar(code[start-1]) {
		start--
	}
	if start > 0 && code[start-1] == '.' {
		q := start - 1
		for q > 0 && isIDChar(code[q-1]) {
			q--
		}
		qualifier = code[q : start-1]
	}
	return start, end, qualifier
}

// byteOffset is the byte offset of the cursor-th code point (clamped).
func byteOffset(s string, cursor int) int {
	if cursor <= 0 {
		return 0
	}
	n := 0
	for i := range s {
		if n == cursor {
			return i
		}
		n++
	}
	return len(s)
}

// complete is kernel/complete: keywords and functions, the names of tables
// and views, and columns (those of the table before a dot, when there is
// one). A keyword is given in the case of what was typed.
func (d *driver) complete(code string, cursor int) protocol.KernelCompleteResult {
	start, end, qualifier := wordAt(code, cursor)
	prefix := code[start:end]
	s := d.currentSchema()
	var matches []string
	add := func(name string) {
		if strings.HasPrefix(strings.ToLower(name), strings.ToLower(prefix)) && !slices.Contains(matches, name) {
			matches = append(matches, name)
		}
	}
	if qualifier != "" {
		if o := s.find(qualifier); o != nil {
			for _, c := range o.columns {
				add(c.name)
			}
		}
		// A PostgreSQL schema's tables and views.
		for _, o := range s.objects {
			if strings.EqualFold(o.schema, qualifier) {
				add(o.name[strings.LastIndexByte(o.name, '.')+1:])
			}
		}
	} else {
		for _, o := range s.objects {
			add(o.name)
		}
		for _, n := range s.namespaces {
			add(n)
		}
		for _, o := range s.objects {
			for _, c := range o.columns {
				add(c.name)
			}
		}
		lower := prefix != "" && strings.ToLower(prefix) == prefix
		for _, k := range s.keywords {
			if lower {
				k = strings.ToLower(k)
			}
			add(k)
		}
		for _, f := range s.functions {
			add(f)
		}
	}
	cs := utf8.RuneCountInString(code[:start])
	if matches == nil {
		matches = []string{}
	}
	return protocol.KernelCompleteResult{Matches: matches, CursorStart: cs, CursorEnd: cs + utf8.RuneCountInString(prefix)}
}

// inspect is kernel/inspect: a table's or view's schema (its CREATE
// statement and columns), for the name at or before the cursor.
func (d *driver) inspect(code string, cursor, _ int) protocol.KernelInspectResult {
	start, end, _ := wordAt(code, cursor)
	// The whole word around the cursor.
	for end < len(code) && isIDChar(code[end]) {
		end++
	}
	o := d.currentSchema().find(code[start:end])
	if o == nil {
		return protocol.KernelInspectResult{Found: false}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", o.kind, o.name)
	for _, c := range o.columns {
		fmt.Fprintf(&b, "  %s", c.name)
		if c.typ != "" {
			b.WriteString(" " + c.typ)
		}
		if c.pk > 0 {
			b.WriteString(" PRIMARY KEY")
		}
		if c.notNull {
			b.WriteString(" NOT NULL")
		}
		b.WriteString("\n")
	}
	if o.sql != "" {
		b.WriteString("\n" + o.sql + ";\n")
	}
	return protocol.KernelInspectResult{Found: true, Data: protocol.MimeBundle{"text/plain": b.String()}}
}

// variables is kernel/variables: the tables and views, with their row
// counts (a count that takes longer than countTimeout is left out).
func (d *driver) variables() protocol.KernelVariablesResult {
	d.refreshSchema()
	s := d.currentSchema()
	out := protocol.KernelVariablesResult{Variables: []protocol.Variable{}}
	for _, o := range s.objects {
		v := protocol.Variable{Name: o.name, Type: o.kind}
		ctx, cancel := context.WithTimeout(context.Background(), countTimeout)
		n, err := d.be.count(ctx, &o)
		cancel()
		cols := make([]string, 0, len(o.columns))
		for _, c := range o.columns {
			cols = append(cols, c.name)
		}
		colText := "(" + strings.Join(cols, ", ") + ")"
		if err == nil {
			v.Size = &n
			if n == 1 {
				v.Summary = "1 row " + colText
			} else {
				v.Summary = fmt.Sprintf("%d rows %s", n, colText)
			}
		} else {
			v.Summary = colText
		}
		out.Variables = append(out.Variables, v)
	}
	return out
}

// quoteIdent quotes a name as an SQL identifier.
func quoteIdent(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}
