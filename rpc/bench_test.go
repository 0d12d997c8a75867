package rpc

import (
	"context"
	"testing"

	"github.com/cellbox-dev/cellbox/protocol"
)

// BenchmarkDispatch is one daemon/stats round trip through the whole
// in-process stack (framing, validation, jsonrpc2, dispatch) over io.Pipe:
// the daemon's own share of a round trip, without process switches. The
// end-to-end figures against the real binary are in cmd/cellbox.
func BenchmarkDispatch(b *testing.B) {
	tc := startInProc(b, Options{})
	ctx := context.Background()
	if _, err := tc.conn.Call(ctx, protocol.MethodInitialize, protocol.InitializeParams{ProtocolVersion: 1}, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := tc.conn.Call(ctx, protocol.MethodDaemonStats, struct{}{}, nil); err != nil {
			b.Fatal(err)
		}
	}
}
