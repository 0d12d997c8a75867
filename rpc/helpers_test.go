package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/cellbox-dev/cellbox/kernel"
	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/pty"
	"github.com/cellbox-dev/cellbox/workspace"
)

// pipeRWC joins a reader and a writer into the io.ReadWriteCloser jsonrpc2
// streams want.
type pipeRWC struct {
	io.Reader
	io.Writer
	closers []io.Closer
}

func (p pipeRWC) Close() error {
	for _, c := range p.closers {
		_ = c.Close()
	}
	return nil
}

// testClient is a jsonrpc2 client connected to an in-process daemon over
// stdio framing, recording notifications and answering server requests.
type testClient struct {
	conn jsonrpc2.Conn
	exit chan int

	mu     sync.Mutex
	notes  []note
	answer func(method string, params json.RawMessage) (any, error)
}

type note struct {
	Method string
	Params json.RawMessage
}

func startInProc(t testing.TB, opts Options) *testClient {
	t.Helper()
	opts.TestHooks = true
	d := newTestDaemon(t, opts)
	cr, sw := io.Pipe() // server -> client
	sr, cw := io.Pipe() // client -> server
	tc := &testClient{exit: make(chan int, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		tc.exit <- d.ServeStdio(ctx, sr, sw)
		_ = sw.Close()
	}()
	tc.conn = jsonrpc2.NewConn(jsonrpc2.NewHeaderStream(pipeRWC{cr, cw, []io.Closer{cr, cw}}))
	tc.conn.Go(context.Background(), jsonrpc2.AsyncHandler(tc.handle))
	t.Cleanup(func() {
		cancel()
		_ = cw.Close()
		_ = sr.Close()
		_ = tc.conn.Close()
	})
	return tc
}

func (tc *testClient) handle(ctx context.Context, req *jsonrpc2.Request) (any, error) {
	params := append(json.RawMessage(nil), req.Params()...)
	if !req.IsCall() {
		tc.mu.Lock()
		tc.notes = append(tc.notes, note{req.Method(), params})
		tc.mu.Unlock()
		return nil, nil
	}
	tc.mu.Lock()
	answer := tc.answer
	tc.mu.Unlock()
	if answer == nil {
		return nil, jsonrpc2.ErrMethodNotFound
	}
	return answer(req.Method(), params)
}

func (tc *testClient) notifications(method string) []json.RawMessage {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	var out []json.RawMessage
	for _, n := range tc.notes {
		if n.Method == method {
			out = append(out, n.Params)
		}
	}
	return out
}

func (tc *testClient) call(t *testing.T, method string, params, result any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := tc.conn.Call(ctx, method, params, result)
	return err
}

func (tc *testClient) initialize(t *testing.T) {
	t.Helper()
	var res protocol.InitializeResult
	if err := tc.call(t, protocol.MethodInitialize, protocol.InitializeParams{ProtocolVersion: 1, Capabilities: &protocol.ClientCapabilities{InputRequest: true}}, &res); err != nil {
		t.Fatalf("initialize: %v", err)
	}
}

// wantCode checks err is a JSON-RPC error with code and data.errorCode.
func wantCode(t *testing.T, err error, code protocol.ErrorCode) *jsonrpc2.Error {
	t.Helper()
	var je *jsonrpc2.Error
	if !errors.As(err, &je) {
		t.Fatalf("want JSON-RPC error %d (%s), got %v", code, code.ErrorName(), err)
	}
	if protocol.ErrorCode(je.Code) != code {
		t.Fatalf("want error code %d (%s), got %d: %s", code, code.ErrorName(), je.Code, je.Message)
	}
	var data protocol.ErrorData
	if err := json.Unmarshal(je.Data, &data); err != nil {
		t.Fatalf("error %d has no valid data: %s", je.Code, je.Data)
	}
	if data.ErrorCode != code.ErrorName() || data.Detail == "" {
		t.Fatalf("error data = %+v, want errorCode %q and a detail", data, code.ErrorName())
	}
	return je
}

// newTestDaemon is New with a workspace manager on a temporary state dir
// and a terminal manager over it.
func newTestDaemon(t testing.TB, opts Options) *Daemon {
	t.Helper()
	if opts.Workspaces == nil {
		m, err := workspace.NewManager(workspace.Options{StateDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		opts.Workspaces = m
	}
	if opts.Ptys == nil {
		p := pty.NewManager(pty.Options{Workspaces: opts.Workspaces})
		t.Cleanup(p.Close) // before the workspaces' Shutdown
		opts.Ptys = p
	}
	if opts.Kernels == nil {
		k := kernel.NewManager(kernel.Options{Workspaces: opts.Workspaces})
		t.Cleanup(k.Close) // before the workspaces' Shutdown
		opts.Kernels = k
	}
	return New(opts)
}
