package rpc

import (
	"context"

	"github.com/cellbox-dev/cellbox/protocol"
)

// WorkspaceExposePort is §11 workspace/exposePort.
func (c *conn) WorkspaceExposePort(ctx context.Context, p *protocol.WorkspaceExposePortParams) (*protocol.Preview, error) {
	return nil, protocol.Errorf(protocol.CodeMethodNotFound, "not yet")
}

// WorkspaceUnexposePort is §11 workspace/unexposePort.
func (c *conn) WorkspaceUnexposePort(ctx context.Context, p *protocol.PreviewIDParams) (*protocol.Empty, error) {
	return nil, protocol.Errorf(protocol.CodeMethodNotFound, "not yet")
}

// WorkspacePreviews is §11 workspace/previews.
func (c *conn) WorkspacePreviews(ctx context.Context, p *protocol.WorkspacePreviewsParams) (*protocol.WorkspacePreviewsResult, error) {
	return nil, protocol.Errorf(protocol.CodeMethodNotFound, "not yet")
}
