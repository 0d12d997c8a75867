// Package mcp is `cellbox mcp`: a Model Context Protocol server over the
// user's daemon (PROTOCOL.md §10), for coding agents. It is a face of the
// daemon like the editors: it speaks the cellbox protocol to it through a
// connection (Options.Dial: rpc.Dial for stdio, an in-process pipe for
// /mcp on `serve --listen`) and never reaches below it. README.md has the
// design.
package mcp
