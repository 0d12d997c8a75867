package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/cellbox-dev/cellbox/protocol"
)

// connState is where a connection is in the §2 lifecycle.
type connState int

const (
	stateNew         connState = iota // before initialize
	stateInitialized                  // initialize answered
	stateShutdown                     // shutdown answered; only exit is accepted
)

// conn is one client connection. It implements protocol.Server by handing
// each method to a service; it knows connections, not kernels.
type conn struct {
	d         *Daemon
	transport string // "stdio" or "websocket"
	log       *slog.Logger
	rpc       jsonrpc2.Conn
	ctx       context.Context // cancelled when the connection ends
	cancel    context.CancelFunc
	onExit    func(code int) // called once on the exit notification
	num       uint64         // numbers the connection in logs and the audit log
	order     sequencer      // wire order of requests on the same resource (order.go)
	// clientDir is the client's working directory, the root of a
	// workspace/open without one; empty: the daemon's DefaultRoot.
	clientDir string

	mu       sync.Mutex // guards the fields below
	state    connState
	caps     protocol.ClientCapabilities
	inflight map[jsonrpc2.ID]*inflight
	exited   bool
	// unanswered counts requests whose response has not been written;
	// answered is closed (and replaced) each time one is.
	unanswered int
	answered   chan struct{}
	// closers run once when the connection ends, by key (see onClose).
	closers map[string]func()
	// seen are the workspaces this connection works in (network.go).
	seen map[string]struct{}
}

var _ protocol.Server = (*conn)(nil)

// inflightKey is the context key of a request's own *inflight.
type inflightKey struct{}

// inflight is a request being handled.
type inflight struct {
	cancel    context.CancelFunc
	cancelled atomic.Bool // by $/cancelRequest, or by shutdown
	self      bool        // the shutdown request that is draining the others
}

// serveConn runs the JSON-RPC connection over s until it ends or ctx is
// done, and returns the finished connection.
func (d *Daemon) serveConn(ctx context.Context, s *stream, transport, clientDir string, onExit func(int)) *conn {
	cctx, cancel := context.WithCancel(ctx)
	c := &conn{
		d:         d,
		clientDir: clientDir,
		transport: transport,
		log:       d.log.With("transport", transport),
		ctx:       cctx,
		cancel:    cancel,
		onExit:    onExit,
		inflight:  make(map[jsonrpc2.ID]*inflight),
		answered:  make(chan struct{}),
	}
	s.onResponse = c.responded
	c.rpc = jsonrpc2.NewConn(s, jsonrpc2.WithPreempter(preempter{c}))
	d.addConn(c)
	defer d.removeConn(c)
	c.log.Debug("connection opened")
	c.rpc.Go(cctx, c.handle)
	select {
	case <-c.rpc.Done():
	case <-ctx.Done():
	}
	cancel()
	c.cancelAll()
	c.mu.Lock()
	closers := c.closers
	c.closers = nil
	c.mu.Unlock()
	for _, f := range closers {
		f()
	}
	_ = c.rpc.Close()
	if err := c.rpc.Err(); err != nil {
		c.log.Debug("connection ended", "err", err)
	} else {
		c.log.Debug("connection closed")
	}
	return c
}

// onClose runs f once when the connection ends (at once if it has);
// another f under the same key replaces it.
func (c *conn) onClose(key string, f func()) {
	c.mu.Lock()
	if c.ctx.Err() == nil {
		if c.closers == nil {
			c.closers = make(map[string]func())
		}
		c.closers[key] = f
		f = nil
	}
	c.mu.Unlock()
	if f != nil {
		f()
	}
}

// shutDown reports whether the client sent shutdown.
func (c *conn) shutDown() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state == stateShutdown
}

