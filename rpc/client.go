package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"go.lsp.dev/jsonrpc2"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Client is a Go client of the user's long-lived daemon: the daemon that
// `cellbox connect` finds or starts (findOrStartDaemon), spoken to over its
// websocket with go.lsp.dev/jsonrpc2 rather than bridged to stdio.
//
//	caller ──Call, Notify──> Client ──one text message per JSON-RPC message──> daemon /rpc
//	caller <──OnNotify, OnRequest── Client <──one message per JSON-RPC message── daemon
//
// The websocket side is the daemon's own transport (wsTransport under
// stream): a bounded send queue written by one goroutine, pings every
// wsPingEvery with a read deadline of wsPongWait, so a daemon that vanishes
// without closing the connection is noticed too.
type Client struct {
	rpc  jsonrpc2.Conn
	tr   clientLink
	log  *slog.Logger
	caps protocol.ServerCapabilities

	onNotify  func(method string, params json.RawMessage)
	onRequest func(ctx context.Context, method string, params json.RawMessage) (any, error)

	// ctx is the parent of the contexts OnRequest gets; it is cancelled
	// when the connection ends.
	ctx    context.Context
	cancel context.CancelFunc
	// done is closed when the connection has ended: lost, or closed by
	// Close. endErr (set before) says how.
	done    chan struct{}
	endOnce sync.Once
	endErr  error

	pingStop  chan struct{} // closed with done
	wg        sync.WaitGroup
	closed    atomic.Bool // Close was called
	closeOnce sync.Once
	closeErr  error
}

// ClientOptions configure Dial.
type ClientOptions struct {
	// StateDir is the daemon's state dir, as ConnectOptions.StateDir: the
	// runtime file is found from it and a started daemon uses it.
	StateDir string
	// Executable is the cellbox binary to start as the daemon when none
	// runs; empty: only a running daemon is used.
	Executable string
	// ServeArgs are extra arguments for a started daemon's `serve`.
	ServeArgs []string
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
	// ClientInfo names the client in initialize (omitted when Name is empty).
	ClientInfo protocol.ClientInfo
	// Capabilities are sent in initialize.
	Capabilities protocol.ClientCapabilities
	// OnNotify gets every notification from the daemon, in the order sent,
	// on the read goroutine (must not block long). method and params are
	// the callee's to keep.
	OnNotify func(method string, params json.RawMessage)
	// OnRequest answers requests from the daemon (kernel/inputRequest). It
	// runs on a goroutine of its own, with a context cancelled when the
	// connection ends. A *protocol.Error it returns is sent as it is; any
	// other error as -32603. nil: every request is answered -32601.
	OnRequest func(ctx context.Context, method string, params json.RawMessage) (any, error)
}

// clientMaxMessageBytes bounds one message from the daemon. The daemon is
// trusted; the bound only keeps a broken one from exhausting memory (a
// buffer grows with the message actually read, not to the bound).
const clientMaxMessageBytes = 1 << 30

// Dial finds the user's daemon (starting o.Executable as `serve` in the
// background when none runs, as Connect does), opens its websocket, and
// completes initialize and initialized. The connection ends with Close, or
// when the daemon goes away (Done).
func Dial(ctx context.Context, o ClientOptions) (*Client, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	info, err := findOrStartDaemon(ctx, o.StateDir, o.Executable, o.ServeArgs, defaultStartTimeout, o.Logger)
	if err != nil {
		return nil, fmt.Errorf("dial daemon: %w", err)
	}
	ws, err := dialDaemon(ctx, info)
	if err != nil {
		return nil, fmt.Errorf("dial daemon: %w", err)
	}
	o.Logger.Debug("connected to daemon", "pid", info.PID, "url", redactToken(info.URL))
	c := newClient(wsLink{newWSTransport(ws, clientMaxMessageBytes)}, o)
	if err := c.initialize(ctx, o); err != nil {
		return nil, fmt.Errorf("dial daemon pid %d: %w", info.PID, err)
	}
	return c, nil
}

// initialize completes initialize and initialized; on failure the client
// is closed.
func (c *Client) initialize(ctx context.Context, o ClientOptions) error {
	params := protocol.InitializeParams{ProtocolVersion: protocol.Version, Capabilities: &o.Capabilities}
	if o.ClientInfo.Name != "" {
		params.ClientInfo = &o.ClientInfo
	}
	var res protocol.InitializeResult
	if err := c.Call(ctx, protocol.MethodInitialize, params, &res); err != nil {
		_ = c.Close()
		return err
	}
	c.caps = res.Capabilities
	if err := c.Notify(ctx, protocol.MethodInitialized, protocol.InitializedParams{}); err != nil {
		_ = c.Close()
		return err
	}
	return nil
}

