package rpc

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// TestBadFrames sends malformed input of every kind over stdio framing and
// checks each gets its §7 answer while the connection goes on serving.
func TestBadFrames(t *testing.T) {
	rc := startRaw(t, Options{MaxMessageBytes: 4096})
	rc.initialize(t)
	stats := `{"jsonrpc":"2.0","id":99,"method":"daemon/stats"}`
	for _, tt := range []struct {
		name  string
		bytes string
		code  protocol.ErrorCode
		id    string // the id the error must carry ("null" when none)
		msg   string
	}{
		{"non-numeric length", "Content-Length: abc\r\n\r\n", protocol.CodeParseError, "null", "not a number"},
		{"negative length", "Content-Length: -5\r\n\r\n", protocol.CodeParseError, "null", "must be positive"},
		{"no length", "Content-Type: application/json\r\n\r\n", protocol.CodeParseError, "null", "no Content-Length"},
		{"line without colon", "Content-Length: 2\r\ngarbage\r\n\r\n{}", protocol.CodeParseError, "null", "no colon"},
		{"huge header", "X-Junk: " + strings.Repeat("a", 100<<10) + "\r\nContent-Length: 2\r\n\r\n{}", protocol.CodeParseError, "null", "exceeds 8 KiB"},
		{"bad batch member", frame(`[{"jsonrpc":"2.0","id":1,"method":"daemon/stats"},7]`), protocol.CodeInvalidRequest, "null", "batch member 1"},
		{"not json", frame(`{"jsonrpc":"2.0","id":1,`), protocol.CodeParseError, "null", "parse error"},
		{"binary junk", frame("\x00\xff\xfe"), protocol.CodeParseError, "null", "parse error"},
		{"json number", frame(`42`), protocol.CodeInvalidRequest, "null", "must be a JSON object"},
		{"json string", frame(`"hello"`), protocol.CodeInvalidRequest, "null", "must be a JSON object"},
		{"wrong version", frame(`{"jsonrpc":"1.0","id":5,"method":"daemon/stats"}`), protocol.CodeInvalidRequest, "5", `"jsonrpc" must be "2.0"`},
		{"method not string", frame(`{"jsonrpc":"2.0","id":6,"method":7}`), protocol.CodeInvalidRequest, "6", "method"},
		{"object id", frame(`{"jsonrpc":"2.0","id":{"a":1},"method":"daemon/stats"}`), protocol.CodeInvalidRequest, "null", `"id"`},
		{"empty batch", frame(`[]`), protocol.CodeInvalidRequest, "null", ""},
		{"oversized", frame(`{"jsonrpc":"2.0","id":8,"method":"daemon/stats","params":{"x":"` + strings.Repeat("y", 5000) + `"}}`), protocol.CodeInvalidRequest, "null", "exceeds the limit of 4096 bytes"},
		{"params array", frame(`{"jsonrpc":"2.0","id":9,"method":"daemon/stats","params":[1]}`), protocol.CodeInvalidParams, "9", "JSON object"},
		{"wrong param type", frame(`{"jsonrpc":"2.0","id":10,"method":"cellboxTest/sleep","params":{"ms":"long"}}`), protocol.CodeInvalidParams, "10", `field "ms" must be an integer`},
		{"unknown method", frame(`{"jsonrpc":"2.0","id":11,"method":"nope/nope"}`), protocol.CodeMethodNotFound, "11", `"nope/nope"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc.sendBytes(t, []byte(tt.bytes))
			m := rc.next(t)
			if got := m.errCode(); got != tt.code {
				t.Fatalf("got %s, want code %d", m.raw, tt.code)
			}
			if string(m.m["id"]) != tt.id {
				t.Fatalf("error id = %s, want %s (%s)", m.m["id"], tt.id, m.raw)
			}
			var e struct {
				Message string             `json:"message"`
				Data    protocol.ErrorData `json:"data"`
			}
			_ = json.Unmarshal(m.m["error"], &e)
			if !strings.Contains(e.Message, tt.msg) || e.Data.ErrorCode != tt.code.ErrorName() || e.Data.Detail == "" {
				t.Fatalf("error %+v: want message containing %q and data for %s", e, tt.msg, tt.code.ErrorName())
			}
			// The connection still serves.
			rc.sendBytes(t, []byte(frame(stats)))
			if m := rc.waitID(t, 99); m.errCode() != 0 {
				t.Fatalf("daemon/stats after bad input: %s", m.raw)
			}
		})
	}
}

func TestBatch(t *testing.T) {
	rc := startRaw(t, Options{})
	rc.initialize(t)
	rc.sendBody(t, `[{"jsonrpc":"2.0","id":1,"method":"daemon/stats"},{"jsonrpc":"2.0","id":2,"method":"nope"},{"jsonrpc":"2.0","method":"initialized","params":{}}]`)
	var got []map[string]json.RawMessage
	deadline := time.After(30 * time.Second)
	for got == nil {
		select {
		case m := <-rc.msgs:
			if len(m.raw) > 0 && m.raw[0] == '[' {
				if err := json.Unmarshal(m.raw, &got); err != nil {
					t.Fatal(err)
				}
			}
		case <-deadline:
			t.Fatal("no batch response within 30 s")
		}
	}
	if len(got) != 2 {
		t.Fatalf("batch answered %d responses, want 2 (one per call): %v", len(got), got)
	}
	codes := map[string]int32{}
	for _, r := range got {
		var e struct {
			Code int32 `json:"code"`
		}
		_ = json.Unmarshal(r["error"], &e)
		codes[string(r["id"])] = e.Code
	}
	if codes["1"] != 0 || codes["2"] != -32601 {
		t.Fatalf("batch codes by id = %v", codes)
	}
}

func TestTruncatedFrameEndsCleanly(t *testing.T) {
	rc := startRaw(t, Options{})
	rc.initialize(t)
	rc.sendBytes(t, []byte("Content-Length: 100\r\n\r\n{\"jsonrpc\""))
	_ = rc.w.Close()
	select {
	case code := <-rc.exit:
		if code != 1 {
			t.Fatalf("exit code %d after a truncated frame, want 1", code)
		}
	case <-timeoutC():
		t.Fatal("daemon did not end after its input was cut mid-frame")
	}
}

func frame(body string) string { return string(AppendFrame(nil, []byte(body))) }
