// Package protocol is the cellbox wire contract (PROTOCOL.md) as Go types:
// method names, params, results, notifications and error codes.
//
// It imports nothing of cellbox's own. The TypeScript and Lua client types
// under editors/ are generated from this package by `go generate`
// (see generate.go); never edit them by hand.
//
// Extensions to PROTOCOL.md made by this package are marked "Extension:" in
// their doc comments and listed in the README's protocol section.
package protocol

// Version is the protocol version spoken by this package (PROTOCOL.md, version 1).
const Version = 1
