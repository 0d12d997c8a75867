package rpc

import (
	"context"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
)

// §10 agents: review and hand-off of a workspace's changes, and what the
// daemon keeps of each execution's writes.

// WorkspaceExportGit is §10 workspace/exportGit.
func (c *conn) WorkspaceExportGit(ctx context.Context, p *protocol.WorkspaceExportGitParams) (*protocol.WorkspaceExportGitResult, error) {
	w, err := c.overlayWorkspace(protocol.MethodWorkspaceExportGit, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	if p.Branch == "" {
		return nil, missingField(protocol.MethodWorkspaceExportGit, "branch")
	}
	c.seeWorkspace(w.ID())
	return w.ExportGit(ctx, *p)
}

// WorkspaceExportPatch is workspace/exportPatch (extension of §10).
func (c *conn) WorkspaceExportPatch(ctx context.Context, p *protocol.WorkspaceExportPatchParams) (*protocol.WorkspaceExportPatchResult, error) {
	w, err := c.overlayWorkspace(protocol.MethodWorkspaceExportPatch, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	return w.ExportPatch(ctx, *p)
}

// WorkspaceFork is §10 workspace/fork.
func (c *conn) WorkspaceFork(ctx context.Context, p *protocol.WorkspaceForkParams) (*protocol.WorkspaceInfo, error) {
	if p.WorkspaceID == "" {
		return nil, missingField(protocol.MethodWorkspaceFork, "workspaceId")
	}
	w, err := c.d.opts.Workspaces.Fork(ctx, p.WorkspaceID, p.Name)
	if err != nil {
		return nil, err
	}
	c.seeWorkspace(w.ID())
	info := w.Info()
	return &info, nil
}

// WorkspaceExecutions is workspace/executions (extension of §10): the
// files each recent execution of the workspace changed.
func (c *conn) WorkspaceExecutions(_ context.Context, p *protocol.WorkspaceExecutionsParams) (*protocol.WorkspaceExecutionsResult, error) {
	w, err := c.overlayWorkspace(protocol.MethodWorkspaceExecutions, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	recs := w.Executions(p.ExecutionID)
	if p.ExecutionID != "" && len(recs) == 0 {
		return nil, protocol.Errorf(protocol.CodeNotFound, "workspace %s has no record of execution %s (it changed no file, or is older than the newest %d)", w.ID(), p.ExecutionID, workspace.MaxExecutionRecords)
	}
	return &protocol.WorkspaceExecutionsResult{Executions: recs}, nil
}
