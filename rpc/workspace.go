package rpc

import (
	"context"

	"github.com/cellbox-dev/cellbox/protocol"
)

// WorkspaceOpen is §3 workspace/open.
func (c *conn) WorkspaceOpen(ctx context.Context, p *protocol.WorkspaceOpenParams) (*protocol.WorkspaceInfo, error) {
	if p.Root == "" && p.Mode != protocol.WorkspaceModeScratch && c.clientDir != "" {
		p.Root = c.clientDir
	}
	w, err := c.d.opts.Workspaces.Open(ctx, *p)
	if err != nil {
		return nil, err
	}
	c.seeWorkspace(w.ID())
	info := w.Info()
	if c.d.opts.Kernels != nil {
		info.Interpreters = c.d.opts.Kernels.WorkspaceInterpreters(ctx, w)
	}
	return &info, nil
}

// WorkspaceList is §3 workspace/list: the workspaces open in this daemon.
func (c *conn) WorkspaceList(context.Context, *protocol.WorkspaceListParams) (*protocol.WorkspaceListResult, error) {
	return &protocol.WorkspaceListResult{Workspaces: c.d.opts.Workspaces.List()}, nil
}

// WorkspaceClose is §3 workspace/close.
func (c *conn) WorkspaceClose(ctx context.Context, p *protocol.WorkspaceCloseParams) (*protocol.Empty, error) {
	if p.WorkspaceID == "" {
		return nil, missingField(protocol.MethodWorkspaceClose, "workspaceId")
	}
	if err := c.d.opts.Workspaces.CloseWorkspace(ctx, p.WorkspaceID, p.Discard); err != nil {
		return nil, err
	}
	return &protocol.Empty{}, nil
}
