package protocol

import "time"

// Decisions this file makes where PROTOCOL.md §3 (workspaces) is silent,
// each marked "Extension:" on its type or field:
//   - workspace/open carries allowDirect, the flag the mode `direct` needs;
//     its root is required by overlay and direct and unused by scratch.
//   - WorkspaceInfo.root of a scratch workspace is the private directory the
//     daemon made for it; WorkspaceInfo carries the name it was opened with.
//   - Checkpoint.files and .bytes count the changed files the checkpoint holds.
//   - workspace/commit, workspace/checkpoint and workspace/restore accept a
//     workDoneToken, as kernel/start does.

// WorkspaceMode is how a workspace's /workspace is backed (§3).
type WorkspaceMode string

// Workspace modes (§3).
const (
	// WorkspaceModeOverlay (the default): the project is the read-only lower
	// layer; writes land in an upper layer in the daemon's state dir.
	WorkspaceModeOverlay WorkspaceMode = "overlay"
	// WorkspaceModeScratch: an empty private directory.
	WorkspaceModeScratch WorkspaceMode = "scratch"
	// WorkspaceModeDirect: the project directory itself, writable.
	WorkspaceModeDirect WorkspaceMode = "direct"
)

// WorkspaceOpenParams are the params of `workspace/open`.
type WorkspaceOpenParams struct {
	// Root is the project directory, an absolute host path. Extension:
	// required by overlay and direct, not used by scratch.
	Root string `json:"root,omitempty"`
	// Mode defaults to overlay.
	Mode WorkspaceMode `json:"mode,omitempty"`
	// Name tells apart workspaces of the same root; reopening the same
	// root+name returns the existing workspace with its changes.
	Name string `json:"name,omitempty"`
	// AllowDirect must be true to open in mode direct (§3 modes).
	// Extension: §3 names the flag but not where it goes; it goes here.
	AllowDirect bool `json:"allowDirect,omitempty"`
}

// WorkspaceInfo is the result of `workspace/open` and an entry of
// `workspace/list`.
type WorkspaceInfo struct {
	WorkspaceID string `json:"workspaceId"`
	// Root is the project directory. Extension: for a scratch workspace, the
	// private directory the daemon made for it.
	Root string        `json:"root"`
	Mode WorkspaceMode `json:"mode"`
	// CreatedAt is when the workspace was first opened (RFC 3339).
	CreatedAt time.Time `json:"createdAt"`
	// Extension: the name given to workspace/open.
	Name string `json:"name,omitempty"`
	// Interpreters is, in workspace/open's result, the interpreter a
	// kernel of each language (python, javascript, bash) runs in this
	// workspace without kernel/start's interpreter: the project's
	// (source "venv" or "version-file") or the host's ("system", with a
	// warning when the project's cannot run). The version of a project's
	// interpreter is absent: it is not run to ask; kernel/start's result
	// has it. Extension.
	Interpreters []InterpreterInfo `json:"interpreters,omitempty"`
}

// WorkspaceListParams are the params of `workspace/list` (always {}).
type WorkspaceListParams struct{}

// WorkspaceListResult is the result of `workspace/list`.
type WorkspaceListResult struct {
	Workspaces []WorkspaceInfo `json:"workspaces"`
}

// ChangeKind is how a file of a workspace differs from the project.
type ChangeKind string

// Change kinds (§3 workspace/changes).
const (
	ChangeKindAdded    ChangeKind = "added"
	ChangeKindModified ChangeKind = "modified"
	ChangeKindDeleted  ChangeKind = "deleted"
)

// WorkspaceChangesParams are the params of `workspace/changes`.
type WorkspaceChangesParams struct {
	WorkspaceID string `json:"workspaceId"`
	// Ignored lists the changes of paths the project's .gitignore ignores
	// too (a project that is a git repository); absent, they are left out
	// and counted in the result's ignored. Extension.
	Ignored bool `json:"ignored,omitempty"`
}

// WorkspaceChangesResult is the result of `workspace/changes`.
type WorkspaceChangesResult struct {
	Changes []Change `json:"changes"`
	// Ignored counts the changes left out because the project ignores
	// their paths. Extension.
	Ignored int `json:"ignored,omitempty"`
}

// Change is one changed file of a workspace.
type Change struct {
	// Path is relative to the workspace.
	Path string     `json:"path"`
	Kind ChangeKind `json:"kind"`
	// Size is the file's size in bytes in the workspace; absent when deleted.
	Size *int64 `json:"size,omitempty"`
	// Binary: the file is not text, so it has no line diff.
	Binary bool `json:"binary,omitempty"`
	// RenamedFrom, on an added file, and RenamedTo, on a deleted one, pair
	// a deletion and an addition of the same content: a rename. Both
	// entries stay, so a commit of either path alone does what it did
	// before. Extension.
	RenamedFrom string `json:"renamedFrom,omitempty"`
	RenamedTo   string `json:"renamedTo,omitempty"`
}

// WorkspaceDiffParams are the params of `workspace/diff`.
type WorkspaceDiffParams struct {
	WorkspaceID string `json:"workspaceId"`
	// Paths limits the diff to these files; absent: every change.
	Paths []string `json:"paths,omitempty"`
	// Ignored: as in workspace/changes. Extension.
	Ignored bool `json:"ignored,omitempty"`
}

