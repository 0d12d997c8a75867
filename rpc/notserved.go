package rpc

import (
	"context"

	"github.com/cellbox-dev/cellbox/protocol"
)

// The methods PROTOCOL.md §11 defines that this build does not serve
// yet: each answers -32601 naming itself, so a client can tell "not here
// yet" from a typo.
var notYetServed = []string{
	protocol.MethodWorkspaceExposePort,
	protocol.MethodWorkspaceUnexposePort,
	protocol.MethodWorkspacePreviews,
	protocol.MethodWorkspaceExport,
}

func init() {
	for _, m := range notYetServed {
		methodTable[m] = func(*conn, context.Context, []byte, func()) (any, error) {
			return nil, notAvailable(m)
		}
	}
}

func notAvailable(method string) error {
	return protocol.Errorf(protocol.CodeMethodNotFound, "%s is part of the cellbox protocol but is not available in this build", method)
}
