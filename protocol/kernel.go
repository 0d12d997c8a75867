package protocol

import "time"

// Decisions this file makes where PROTOCOL.md §4 (kernels) is silent, each
// marked "Extension:" on its type or field:
//   - kernel/start: cwd is relative to the workspace; network defaults to
//     none; the result's sandbox is a SandboxInfo (the layers of
//     ServerCapabilities.sandbox that are in force, plus the network mode).
//   - kernel/output seq counts per kernel, not per execution (see
//     KernelOutputParams.Seq), so kernel/attach fromSeq has one meaning;
//     without fromSeq, attach replays everything still buffered.
//   - kernel/output of kind error also carries the structured error.
//   - kernel/history: n absent means every kept entry; pattern is a glob.
//   - Variable.size is the length of a sized value.

// SandboxMode is what kernel/start does when the host cannot build the
// full sandbox (§4).
type SandboxMode string

// Sandbox modes.
const (
	// SandboxModeRequired (the default): fail with SandboxUnavailable.
	SandboxModeRequired SandboxMode = "required"
	// SandboxModeBestEffort: run with the layers the host allows and report
	// them in KernelStartResult.sandbox.
	SandboxModeBestEffort SandboxMode = "best-effort"
)

// NetworkMode is the network a sandbox sees.
type NetworkMode string

// Network modes.
const (
	// NetworkModeNone: a network namespace with only loopback.
	NetworkModeNone NetworkMode = "none"
	// NetworkModeHost: the host's network.
	NetworkModeHost NetworkMode = "host"
	// NetworkModeAllowlist: a network namespace whose programs reach the
	// outside only through the daemon's proxies, to what the rules allow
	// (§9).
	NetworkModeAllowlist NetworkMode = "allowlist"
)

// Limits bound a kernel's sandbox (§4). Every field has a documented default
// and maximum; 0 or absent means the default, and a value over the maximum is
// an error (LimitExceeded), never silently clamped.
type Limits struct {
	// MemoryBytes bounds the memory of the sandbox's processes.
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// CPUSeconds bounds the CPU time of a kernel process.
	CPUSeconds int64 `json:"cpuSeconds,omitempty"`
	// Pids bounds the number of processes.
	Pids int64 `json:"pids,omitempty"`
	// FileSizeBytes bounds the size of one written file.
	FileSizeBytes int64 `json:"fileSizeBytes,omitempty"`
	// DiskBytes bounds the bytes written to the workspace.
	DiskBytes int64 `json:"diskBytes,omitempty"`
	// OpenFiles bounds the open file descriptors of a process.
	OpenFiles int64 `json:"openFiles,omitempty"`
	// OutputBytes bounds the output of one execution; beyond it output is
	// dropped and ExecuteResult.outputTruncated is set.
	OutputBytes int64 `json:"outputBytes,omitempty"`
	// TimeoutMs is the default timeoutMs of an execution.
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
}

// KernelStartParams are the params of `kernel/start`.
type KernelStartParams struct {
	// Language is a LanguageCapability.id, for example "python".
	Language string `json:"language"`
	// WorkspaceID is the workspace to run in; absent: a fresh scratch
	// workspace of the kernel's own, removed at shutdown.
	WorkspaceID string `json:"workspaceId,omitempty"`
	// Cwd is the working directory. Extension: relative to the workspace,
	// like fs paths; absent: its root.
	Cwd string `json:"cwd,omitempty"`
	// Env is added to the kernel's environment.
	Env    map[string]string `json:"env,omitempty"`
	Limits *Limits           `json:"limits,omitempty"`
	// Sandbox defaults to required.
	Sandbox SandboxMode `json:"sandbox,omitempty"`
	// Network of the workspace's sandbox. Extension: absent, a new
	// sandbox has none and a running one keeps what it has (none or
	// allowlist, with its rules); "none" or "allowlist" set the
	// workspace's network as workspace/setNetwork does.
	Network NetworkMode `json:"network,omitempty"`
	// Allow is the allowlist's rules (§9), with network "allowlist".
	Allow []string `json:"allow,omitempty"`
	// WorkDoneToken asks for $/progress while the kernel starts.
	WorkDoneToken ProgressToken `json:"workDoneToken,omitempty"`
	// Interpreter is the absolute host path of the interpreter to run, for
	// the kernels that run one: python, javascript, typescript (node),
	// bash, ruby and r (Rscript). Extension: absent, a python kernel of a
	// workspace whose project holds a virtual environment (.venv or venv)
	// runs its python (else the pyenv version its .python-version names),
	// and a javascript or typescript kernel of a project with .nvmrc or .node-version
	// runs that node version (installed by nvm, asdf or fnm); else the
	// host's (initialize's languages[].version). An interpreter
	// outside /usr has its prefix bound read-only into the sandbox. A path
	// that is not an executable of the kernel's language gets -32602.
	Interpreter string `json:"interpreter,omitempty"`
}

