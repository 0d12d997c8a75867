package mcp

import "time"

// The tools' inputs and outputs (PROTOCOL.md §10). The SDK derives each
// tool's inputSchema and outputSchema from these types; a field without
// omitempty is required.

// RunInput is the input of run.
type RunInput struct {
	Code     string            `json:"code" jsonschema:"the code to run in the workspace's kernel (the working directory is /workspace)"`
	Language string            `json:"language,omitempty" jsonschema:"the kernel's language: python (default), javascript, typescript, bash, sql, go, ruby, r, or jupyter:NAME"`
	Files    map[string]string `json:"files,omitempty" jsonschema:"files to write first, path (relative to the workspace) to content"`
	Stdin    string            `json:"stdin,omitempty" jsonschema:"what the code reads from standard input (then end of file)"`
	TimeoutS float64           `json:"timeoutS,omitempty" jsonschema:"interrupt the code after this many seconds"`
	WaitS    float64           `json:"waitS,omitempty" jsonschema:"seconds to wait for the code to finish before answering status running (default 30, at most 300)"`
}

// PollInput is the input of poll.
type PollInput struct {
	ExecutionID string  `json:"executionId" jsonschema:"the executionId a run answered"`
	WaitS       float64 `json:"waitS,omitempty" jsonschema:"seconds to wait for it to finish (default 30, at most 300)"`
}

// RunOutput is the output of run and poll.
type RunOutput struct {
	Status         string `json:"status" jsonschema:"ok, error (the program failed: see error), interrupted, timeout, aborted, or running (still running: poll it)"`
	ExecutionID    string `json:"executionId"`
	ExecutionCount int    `json:"executionCount,omitempty" jsonschema:"the kernel's execution number"`
	// Stdout and Stderr are what is new since the last run or poll of this
	// execution, bounded: head and tail, with a note naming the resource
	// that holds the whole.
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	Result string `json:"result,omitempty" jsonschema:"the text of the value of the last expression"`
	// Displays are the text of the rich outputs (display()), bounded.
	Displays []string   `json:"displays,omitempty" jsonschema:"the text of displayed outputs"`
	Error    *ErrorInfo `json:"error,omitempty"`
	// DurationMs is how long it ran (so far, while running).
	DurationMs       int64        `json:"durationMs"`
	FilesChanged     []FileChange `json:"filesChanged" jsonschema:"the workspace files this execution created, changed or deleted"`
	FilesChangedMore int          `json:"filesChangedMore,omitempty" jsonschema:"how many more files it changed"`
	Images           []ImageInfo  `json:"images" jsonschema:"images the code displayed, sent as image content too"`
	Links            []LinkInfo   `json:"links,omitempty" jsonschema:"rich outputs (HTML, SVG, big JSON) kept as resources"`
	// Checkpoint is the automatic checkpoint taken before the execution:
	// restore it to undo what the execution wrote.
	Checkpoint      string `json:"checkpoint,omitempty" jsonschema:"the checkpoint taken before this execution: restore it to undo its writes"`
	OutputTruncated bool   `json:"outputTruncated,omitempty" jsonschema:"the kernel dropped output past its limit"`
	Note            string `json:"note,omitempty"`
}

// FileChange is a workspace path an execution created, changed or
// deleted.
type FileChange struct {
	Path string `json:"path"`
	Kind string `json:"kind" jsonschema:"added, modified or deleted"`
}

// ImageInfo describes an image of a run, sent as image content.
type ImageInfo struct {
	URI      string `json:"uri" jsonschema:"the full-size image"`
	MimeType string `json:"mimeType"`
	Width    int    `json:"width" jsonschema:"of the image sent"`
	Height   int    `json:"height"`
	// OriginalWidth and OriginalHeight are the full size's.
	OriginalWidth  int `json:"originalWidth"`
	OriginalHeight int `json:"originalHeight"`
}

// LinkInfo is a rich output kept as a resource.
type LinkInfo struct {
	URI      string `json:"uri"`
	MimeType string `json:"mimeType"`
	Bytes    int    `json:"bytes"`
}

// StopInput is the input of stop.
type StopInput struct {
	ExecutionID string `json:"executionId,omitempty" jsonschema:"the execution to stop (default: the one running)"`
	Restart     bool   `json:"restart,omitempty" jsonschema:"restart the kernel: stops anything, and loses its in-memory state (variables, imports); files are kept"`
	Language    string `json:"language,omitempty" jsonschema:"with restart and no executionId: the kernel's language (default python)"`
}

// StopOutput is the output of stop.
type StopOutput struct {
	Status      string `json:"status" jsonschema:"interrupted (or the status it ended with), restarted, still-running, or idle (nothing was running)"`
	ExecutionID string `json:"executionId,omitempty"`
	Note        string `json:"note,omitempty"`
}