// newClient runs the JSON-RPC connection over tr.
func newClient(tr clientLink, o ClientOptions) *Client {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Client{
		tr:        tr,
		log:       o.Logger,
		onNotify:  o.OnNotify,
		onRequest: o.OnRequest,
		done:      make(chan struct{}),
		pingStop:  make(chan struct{}),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.wg.Go(func() { c.tr.keepAlive(c.pingStop) })
	c.rpc = jsonrpc2.NewConn(newStream(&clientTransport{clientLink: c.tr, ended: c.end}, nil))
	c.rpc.Go(c.ctx, c.handle)
	return c
}

// clientLink is what a Client speaks over: the daemon's websocket, or an
// in-process pipe (Daemon.DialInProcess).
type clientLink interface {
	transport
	// keepAlive pings the daemon until stop is closed (websocket).
	keepAlive(stop <-chan struct{})
	// goodbye ends the connection cleanly: a close frame after what is
	// queued (websocket), or closing the pipe.
	goodbye()
}

// wsLink is the daemon's websocket transport on the client side.
type wsLink struct{ *wsTransport }

func (l wsLink) keepAlive(stop <-chan struct{}) { l.pingLoop(stop) }
func (l wsLink) goodbye()                       { l.closeWith(websocket.CloseNormalClosure, "") }

// clientTransport is the client's link, telling the client when reading
// has ended: the connection is gone.
type clientTransport struct {
	clientLink
	ended func(error)
}

func (t *clientTransport) readFrame() ([]byte, error) {
	frame, err := t.clientLink.readFrame()
	var fe *FrameError
	if err != nil && !errors.As(err, &fe) { // a FrameError skips one frame
		t.ended(err)
	}
	return frame, err
}

// end marks the connection ended (once) because of err.
func (c *Client) end(err error) {
	c.endOnce.Do(func() {
		c.endErr = err
		c.cancel()
		close(c.pingStop)
		close(c.done)
		var ce *websocket.CloseError
		switch {
		case errors.Is(err, net.ErrClosed), c.closed.Load():
		case errors.As(err, &ce) && ce.Code == websocket.CloseNormalClosure:
			c.log.Debug("daemon closed the connection", "reason", ce.Text)
		default:
			c.log.Warn("connection to daemon lost", "err", err)
		}
	})
}

// handle takes the daemon's notifications and requests.
func (c *Client) handle(ctx context.Context, req *jsonrpc2.Request) (any, error) {
	if !req.IsCall() {
		// On the read goroutine, so in wire order. Method and params
		// borrow the read buffer: the callee gets copies.
		if c.onNotify != nil {
			c.onNotify(strings.Clone(req.Method()), append(json.RawMessage(nil), req.Params()...))
		}
		return nil, nil // an error here would end the connection
	}
	method := strings.Clone(req.Method())
	if c.onRequest == nil {
		return nil, toJSONRPC(protocol.Errorf(protocol.CodeMethodNotFound, "method not found: %s (this client answers no requests)", method))
	}
	params := append(json.RawMessage(nil), req.Params()...)
	// An answer may wait for a person (kernel/inputRequest): release the
	// read goroutine. ctx is cancelled when the connection ends.
	jsonrpc2.Async(ctx)
	res, err := c.onRequest(ctx, method, params)
	if err != nil {
		return nil, toJSONRPC(err)
	}
	return res, nil
}

// Call sends a request and decodes its result into result (nil: discarded).
//
// An error response from the daemon comes back as a *protocol.Error: its
// Code and Message as sent, and Detail and RetryAfterMs from its data (the
// errorCode of data is Code.ErrorName()). Other errors are this side's: the
// connection is lost (Done is closed), or ctx ended. When ctx ends first,
// Call sends $/cancelRequest for the request (PROTOCOL.md §2: the daemon
// ends it with -32800, and a kernel/execute is interrupted) and returns
// ctx's error without waiting for that answer.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	id, err := c.rpc.Call(ctx, method, params, result)
	if err == nil {
		return nil
	}
	var je *jsonrpc2.Error
	if errors.As(err, &je) {
		return fromJSONRPC(je)
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		if n, ok := id.Number(); ok {
			c.cancelRemote(n)
		}
		return fmt.Errorf("%s: %w", method, err)
	}
	return c.connError(method, err)
}

// cancelRemote sends $/cancelRequest for the request with id n.
func (c *Client) cancelRemote(n int64) {
	select {
	case <-c.done:
		return
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeWait)
	defer cancel()
	if err := c.rpc.Notify(ctx, protocol.MethodCancelRequest, protocol.CancelParams{ID: n}); err != nil {
		c.log.Debug("send $/cancelRequest", "id", n, "err", err)
	}
}

// Notify sends a notification.
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	if err := c.rpc.Notify(ctx, method, params); err != nil {
		return c.connError(method, err)
	}
	return nil
}

// connError is a failed call or notification of method: when the
// connection has ended, the error says so and why.
func (c *Client) connError(method string, err error) error {
	if c.closed.Load() {
		return fmt.Errorf("%s: the client is closed", method)
	}
	select {
	case <-c.done:
		return fmt.Errorf("%s: connection to the daemon lost: %w", method, c.endErr)
	default:
		return fmt.Errorf("%s: %w", method, err)
	}
}

// fromJSONRPC is the protocol error a JSON-RPC error response carries.
func fromJSONRPC(je *jsonrpc2.Error) *protocol.Error {
	pe := &protocol.Error{Code: protocol.ErrorCode(je.Code), Message: je.Message}
	var data protocol.ErrorData
	if len(je.Data) > 0 && json.Unmarshal(je.Data, &data) == nil {
		pe.Detail, pe.RetryAfterMs = data.Detail, data.RetryAfterMs
	}
	return pe
}

// Capabilities are what the daemon answered to initialize.
func (c *Client) Capabilities() protocol.ServerCapabilities { return c.caps }

// Done is closed when the connection to the daemon has ended: lost (the
// daemon exited or closed it), or closed by Close. Calls then fail.
func (c *Client) Done() <-chan struct{} { return c.done }

// Close ends the connection cleanly: a close frame (1000) after what is
// queued, and the daemon's answer awaited for at most closeWait. The
// daemon runs on, and so do kernels and terminals this connection started
// (PROTOCOL.md §2) unless the caller shut them down. Calls in flight fail.
// Close waits for OnRequest handlers, whose context it cancels, to return.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.tr.goodbye()
		select {
		case <-c.done:
		case <-time.After(closeWait):
		}
		c.end(net.ErrClosed)
		_ = c.tr.close() // ends the read if the daemon did not answer
		if err := c.rpc.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			c.closeErr = fmt.Errorf("close connection to daemon: %w", err)
		}
		c.wg.Wait()
	})
	return c.closeErr
}
