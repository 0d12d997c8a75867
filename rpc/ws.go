package rpc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gorilla/websocket"
)

const (
	wsWriteTimeout = 30 * time.Second
	wsPingEvery    = 30 * time.Second
	wsPongWait     = 75 * time.Second
	// wsCloseTimeout bounds writing a close frame to a client that does not read.
	wsCloseTimeout = time.Second
)

// errMessageTooBig ends a websocket connection whose client sent a message
// over the limit (PROTOCOL.md §1).
var errMessageTooBig = errors.New("message too big")

// wsTransport is one JSON-RPC message per websocket text frame.
type wsTransport struct {
	ws  *websocket.Conn
	max int
	buf bytes.Buffer // holds the last message read; valid until the next read
}

func newWSTransport(ws *websocket.Conn, max int) *wsTransport {
	t := &wsTransport{ws: ws, max: max}
	_ = ws.SetReadDeadline(time.Now().Add(wsPongWait))
	ws.SetPongHandler(func(string) error {
		return ws.SetReadDeadline(time.Now().Add(wsPongWait))
	})
	return t
}

func (t *wsTransport) readFrame() ([]byte, error) {
	mt, r, err := t.ws.NextReader()
	if err != nil {
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			// The client closed and gorilla has answered its close frame:
			// end the TCP connection now rather than when the requests
			// still running end (a browser waits for it to reconnect).
			// Their answers have nowhere to go; kernels run on (§2).
			_ = t.ws.Close()
		}
		return nil, err
	}
	_ = t.ws.SetReadDeadline(time.Now().Add(wsPongWait))
	if t.buf.Cap() > 1<<20 {
		t.buf = bytes.Buffer{} // let one huge message's buffer go
	}
	t.buf.Reset()
	n, err := t.buf.ReadFrom(io.LimitReader(r, int64(t.max)+1))
	if err != nil {
		return nil, fmt.Errorf("read websocket message: %w", err)
	}
	if n > int64(t.max) {
		t.closeWith(websocket.CloseMessageTooBig, fmt.Sprintf("message exceeds %d bytes (--max-message-bytes)", t.max))
		return nil, errMessageTooBig
	}
	if mt != websocket.TextMessage {
		return nil, &FrameError{Code: -32600, Msg: "invalid request: binary websocket frames are not accepted; send each JSON-RPC message as one text frame"}
	}
	return t.buf.Bytes(), nil
}

func (t *wsTransport) writeFrame(data []byte) error {
	_ = t.ws.SetWriteDeadline(time.Now().Add(wsWriteTimeout))
	return t.ws.WriteMessage(websocket.TextMessage, data)
}

func (t *wsTransport) close() error { return t.ws.Close() }

// closeWith sends a close frame with a reason a person can read; the reason
// is cut to the 123 bytes a close frame holds.
func (t *wsTransport) closeWith(code int, reason string) {
	if len(reason) > 123 {
		reason = reason[:123]
	}
	_ = t.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(wsCloseTimeout))
}

// pingLoop keeps the connection alive and detects dead peers.
func (t *wsTransport) pingLoop(done <-chan struct{}) {
	tick := time.NewTicker(wsPingEvery)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			if err := t.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(wsWriteTimeout)); err != nil {
				return
			}
		}
	}
}
