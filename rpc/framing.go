package rpc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// LSP base-protocol framing: a header block of "Name: value\r\n" lines ended
// by an empty line, then Content-Length bytes of JSON.
//
// The framing reader is ours rather than jsonrpc2's so that a bad frame is a
// *FrameError the stream answers and skips, not the end of the connection.

const (
	// maxHeaderBytes bounds one header block. Real clients send one or two
	// short lines; anything longer is garbage to skip.
	maxHeaderBytes = 8 << 10
	// DefaultMaxMessageBytes is the default for --max-message-bytes (16 MiB).
	DefaultMaxMessageBytes = 16 << 20
)

// FrameError is a malformed or oversized frame that the reader skipped. The
// stream stays usable: the next ReadFrame starts at the next frame.
type FrameError struct {
	// Code is the JSON-RPC code to answer with (-32700 or -32600).
	Code int32
	Msg  string
}

func (e *FrameError) Error() string { return e.Msg }

// ReadFrame reads one LSP frame from r and returns its body, which is valid
// until the next call with the same buf. A malformed header or a body over max
// bytes is consumed and reported as a *FrameError; io errors (including
// io.EOF at a frame boundary and io.ErrUnexpectedEOF inside one) are returned
// as they are and end the stream.
func ReadFrame(r *bufio.Reader, max int, buf []byte) (body []byte, err error) {
	length, herr := readHeader(r)
	if herr != nil {
		var fe *FrameError
		if !errors.As(herr, &fe) {
			return nil, herr
		}
		if length > 0 {
			if err := discard(r, length); err != nil {
				return nil, err
			}
		}
		return nil, herr
	}
	if length > max {
		if err := discard(r, length); err != nil {
			return nil, err
		}
		return nil, &FrameError{Code: -32600, Msg: fmt.Sprintf("message of %d bytes exceeds the limit of %d bytes (--max-message-bytes)", length, max)}
	}
	if cap(buf) < length {
		buf = make([]byte, length)
	}
	body = buf[:length]
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return body, nil
}

// readHeader parses one header block and returns Content-Length. On a
// malformed block it still reads through the block's empty line and returns
// a *FrameError, with length > 0 when a Content-Length was readable (the
// caller then skips that many body bytes to resynchronise).
func readHeader(r *bufio.Reader) (length int, err error) {
	var (
		lines   int
		bad     string
		haveLen bool
	)
	setBad := func(format string, args ...any) {
		if bad == "" {
			bad = fmt.Sprintf(format, args...)
		}
	}
	for {
		line, err := readLine(r, maxHeaderBytes)
		if errors.Is(err, errLineTooLong) {
			setBad("header line exceeds 8 KiB")
			if err := skipLine(r); err != nil {
				return 0, err
			}
			lines++
			continue
		}
		if err != nil {
			if err == io.EOF && lines > 0 {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		lines++
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if lines == 1 {
				// A stray empty line between frames: tolerate it.
				lines = 0
				continue
			}
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			setBad("header line %q has no colon", truncate(line, 40))
			continue
		}
		if !bytes.EqualFold(bytes.TrimSpace(name), []byte("Content-Length")) {
			continue // Content-Type and unknown fields are ignored, as in LSP.
		}
		value = bytes.TrimSpace(value)
		n, perr := strconv.Atoi(string(value))
		switch {
		case perr != nil:
			setBad("Content-Length %q is not a number", truncate(value, 40))
		case n <= 0:
			setBad("Content-Length %d must be positive", n)
		default:
			length, haveLen = n, true
		}
	}
	if !haveLen {
		setBad("header block has no Content-Length")
	}
	if bad != "" {
		return length, &FrameError{Code: -32700, Msg: "invalid frame header: " + bad}
	}
	return length, nil
}

var errLineTooLong = errors.New("header line too long")

// readLine reads one line of at most limit bytes, including its newline.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > limit {
			return nil, errLineTooLong
		}
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return line, err
		}
		return line, nil
	}
}

// skipLine discards input through the next newline.
func skipLine(r *bufio.Reader) error {
	for {
		_, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			return io.ErrUnexpectedEOF
		}
		return err
	}
}

func discard(r *bufio.Reader, n int) error {
	if _, err := r.Discard(n); err != nil {
		if err == io.EOF {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// AppendFrame appends body framed with its Content-Length header to dst.
func AppendFrame(dst, body []byte) []byte {
	dst = append(dst, "Content-Length: "...)
	dst = strconv.AppendInt(dst, int64(len(body)), 10)
	dst = append(dst, "\r\n\r\n"...)
	return append(dst, body...)
}
