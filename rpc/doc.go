// Package rpc is cellbox's JSON-RPC side: the stdio and websocket
// transports, the HTTP listener (/rpc, /, /healthz, /metrics) with its token
// and Origin checks, and dispatch of PROTOCOL.md methods to the services. It
// knows connections, not kernels.
//
// # go.lsp.dev/jsonrpc2 v1.0.1 and its rough edges
//
// The connection machinery is go.lsp.dev/jsonrpc2. These are the edges of
// v1.0.1 this package works around, each with a regression test:
//
//   - Handlers run one at a time on the read goroutine unless released with
//     jsonrpc2.Async. conn.handle releases every request as soon as it is
//     registered and its params decoded (methods listed in `ordered` release
//     after their ordered part), so a slow request never delays a fast one,
//     and handlers that call the client (kernel/inputRequest) cannot
//     deadlock. (TestSlowRequestDoesNotBlock, TestServerToClientRequest)
//     Released requests on the same kernel or workspace still keep wire
//     order: each takes its turn before it is released (order.go).
//     (TestSequencer*, and cmd/cellbox's TestPipelinedWireOrder under load)
//   - The context and *Request handed to a handler are pooled and recycled
//     when it returns; a context derived from it (including by the library's
//     CancelHandler) outlives it and fails later. Work runs under a context
//     derived from the connection's own, and $/cancelRequest is taken by a
//     Preempter on the read goroutine, which cancels that context.
//     (TestCancelRequest, run with -race)
//   - One malformed frame ends the connection without a reply. stream
//     validates each frame with the library's own decoders first and answers
//     -32700 or -32600 itself, keeping the connection. The LSP header reader
//     is ours for the same reason: a bad header or an oversized body is
//     skipped and answered. (TestBadFrames, FuzzReadFrame)
//   - A Stream with only Read and Write cannot receive batch arrays. stream
//     implements the library's frame-level ReadFrame/WriteFrame on both
//     transports, so batches work over stdio and websocket. (TestBatch)
//   - A notification handler that returns an error ends the connection, so
//     notification handlers here never return one.
//   - A panicking handler ends the connection; conn.call recovers and answers
//     -32603 instead. (TestHandlerPanic)
package rpc
