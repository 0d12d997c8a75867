// Package jupyter speaks the Jupyter messaging protocol, version 5.3: the
// wire format of a message (identities, the `<IDS|MSG>` delimiter, the
// HMAC-SHA256 signature, header, parent header, metadata, content and
// buffers), connection files, and the five ZeroMQ sockets of a kernel
// (shell, control and stdin as ROUTER, iopub as PUB, heartbeat as REP) and
// of a client (DEALER, SUB, REQ).
//
// It is used twice: by `cellbox jupyter-kernel`, which makes a cellbox
// kernel a Jupyter kernel for Jupyter's own clients, and by the bridge that
// drives an installed Jupyter kernel inside a sandbox as a client. Both
// ends read bytes that another program wrote (a Jupyter client any local
// user can connect to over tcp; a kernel running untrusted code), so
// every frame is bounded before it is read (transport.go), every message is
// checked (its signature first) before it is parsed, and nothing panics on
// input.
//
// ZeroMQ is github.com/go-zeromq/zmq4 (pure Go, so the binary stays
// CGO_ENABLED=0), used only in sockets.go and transport.go behind this
// package's small API, so it can be patched or replaced.
package jupyter
