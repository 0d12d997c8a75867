package mcp

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Text that goes into a model's context is bounded: a long stream keeps
// its head and its tail, cut on line boundaries, with a line between them
// saying what was left out and where the whole is.

// headTail returns text as it is when it is at most max bytes; longer
// text keeps about max/2 bytes of its head and of its tail, each cut on a
// line boundary (a line longer than that is cut on a UTF-8 boundary), with
// a note line between them naming how many lines were left out and, when
// whole is not empty, where the whole text is. omitted is that count of
// lines (0 when nothing was left out).
func headTail(text string, max int, whole string) (out string, omitted int) {
	if len(text) <= max {
		return text, 0
	}
	half := max / 2
	head := text[:half]
	if i := strings.LastIndexByte(head, '\n'); i > 0 {
		head = head[:i+1]
	} else {
		head = cutUTF8(head)
	}
	tail := text[len(text)-half:]
	if i := strings.IndexByte(tail, '\n'); i >= 0 && i < len(tail)-1 {
		tail = tail[i+1:]
	} else {
		tail = tail[utf8Start(tail):]
	}
	middle := text[len(head) : len(text)-len(tail)]
	omitted = strings.Count(middle, "\n")
	if !strings.HasSuffix(middle, "\n") {
		omitted++ // a line cut in two counts once
	}
	var b strings.Builder
	b.Grow(len(head) + len(tail) + 100)
	b.WriteString(head)
	if !strings.HasSuffix(head, "\n") {
		b.WriteByte('\n')
	}
	b.WriteString(omittedNote(omitted, len(middle), whole))
	b.WriteByte('\n')
	b.WriteString(tail)
	return b.String(), omitted
}

// omittedNote is the line that stands for what headTail left out.
func omittedNote(lines, bytes int, whole string) string {
	what := strconv.Itoa(lines) + " lines"
	if lines == 1 {
		what = "1 line"
	}
	note := fmt.Sprintf("… %s omitted (%d bytes)", what, bytes)
	if whole != "" {
		note += "; full output: " + whole
	}
	return note
}

// cutUTF8 drops a UTF-8 sequence cut at the end of s.
func cutUTF8(s string) string {
	for i := 0; i < utf8.UTFMax && len(s) > 0; i++ {
		r, size := utf8.DecodeLastRuneInString(s)
		if r != utf8.RuneError || size > 1 {
			return s
		}
		s = s[:len(s)-1]
	}
	return s
}

// utf8Start is the offset of the first rune that starts in s.
func utf8Start(s string) int {
	for i := 0; i < len(s) && i < utf8.UTFMax; i++ {
		if utf8.RuneStart(s[i]) {
			return i
		}
	}
	return 0
}

// collapseCR keeps, of each line, what a terminal would show: the text
// after its last carriage return (progress bars redraw a line with \r).
// "\r\n" is a line end.
func collapseCR(s string) string {
	if !strings.Contains(s, "\r") {
		return s
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if j := strings.LastIndexByte(strings.TrimRight(l, "\r"), '\r'); j >= 0 {
			l = l[j+1:]
		}
		lines[i] = strings.TrimRight(l, "\r")
	}
	return strings.Join(lines, "\n")
}

// ansiRE matches terminal escape sequences: CSI (colours, cursor moves),
// OSC (titles, links) and the two-byte ones.
var ansiRE = regexp.MustCompile(`\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]`)

// stripANSI removes terminal escape sequences.
func stripANSI(s string) string {
	if !strings.Contains(s, "\x1b") {
		return s
	}
	return ansiRE.ReplaceAllString(s, "")
}

// lastLine is the last non-empty line of s, at most n bytes of it, for a
// progress message.
func lastLine(s string, n int) string {
	s = strings.TrimRight(collapseCR(s), "\n \t")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	s = strings.TrimSpace(stripANSI(s))
	if len(s) > n {
		s = cutUTF8(s[:n]) + "…"
	}
	return s
}
