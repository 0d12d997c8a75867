package rpc

import (
	"context"

	"github.com/cellbox-dev/cellbox/protocol"
)

// WorkspaceExport is §11 workspace/export.
func (c *conn) WorkspaceExport(ctx context.Context, p *protocol.WorkspaceExportParams) (*protocol.WorkspaceExportResult, error) {
	return nil, protocol.Errorf(protocol.CodeMethodNotFound, "%s is not available in this build yet", protocol.MethodWorkspaceExport)
}