// InterpreterInfo is an interpreter of the host: the one a kernel runs
// (kernel/start's result) or one found (initialize). Extension.
type InterpreterInfo struct {
	// Language is a LanguageCapability.id; set in initialize's list.
	Language string `json:"language,omitempty"`
	// Path is the interpreter's absolute host path: for a virtual
	// environment, its bin/python (inside the sandbox the project's is
	// under /workspace).
	Path string `json:"path"`
	// Source says how it was chosen or found: "explicit" (kernel/start's
	// interpreter), "venv" (the project's virtual environment),
	// "version-file" (the project's .nvmrc or .node-version), "system"
	// (the host's PATH), or where it is installed: "pyenv", "uv", "nvm",
	// "asdf", "fnm".
	Source string `json:"source"`
	// Prefix is the host directory bound read-only into the sandbox for it
	// (the directory above the bin/ holding the interpreter, symlinks
	// resolved); absent when sandboxes show it anyway (/usr).
	Prefix string `json:"prefix,omitempty"`
	// Version of the interpreter.
	Version string `json:"version,omitempty"`
	// Warning says why the interpreter the project names was not used
	// (for example a .venv whose base interpreter is gone).
	Warning string `json:"warning,omitempty"`
}

// KernelStartResult is the result of `kernel/start`.
type KernelStartResult struct {
	KernelID     string       `json:"kernelId"`
	Language     string       `json:"language"`
	LanguageInfo LanguageInfo `json:"languageInfo"`
	// Sandbox is the layers in force.
	Sandbox SandboxInfo `json:"sandbox"`
	// Interpreter is the interpreter the kernel runs and why. Extension;
	// absent for Jupyter kernels (jupyter:NAME).
	Interpreter *InterpreterInfo `json:"interpreter,omitempty"`
}

// LanguageInfo describes a started kernel's language, as Jupyter's
// language_info.
type LanguageInfo struct {
	Name          string `json:"name"`
	Version       string `json:"version"`
	FileExtension string `json:"fileExtension"`
	Mimetype      string `json:"mimetype"`
}

// SandboxInfo is the sandbox a kernel runs in. Extension: §4 says only
// "layers in force"; they are the layers of ServerCapabilities.sandbox, plus
// the network mode.
type SandboxInfo struct {
	UserNamespaces   bool        `json:"userNamespaces"`
	Overlay          bool        `json:"overlay"`
	PidNamespace     bool        `json:"pidNamespace"`
	NetworkNamespace bool        `json:"networkNamespace"`
	Seccomp          bool        `json:"seccomp"`
	Landlock         bool        `json:"landlock"`
	Cgroups          bool        `json:"cgroups"`
	Network          NetworkMode `json:"network"`
	// Reason says why a layer is missing (best-effort only).
	Reason string `json:"reason,omitempty"`
}

