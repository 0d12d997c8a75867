package protocol

// Decisions this file makes where PROTOCOL.md §5 (terminals) is silent, each
// marked "Extension:" on its type or field:
//   - pty/open with neither workspaceId nor kernelId gets a fresh scratch
//     workspace of its own, as kernel/start does; with kernelId it runs in
//     that kernel's workspace.
//   - pty/open's encoding (named in §5's prose) applies to pty/write data too.
//   - seq starts at 1 per terminal; pty/ack acknowledges every output up to
//     and including seq; pty/attach without fromSeq replays all kept
//     scrollback.
//   - pty/exit of a process killed by a signal has exitCode 128+N (as a
//     shell reports it) and signal its name, for example "SIGKILL".
//   - pty/attach answers PtyAttachResult (dropped, firstSeq) instead of {},
//     so a client knows whether the scrollback still held what it asked for.
//   - The first pty/output of a new terminal may reach the client before
//     the pty/open answer that names its ptyId.
//   - A pty/output chunk carries at most 64 KiB of the terminal's bytes
//     (before encoding); in utf8, bytes that are not UTF-8 arrive as U+FFFD,
//     one per byte.

// PtyOpenParams are the params of `pty/open`.
type PtyOpenParams struct {
	// WorkspaceID is the workspace whose sandbox the terminal runs in.
	WorkspaceID string `json:"workspaceId,omitempty"`
	// KernelID runs the terminal in that kernel's workspace. Extension:
	// with neither, the terminal gets a fresh scratch workspace of its own,
	// removed when it closes.
	KernelID string `json:"kernelId,omitempty"`
	// Command and its arguments; absent: the user's shell.
	Command []string `json:"command,omitempty"`
	Cols    int      `json:"cols"`
	Rows    int      `json:"rows"`
	// Env is added to the terminal's environment.
	Env map[string]string `json:"env,omitempty"`
	// Cwd is relative to the workspace; absent: its root.
	Cwd string `json:"cwd,omitempty"`
	// Encoding of pty/output data: utf8 (the default) or base64 for
	// byte-exact binary. Extension: pty/write data uses it too.
	Encoding Encoding `json:"encoding,omitempty"`
	// Network and Allow are kernel/start's (§9). Extension.
	Network NetworkMode `json:"network,omitempty"`
	Allow   []string    `json:"allow,omitempty"`
}

// PtyOpenResult is the result of `pty/open`.
type PtyOpenResult struct {
	PtyID string `json:"ptyId"`
}

// PtyIDParams are the params of the pty/ methods that take only a terminal:
// close.
type PtyIDParams struct {
	PtyID string `json:"ptyId"`
}

// PtyWriteParams are the params of `pty/write`.
type PtyWriteParams struct {
	PtyID string `json:"ptyId"`
	// Data is input for the terminal, in the encoding of pty/open.
	Data string `json:"data"`
}

// PtyResizeParams are the params of `pty/resize`.
type PtyResizeParams struct {
	PtyID string `json:"ptyId"`
	Cols  int    `json:"cols"`
	Rows  int    `json:"rows"`
}

// PtyAttachParams are the params of `pty/attach`, for a client that
// reconnects.
type PtyAttachParams struct {
	PtyID string `json:"ptyId"`
	// FromSeq replays the kept scrollback from this seq on. Extension:
	// absent replays all of it.
	FromSeq *int64 `json:"fromSeq,omitempty"`
}

// PtyAttachResult is the result of `pty/attach`. Extension: §5 answers {};
// these fields say what the replay held.
type PtyAttachResult struct {
	// Dropped is true when output the client asked for (from fromSeq, or
	// from seq 1 without it) was no longer in the bounded scrollback.
	Dropped bool `json:"dropped"`
	// FirstSeq is the seq of the first pty/output this connection receives
	// for the terminal: the first one replayed, or the next one to come.
	FirstSeq int64 `json:"firstSeq"`
}

// PtyAckParams are the params of `pty/ack`: flow control. The server stops
// reading a terminal whose unacknowledged output exceeds a high-water mark.
type PtyAckParams struct {
	PtyID string `json:"ptyId"`
	// Seq acknowledges every pty/output up to and including it.
	Seq int64 `json:"seq"`
}

// PtyOutputParams are the params of the `pty/output` notification.
type PtyOutputParams struct {
	PtyID string `json:"ptyId"`
	// Seq increases by 1 per pty/output of the terminal, from 1.
	Seq int64 `json:"seq"`
	// Data is the terminal's bytes in the encoding of pty/open; a utf8
	// chunk never splits a UTF-8 sequence.
	Data string `json:"data"`
}

// PtyExitParams are the params of the `pty/exit` notification.
type PtyExitParams struct {
	PtyID    string `json:"ptyId"`
	ExitCode int    `json:"exitCode"`
	// Signal names the signal that killed the process, for example
	// "SIGKILL". Extension: ExitCode is then 128+N, as a shell reports it.
	Signal string `json:"signal,omitempty"`
}
