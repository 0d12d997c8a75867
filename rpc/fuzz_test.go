package rpc

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/cellbox-dev/cellbox/protocol"
)

// FuzzReadFrame: any input either yields frames whose length matches their
// header, *FrameErrors, or an io error that ends the stream; never a panic,
// never a frame over the limit, never an endless loop.
func FuzzReadFrame(f *testing.F) {
	for _, seed := range []string{
		"Content-Length: 2\r\n\r\n{}",
		"Content-Length: 2\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{}",
		"content-length:2\n\n{}Content-Length: 2\r\n\r\n[]",
		"Content-Length: abc\r\n\r\n",
		"Content-Length: -1\r\n\r\n",
		"Content-Length: 99999999999999999999\r\n\r\n",
		"Content-Length: 10\r\n\r\n{}",
		"\r\n\r\nContent-Length: 2\r\n\r\n{}",
		"garbage\r\n\r\nContent-Length: 2\r\n\r\n{}",
		"Content-Length: 5000\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		const max = 4096
		r := bufio.NewReader(bytes.NewReader(in))
		for i := 0; i <= len(in)+1; i++ {
			body, err := ReadFrame(r, max, nil)
			var fe *FrameError
			switch {
			case err == nil:
				if len(body) == 0 || len(body) > max {
					t.Fatalf("frame of %d bytes (limit %d)", len(body), max)
				}
			case errors.As(err, &fe):
				if fe.Code != -32700 && fe.Code != -32600 || fe.Msg == "" {
					t.Fatalf("bad FrameError %+v", fe)
				}
			case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
				return
			default:
				t.Fatalf("unexpected error %v", err)
			}
		}
		t.Fatalf("ReadFrame did not reach the end of %d bytes", len(in))
	})
}

// FuzzValidateFrame: whatever validateFrame passes, jsonrpc2 must accept
// (else one frame would end the connection), and what it refuses gets a
// §7 code.
func FuzzValidateFrame(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","method":"exit"}`,
		`{"jsonrpc":"2.0","id":"x","result":null}`,
		`[{"jsonrpc":"2.0","id":1,"method":"a"}]`, `[]`, `[1]`, `42`, `{`, `{"id":{}}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"a"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		code, msg, id := validateFrame(frame)
		if code == 0 {
			return
		}
		if code != protocol.CodeParseError && code != protocol.CodeInvalidRequest || msg == "" {
			t.Fatalf("validateFrame(%q) = %d %q", frame, code, msg)
		}
		if len(id) > 0 && !validID(id) {
			t.Fatalf("error id %s is not a valid id", id)
		}
	})
}

// FuzzDecodeParams: params of every method either decode and run, or are
// answered with a §7 error other than internal, never a panic.
func FuzzDecodeParams(f *testing.F) {
	for _, seed := range []string{
		`{"protocolVersion":1}`, `{"protocolVersion":"1"}`, `null`, `[]`, `{"kernelId":5}`,
		`{"code":"print(1)","kernelId":"k","source":{"path":"a.py","line":"x"}}`,
		`{"limits":{"memoryBytes":-1}}`, `{"env":{"A":1}}`, `"str"`, `{"ms":1e400}`,
	} {
		for m := range methodTable {
			if m == protocol.MethodShutdown {
				continue
			}
			f.Add(m, []byte(seed))
		}
	}
	d := newTestDaemon(f, Options{})
	f.Fuzz(func(t *testing.T, method string, params []byte) {
		h, ok := methodTable[method]
		if !ok {
			return
		}
		c := &conn{d: d, ctx: t.Context()}
		c.log = c.d.log
		_, err := h(c, t.Context(), params, func() {})
		if err == nil {
			return
		}
		pe := toProtocolError(err)
		switch pe.Code {
		case protocol.CodeInvalidParams:
			if !bytes.Contains([]byte(pe.Message), []byte(method)) && !bytes.Contains([]byte(pe.Message), []byte("invalid")) {
				t.Fatalf("-32602 %q does not say what is wrong", pe.Message)
			}
		case protocol.CodeInternalError:
			t.Fatalf("%s %s: internal error %v", method, params, err)
		}
	})
}
