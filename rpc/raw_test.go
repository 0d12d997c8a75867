package rpc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// rawClient speaks bytes to an in-process daemon: it writes exactly what a
// test gives it and collects every framed reply.
type rawClient struct {
	w    io.WriteCloser
	msgs chan rawMsg
	exit chan int
}

type rawMsg struct {
	raw []byte
	m   map[string]json.RawMessage
}

func (m rawMsg) errCode() protocol.ErrorCode {
	var e struct {
		Code int32 `json:"code"`
	}
	if len(m.m["error"]) == 0 || json.Unmarshal(m.m["error"], &e) != nil {
		return 0
	}
	return protocol.ErrorCode(e.Code)
}

func startRaw(t *testing.T, opts Options) *rawClient {
	t.Helper()
	opts.TestHooks = true
	d := newTestDaemon(t, opts)
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	rc := &rawClient{w: cw, msgs: make(chan rawMsg, 1024), exit: make(chan int, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		rc.exit <- d.ServeStdio(ctx, sr, sw)
		_ = sw.Close()
	}()
	go func() {
		r := bufio.NewReader(cr)
		for {
			body, err := ReadFrame(r, 1<<30, nil)
			if err != nil {
				close(rc.msgs)
				return
			}
			var m map[string]json.RawMessage
			_ = json.Unmarshal(body, &m)
			rc.msgs <- rawMsg{raw: body, m: m}
		}
	}()
	t.Cleanup(func() {
		cancel()
		_ = cw.Close()
		_ = cr.Close()
	})
	return rc
}

func (rc *rawClient) sendBytes(t *testing.T, b []byte) {
	t.Helper()
	if _, err := rc.w.Write(b); err != nil {
		t.Fatalf("write: %v", err)
	}
}

func (rc *rawClient) sendBody(t *testing.T, body string) {
	t.Helper()
	rc.sendBytes(t, AppendFrame(nil, []byte(body)))
}

func (rc *rawClient) send(t *testing.T, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	rc.sendBytes(t, AppendFrame(nil, b))
}

// next returns the next message that is not a notification.
func (rc *rawClient) next(t *testing.T) rawMsg {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m, ok := <-rc.msgs:
			if !ok {
				t.Fatal("daemon closed the connection")
			}
			if _, isNote := m.m["method"]; isNote {
				continue
			}
			return m
		case <-timeout:
			t.Fatal("no reply within 10s")
		}
	}
}

// waitID returns the response with the given id, skipping others.
func (rc *rawClient) waitID(t *testing.T, id any) rawMsg {
	t.Helper()
	want, _ := json.Marshal(id)
	for {
		m := rc.next(t)
		if string(m.m["id"]) == string(want) {
			return m
		}
	}
}

func (rc *rawClient) initialize(t *testing.T) {
	t.Helper()
	rc.send(t, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{"protocolVersion": 1}})
	if m := rc.waitID(t, 1); m.errCode() != 0 {
		t.Fatalf("initialize: %s", m.raw)
	}
}

func (rc *rawClient) String() string { return fmt.Sprintf("rawClient(%p)", rc) }

func timeoutC() <-chan time.Time { return time.After(10 * time.Second) }
