package protocol

import "time"

// §10 Agents: the review and hand-off methods, and what the daemon keeps
// of each execution's writes. The MCP server (`cellbox mcp`) is a client
// of these methods; its tools are not part of this package.

// Extension methods of §10: not in PROTOCOL.md, listed in the README's
// protocol section.
const (
	// MethodWorkspaceExportPatch is a workspace's changes as one patch that
	// `git apply` takes. Extension.
	MethodWorkspaceExportPatch = "workspace/exportPatch"
	// MethodWorkspaceExecutions lists the files each recent execution of a
	// workspace changed. Extension.
	MethodWorkspaceExecutions = "workspace/executions"
)

// PathChange is a path an execution created, changed or deleted
// (ExecuteResult.filesChanged): kind "added" (it did not exist before the
// execution), "modified" or "deleted", relative to the workspace view as it
// was when the execution began.
type PathChange struct {
	Path string     `json:"path"`
	Kind ChangeKind `json:"kind"`
}

// WorkspaceExportGitParams are the params of `workspace/exportGit`.
type WorkspaceExportGitParams struct {
	WorkspaceID string `json:"workspaceId"`
	// Branch is the branch to write (refs/heads/<branch>). An existing
	// branch is moved only when it points at the commit the export builds
	// on (its new commit's parent) or Force is set. Extension: Force.
	Branch string `json:"branch"`
	Force  bool   `json:"force,omitempty"`
	// Message is the commit message; absent: one naming the workspace.
	Message string `json:"message,omitempty"`
	// Paths limits the commit to these changes; absent: every change that
	// workspace/changes lists (paths the project's .gitignore ignores are
	// left out unless Ignored).
	Paths []string `json:"paths,omitempty"`
	// Ignored includes the changes of paths the project ignores. Extension.
	Ignored bool `json:"ignored,omitempty"`
}

// WorkspaceExportGitResult is the result of `workspace/exportGit`.
type WorkspaceExportGitResult struct {
	// Commit is the new commit's id; its parent is Baseline when there is
	// one, else the project's HEAD.
	Commit string `json:"commit"`
	Branch string `json:"branch"`
	// Baseline is, when the project had uncommitted work (its working tree
	// differed from HEAD), the commit of that work made first, so that
	// Commit's own diff is exactly the workspace's changes. Extension.
	Baseline string `json:"baseline,omitempty"`
	// Files is how many paths the commit changes. Extension.
	Files int `json:"files"`
}

// WorkspaceExportPatchParams are the params of `workspace/exportPatch`
// (extension).
type WorkspaceExportPatchParams struct {
	WorkspaceID string   `json:"workspaceId"`
	Paths       []string `json:"paths,omitempty"`
	Ignored     bool     `json:"ignored,omitempty"`
}

// WorkspaceExportPatchResult is the result of `workspace/exportPatch`:
// Patch applies to the project with `git apply` (binary files as git's
// binary patches when the project is a git repository).
type WorkspaceExportPatchResult struct {
	Patch string `json:"patch"`
	Files int    `json:"files"`
}

// WorkspaceForkParams are the params of `workspace/fork`.
type WorkspaceForkParams struct {
	WorkspaceID string `json:"workspaceId"`
	// Name is the new workspace's name; absent: the server picks one
	// ("<name>-fork-N").
	Name string `json:"name,omitempty"`
}

// WorkspaceExecutionsParams are the params of `workspace/executions`
// (extension).
type WorkspaceExecutionsParams struct {
	WorkspaceID string `json:"workspaceId"`
	// ExecutionID asks for one execution's record.
	ExecutionID string `json:"executionId,omitempty"`
}

// ExecutionRecord is what the daemon keeps of an execution that changed
// files: the newest are kept (a bounded ring per workspace, in memory).
type ExecutionRecord struct {
	ExecutionID    string       `json:"executionId"`
	KernelID       string       `json:"kernelId"`
	Language       string       `json:"language,omitempty"`
	ExecutionCount int          `json:"executionCount"`
	FinishedAt     time.Time    `json:"finishedAt"`
	FilesChanged   []PathChange `json:"filesChanged"`
	// More counts the paths left out of FilesChanged (it is bounded).
	More int `json:"more,omitempty"`
	// Checkpoint is the automatic checkpoint taken before the execution,
	// when one was (restoring it undoes the execution's writes).
	Checkpoint string `json:"checkpoint,omitempty"`
}

// WorkspaceExecutionsResult is the result of `workspace/executions`,
// oldest first.
type WorkspaceExecutionsResult struct {
	Executions []ExecutionRecord `json:"executions"`
}
