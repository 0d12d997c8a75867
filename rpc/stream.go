package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"go.lsp.dev/jsonrpc2"

	"github.com/cellbox-dev/cellbox/protocol"
)

// transport moves whole frames: an LSP-framed byte stream or a websocket.
type transport interface {
	// readFrame returns the next frame, valid until the next call. A
	// *FrameError is a frame that was skipped; other errors end the stream.
	readFrame() ([]byte, error)
	writeFrame(data []byte) error
	close() error
}

// stream adapts a transport to jsonrpc2.Stream. It also implements the
// library's frame-level methods (ReadFrame and WriteFrame), which is what lets
// jsonrpc2 accept batch arrays from it.
//
// It exists to fix one rough edge of go.lsp.dev/jsonrpc2 v1.0.1: a frame the
// library cannot decode ends the whole connection without a reply. stream
// checks every frame with the library's own decoders first, answers a bad one
// with -32700 or -32600 as JSON-RPC requires, and reads on.
type stream struct {
	t          transport
	onReject   func(reason string)
	onResponse func() // a response to a request went out (set before use)

	wmu  sync.Mutex // guards wbuf and serializes writes
	wbuf []byte
}

var _ jsonrpc2.Stream = (*stream)(nil)

func newStream(t transport, onReject func(string)) *stream {
	if onReject == nil {
		onReject = func(string) {}
	}
	return &stream{t: t, onReject: onReject}
}

// ReadFrame implements the frame-level extension of jsonrpc2.Stream.
func (s *stream) ReadFrame(ctx context.Context) ([]byte, int64, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		frame, err := s.t.readFrame()
		var fe *FrameError
		if errors.As(err, &fe) {
			s.onReject(protocol.ErrorCode(fe.Code).ErrorName())
			if werr := s.replyError(nil, protocol.ErrorCode(fe.Code), fe.Msg); werr != nil {
				return nil, 0, werr
			}
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		if code, msg, id := validateFrame(frame); code != 0 {
			s.onReject(code.ErrorName())
			if werr := s.replyError(id, code, msg); werr != nil {
				return nil, 0, werr
			}
			continue
		}
		return frame, int64(len(frame)), nil
	}
}

// Read implements jsonrpc2.Stream.
func (s *stream) Read(ctx context.Context) (jsonrpc2.Message, int64, error) {
	frame, n, err := s.ReadFrame(ctx)
	if err != nil {
		return nil, 0, err
	}
	msg, err := jsonrpc2.DecodeMessage(frame)
	if err != nil {
		return nil, 0, fmt.Errorf("decode validated frame: %w", err)
	}
	return msg, n, nil
}

// Write implements jsonrpc2.Stream.
func (s *stream) Write(ctx context.Context, msg jsonrpc2.Message) (int64, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.wbuf = jsonrpc2.AppendMessage(s.wbuf[:0], msg)
	n := int64(len(s.wbuf))
	err := s.t.writeFrame(s.wbuf)
	s.shrink()
	switch msg.(type) {
	case *jsonrpc2.Call, *jsonrpc2.Notification:
	default: // a response (jsonrpc2 writes its own unexported type)
		if s.onResponse != nil {
			s.onResponse() // written, or never will be
		}
	}
	if err != nil {
		return 0, err
	}
	return n, nil
}

// WriteFrame implements the frame-level extension of jsonrpc2.Stream;
// jsonrpc2 writes a batch's responses with it.
func (s *stream) WriteFrame(ctx context.Context, data []byte) (int64, error) {
	if err := s.writeFrame(data); err != nil {
		return 0, err
	}
	if s.onResponse != nil && len(data) > 0 && data[0] == '[' {
		var rs []json.RawMessage
		_ = json.Unmarshal(data, &rs)
		for range rs {
			s.onResponse()
		}
	}
	return int64(len(data)), nil
}

func (s *stream) writeFrame(data []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.t.writeFrame(data)
}

// Close implements jsonrpc2.Stream.
func (s *stream) Close() error { return s.t.close() }

// shrink drops a write buffer that one huge message grew, so an idle
// connection does not pin it. Called with wmu held.
func (s *stream) shrink() {
	if cap(s.wbuf) > 1<<20 {
		s.wbuf = nil
	}
}