// handle is the jsonrpc2 handler. It runs on the read goroutine until it
// releases the request (jsonrpc2.Async), which it does as soon as the
// request is registered and its params decoded, so a slow request never
// delays the next one. The context jsonrpc2 passes is pooled and dies with
// the handler; work runs under a context derived from the connection's.
func (c *conn) handle(libCtx context.Context, req *jsonrpc2.Request) (any, error) {
	if !req.IsCall() {
		c.handleNotification(req)
		return nil, nil // a notification error would end the connection
	}
	c.mu.Lock()
	c.unanswered++
	c.mu.Unlock()
	start := time.Now()
	// req.Method() borrows the transport's frame buffer until the request is
	// released (see doc.go); keep an owned copy for after.
	method := strings.Clone(req.Method())
	result, err := c.call(libCtx, method, req)
	var code protocol.ErrorCode
	if err != nil {
		werr := toJSONRPC(err)
		code = protocol.ErrorCode(werr.Code)
		if code == protocol.CodeInternalError {
			c.log.Error("request failed", "method", method, "err", err)
		}
		err = werr
	}
	dur := time.Since(start)
	c.d.observe(method, code, dur)
	if c.log.Enabled(context.Background(), slog.LevelDebug) {
		c.log.Debug("request", "method", method, "duration_ms", float64(dur.Microseconds())/1000, "code", int(code))
	}
	return result, err
}

func (c *conn) call(libCtx context.Context, method string, req *jsonrpc2.Request) (result any, err error) {
	h, ok := c.lookup(method)
	if !ok {
		return nil, protocol.Errorf(protocol.CodeMethodNotFound, "unknown method %q", method)
	}
	if err := c.gate(method); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	id := req.ID()
	fl, err := c.register(id, cancel)
	if err != nil {
		return nil, err
	}
	defer c.unregister(id)
	ctx = context.WithValue(ctx, inflightKey{}, fl)

	var once sync.Once
	release := func() { once.Do(func() { jsonrpc2.Async(libCtx) }) }
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("handler panicked", "method", method, "panic", r, "stack", string(debug.Stack()))
			result, err = nil, protocol.Errorf(protocol.CodeInternalError, "internal error while handling %s: %v", method, r)
		}
	}()
	result, err = h(c, ctx, req.Params(), release)
	if fl.cancelled.Load() {
		return nil, errCancelled
	}
	if err != nil {
		return nil, err
	}
	raw, merr := marshal(result)
	if merr != nil {
		return nil, fmt.Errorf("encode %s result: %w", method, merr)
	}
	return jsonrpc2.RawMessage(raw), nil
}

// lookup finds the handler of a request method.
func (c *conn) lookup(method string) (handlerFunc, bool) {
	if h, ok := methodTable[method]; ok {
		return h, true
	}
	if c.d.opts.TestHooks {
		h, ok := testMethods[method]
		return h, ok
	}
	return nil, false
}

// gate enforces the §2 lifecycle for a request.
func (c *conn) gate(method string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case stateNew:
		if method != protocol.MethodInitialize {
			return errNotInitialized
		}
	case stateInitialized:
		if method == protocol.MethodInitialize {
			return protocol.Errorf(protocol.CodeInvalidRequest, "initialize was already called on this connection")
		}
	case stateShutdown:
		return errShuttingDown
	}
	return nil
}

func (c *conn) register(id jsonrpc2.ID, cancel context.CancelFunc) (*inflight, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.inflight[id]; dup {
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, "request id %v is already in use by a request in flight", id)
	}
	if len(c.inflight) >= c.d.opts.MaxInFlight {
		e := protocol.Errorf(protocol.CodeLimitExceeded, "too many requests in flight on this connection (limit %d)", c.d.opts.MaxInFlight)
		e.RetryAfterMs = 100
		return nil, e
	}
	fl := &inflight{cancel: cancel}
	c.inflight[id] = fl
	return fl, nil
}

func (c *conn) unregister(id jsonrpc2.ID) {
	c.mu.Lock()
	delete(c.inflight, id)
	c.mu.Unlock()
}

// responded notes that a response went out.
func (c *conn) responded() {
	c.mu.Lock()
	c.unanswered--
	close(c.answered)
	c.answered = make(chan struct{})
	c.mu.Unlock()
}

// waitAnswered waits, at most until deadline, until at most n requests are
// still unanswered, and reports whether they are.
func (c *conn) waitAnswered(n int, deadline <-chan time.Time) bool {
	for {
		c.mu.Lock()
		left, ch := c.unanswered, c.answered
		c.mu.Unlock()
		if left <= n {
			return true
		}
		select {
		case <-ch:
		case <-deadline:
			return false
		}
	}
}