// KernelExecuteParams are the params of `kernel/execute`.
type KernelExecuteParams struct {
	KernelID string `json:"kernelId"`
	Code     string `json:"code"`
	// ExecutionID names this execution in kernel/output; absent: the
	// server picks one.
	ExecutionID string `json:"executionId,omitempty"`
	// Source makes tracebacks refer to the editor's file and line.
	Source *SourceLocation `json:"source,omitempty"`
	// Silent runs quietly, as Jupyter's silent: no result output, no
	// execution count, no history.
	Silent bool `json:"silent,omitempty"`
	// StoreHistory defaults to true (false when silent).
	StoreHistory *bool `json:"storeHistory,omitempty"`
	// Stdin is fed to the code's standard input first.
	Stdin string `json:"stdin,omitempty"`
	// AllowStdin lets the server send kernel/inputRequest once Stdin is used
	// up, if the client declared capabilities.inputRequest.
	AllowStdin bool `json:"allowStdin,omitempty"`
	// TimeoutMs interrupts the code when it expires; absent: limits.timeoutMs.
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	// StopOnError defaults to true: when this execution fails, the ones
	// queued behind it end with status aborted.
	StopOnError *bool `json:"stopOnError,omitempty"`
	// Checkpoint takes an automatic checkpoint of the workspace (as
	// workspace/checkpoint with auto) when the execution begins, so that
	// restoring it undoes what the execution wrote; the result names it.
	// Extension.
	Checkpoint bool `json:"checkpoint,omitempty"`
}

// SourceLocation is where code comes from in the editor.
type SourceLocation struct {
	Path string `json:"path"`
	// Line is the 1-based line of Path on which the code begins.
	Line int `json:"line"`
}

// ExecutionStatus is how an execution ended.
type ExecutionStatus string

// Execution statuses (§4 ExecuteResult).
const (
	ExecutionStatusOK ExecutionStatus = "ok"
	// ExecutionStatusError: the user's code raised an error.
	ExecutionStatusError       ExecutionStatus = "error"
	ExecutionStatusInterrupted ExecutionStatus = "interrupted"
	// ExecutionStatusTimeout: timeoutMs expired; if the code did not stop
	// within the grace period the kernel was restarted and error.ename is
	// "KernelRestarted".
	ExecutionStatusTimeout ExecutionStatus = "timeout"
	// ExecutionStatusAborted: an earlier execution failed with stopOnError.
	ExecutionStatusAborted ExecutionStatus = "aborted"
)

// ExecuteResult is the result of `kernel/execute`, sent after every
// kernel/output of the execution.
type ExecuteResult struct {
	ExecutionID    string          `json:"executionId"`
	ExecutionCount int             `json:"executionCount"`
	Status         ExecutionStatus `json:"status"`
	Error          *ExecuteError   `json:"error,omitempty"`
	DurationMs     int64           `json:"durationMs"`
	// CPUMs is the CPU time the execution used, when known.
	CPUMs *int64 `json:"cpuMs,omitempty"`
	// PeakMemoryBytes is the kernel's peak memory, when known.
	PeakMemoryBytes int64 `json:"peakMemoryBytes,omitempty"`
	// OutputTruncated: output beyond limits.outputBytes was dropped.
	OutputTruncated bool `json:"outputTruncated,omitempty"`
	// FilesChanged are the workspace paths this execution created, changed
	// or deleted (§10), at most 1000; FilesChangedMore counts the rest
	// (extension). Attribution is by time: a program of the same workspace
	// that writes while the execution runs (a terminal, another kernel) is
	// counted too.
	FilesChanged     []PathChange `json:"filesChanged,omitempty"`
	FilesChangedMore int          `json:"filesChangedMore,omitempty"`
	// Checkpoint is the automatic checkpoint taken before the execution
	// (kernel/execute with checkpoint). Extension.
	Checkpoint string `json:"checkpoint,omitempty"`
}

