package sqldriver

import (
	"encoding/hex"
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// A query's rows are shown as a table, in text/plain (box drawing, as the
// sqlite3 shell's .mode box) and text/html (an escaped <table>).

const (
	// MaxRows is how many rows of a query are shown; the footer says how
	// many more the query gave.
	MaxRows = 1000
	// maxTextCell is the width, in characters, a value gets in text/plain
	// before it is cut with "…"; maxHTMLCell the same for text/html.
	maxTextCell = 80
	maxHTMLCell = 4000
	// maxBlobShown is how many bytes of a blob are shown, in hex.
	maxBlobShown = 32
)

// Cell is one shown value.
type Cell struct {
	Text string
	// Null: SQL NULL (Text is "NULL").
	Null bool
	// Number: right-aligned in text/plain.
	Number bool
}

// Table is a query's result as shown.
type Table struct {
	Columns []string
	Rows    [][]Cell
	// More is how many rows the query gave beyond Rows.
	More int64
}

// FormatValue is how a value of a row is shown. declType is the column's
// declared type (DATE, DATETIME and TIMESTAMP text comes as a time).
func FormatValue(v any, declType string) Cell {
	switch v := v.(type) {
	case nil:
		return Cell{Text: "NULL", Null: true}
	case int64:
		return Cell{Text: strconv.FormatInt(v, 10), Number: true}
	case float64:
		return Cell{Text: formatFloat(v), Number: true}
	case string:
		return Cell{Text: v}
	case []byte:
		if len(v) > maxBlobShown {
			return Cell{Text: "X'" + strings.ToUpper(hex.EncodeToString(v[:maxBlobShown])) + "…' (" + strconv.Itoa(len(v)) + " bytes)"}
		}
		return Cell{Text: "X'" + strings.ToUpper(hex.EncodeToString(v)) + "'"}
	case time.Time:
		if strings.EqualFold(declType, "DATE") && v.Equal(v.Truncate(24*time.Hour)) && v.Location() == time.UTC {
			return Cell{Text: v.Format(time.DateOnly)}
		}
		if v.Location() == time.UTC {
			return Cell{Text: v.Format("2006-01-02 15:04:05.999999999")}
		}
		return Cell{Text: v.Format("2006-01-02 15:04:05.999999999-07:00")}
	case bool:
		if v {
			return Cell{Text: "1", Number: true}
		}
		return Cell{Text: "0", Number: true}
	default:
		return Cell{Text: fmt.Sprint(v)}
	}
}

// formatFloat is SQLite's way of printing a REAL (%!.15g): 15 significant
// digits, and always a decimal point or an exponent.
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case math.IsNaN(f):
		return "NaN"
	}
	s := strconv.FormatFloat(f, 'g', 15, 64)
	mant, exp, hasExp := strings.Cut(s, "e")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	} else {
		mant = strings.TrimRight(mant, "0")
		if strings.HasSuffix(mant, ".") {
			mant += "0"
		}
	}
	if hasExp {
		return mant + "e" + exp
	}
	return mant
}

// clean makes a value fit one line of a text table: control characters
// are shown as escapes (a newline as \n), and a value wider than max
// characters is cut with "…".
func clean(s string, max int) string {
	var b strings.Builder
	n := 0
	for i, r := range s {
		if n >= max {
			b.WriteString("…")
			break
		}
		switch {
		case r == utf8.RuneError && !validAt(s, i):
			b.WriteString(`\x` + hex.EncodeToString([]byte{s[i]}))
			n += 4
		case r == '\n':
			b.WriteString(`\n`)
			n += 2
		case r == '\t':
			b.WriteString(`\t`)
			n += 2
		case r == '\r':
			b.WriteString(`\r`)
			n += 2
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029':
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			n += len(q) - 2
		default:
			b.WriteRune(r)
			n += runeWidth(r)
		}
	}
	return b.String()
}

// validAt: s holds a valid encoding at i (a real U+FFFD, not a bad byte).
func validAt(s string, i int) bool {
	r, size := utf8.DecodeRuneInString(s[i:])
	return r != utf8.RuneError || size == 3
}

