package rpc

import (
	"context"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Methods of PROTOCOL.md §3-§5 whose services are not in this build yet.
// Each answers -32601 with the method named, so a client can tell "not
// here yet" from a typo.

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

func (c *conn) KernelStart(context.Context, *protocol.KernelStartParams) (*protocol.KernelStartResult, error) {
	return nil, notAvailable(protocol.MethodKernelStart)
}

func (c *conn) KernelExecute(context.Context, *protocol.KernelExecuteParams) (*protocol.ExecuteResult, error) {
	return nil, notAvailable(protocol.MethodKernelExecute)
}

func (c *conn) KernelInterrupt(context.Context, *protocol.KernelIDParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodKernelInterrupt)
}

func (c *conn) KernelRestart(context.Context, *protocol.KernelIDParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodKernelRestart)
}

func (c *conn) KernelShutdown(context.Context, *protocol.KernelIDParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodKernelShutdown)
}

func (c *conn) KernelAttach(context.Context, *protocol.KernelAttachParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodKernelAttach)
}

func (c *conn) KernelDetach(context.Context, *protocol.KernelIDParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodKernelDetach)
}

func (c *conn) KernelHistory(context.Context, *protocol.KernelHistoryParams) (*protocol.KernelHistoryResult, error) {
	return nil, notAvailable(protocol.MethodKernelHistory)
}

func (c *conn) KernelList(context.Context, *protocol.KernelListParams) (*protocol.KernelListResult, error) {
	return nil, notAvailable(protocol.MethodKernelList)
}

func (c *conn) KernelComplete(context.Context, *protocol.KernelCompleteParams) (*protocol.KernelCompleteResult, error) {
	return nil, notAvailable(protocol.MethodKernelComplete)
}

func (c *conn) KernelInspect(context.Context, *protocol.KernelInspectParams) (*protocol.KernelInspectResult, error) {
	return nil, notAvailable(protocol.MethodKernelInspect)
}

func (c *conn) KernelIsComplete(context.Context, *protocol.KernelIsCompleteParams) (*protocol.KernelIsCompleteResult, error) {
	return nil, notAvailable(protocol.MethodKernelIsComplete)
}

func (c *conn) KernelVariables(context.Context, *protocol.KernelIDParams) (*protocol.KernelVariablesResult, error) {
	return nil, notAvailable(protocol.MethodKernelVariables)
}

func (c *conn) PtyOpen(context.Context, *protocol.PtyOpenParams) (*protocol.PtyOpenResult, error) {
	return nil, notAvailable(protocol.MethodPtyOpen)
}

func (c *conn) PtyWrite(context.Context, *protocol.PtyWriteParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodPtyWrite)
}

func (c *conn) PtyResize(context.Context, *protocol.PtyResizeParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodPtyResize)
}

func (c *conn) PtyAttach(context.Context, *protocol.PtyAttachParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodPtyAttach)
}

func (c *conn) PtyAck(context.Context, *protocol.PtyAckParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodPtyAck)
}

func (c *conn) PtyClose(context.Context, *protocol.PtyIDParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodPtyClose)
}
func notAvailable(method string) error {
	return protocol.Errorf(protocol.CodeMethodNotFound, "%s is part of the cellbox protocol but is not available in this build", method)
}