// WorkspaceDiffResult is the result of `workspace/diff`.
type WorkspaceDiffResult struct {
	Files []FileDiff `json:"files"`
}

// FileDiff is the diff of one changed file.
type FileDiff struct {
	Path string     `json:"path"`
	Kind ChangeKind `json:"kind"`
	// Diff is a unified diff of the project's file against the workspace's;
	// empty for a binary file.
	Diff   string `json:"diff"`
	Binary bool   `json:"binary"`
}

// WorkspaceCommitParams are the params of `workspace/commit`.
type WorkspaceCommitParams struct {
	WorkspaceID string `json:"workspaceId"`
	// Paths limits the commit to these files; absent: every change.
	// Extension: absent, the changes of paths the project's .gitignore
	// ignores are left out, as workspace/changes leaves them out (what was
	// reviewed is what is committed), unless Ignored.
	Paths   []string `json:"paths,omitempty"`
	Ignored bool     `json:"ignored,omitempty"`
	// Extension: a token for $/progress, as on kernel/start.
	WorkDoneToken ProgressToken `json:"workDoneToken,omitempty"`
}

// WorkspaceCommitResult is the result of `workspace/commit`.
type WorkspaceCommitResult struct {
	// Applied are the paths copied into the project.
	Applied []string `json:"applied"`
	// Conflicts are the paths changed in the project since the workspace saw
	// them; they are not overwritten.
	Conflicts []Conflict `json:"conflicts"`
}

// Conflict is a path that workspace/commit did not apply, and why.
type Conflict struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// WorkspaceDiscardParams are the params of `workspace/discard`.
type WorkspaceDiscardParams struct {
	WorkspaceID string `json:"workspaceId"`
	// Paths limits the discard to these files; absent: every change.
	Paths []string `json:"paths,omitempty"`
}

// WorkspaceDiscardResult is the result of `workspace/discard`.
type WorkspaceDiscardResult struct {
	Discarded []string `json:"discarded"`
}

// WorkspaceCheckpointParams are the params of `workspace/checkpoint`.
type WorkspaceCheckpointParams struct {
	WorkspaceID string `json:"workspaceId"`
	// Name labels the checkpoint; absent: the server picks one.
	Name string `json:"name,omitempty"`
	// Extension: a token for $/progress, as on kernel/start.
	WorkDoneToken ProgressToken `json:"workDoneToken,omitempty"`
	// Auto takes an automatic checkpoint: kept in a ring of its own (the
	// newest 100), not counted against the user's checkpoints, and taken
	// only when the workspace changed since the newest checkpoint; when it
	// did not, the result is that checkpoint with reused set. Extension.
	Auto bool `json:"auto,omitempty"`
}

// Checkpoint is the result of `workspace/checkpoint` and an entry of
// `workspace/checkpoints`: a saved state of a workspace's changes.
type Checkpoint struct {
	CheckpointID string `json:"checkpointId"`
	Name         string `json:"name"`
	// CreatedAt is when the checkpoint was taken (RFC 3339).
	CreatedAt time.Time `json:"createdAt"`
	// Files is how many changed files the checkpoint holds. Extension: §3
	// does not say what is counted.
	Files int `json:"files"`
	// Bytes is the total size of those files.
	Bytes int64 `json:"bytes"`
	// Auto marks an automatic checkpoint (workspace/checkpoint with auto,
	// kernel/execute with checkpoint). Extension.
	Auto bool `json:"auto,omitempty"`
	// Reused: nothing changed since this checkpoint, so an automatic one
	// was not taken again. Extension.
	Reused bool `json:"reused,omitempty"`
	// Copied is how many files taking it copied; the others were the same
	// as in the checkpoint before and are shared with it. Extension.
	Copied int `json:"copied,omitempty"`
}

// WorkspaceCheckpointsParams are the params of `workspace/checkpoints`.
type WorkspaceCheckpointsParams struct {
	WorkspaceID string `json:"workspaceId"`
}

// WorkspaceCheckpointsResult is the result of `workspace/checkpoints`.
type WorkspaceCheckpointsResult struct {
	Checkpoints []Checkpoint `json:"checkpoints"`
}

// WorkspaceRestoreParams are the params of `workspace/restore`. The state
// before the restore is kept as a checkpoint named `before-restore`.
type WorkspaceRestoreParams struct {
	WorkspaceID  string `json:"workspaceId"`
	CheckpointID string `json:"checkpointId"`
	// Extension: a token for $/progress, as on kernel/start.
	WorkDoneToken ProgressToken `json:"workDoneToken,omitempty"`
}

// WorkspaceDeleteCheckpointParams are the params of
// `workspace/deleteCheckpoint`.
type WorkspaceDeleteCheckpointParams struct {
	WorkspaceID  string `json:"workspaceId"`
	CheckpointID string `json:"checkpointId"`
}

// WorkspaceCloseParams are the params of `workspace/close`.
type WorkspaceCloseParams struct {
	WorkspaceID string `json:"workspaceId"`
	// Discard removes the workspace's changes; without it the upper layer
	// stays on disk and is there on the next open.
	Discard bool `json:"discard,omitempty"`
}
