package sqldriver

import "strings"

// A cell is split into statements the way SQLite's own sqlite3_complete
// reads SQL: a statement ends at a semicolon outside string literals,
// quoted identifiers and comments, except inside the body of a CREATE
// TRIGGER, which ends only at "END ;". The splitter is that state machine
// (SQLite's complete.c) run over the cell, cutting at each statement's end.

// token classes of complete.c.
const (
	tkSemi = iota
	tkWS
	tkOther
	tkExplain
	tkCreate
	tkTemp
	tkTrigger
	tkEnd
)

// states of complete.c.
const (
	stInvalid = iota
	stStart
	stNormal
	stExplain
	stCreate
	stTrigger
	stSemi
	stEnd
)

// trans is complete.c's transition table: trans[state][token].
var trans = [8][8]int{
	//            SEMI WS OTHER EXPLAIN CREATE TEMP TRIGGER END
	stInvalid: {stStart, stInvalid, stNormal, stExplain, stCreate, stNormal, stNormal, stNormal},
	stStart:   {stStart, stStart, stNormal, stExplain, stCreate, stNormal, stNormal, stNormal},
	stNormal:  {stStart, stNormal, stNormal, stNormal, stNormal, stNormal, stNormal, stNormal},
	stExplain: {stStart, stExplain, stExplain, stNormal, stCreate, stNormal, stNormal, stNormal},
	stCreate:  {stStart, stCreate, stNormal, stNormal, stNormal, stCreate, stTrigger, stNormal},
	stTrigger: {stSemi, stTrigger, stTrigger, stTrigger, stTrigger, stTrigger, stTrigger, stTrigger},
	stSemi:    {stSemi, stSemi, stTrigger, stTrigger, stTrigger, stTrigger, stTrigger, stEnd},
	stEnd:     {stStart, stEnd, stTrigger, stTrigger, stTrigger, stTrigger, stTrigger, stTrigger},
}

// Statement is one statement of a cell.
type Statement struct {
	// Text is the statement as written, from its first token to its
	// semicolon (included) or the end of the cell, without the comments
	// and blanks before it.
	Text string
	// Line is the 1-based line of the cell on which Text begins.
	Line int
}

// token is the next token of s at i: its class and where it ends.
// unterminated is true when a string, quoted identifier or block comment
// runs to the end of s.
func token(s string, i int) (class, end int, unterminated bool) {
	c := s[i]
	switch {
	case c == ';':
		return tkSemi, i + 1, false
	case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
		return tkWS, i + 1, false
	case c == '/' && i+1 < len(s) && s[i+1] == '*':
		j := strings.Index(s[i+2:], "*/")
		if j < 0 {
			return tkWS, len(s), true
		}
		return tkWS, i + 2 + j + 2, false
	case c == '-' && i+1 < len(s) && s[i+1] == '-':
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			return tkWS, len(s), false
		}
		return tkWS, i + j + 1, false
	case c == '[':
		j := strings.IndexByte(s[i+1:], ']')
		if j < 0 {
			return tkOther, len(s), true
		}
		return tkOther, i + 1 + j + 1, false
	case c == '`' || c == '"' || c == '\'':
		// A doubled quote inside is two tokens back to back, which reads
		// the same for the state machine.
		j := strings.IndexByte(s[i+1:], c)
		if j < 0 {
			return tkOther, len(s), true
		}
		return tkOther, i + 1 + j + 1, false
	case isIDChar(c):
		j := i + 1
		for j < len(s) && isIDChar(s[j]) {
			j++
		}
		return keyword(s[i:j]), j, false
	default:
		return tkOther, i + 1, false
	}
}

// isIDChar: a character of an identifier or keyword (SQLite takes every
// byte over 0x7f as one).
func isIDChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80
}

func keyword(w string) int {
	switch len(w) {
	case 3:
		if strings.EqualFold(w, "end") {
			return tkEnd
		}
	case 4:
		if strings.EqualFold(w, "temp") {
			return tkTemp
		}
	case 6:
		if strings.EqualFold(w, "create") {
			return tkCreate
		}
	case 7:
		if strings.EqualFold(w, "trigger") {
			return tkTrigger
		}
		if strings.EqualFold(w, "explain") {
			return tkExplain
		}
	case 9:
		if strings.EqualFold(w, "temporary") {
			return tkTemp
		}
	}
	return tkOther
}

// Split cuts a cell into its statements, in order. Blanks and comments
// between statements and empty statements (a lone semicolon) are left
// out; text after the last semicolon that holds a token is a last
// statement without one. It never fails: what SQLite cannot parse is
// SQLite's to report.
func Split(cell string) []Statement {
	var out []Statement
	state := stStart
	begin := -1 // the byte where the current statement's first token begins
	line, beginLine := 1, 1
	for i := 0; i < len(cell); {
		class, end, _ := token(cell, i)
		if class != tkWS && class != tkSemi && begin < 0 {
			begin, beginLine = i, line
		}
		state = trans[state][class]
		line += strings.Count(cell[i:end], "\n")
		if class == tkSemi && state == stStart {
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

// Complete is sqlite3_complete: whether the cell ends a statement (its last
// token is a semicolon that ends one). A cell of blanks and comments alone
// is complete too: there is nothing more to wait for.
func Complete(cell string) bool {
	state := stStart
	for i := 0; i < len(cell); {
		class, end, unterminated := token(cell, i)
		if unterminated {
			return false
		}
		state = trans[state][class]
		i = end
	}
	return state == stStart
}
