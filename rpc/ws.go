package rpc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

const (
	wsWriteTimeout = 30 * time.Second
	wsPingEvery    = 30 * time.Second
	wsPongWait     = 75 * time.Second
	// wsCloseTimeout bounds writing a close frame to a client that does not read.
	wsCloseTimeout = time.Second
	// wsQueueBytes bounds the messages queued for one client: past it,
	// senders wait (kernel output then waits, and the program with it).
	wsQueueBytes = 4 << 20
	// wsStallTimeout: a client that has not taken a message for this long
	// has stopped reading; its connection is closed with wsStalledCode.
	wsStallTimeout = 30 * time.Second
	// wsFlushTimeout bounds sending what is queued before a close frame.
	wsFlushTimeout = 5 * time.Second
	// wsStalledCode is the close code for a client that stopped reading
	// (1008, policy violation).
	wsStalledCode = websocket.ClosePolicyViolation
)

// errMessageTooBig ends a websocket connection whose client sent a message
// over the limit (PROTOCOL.md §1).
var errMessageTooBig = errors.New("message too big")

// wsTransport is one JSON-RPC message per websocket text frame.
//
// Messages to the client go through a queue of at most wsQueueBytes, which
// one goroutine writes in order. A sender waits while the queue is full.
// When the client has not taken a message for wsStallTimeout, it has
// stopped reading: the queue is dropped, senders fail at once, and the
// connection is closed with code 1008 and a reason saying so (the client
// sees it if it reads again; the TCP connection ends in any case).
type wsTransport struct {
	ws  *websocket.Conn
	max int
	buf bytes.Buffer // holds the last message read; valid until the next read

	stall time.Duration // wsStallTimeout; shorter in tests

	mu      sync.Mutex
	queue   []wsItem
	queued  int           // bytes in queue
	wake    chan struct{} // the queue got an item (cap 1)
	space   chan struct{} // closed and replaced when the queue shrinks
	failed  error         // set once: every later write fails with it
	closing bool          // a close frame is queued or sent
	done    chan struct{} // closed when the writer has ended
}

// wsLog is the daemon's logger, for the transports' own events.
var wsLog atomic.Pointer[slog.Logger]

// wsItem is a queued message, or a close frame (close set).
type wsItem struct {
	data   []byte
	close  bool
	code   int
	reason string
	sent   chan struct{} // closed once written (or dropped)
}

func newWSTransport(ws *websocket.Conn, max int) *wsTransport {
	t := &wsTransport{ws: ws, max: max, stall: wsStallTimeout,
		wake: make(chan struct{}, 1), space: make(chan struct{}), done: make(chan struct{})}
	if d := testWSStall.Load(); d > 0 {
		t.stall = time.Duration(d)
	}
	_ = ws.SetReadDeadline(time.Now().Add(wsPongWait))
	ws.SetPongHandler(func(string) error {
		return ws.SetReadDeadline(time.Now().Add(wsPongWait))
	})
	go t.writer()
	return t
}

// writer writes the queue in order, one message at a time. A message the
// client does not take within t.stall stalls the connection.
func (t *wsTransport) writer() {
	defer close(t.done)
	for {
		t.mu.Lock()
		for len(t.queue) == 0 && t.failed == nil {
			t.mu.Unlock()
			<-t.wake
			t.mu.Lock()
		}
		if len(t.queue) == 0 {
			t.mu.Unlock()
			return
		}
		it := t.queue[0]
		t.mu.Unlock()

		stalled := time.AfterFunc(t.stall, func() {
			t.fail(fmt.Errorf("the client took no message for %v: it stopped reading", t.stall),
				fmt.Sprintf("client stopped reading: no message taken for %v", t.stall))
		})
		var err error
		if it.close {
			err = t.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(it.code, it.reason), time.Now().Add(wsCloseTimeout))
		} else {
			// The deadline only ends a write that even the stall's close
			// could not end (see fail).
			_ = t.ws.SetWriteDeadline(time.Now().Add(t.stall + wsFlushTimeout))
			err = t.ws.WriteMessage(websocket.TextMessage, it.data)
		}
		stalled.Stop()

		t.mu.Lock()
		if len(t.queue) > 0 && t.queue[0].sent == it.sent {
			t.queue = t.queue[1:]
			t.queued -= len(it.data)
		}
		close(it.sent)
		close(t.space)
		t.space = make(chan struct{})
		t.mu.Unlock()
		if err != nil {
			t.fail(fmt.Errorf("write websocket message: %w", err), "")
			_ = t.ws.Close()
		}
		if it.close {
			t.fail(websocket.ErrCloseSent, "")
		}
	}
}

