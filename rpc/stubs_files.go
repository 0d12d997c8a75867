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

func (c *conn) FsRead(context.Context, *protocol.FsReadParams) (*protocol.FsReadResult, error) {
	return nil, notAvailable(protocol.MethodFsRead)
}

func (c *conn) FsWrite(context.Context, *protocol.FsWriteParams) (*protocol.FsWriteResult, error) {
	return nil, notAvailable(protocol.MethodFsWrite)
}

func (c *conn) FsList(context.Context, *protocol.FsListParams) (*protocol.FsListResult, error) {
	return nil, notAvailable(protocol.MethodFsList)
}

func (c *conn) FsStat(context.Context, *protocol.FsStatParams) (*protocol.FileEntry, error) {
	return nil, notAvailable(protocol.MethodFsStat)
}

func (c *conn) FsDelete(context.Context, *protocol.FsDeleteParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodFsDelete)
}

func (c *conn) FsRename(context.Context, *protocol.FsRenameParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodFsRename)
}

func (c *conn) FsMkdir(context.Context, *protocol.FsMkdirParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodFsMkdir)
}

func (c *conn) FsWatch(context.Context, *protocol.FsWatchParams) (*protocol.FsWatchResult, error) {
	return nil, notAvailable(protocol.MethodFsWatch)
}

func (c *conn) FsUnwatch(context.Context, *protocol.FsUnwatchParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodFsUnwatch)
}
