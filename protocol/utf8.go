package protocol

import (
	"strings"
	"unicode/utf8"
)

// How a program's bytes are carried in JSON strings: the data of pty/output
// in encoding utf8 and the text of kernel/output of kind stream. The bytes
// are read in pieces, and each piece becomes a chunk of valid UTF-8 by one
// rule, the same for terminals and kernels:
//   - every byte that is not part of a valid UTF-8 sequence becomes one
//     U+FFFD: "a\xff\xfe\xfdb" is "a\uFFFD\uFFFD\uFFFDb" (not one U+FFFD for
//     the run, as strings.ToValidUTF8 would give);
//   - a chunk never splits a sequence: one cut short at the end of a read
//     (at most 3 bytes) is carried to the front of the next, and becomes
//     one U+FFFD per byte only when the next bytes do not complete it or
//     the stream ends.
//
// A client that needs the bytes exactly asks for base64 (pty/open).

// UTF8Chunker applies that rule to one stream of bytes. The zero value is
// ready to use; it is not safe for concurrent use.
type UTF8Chunker struct {
	carry  [utf8.UTFMax]byte // a sequence cut short at the end of the last read
	ncarry int
}

// Chunk returns b as text, with the bytes carried from the last call in
// front; an incomplete sequence at the end of b is carried to the next
// call. It returns "" when there is nothing to send yet.
func (c *UTF8Chunker) Chunk(b []byte) string {
	var sb strings.Builder
	if c.ncarry > 0 {
		carried := c.ncarry
		n := copy(c.carry[carried:], b)
		seq := c.carry[:carried+n]
		if !utf8.FullRune(seq) {
			c.ncarry += n // all of b continues the sequence, still short
			return ""
		}
		c.ncarry = 0
		sb.Grow(len(b) + len(replacement)*carried)
		if r, size := utf8.DecodeRune(seq); r == utf8.RuneError && size == 1 {
			// Not completed: each carried byte is one U+FFFD, and b is
			// read from its start.
			for range carried {
				sb.WriteString(replacement)
			}
		} else {
			sb.Write(seq[:size])
			b = b[size-carried:]
		}
	}
	if k := incompleteTail(b); k > 0 {
		c.ncarry = copy(c.carry[:], b[len(b)-k:])
		b = b[:len(b)-k]
	}
	if sb.Len() == 0 && utf8.Valid(b) {
		return string(b)
	}
	writeValid(&sb, b)
	return sb.String()
}

// Flush returns the bytes still carried, one U+FFFD each (the stream ended
// inside a sequence), or "" when none are.
func (c *UTF8Chunker) Flush() string {
	s := strings.Repeat(replacement, c.ncarry)
	c.ncarry = 0
	return s
}

// replacement is U+FFFD, what each byte that is not UTF-8 becomes.
const replacement = "\uFFFD"

// incompleteTail is the length of a UTF-8 sequence cut short at the end of
// b, which more bytes could complete; 0 when b ends on a boundary (or with
// bytes that no continuation makes valid, which become U+FFFD now).
func incompleteTail(b []byte) int {
	for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
		c := b[len(b)-i]
		if c&0xC0 == 0x80 {
			continue // a continuation byte: look further back
		}
		if c >= 0xC0 && !utf8.FullRune(b[len(b)-i:]) {
			return i
		}
		return 0
	}
	return 0
}

// writeValid writes b to sb with every byte that is not part of a valid
// UTF-8 sequence as one U+FFFD.
func writeValid(sb *strings.Builder, b []byte) {
	if utf8.Valid(b) {
		sb.Write(b)
		return
	}
	sb.Grow(len(b) + len(b)/2)
	start := 0
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			sb.Write(b[start:i])
			sb.WriteString(replacement)
			i++
			start = i
			continue
		}
		i += size
	}
	sb.Write(b[start:])
}
