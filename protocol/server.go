package protocol

import "context"

// Server is every client-to-server method of PROTOCOL.md. rpc dispatches to
// an implementation of it, so a method missing from the implementation fails
// to compile.
type Server interface {
	// §2 Lifecycle.
	Initialize(context.Context, *InitializeParams) (*InitializeResult, error)
	Initialized(context.Context, *InitializedParams) error
	Shutdown(context.Context) error
	Exit(context.Context) error

	// §3 Workspaces.
	WorkspaceOpen(context.Context, *WorkspaceOpenParams) (*WorkspaceInfo, error)
	WorkspaceList(context.Context, *WorkspaceListParams) (*WorkspaceListResult, error)
	WorkspaceChanges(context.Context, *WorkspaceChangesParams) (*WorkspaceChangesResult, error)
	WorkspaceDiff(context.Context, *WorkspaceDiffParams) (*WorkspaceDiffResult, error)
	WorkspaceCommit(context.Context, *WorkspaceCommitParams) (*WorkspaceCommitResult, error)
	WorkspaceDiscard(context.Context, *WorkspaceDiscardParams) (*WorkspaceDiscardResult, error)
	WorkspaceCheckpoint(context.Context, *WorkspaceCheckpointParams) (*Checkpoint, error)
	WorkspaceCheckpoints(context.Context, *WorkspaceCheckpointsParams) (*WorkspaceCheckpointsResult, error)
	WorkspaceRestore(context.Context, *WorkspaceRestoreParams) (*Empty, error)
	WorkspaceDeleteCheckpoint(context.Context, *WorkspaceDeleteCheckpointParams) (*Empty, error)
	WorkspaceClose(context.Context, *WorkspaceCloseParams) (*Empty, error)

	// §3 Files.
	FsRead(context.Context, *FsReadParams) (*FsReadResult, error)
	FsWrite(context.Context, *FsWriteParams) (*FsWriteResult, error)
	FsList(context.Context, *FsListParams) (*FsListResult, error)
	FsStat(context.Context, *FsStatParams) (*FileEntry, error)
	FsDelete(context.Context, *FsDeleteParams) (*Empty, error)
	FsRename(context.Context, *FsRenameParams) (*Empty, error)
	FsMkdir(context.Context, *FsMkdirParams) (*Empty, error)
	FsWatch(context.Context, *FsWatchParams) (*FsWatchResult, error)
	FsUnwatch(context.Context, *FsUnwatchParams) (*Empty, error)

	// §4 Kernels.
	KernelStart(context.Context, *KernelStartParams) (*KernelStartResult, error)
	KernelExecute(context.Context, *KernelExecuteParams) (*ExecuteResult, error)
	KernelInterrupt(context.Context, *KernelIDParams) (*Empty, error)
	KernelRestart(context.Context, *KernelIDParams) (*Empty, error)
	KernelShutdown(context.Context, *KernelIDParams) (*Empty, error)
	KernelAttach(context.Context, *KernelAttachParams) (*Empty, error)
	KernelDetach(context.Context, *KernelIDParams) (*Empty, error)
	KernelHistory(context.Context, *KernelHistoryParams) (*KernelHistoryResult, error)
	KernelList(context.Context, *KernelListParams) (*KernelListResult, error)
	KernelComplete(context.Context, *KernelCompleteParams) (*KernelCompleteResult, error)
	KernelInspect(context.Context, *KernelInspectParams) (*KernelInspectResult, error)
	KernelIsComplete(context.Context, *KernelIsCompleteParams) (*KernelIsCompleteResult, error)
	KernelVariables(context.Context, *KernelIDParams) (*KernelVariablesResult, error)

	// §5 Terminals.
	PtyOpen(context.Context, *PtyOpenParams) (*PtyOpenResult, error)
	PtyWrite(context.Context, *PtyWriteParams) (*Empty, error)
	PtyResize(context.Context, *PtyResizeParams) (*Empty, error)
	PtyAttach(context.Context, *PtyAttachParams) (*PtyAttachResult, error)
	PtyAck(context.Context, *PtyAckParams) (*Empty, error)
	PtyClose(context.Context, *PtyIDParams) (*Empty, error)

	// §6 Daemon.
	DaemonStats(context.Context, *DaemonStatsParams) (*DaemonStats, error)

	// §9 Network and packages.
	WorkspaceSetNetwork(context.Context, *WorkspaceSetNetworkParams) (*Empty, error)
	WorkspaceInstall(context.Context, *WorkspaceInstallParams) (*WorkspaceInstallResult, error)

	// §10 Agents.
	WorkspaceExportGit(context.Context, *WorkspaceExportGitParams) (*WorkspaceExportGitResult, error)
	WorkspaceExportPatch(context.Context, *WorkspaceExportPatchParams) (*WorkspaceExportPatchResult, error)
	WorkspaceFork(context.Context, *WorkspaceForkParams) (*WorkspaceInfo, error)
	WorkspaceExecutions(context.Context, *WorkspaceExecutionsParams) (*WorkspaceExecutionsResult, error)

	// §11 Apps.
	WorkspaceExposePort(context.Context, *WorkspaceExposePortParams) (*Preview, error)
	WorkspaceUnexposePort(context.Context, *PreviewIDParams) (*Empty, error)
	WorkspacePreviews(context.Context, *WorkspacePreviewsParams) (*WorkspacePreviewsResult, error)
	WorkspaceExport(context.Context, *WorkspaceExportParams) (*WorkspaceExportResult, error)
}

// Client is every server-to-client message of PROTOCOL.md: notifications,
// and the one request (kernel/inputRequest).
type Client interface {
	Progress(context.Context, *ProgressParams) error
	FsDidChange(context.Context, *FsDidChangeParams) error
	KernelOutput(context.Context, *KernelOutputParams) error
	KernelStatus(context.Context, *KernelStatusParams) error
	KernelInputRequest(context.Context, *KernelInputRequestParams) (*KernelInputReply, error)
	PtyOutput(context.Context, *PtyOutputParams) error
	PtyExit(context.Context, *PtyExitParams) error
	NetworkBlocked(context.Context, *NetworkBlockedParams) error
	WorkspacePorts(context.Context, *WorkspacePortsParams) error
}
