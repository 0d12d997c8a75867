package workspace

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Names on the wire. A file name is bytes; a JSON string is Unicode, so a
// name whose bytes are not UTF-8 cannot be carried as it is (encoding/json
// would put U+FFFD in place of each bad byte, and the client could neither
// review nor name the file). Such a name is carried quoted as git quotes
// it (quote_c_style): in double quotes, `"` and `\` escaped, control
// characters as C escapes, bytes that are not UTF-8 in octal, so
// "caf\351.txt" names the Latin-1 "café.txt". To keep that lossless, a
// name that begins with `"` is quoted too. Every other name is carried as
// it is. A path a client sends that begins and ends with `"` and unquotes
// cleanly is read quoted (README: Extensions).

// quotePath quotes a diff label as git does: a name with a control
// character, a double quote, a backslash or bytes that are not UTF-8 is
// quoted (cQuote), so a name holding "\n+++ b/x" or "\n@@" cannot forge
// the lines of a diff. Other names are as they are.
func quotePath(s string) string {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r < 0x20 || r == 0x7f || r == '"' || r == '\\' || (r == utf8.RuneError && n == 1) {
			return cQuote(s)
		}
		i += n
	}
	return s
}

// wireName is how a name (a workspace-relative path, as bytes) is carried
// in the protocol and in the workspace's own JSON files: as it is when it
// is UTF-8 and does not begin with `"`, else quoted.
func wireName(s string) string {
	if utf8.ValidString(s) && !strings.HasPrefix(s, `"`) {
		return s
	}
	return cQuote(s)
}

// fromWire is the name a path from a client or a JSON file means: a
// quoted name (wireName) unquoted, anything else as it is.
func fromWire(p string) string {
	if len(p) < 2 || p[0] != '"' || p[len(p)-1] != '"' {
		return p
	}
	if s, err := strconv.Unquote(p); err == nil {
		return s
	}
	return p
}

// wireNames is wireName of each.
func wireNames(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = wireName(n)
	}
	return out
}

// cQuote puts s in double quotes as git's quote_c_style does: `"` and `\`
// escaped, control characters as C escapes or octal, bytes that are not
// UTF-8 in octal, UTF-8 text as it is (core.quotePath off). strconv.Unquote
// reads it back byte for byte.
func cQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, "\\%03o", s[i])
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			if e := strings.IndexByte("\a\b\t\n\v\f\r", byte(r)); e >= 0 {
				b.WriteByte('\\')
				b.WriteByte("abtnvfr"[e])
			} else {
				fmt.Fprintf(&b, "\\%03o", r)
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	b.WriteByte('"')
	return b.String()
}

// relPath is the name a client's workspace-relative path means (fromWire:
// a quoted name unquoted), checked by checkRel.
func relPath(p string) (string, error) { return checkRel(fromWire(p)) }

// checkRel checks a workspace-relative name: not absolute, no ".." that
// climbs above /workspace. "" and "." are /workspace itself.
func checkRel(name string) (string, error) {
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("%w: %q is absolute; paths are relative to /workspace", ErrPathOutside, name)
	}
	if strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("%w: %q holds a NUL byte", ErrInvalid, name)
	}
	clean := path.Clean(name)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%w: %q climbs out of /workspace", ErrPathOutside, name)
	}
	return clean, nil
}
