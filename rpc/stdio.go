package rpc

import (
	"context"
	"io"
)

// ServeStdio serves one client over r and w with LSP framing (PROTOCOL.md
// §1) and returns the process exit code of §2: 0 after shutdown then exit,
// 1 otherwise (exit without shutdown, or the client closed its end).
//
// w must carry protocol bytes only. On exit ServeStdio returns without
// waiting for a read blocked on r; the caller is expected to exit.
func (d *Daemon) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	exit := make(chan int, 1)
	done := make(chan struct{})
	var last *conn
	t := newStdioTransport(r, w, nil, d.opts.MaxMessageBytes)
	s := newStream(t, d.rejected)
	go func() {
		defer close(done)
		last = d.serveConn(ctx, s, "stdio", "", func(code int) {
			select {
			case exit <- code:
			default:
			}
		})
	}()
	select {
	case code := <-exit:
		return code
	case <-done:
		if last != nil && last.shutDown() {
			return 0
		}
		return 1
	case <-ctx.Done():
		return 1
	}
}

func (d *Daemon) rejected(reason string) {
	d.metrics.rejected.WithLabelValues(reason).Inc()
}