// drain lets the requests in flight (but the calling one, shutdown) finish
// for up to grace, then cancels those left and waits, at most timeout, for
// their answers to go out: so that a client which sends exit right after
// shutdown has every answer first.
func (c *conn) drain(grace, timeout time.Duration) {
	if c.waitAnswered(1, time.After(grace)) {
		return
	}
	c.mu.Lock()
	for _, fl := range c.inflight {
		if !fl.self {
			fl.cancelled.Store(true)
			fl.cancel()
		}
	}
	c.mu.Unlock()
	c.waitAnswered(1, time.After(timeout))
}

// cancelAll cancels every request in flight (the connection is ending).
func (c *conn) cancelAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, fl := range c.inflight {
		fl.cancel()
	}
}

// cancelRequest is $/cancelRequest: the request's context is cancelled and
// it answers -32800. Unknown or finished ids are ignored, as in LSP.
func (c *conn) cancelRequest(id jsonrpc2.ID) {
	c.mu.Lock()
	fl := c.inflight[id]
	c.mu.Unlock()
	if fl != nil {
		fl.cancelled.Store(true)
		fl.cancel()
	}
}

func (c *conn) handleNotification(req *jsonrpc2.Request) {
	switch req.Method() {
	case protocol.MethodInitialized:
		_ = c.Initialized(c.ctx, &protocol.InitializedParams{})
	case protocol.MethodExit:
		_ = c.Exit(c.ctx)
	case protocol.MethodCancelRequest:
		// Normally taken by the preempter; here when it came in a batch.
		if id, ok := parseCancelID(req.Params()); ok {
			c.cancelRequest(id)
		}
	default:
		c.log.Debug("unknown notification ignored", "method", methodLabel(req.Method()))
	}
}

// preempter takes $/cancelRequest on the read goroutine, ahead of anything
// queued behind it. (jsonrpc2's CancelHandler derives contexts from the
// pooled request context and is unsafe; see doc.go.)
type preempter struct{ c *conn }

func (p preempter) Preempt(_ context.Context, req *jsonrpc2.Request) (any, error) {
	if req.Method() != protocol.MethodCancelRequest || req.IsCall() {
		return nil, jsonrpc2.ErrNotHandled
	}
	if id, ok := parseCancelID(req.Params()); ok {
		p.c.cancelRequest(id)
	}
	return true, nil
}

func parseCancelID(params []byte) (jsonrpc2.ID, bool) {
	var p struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.ID) == 0 {
		return jsonrpc2.ID{}, false
	}
	var s string
	if json.Unmarshal(p.ID, &s) == nil {
		return jsonrpc2.NewStringID(s), true
	}
	var n int64
	if json.Unmarshal(p.ID, &n) == nil {
		return jsonrpc2.NewNumberID(n), true
	}
	return jsonrpc2.ID{}, false
}

// notify sends a notification to this connection's client.
func (c *conn) notify(ctx context.Context, method string, params any) error {
	raw, err := marshal(params)
	if err != nil {
		return fmt.Errorf("encode %s: %w", method, err)
	}
	if err := c.rpc.Notify(ctx, method, jsonrpc2.RawMessage(raw)); err != nil {
		return fmt.Errorf("notify %s: %w", method, err)
	}
	return nil
}

// callClient sends a request to this connection's client and decodes its
// result into result. The calling handler must have been released.
func (c *conn) callClient(ctx context.Context, method string, params, result any) error {
	raw, err := marshal(params)
	if err != nil {
		return fmt.Errorf("encode %s: %w", method, err)
	}
	var out jsonrpc2.RawMessage
	if _, err := c.rpc.Call(ctx, method, jsonrpc2.RawMessage(raw), &out); err != nil {
		return fmt.Errorf("call client %s: %w", method, err)
	}
	if result == nil {
		return nil
	}
	if err := json.Unmarshal(out, result); err != nil {
		return fmt.Errorf("decode client reply to %s: %w", method, err)
	}
	return nil
}