// ExecuteError is an error of the user's code, as Jupyter reports it.
type ExecuteError struct {
	Ename     string   `json:"ename"`
	Evalue    string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// KernelIDParams are the params of the kernel/ methods that take only a
// kernel: interrupt, restart, shutdown, detach, variables.
type KernelIDParams struct {
	KernelID string `json:"kernelId"`
}

// KernelAttachParams are the params of `kernel/attach`.
type KernelAttachParams struct {
	KernelID string `json:"kernelId"`
	// FromSeq replays buffered kernel/output from this seq on. Extension:
	// absent replays everything still buffered.
	FromSeq *int64 `json:"fromSeq,omitempty"`
}

// KernelHistoryParams are the params of `kernel/history`.
type KernelHistoryParams struct {
	KernelID string `json:"kernelId"`
	// N is how many of the newest entries to return. Extension: absent means
	// every kept entry.
	N int `json:"n,omitempty"`
	// Pattern keeps entries whose code matches. Extension: a glob (`*`, `?`),
	// as Jupyter's history search.
	Pattern string `json:"pattern,omitempty"`
	// Unique drops repeated code.
	Unique bool `json:"unique,omitempty"`
}

// KernelHistoryResult is the result of `kernel/history`, newest last.
type KernelHistoryResult struct {
	Entries []HistoryEntry `json:"entries"`
}

// HistoryEntry is one executed cell.
type HistoryEntry struct {
	ExecutionCount int    `json:"executionCount"`
	Code           string `json:"code"`
}

// KernelListParams are the params of `kernel/list` (always {}).
type KernelListParams struct{}

// KernelListResult is the result of `kernel/list`.
type KernelListResult struct {
	Kernels []KernelInfo `json:"kernels"`
}

// KernelInfo is an entry of kernel/list.
type KernelInfo struct {
	KernelID       string      `json:"kernelId"`
	Language       string      `json:"language"`
	WorkspaceID    string      `json:"workspaceId"`
	State          KernelState `json:"state"`
	ExecutionCount int         `json:"executionCount"`
	// StartedAt is when the kernel started (RFC 3339).
	StartedAt time.Time `json:"startedAt"`
	// LastActivity is when the kernel last executed or produced output (RFC 3339).
	LastActivity time.Time `json:"lastActivity"`
	// CPUMs is the CPU time (user and system) the kernel's processes have
	// used so far, with that of their children that ended and were waited
	// for; measured when kernel/list is asked; absent when unknown (a
	// kernel not running).
	// An extension of version 1 (README: the daemon's extensions).
	CPUMs *int64 `json:"cpuMs,omitempty"`
	// MemoryBytes is the resident memory of the kernel's processes now
	// (summed: a page two of them share counts twice); absent when unknown.
	// An extension of version 1 (README: the daemon's extensions).
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
}

// KernelCompleteParams are the params of `kernel/complete`.
type KernelCompleteParams struct {
	KernelID string `json:"kernelId"`
	Code     string `json:"code"`
	// CursorPos counts in the connection's position encoding (code points
	// unless initialize chose another).
	CursorPos int `json:"cursorPos"`
}

// KernelCompleteResult is the result of `kernel/complete`: the matches
// replace code[cursorStart:cursorEnd].
type KernelCompleteResult struct {
	Matches     []string `json:"matches"`
	CursorStart int      `json:"cursorStart"`
	CursorEnd   int      `json:"cursorEnd"`
}

// KernelInspectParams are the params of `kernel/inspect`.
type KernelInspectParams struct {
	KernelID  string `json:"kernelId"`
	Code      string `json:"code"`
	CursorPos int    `json:"cursorPos"`
	// DetailLevel is 0 (the default) or 1 (more, for example source).
	DetailLevel int `json:"detailLevel,omitempty"`
}

// KernelInspectResult is the result of `kernel/inspect`.
type KernelInspectResult struct {
	Found bool       `json:"found"`
	Data  MimeBundle `json:"data,omitempty"`
}

// IsCompleteStatus says whether code is ready to run.
type IsCompleteStatus string

// Is-complete statuses (§4 kernel/isComplete).
const (
	IsCompleteStatusComplete   IsCompleteStatus = "complete"
	IsCompleteStatusIncomplete IsCompleteStatus = "incomplete"
	IsCompleteStatusInvalid    IsCompleteStatus = "invalid"
	IsCompleteStatusUnknown    IsCompleteStatus = "unknown"
)

// KernelIsCompleteParams are the params of `kernel/isComplete`.
type KernelIsCompleteParams struct {
	KernelID string `json:"kernelId"`
	Code     string `json:"code"`
}

// KernelIsCompleteResult is the result of `kernel/isComplete`.
type KernelIsCompleteResult struct {
	Status IsCompleteStatus `json:"status"`
	// Indent is the indentation of the next line, when incomplete.
	Indent string `json:"indent,omitempty"`
}

// KernelVariablesResult is the result of `kernel/variables`.
type KernelVariablesResult struct {
	Variables []Variable `json:"variables"`
}

// Variable is a name defined in a kernel.
type Variable struct {
	Name string `json:"name"`
	// Type is the language's name of the value's type.
	Type string `json:"type"`
	// Summary is a short, truncated rendering of the value.
	Summary string `json:"summary"`
	// Size is the length of a sized value. Extension: §4 does not say
	// what is measured.
	Size *int64 `json:"size,omitempty"`
}

// MimeBundle is {mime: content} as in Jupyter (text/plain, text/html,
// text/markdown, image/png in base64, image/svg+xml, application/json).
type MimeBundle map[string]any

// OutputKind is the kind of a kernel/output.
type OutputKind string

// Output kinds (§4 kernel/output).
const (
	// OutputKindStream: text on stdout or stderr.
	OutputKindStream OutputKind = "stream"
	// OutputKindDisplay: rich data; with update, replaces the output with
	// the same displayId.
	OutputKindDisplay OutputKind = "display"
	// OutputKindResult: the value of the cell's last expression (Out[n]).
	OutputKindResult OutputKind = "result"
	// OutputKindError: an error of the user's code.
	OutputKindError OutputKind = "error"
	// OutputKindClear: clear the output; with wait, when the next arrives.
	OutputKindClear OutputKind = "clear"
)

// StreamName is the stream of a kernel/output of kind stream.
type StreamName string

// Stream names.
const (
	StreamStdout StreamName = "stdout"
	StreamStderr StreamName = "stderr"
)

// KernelOutputParams are the params of the `kernel/output` notification,
// every one sent before the kernel/execute response.
type KernelOutputParams struct {
	KernelID    string `json:"kernelId"`
	ExecutionID string `json:"executionId"`
	// Seq increases by 1 per notification, so a client can detect loss.
	// Extension: it counts the kernel/output of the kernel across
	// executions and restarts, starting at 1 (consecutive within an
	// execution, since executions run one at a time); kernel/attach
	// fromSeq refers to it.
	Seq  int64      `json:"seq"`
	Kind OutputKind `json:"kind"`
	// Name is the stream of kind stream.
	Name StreamName `json:"name,omitempty"`
	// Text of kind stream; for kind error, the formatted traceback.
	Text string `json:"text,omitempty"`
	// Data of kinds display and result.
	Data     MimeBundle     `json:"data,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
	// DisplayID names a display output that a later update replaces.
	DisplayID string `json:"displayId,omitempty"`
	// Update: this display output replaces the earlier one with DisplayID.
	Update bool `json:"update,omitempty"`
	// Wait: this clear takes effect when the next output arrives.
	Wait bool `json:"wait,omitempty"`
	// Extension: the error of kind error, as in ExecuteResult.error.
	Error *ExecuteError `json:"error,omitempty"`
}

// KernelState is the state of a kernel.
type KernelState string

// Kernel states (§4 kernel/status).
const (
	KernelStateStarting   KernelState = "starting"
	KernelStateIdle       KernelState = "idle"
	KernelStateBusy       KernelState = "busy"
	KernelStateRestarting KernelState = "restarting"
	KernelStateDead       KernelState = "dead"
)

// KernelStatusParams are the params of the `kernel/status` notification.
type KernelStatusParams struct {
	KernelID string      `json:"kernelId"`
	State    KernelState `json:"state"`
	// Reason says why, for restarting and dead (for example "killed:
	// memory limit").
	Reason string `json:"reason,omitempty"`
}

// KernelInputRequestParams are the params of `kernel/inputRequest`, the
// request the server sends when code reads standard input, the client
// declared capabilities.inputRequest and the execution allowStdin.
type KernelInputRequestParams struct {
	KernelID    string `json:"kernelId"`
	ExecutionID string `json:"executionId"`
	Prompt      string `json:"prompt"`
	// Password: do not echo the input.
	Password bool `json:"password"`
}

// KernelInputReply is the client's result of `kernel/inputRequest`.
type KernelInputReply struct {
	// Value is the line read, without its newline.
	Value string `json:"value"`
}
