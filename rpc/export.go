package rpc

import (
	"context"
	"fmt"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
)

// WorkspaceExport is §11 workspace/export.
func (c *conn) WorkspaceExport(ctx context.Context, p *protocol.WorkspaceExportParams) (*protocol.WorkspaceExportResult, error) {
	if p.WorkspaceID == "" {
		return nil, missingField(protocol.MethodWorkspaceExport, "workspaceId")
	}
	if p.Dest == "" {
		return nil, missingField(protocol.MethodWorkspaceExport, "dest")
	}
	if p.Format == "" {
		return nil, missingField(protocol.MethodWorkspaceExport, "format")
	}
	if err := workspace.CheckExport(*p); err != nil {
		return nil, fmt.Errorf("invalid params for %s: %w", protocol.MethodWorkspaceExport, err)
	}
	w, err := c.d.opts.Workspaces.Get(p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	c.seeWorkspace(w.ID())
	prog := c.startProgress(p.WorkDoneToken, "Exporting the workspace")
	res, err := w.Export(ctx, *p, func(msg string) { prog.Report(msg, -1) })
	if err != nil {
		prog.End("failed")
		return nil, err
	}
	msg := fmt.Sprintf("exported %d files (%s) to %s", res.Files, byteSize(res.Bytes), res.Path)
	if res.Image != nil {
		msg += ", image " + res.Image.Digest
	}
	prog.End(msg)
	return res, nil
}
