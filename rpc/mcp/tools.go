package mcp

import (
	"context"
	"encoding/json"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cellbox-dev/cellbox/protocol"
)

// The eleven tools of PROTOCOL.md §10. Each handler translates its input
// into requests to the daemon and their results into the tool's output;
// the workflow is explained once, in the server's instructions.

func (s *Server) addTools(srv *sdk.Server) {
	yes, no := true, false
	tool := func(name, title, desc string, readOnly bool, destructive *bool) *sdk.Tool {
		return &sdk.Tool{Name: name, Title: title, Description: desc,
			Annotations: &sdk.ToolAnnotations{Title: title, ReadOnlyHint: readOnly, DestructiveHint: destructive, OpenWorldHint: &no}}
	}
	sdk.AddTool(srv, tool("run", "Run code",
		"Run code in the workspace's persistent kernel (python by default), after writing files. Returns stdout, stderr, the last value, the error with file:line, images, and the files it changed.",
		false, &no), withSession(s, (*session).run))
	sdk.AddTool(srv, tool("poll", "Poll a run",
		`Wait for a run that answered status "running"; returns the output since the last run or poll, and the result once it ends.`,
		true, nil), withSession(s, (*session).poll))
	sdk.AddTool(srv, tool("stop", "Stop a run",
		"Interrupt a running execution; with restart, restart its kernel (its in-memory state is lost, files are kept).",
		false, &yes), withSession(s, (*session).stop))
	sdk.AddTool(srv, tool("read_file", "Read a file",
		"Read a workspace file as the sandbox sees it (with your changes), whole or lines startLine to endLine; images come back as images.",
		true, nil), withSession(s, (*session).readFile))
	sdk.AddTool(srv, tool("write_file", "Write a file",
		"Write a workspace file: content replaces it whole; edits are exact search/replace pairs applied in order, each search occurring exactly once.",
		false, &no), withSession(s, (*session).writeFile))
	sdk.AddTool(srv, tool("changes", "List changes",
		"List the workspace's changes to the project (added, modified, deleted); diff: true adds the unified diff.",
		true, nil), withSession(s, (*session).changes))
	sdk.AddTool(srv, tool("checkpoint", "Checkpoint",
		"Save the workspace's files as a checkpoint to restore later; returns its id and the recent checkpoints.",
		false, &no), withSession(s, (*session).checkpoint))
	sdk.AddTool(srv, tool("restore", "Restore a checkpoint",
		"Bring the workspace's files back to a checkpoint (a run names the one taken before it). The kernel's memory is not rolled back.",
		false, &yes), withSession(s, (*session).restore))
	sdk.AddTool(srv, tool("discard", "Discard changes",
		"Drop the workspace's changes at paths (every change when none are given); the project itself is not touched.",
		false, &yes), withSession(s, (*session).discard))
	sdk.AddTool(srv, tool("commit", "Commit changes",
		"Copy the workspace's changes into the project. Off unless the server was started with --allow-commit.",
		false, &yes), withSession(s, s.commit))
	sdk.AddTool(srv, tool("install", "Install packages",
		"Install pip or npm packages into the workspace's environment, through cellbox's verified package cache.",
		false, &no), withSession(s, (*session).install))
}

// toolFunc is a tool's handler on the session of its request.
type toolFunc[In, Out any] func(*session, context.Context, *sdk.CallToolRequest, In) (*sdk.CallToolResult, Out, error)

// withSession finds the request's session and turns the handler's errors
// into tool errors (toolError).
func withSession[In, Out any](s *Server, f toolFunc[In, Out]) sdk.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *sdk.CallToolRequest, in In) (*sdk.CallToolResult, Out, error) {
		var zero Out
		var h map[string][]string
		if req.Extra != nil {
			h = req.Extra.Header
		}
		sess, err := s.sessionFor(req.Session, h)
		if err != nil {
			return nil, zero, err
		}
		res, out, err := f(sess, ctx, req, in)
		if err != nil {
			if _, ok := err.(*inputError); ok {
				return nil, zero, err
			}
			sess.log.Info("tool failed", "tool", req.Params.Name, "err", err)
			return nil, zero, toolError(err)
		}
		return res, out, nil
	}
}

// inputError is a tool input the tool cannot carry out (an edit that does
// not match, an unknown executionId): said as it is.
type inputError struct{ msg string }

func (e *inputError) Error() string { return e.msg }

func inputErrorf(format string, a ...any) error { return &inputError{fmt.Sprintf(format, a...)} }

// textResult is a result whose content is out as JSON text (what the SDK
// would send) followed by more content.
func textResult(out any, more ...sdk.Content) (*sdk.CallToolResult, error) {
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("marshal the tool's output: %w", err)
	}
	return &sdk.CallToolResult{Content: append([]sdk.Content{&sdk.TextContent{Text: string(raw)}}, more...)}, nil
}

// autoCheckpoint takes the automatic checkpoint before a mutating tool
// (the daemon takes none when nothing changed since the newest) and
// returns its id. A failure does not stop the tool: it is logged. A daemon
// older than automatic checkpoints takes an ordinary one, which would
// count against the user's: it is deleted, and the session takes no more.
func (s *session) autoCheckpoint(ctx context.Context, c Conn, ws protocol.WorkspaceInfo, tool string) string {
	s.mu.Lock()
	off := s.noAuto
	s.mu.Unlock()
	if off {
		return ""
	}
	var cp protocol.Checkpoint
	p := protocol.WorkspaceCheckpointParams{WorkspaceID: ws.WorkspaceID, Name: "before " + tool, Auto: true}
	if err := c.Call(ctx, protocol.MethodWorkspaceCheckpoint, p, &cp); err != nil {
		s.log.Warn("automatic checkpoint", "tool", tool, "err", err)
		return ""
	}
	// A new daemon answers an automatic checkpoint, or (nothing changed)
	// the newest checkpoint, of any kind, marked reused.
	if !cp.Auto && !cp.Reused {
		s.log.Warn("the daemon takes no automatic checkpoints (it is older than this cellbox): none are taken before tools", "checkpoint", cp.CheckpointID)
		s.mu.Lock()
		s.noAuto = true
		s.mu.Unlock()
		d := protocol.WorkspaceDeleteCheckpointParams{WorkspaceID: ws.WorkspaceID, CheckpointID: cp.CheckpointID}
		if err := c.Call(ctx, protocol.MethodWorkspaceDeleteCheckpoint, d, nil); err != nil {
			s.log.Warn("delete the ordinary checkpoint taken for an automatic one", "checkpoint", cp.CheckpointID, "err", err)
		}
		return ""
	}
	return cp.CheckpointID
}
