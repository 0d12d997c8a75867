package pty

import (
	"encoding/base64"
	"fmt"
	"unicode/utf8"

	"github.com/cellbox-dev/cellbox/protocol"
)

// encoder turns what the reader gets from the master into pty/output data.
// In utf8 it never splits a sequence: an incomplete one at the end of a
// read is carried (at most utf8.UTFMax-1 bytes) and put in front of the
// next read. Bytes that are not UTF-8 become U+FFFD, one per byte. base64
// is byte-exact and carries nothing.
type encoder struct {
	base64 bool
	tail   [utf8.UTFMax]byte
	ntail  int
}

// tailRoom is how much room read buffers keep in front for the carried
// tail; see (*encoder).prepend.
const tailRoom = utf8.UTFMax

// prepend puts the carried tail just before buf[tailRoom:], where the new
// bytes were read, and returns where the chunk starts.
func (e *encoder) prepend(buf []byte) int {
	start := tailRoom - e.ntail
	copy(buf[start:tailRoom], e.tail[:e.ntail])
	e.ntail = 0
	return start
}

// encode returns the data for b (which begins with any carried tail), or ""
// when all of b is carried.
func (e *encoder) encode(b []byte) string {
	if e.base64 {
		return base64.StdEncoding.EncodeToString(b)
	}
	if k := incompleteTail(b); k > 0 {
		e.ntail = copy(e.tail[:], b[len(b)-k:])
		b = b[:len(b)-k]
	}
	return validUTF8(b)
}

// flush returns the carried tail as U+FFFD per byte (the program ended
// in the middle of a sequence).
func (e *encoder) flush() string {
	if e.ntail == 0 {
		return ""
	}
	s := validUTF8(e.tail[:e.ntail])
	e.ntail = 0
	return s
}

// incompleteTail is the length of a UTF-8 sequence cut short at the end of
// b, which more bytes could complete; 0 when b ends on a boundary (or with
// bytes that no continuation makes valid, which are sent as U+FFFD).
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

// validUTF8 returns b as a string with every byte that is not part of a
// valid UTF-8 sequence replaced by U+FFFD.
func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+len(b)/2)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			out = append(out, "\uFFFD"...)
		} else {
			out = append(out, b[:size]...)
		}
		b = b[size:]
	}
	return string(out)
}

// decodeInput is pty/write data in the terminal's encoding.
func decodeInput(enc protocol.Encoding, data string) ([]byte, error) {
	if enc != protocol.EncodingBase64 {
		return []byte(data), nil
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return nil, fmt.Errorf("%w: field \"data\" is not valid base64 (the terminal was opened with encoding base64): %v", ErrInvalid, err)
	}
	return b, nil
}
