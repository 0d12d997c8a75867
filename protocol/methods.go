package protocol

// Method names, exactly as PROTOCOL.md spells them.
const (
	// §2 Lifecycle.
	MethodInitialize    = "initialize"
	MethodInitialized   = "initialized"
	MethodShutdown      = "shutdown"
	MethodExit          = "exit"
	MethodCancelRequest = "$/cancelRequest"
	MethodProgress      = "$/progress"

	// §3 Workspaces.
	MethodWorkspaceOpen             = "workspace/open"
	MethodWorkspaceList             = "workspace/list"
	MethodWorkspaceChanges          = "workspace/changes"
	MethodWorkspaceDiff             = "workspace/diff"
	MethodWorkspaceCommit           = "workspace/commit"
	MethodWorkspaceDiscard          = "workspace/discard"
	MethodWorkspaceCheckpoint       = "workspace/checkpoint"
	MethodWorkspaceCheckpoints      = "workspace/checkpoints"
	MethodWorkspaceRestore          = "workspace/restore"
	MethodWorkspaceDeleteCheckpoint = "workspace/deleteCheckpoint"
	MethodWorkspaceClose            = "workspace/close"

	// §3 Files.
	MethodFsRead      = "fs/read"
	MethodFsWrite     = "fs/write"
	MethodFsList      = "fs/list"
	MethodFsStat      = "fs/stat"
	MethodFsDelete    = "fs/delete"
	MethodFsRename    = "fs/rename"
	MethodFsMkdir     = "fs/mkdir"
	MethodFsWatch     = "fs/watch"
	MethodFsUnwatch   = "fs/unwatch"
	MethodFsDidChange = "fs/didChange" // notification, server to client

	// §4 Kernels.
	MethodKernelStart        = "kernel/start"
	MethodKernelExecute      = "kernel/execute"
	MethodKernelInterrupt    = "kernel/interrupt"
	MethodKernelRestart      = "kernel/restart"
	MethodKernelShutdown     = "kernel/shutdown"
	MethodKernelAttach       = "kernel/attach"
	MethodKernelDetach       = "kernel/detach"
	MethodKernelHistory      = "kernel/history"
	MethodKernelList         = "kernel/list"
	MethodKernelComplete     = "kernel/complete"
	MethodKernelInspect      = "kernel/inspect"
	MethodKernelIsComplete   = "kernel/isComplete"
	MethodKernelVariables    = "kernel/variables"
	MethodKernelOutput       = "kernel/output"       // notification, server to client
	MethodKernelStatus       = "kernel/status"       // notification, server to client
	MethodKernelInputRequest = "kernel/inputRequest" // request, server to client

	// §5 Terminals.
	MethodPtyOpen   = "pty/open"
	MethodPtyWrite  = "pty/write"
	MethodPtyResize = "pty/resize"
	MethodPtyAttach = "pty/attach"
	MethodPtyAck    = "pty/ack"
	MethodPtyClose  = "pty/close"
	MethodPtyOutput = "pty/output" // notification, server to client
	MethodPtyExit   = "pty/exit"   // notification, server to client

	// §6 Daemon.
	MethodDaemonStats = "daemon/stats"

	// §9 Network and packages.
	MethodWorkspaceSetNetwork = "workspace/setNetwork"
	MethodNetworkBlocked      = "network/blocked" // notification, server to client
	MethodWorkspaceInstall    = "workspace/install"

	// §10 Agents.
	MethodWorkspaceExportGit = "workspace/exportGit"
	MethodWorkspaceFork      = "workspace/fork"

	// §11 App previews and export.
	MethodWorkspaceExposePort   = "workspace/exposePort"
	MethodWorkspaceUnexposePort = "workspace/unexposePort"
	MethodWorkspacePreviews     = "workspace/previews"
	MethodWorkspaceExport       = "workspace/export"
)
