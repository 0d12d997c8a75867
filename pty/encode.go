package pty

import (
	"encoding/base64"
	"fmt"

	"github.com/cellbox-dev/cellbox/protocol"
)

// encoder turns what the reader gets from the master into pty/output data:
// in utf8 by protocol.UTF8Chunker (one U+FFFD per byte that is not UTF-8,
// a chunk never splits a sequence); in base64 byte-exact, carrying nothing.
type encoder struct {
	base64 bool
	utf8   protocol.UTF8Chunker
}

// encode returns the data for b, or "" when all of b is carried.
func (e *encoder) encode(b []byte) string {
	if e.base64 {
		return base64.StdEncoding.EncodeToString(b)
	}
	return e.utf8.Chunk(b)
}

// flush returns what is still carried, as U+FFFD per byte (the program
// ended in the middle of a sequence).
func (e *encoder) flush() string {
	if e.base64 {
		return ""
	}
	return e.utf8.Flush()
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
