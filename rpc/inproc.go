package rpc

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
)

// In-process connections: a face of the daemon that runs in the daemon's
// own process (the MCP server at /mcp) speaks the protocol to it over an
// in-memory pipe, through the same dispatch, ordering and ownership as a
// stdio or websocket client.
//
//	face ──Client──> net.Pipe (LSP framing) ──> ServeConn ──> dispatch
//
// HandleHTTP puts such a face's handler on the daemon's listener, behind
// the same Host, Origin and token checks as /rpc.

// ServeConn serves one client over conn with LSP framing (PROTOCOL.md §1)
// until the client closes it, sends exit, or ctx ends; conn is closed when
// it returns. transport names the connection in logs and metrics.
func (d *Daemon) ServeConn(ctx context.Context, conn io.ReadWriteCloser, transport string) {
	t := newStdioTransport(conn, conn, conn, d.opts.MaxMessageBytes)
	d.serveConn(ctx, newStream(t, d.rejected), transport, "", func(int) { _ = conn.Close() })
	_ = conn.Close()
}

// DialInProcess is a Client of this daemon over an in-memory pipe, with
// initialize and initialized done. The connection lasts until the Client
// is closed or ctx ends.
func (d *Daemon) DialInProcess(ctx context.Context, o ClientOptions) (*Client, error) {
	server, client := net.Pipe()
	go d.ServeConn(ctx, server, "inproc")
	c := newClient(pipeLink{newStdioTransport(client, client, client, clientMaxMessageBytes)}, o)
	if err := c.initialize(ctx, o); err != nil {
		return nil, fmt.Errorf("connect to the daemon in process: %w", err)
	}
	return c, nil
}

// pipeLink is an in-process connection on the client side.
type pipeLink struct{ *stdioTransport }

func (pipeLink) keepAlive(<-chan struct{}) {}
func (l pipeLink) goodbye()                { _ = l.close() }

// HandleHTTP serves h at pattern (a net/http ServeMux pattern, "/mcp")
// beside /rpc, behind the same Host, Origin and token checks. Call it
// before Handler or Serve.
func (d *Daemon) HandleHTTP(pattern string, h http.Handler) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.extra == nil {
		d.extra = make(map[string]http.Handler)
	}
	d.extra[pattern] = h
}