// width is how many terminal columns s takes (wide East Asian characters
// two, combining marks none).
func width(s string) int {
	n := 0
	for _, r := range s {
		n += runeWidth(r)
	}
	return n
}

func runeWidth(r rune) int {
	switch {
	case unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Me, r) || r == '\u200b':
		return 0
	case r >= 0x1100 && (r <= 0x115f || r == 0x2329 || r == 0x232a ||
		r >= 0x2e80 && r <= 0xa4cf && r != 0x303f ||
		r >= 0xac00 && r <= 0xd7a3 ||
		r >= 0xf900 && r <= 0xfaff ||
		r >= 0xfe30 && r <= 0xfe6f ||
		r >= 0xff00 && r <= 0xff60 ||
		r >= 0xffe0 && r <= 0xffe6 ||
		r >= 0x1f300 && r <= 0x1f64f ||
		r >= 0x1f900 && r <= 0x1f9ff ||
		r >= 0x20000 && r <= 0x3fffd):
		return 2
	}
	return 1
}

// Footer is the line under a table: how many rows it has, and how many
// were left out.
func (t *Table) Footer() string {
	shown := int64(len(t.Rows))
	switch {
	case t.More > 0:
		return fmt.Sprintf("%d rows (the first %d shown, %d more not shown)", shown+t.More, shown, t.More)
	case shown == 1:
		return "1 row"
	default:
		return fmt.Sprintf("%d rows", shown)
	}
}

// Text is the table in box drawing, with the footer under it.
func (t *Table) Text() string {
	cols := make([]string, len(t.Columns))
	widths := make([]int, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = clean(c, maxTextCell)
		widths[i] = width(cols[i])
	}
	cells := make([][]string, len(t.Rows))
	for r, row := range t.Rows {
		cells[r] = make([]string, len(cols))
		for i := range cols {
			if i < len(row) {
				cells[r][i] = clean(row[i].Text, maxTextCell)
				widths[i] = max(widths[i], width(cells[r][i]))
			}
		}
	}
	var b strings.Builder
	rule := func(left, mid, right string) {
		b.WriteString(left)
		for i, w := range widths {
			if i > 0 {
				b.WriteString(mid)
			}
			b.WriteString(strings.Repeat("─", w+2))
		}
		b.WriteString(right + "\n")
	}
	line := func(vals []string, right func(i int) bool) {
		b.WriteString("│")
		for i, v := range vals {
			pad := strings.Repeat(" ", widths[i]-width(v))
			if right(i) {
				b.WriteString(" " + pad + v + " │")
			} else {
				b.WriteString(" " + v + pad + " │")
			}
		}
		b.WriteString("\n")
	}
	if len(cols) > 0 {
		rule("┌", "┬", "┐")
		line(cols, func(int) bool { return false })
		rule("├", "┼", "┤")
		for r, row := range cells {
			line(row, func(i int) bool { return i < len(t.Rows[r]) && t.Rows[r][i].Number })
		}
		rule("└", "┴", "┘")
	}
	b.WriteString(t.Footer())
	return b.String()
}

// HTML is the table as an HTML <table>, every value escaped, with the
// footer under it.
func (t *Table) HTML() string {
	var b strings.Builder
	b.WriteString("<table>\n<thead><tr>")
	for _, c := range t.Columns {
		b.WriteString("<th>" + htmlCell(c) + "</th>")
	}
	b.WriteString("</tr></thead>\n<tbody>\n")
	for _, row := range t.Rows {
		b.WriteString("<tr>")
		for _, c := range row {
			switch {
			case c.Null:
				b.WriteString("<td><em>NULL</em></td>")
			case c.Number:
				b.WriteString(`<td style="text-align: right">` + htmlCell(c.Text) + "</td>")
			default:
				b.WriteString("<td>" + htmlCell(c.Text) + "</td>")
			}
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody>\n</table>\n<p>" + html.EscapeString(t.Footer()) + "</p>")
	return b.String()
}

// htmlCell escapes a value, cut at maxHTMLCell characters; invalid UTF-8
// becomes U+FFFD.
func htmlCell(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) > maxHTMLCell {
		s = string([]rune(s)[:maxHTMLCell]) + "…"
	}
	return html.EscapeString(s)
}