// ReadFileInput is the input of read_file.
type ReadFileInput struct {
	Path      string `json:"path" jsonschema:"relative to the workspace"`
	StartLine int    `json:"startLine,omitempty" jsonschema:"the first line to read (from 1)"`
	EndLine   int    `json:"endLine,omitempty" jsonschema:"the last line to read"`
}

// ReadFileOutput is the output of read_file.
type ReadFileOutput struct {
	Path       string `json:"path"`
	Content    string `json:"content,omitempty" jsonschema:"the text of the lines read (an image comes as image content instead)"`
	StartLine  int    `json:"startLine,omitempty"`
	EndLine    int    `json:"endLine,omitempty"`
	TotalLines int    `json:"totalLines,omitempty"`
	Size       int64  `json:"size" jsonschema:"the file's size in bytes"`
	MimeType   string `json:"mimeType,omitempty" jsonschema:"of an image"`
	Note       string `json:"note,omitempty"`
}

// WriteFileInput is the input of write_file.
type WriteFileInput struct {
	Path    string  `json:"path" jsonschema:"relative to the workspace; parent directories are created"`
	Content *string `json:"content,omitempty" jsonschema:"the whole new content"`
	Edits   []Edit  `json:"edits,omitempty" jsonschema:"exact search/replace pairs applied in order to the current content"`
}

// Edit is one search/replace of write_file.
type Edit struct {
	Search  string `json:"search" jsonschema:"text that occurs exactly once in the file, whitespace included"`
	Replace string `json:"replace"`
}

// WriteFileOutput is the output of write_file.
type WriteFileOutput struct {
	Path string `json:"path"`
	Size int64  `json:"size" jsonschema:"the file's new size in bytes"`
}

// ChangesInput is the input of changes.
type ChangesInput struct {
	Paths []string `json:"paths,omitempty" jsonschema:"only changes at or below these paths"`
	Diff  bool     `json:"diff,omitempty" jsonschema:"add a unified diff"`
}

// ChangesOutput is the output of changes.
type ChangesOutput struct {
	Changes []Change `json:"changes"`
	Diff    string   `json:"diff,omitempty"`
	Note    string   `json:"note,omitempty"`
}

// Change is a changed file of the workspace.
type Change struct {
	Path   string `json:"path"`
	Kind   string `json:"kind" jsonschema:"added, modified or deleted"`
	Size   *int64 `json:"size,omitempty"`
	Binary bool   `json:"binary,omitempty"`
}

// CheckpointInput is the input of checkpoint.
type CheckpointInput struct {
	Name string `json:"name,omitempty" jsonschema:"a name to find it by"`
}

// CheckpointOutput is the output of checkpoint.
type CheckpointOutput struct {
	CheckpointID string           `json:"checkpointId"`
	Checkpoints  []CheckpointInfo `json:"checkpoints" jsonschema:"the newest checkpoints, newest last"`
}

// CheckpointInfo is a checkpoint of the workspace.
type CheckpointInfo struct {
	CheckpointID string    `json:"checkpointId"`
	Name         string    `json:"name"`
	CreatedAt    time.Time `json:"createdAt"`
	Files        int       `json:"files"`
	Auto         bool      `json:"auto,omitempty" jsonschema:"taken automatically before a change"`
}

// RestoreInput is the input of restore.
type RestoreInput struct {
	CheckpointID string `json:"checkpointId"`
}

// RestoreOutput is the output of restore.
type RestoreOutput struct {
	Restored []string `json:"restored" jsonschema:"the paths the restore changed"`
	Note     string   `json:"note"`
}

// DiscardInput is the input of discard.
type DiscardInput struct {
	Paths []string `json:"paths,omitempty" jsonschema:"the changes to drop (default: every change)"`
}

// DiscardOutput is the output of discard.
type DiscardOutput struct {
	Discarded  []string `json:"discarded"`
	Checkpoint string   `json:"checkpoint,omitempty" jsonschema:"the checkpoint taken before: restore it to undo the discard"`
}

// CommitInput is the input of commit.
type CommitInput struct {
	Paths   []string `json:"paths,omitempty" jsonschema:"the changes to copy into the project (default: every change)"`
	Message string   `json:"message,omitempty" jsonschema:"what the change does, for the log"`
}

// CommitOutput is the output of commit.
type CommitOutput struct {
	Applied   []string   `json:"applied"`
	Conflicts []Conflict `json:"conflicts"`
}

// Conflict is a change commit did not apply.
type Conflict struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// InstallInput is the input of install.
type InstallInput struct {
	Manager  string   `json:"manager" jsonschema:"pip or npm"`
	Packages []string `json:"packages" jsonschema:"requirement specifiers, e.g. requests==2.32.3 or lodash@4"`
}

// InstallOutput is the output of install.
type InstallOutput struct {
	Installed       []Package `json:"installed"`
	CacheHits       int       `json:"cacheHits"`
	DownloadedBytes int64     `json:"downloadedBytes"`
	DurationMs      int64     `json:"durationMs"`
}

// Package is an installed package.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}