// fail makes every later write fail with err, drops the queue, and, with a
// reason, queues a close frame saying why: the writer sends it after the
// message it is writing, if the client ever takes that one; if not, the
// connection is closed without it after wsFlushTimeout.
func (t *wsTransport) fail(err error, reason string) {
	t.mu.Lock()
	if t.failed != nil {
		t.mu.Unlock()
		return
	}
	t.failed = err
	var dropped []wsItem
	if len(t.queue) > 1 {
		dropped = append([]wsItem(nil), t.queue[1:]...)
		t.queue = t.queue[:1:1]
		t.queued = len(t.queue[0].data)
	}
	if reason != "" && !t.closing {
		t.closing = true
		t.queue = append(t.queue, wsItem{close: true, code: wsStalledCode, reason: closeReason(reason), sent: make(chan struct{})})
	}
	queued := t.queued
	for _, it := range dropped {
		queued += len(it.data)
	}
	close(t.space)
	t.space = make(chan struct{})
	t.mu.Unlock()
	if l := wsLog.Load(); l != nil && reason != "" {
		l.Warn("closing a websocket connection: its client stopped reading", "stall", t.stall, "queued_bytes", queued, "remote", t.ws.RemoteAddr().String())
	}
	for _, it := range dropped {
		close(it.sent)
	}
	select {
	case t.wake <- struct{}{}:
	default:
	}
	if reason != "" {
		go func() {
			select {
			case <-t.done:
			case <-time.After(wsFlushTimeout):
			}
			_ = t.ws.Close()
		}()
	}
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

// writeFrame queues data (copied: the caller reuses its buffer), waiting
// while the queue is full; the connection stalls rather than wait longer
// than that.
func (t *wsTransport) writeFrame(data []byte) error {
	t.mu.Lock()
	for t.failed == nil && !t.closing && len(t.queue) > 0 && t.queued+len(data) > wsQueueBytes {
		space := t.space
		t.mu.Unlock()
		<-space // the writer's stall timer ends this wait too
		t.mu.Lock()
	}
	if t.failed != nil || t.closing {
		err := t.failed
		t.mu.Unlock()
		if err == nil {
			err = websocket.ErrCloseSent
		}
		return err
	}
	t.queue = append(t.queue, wsItem{data: bytes.Clone(data), sent: make(chan struct{})})
	t.queued += len(data)
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
	return nil
}

func (t *wsTransport) close() error {
	t.fail(net.ErrClosed, "")
	return t.ws.Close()
}

// closeWith sends a close frame with a reason a person can read, after
// what is queued (waiting at most wsFlushTimeout for it to go).
func (t *wsTransport) closeWith(code int, reason string) {
	it := wsItem{close: true, code: code, reason: closeReason(reason), sent: make(chan struct{})}
	t.mu.Lock()
	if t.failed != nil || t.closing {
		t.mu.Unlock()
		return
	}
	t.closing = true
	t.queue = append(t.queue, it)
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
	select {
	case <-it.sent:
	case <-time.After(wsFlushTimeout):
	}
}

// closeReason cuts a reason to the 123 bytes a close frame holds.
func closeReason(reason string) string {
	if len(reason) > 123 {
		reason = reason[:123]
	}
	return reason
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
