package rpc

import (
	"context"

	"github.com/cellbox-dev/cellbox/protocol"
)

func (c *conn) WorkspaceChanges(context.Context, *protocol.WorkspaceChangesParams) (*protocol.WorkspaceChangesResult, error) {
	return nil, notAvailable(protocol.MethodWorkspaceChanges)
}

func (c *conn) WorkspaceDiff(context.Context, *protocol.WorkspaceDiffParams) (*protocol.WorkspaceDiffResult, error) {
	return nil, notAvailable(protocol.MethodWorkspaceDiff)
}

func (c *conn) WorkspaceCommit(context.Context, *protocol.WorkspaceCommitParams) (*protocol.WorkspaceCommitResult, error) {
	return nil, notAvailable(protocol.MethodWorkspaceCommit)
}

func (c *conn) WorkspaceDiscard(context.Context, *protocol.WorkspaceDiscardParams) (*protocol.WorkspaceDiscardResult, error) {
	return nil, notAvailable(protocol.MethodWorkspaceDiscard)
}

func (c *conn) WorkspaceCheckpoint(context.Context, *protocol.WorkspaceCheckpointParams) (*protocol.Checkpoint, error) {
	return nil, notAvailable(protocol.MethodWorkspaceCheckpoint)
}

func (c *conn) WorkspaceCheckpoints(context.Context, *protocol.WorkspaceCheckpointsParams) (*protocol.WorkspaceCheckpointsResult, error) {
	return nil, notAvailable(protocol.MethodWorkspaceCheckpoints)
}

func (c *conn) WorkspaceRestore(context.Context, *protocol.WorkspaceRestoreParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodWorkspaceRestore)
}

func (c *conn) WorkspaceDeleteCheckpoint(context.Context, *protocol.WorkspaceDeleteCheckpointParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodWorkspaceDeleteCheckpoint)
}
