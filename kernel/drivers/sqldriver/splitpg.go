package sqldriver

import "strings"

// A cell for PostgreSQL is split the way psql reads its input: a statement
// ends at a semicolon outside string literals ('...', E'...' with its
// backslash escapes), quoted identifiers, dollar-quoted strings
// ($$...$$, $tag$...$tag$: function bodies) and comments (-- and nested
// /* */). A body of BEGIN ATOMIC ... END (SQL-standard function bodies)
// is not recognized: write such a function with a dollar-quoted body.

// pgToken is the next token of s at i for PostgreSQL: its class (tkSemi,
// tkWS or tkOther) and where it ends. unterminated is true when a string,
// quoted identifier or comment runs to the end of s.
func pgToken(s string, i int) (class, end int, unterminated bool) {
	c := s[i]
	switch {
	case c == ';':
		return tkSemi, i + 1, false
	case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
		return tkWS, i + 1, false
	case c == '-' && i+1 < len(s) && s[i+1] == '-':
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			return tkWS, len(s), false
		}
		return tkWS, i + j + 1, false
	case c == '/' && i+1 < len(s) && s[i+1] == '*':
		depth := 0
		for j := i; j+1 < len(s); {
			switch {
			case s[j] == '/' && s[j+1] == '*':
				depth++
				j += 2
			case s[j] == '*' && s[j+1] == '/':
				depth--
				j += 2
				if depth == 0 {
					return tkWS, j, false
				}
			default:
				j++
			}
		}
		return tkWS, len(s), true
	case c == '\'':
		return pgQuoted(s, i, '\'', false)
	case c == '"':
		return pgQuoted(s, i, '"', false)
	case (c == 'E' || c == 'e') && i+1 < len(s) && s[i+1] == '\'':
		return pgQuoted(s, i+1, '\'', true)
	case c == '$':
		if tag, ok := dollarTag(s, i); ok {
			j := strings.Index(s[i+len(tag):], tag)
			if j < 0 {
				return tkOther, len(s), true
			}
			return tkOther, i + len(tag) + j + len(tag), false
		}
		return tkOther, i + 1, false
	case pgIDChar(c):
		j := i + 1
		for j < len(s) && (pgIDChar(s[j]) || s[j] == '$') {
			j++
		}
		return tkOther, j, false
	default:
		return tkOther, i + 1, false
	}
}

// pgQuoted is the quoted token whose opening quote is at i: a doubled
// quote stands for one, and with backslashes (an E” string) a backslash
// escapes the character after it.
func pgQuoted(s string, i int, q byte, backslashes bool) (int, int, bool) {
	for j := i + 1; j < len(s); j++ {
		switch {
		case backslashes && s[j] == '\\':
			j++
		case s[j] == q:
			if j+1 < len(s) && s[j+1] == q {
				j++
				continue
			}
			return tkOther, j + 1, false
		}
	}
	return tkOther, len(s), true
}

// dollarTag is the opening delimiter of a dollar-quoted string at i ($$ or
// $tag$), if there is one: a tag is an identifier that does not begin
// with a digit ($1 is a parameter).
func dollarTag(s string, i int) (string, bool) {
	j := i + 1
	for j < len(s) && s[j] != '$' {
		if !pgIDChar(s[j]) || (j == i+1 && s[j] >= '0' && s[j] <= '9') {
			return "", false
		}
		j++
	}
	if j >= len(s) {
		return "", false
	}
	return s[i : j+1], true
}

// pgIDChar: a character of an identifier or keyword.
func pgIDChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c >= 0x80
}

// SplitPG cuts a cell into its statements for PostgreSQL, as Split does
// for SQLite.
func SplitPG(cell string) []Statement {
	var out []Statement
	begin := -1
	line, beginLine := 1, 1
	for i := 0; i < len(cell); {
		class, end, _ := pgToken(cell, i)
		if class == tkOther && begin < 0 {
			begin, beginLine = i, line
		}
		line += strings.Count(cell[i:end], "\n")
		if class == tkSemi {
			if begin >= 0 {
				out = append(out, Statement{Text: cell[begin:end], Line: beginLine})
			}
			begin = -1
		}
		i = end
	}
	if begin >= 0 {
		out = append(out, Statement{Text: strings.TrimRight(cell[begin:], " \t\r\n\f\v"), Line: beginLine})
	}
	return out
}

// CompletePG says whether a cell ends a statement for PostgreSQL: its last
// token is a semicolon (a cell of blanks and comments alone is complete).
func CompletePG(cell string) bool {
	complete := true
	for i := 0; i < len(cell); {
		class, end, unterminated := pgToken(cell, i)
		if unterminated {
			return false
		}
		switch class {
		case tkSemi:
			complete = true
		case tkOther:
			complete = false
		}
		i = end
	}
	return complete
}