// replyError writes an error response for a frame that never reached the
// connection. id is the request's raw id, or nil for null.
func (s *stream) replyError(id json.RawMessage, code protocol.ErrorCode, msg string) error {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	resp := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *wireError      `json:"error"`
	}{"2.0", id, newWireError(code, msg, msg, 0)}
	b, err := marshal(resp)
	if err != nil {
		return fmt.Errorf("encode error reply: %w", err)
	}
	return s.writeFrame(b)
}

// validateFrame reports why jsonrpc2 would refuse frame, with the id to
// answer under, or code 0 when the frame is fine. It runs the library's own
// decoders, so a frame it passes cannot end the connection.
func validateFrame(frame []byte) (code protocol.ErrorCode, msg string, id json.RawMessage) {
	trimmed := bytes.TrimLeft(frame, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		// jsonrpc2 answers bad batch members itself, without cellbox's error
		// data; so a batch is taken only when every member is a request.
		if !json.Valid(frame) {
			return protocol.CodeParseError, "parse error: " + jsonSyntaxError(frame), nil
		}
		members, err := jsonrpc2.ParseRequests(frame)
		if err != nil || len(members) == 0 {
			return protocol.CodeInvalidRequest, "invalid request: a batch must be a non-empty array of JSON-RPC requests", nil
		}
		for i, m := range members {
			if m.Err != nil {
				return protocol.CodeInvalidRequest, fmt.Sprintf("invalid request: batch member %d is not a JSON-RPC request (%s); the batch was not run", i, m.Err.Message), nil
			}
		}
		return 0, "", nil
	}
	if _, err := jsonrpc2.DecodeMessage(frame); err == nil {
		return 0, "", nil
	}
	if !json.Valid(frame) {
		return protocol.CodeParseError, "parse error: " + jsonSyntaxError(frame), nil
	}
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return protocol.CodeInvalidRequest, "invalid request: a JSON-RPC message must be a JSON object", nil
	}
	var env struct {
		JSONRPC *string         `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  json.RawMessage `json:"method"`
	}
	_ = json.Unmarshal(frame, &env)
	if !validID(env.ID) {
		env.ID = nil
	}
	switch {
	case env.JSONRPC == nil || *env.JSONRPC != "2.0":
		msg = `invalid request: "jsonrpc" must be "2.0"`
	case len(env.Method) == 0:
		msg = `invalid request: missing "method" (and not a response)`
	case env.Method[0] != '"':
		msg = `invalid request: "method" must be a string`
	case len(env.ID) == 0 && bytes.Contains(frame, []byte(`"id"`)):
		msg = `invalid request: "id" must be a string, an integer or null`
	default:
		msg = "invalid request: not a JSON-RPC 2.0 request, notification or response"
	}
	return protocol.CodeInvalidRequest, msg, env.ID
}

func validID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	var s string
	if json.Unmarshal(id, &s) == nil {
		return true
	}
	var n int64
	return json.Unmarshal(id, &n) == nil
}

func jsonSyntaxError(b []byte) string {
	var v any
	err := json.Unmarshal(b, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%v (at byte %d)", se, se.Offset)
	}
	if err != nil {
		return err.Error()
	}
	return "invalid JSON"
}

// stdioTransport is LSP framing over a byte stream (stdio, or a pipe).
type stdioTransport struct {
	r    *bufio.Reader
	w    io.Writer
	c    io.Closer
	max  int
	buf  []byte
	wbuf []byte // only used under stream.wmu
}

func newStdioTransport(r io.Reader, w io.Writer, c io.Closer, max int) *stdioTransport {
	return &stdioTransport{r: bufio.NewReaderSize(r, 64<<10), w: w, c: c, max: max}
}

func (t *stdioTransport) readFrame() ([]byte, error) {
	body, err := ReadFrame(t.r, t.max, t.buf)
	if err == nil && cap(body) <= 1<<20 {
		t.buf = body[:0]
	}
	return body, err
}

func (t *stdioTransport) writeFrame(data []byte) error {
	// One Write per frame: header and body together, so concurrent writers
	// (serialized by stream) never interleave.
	t.wbuf = AppendFrame(t.wbuf[:0], data)
	_, err := t.w.Write(t.wbuf)
	if cap(t.wbuf) > 1<<20 {
		t.wbuf = nil
	}
	return err
}

func (t *stdioTransport) close() error {
	if t.c == nil {
		return nil
	}
	return t.c.Close()
}
