package rpc

import "github.com/cellbox-dev/cellbox/protocol"

// Methods of PROTOCOL.md whose services are not in this build yet answer
// -32601 with the method named, so a client can tell "not here yet" from a
// typo. stubs_*.go hold them, one file per area.
func notAvailable(method string) error {
	return protocol.Errorf(protocol.CodeMethodNotFound, "%s is part of the cellbox protocol but is not available in this build", method)
}
