package mcp

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cellbox-dev/cellbox/protocol"
)

const (
	// diffShowBytes bounds the diff changes returns.
	diffShowBytes = 32 << 10
	// checkpointsShown is how many of the newest checkpoints checkpoint
	// lists.
	checkpointsShown = 20
)

// changes is the changes tool.
func (s *session) changes(ctx context.Context, _ *sdk.CallToolRequest, in ChangesInput) (*sdk.CallToolResult, ChangesOutput, error) {
	c, ws, err := s.connect(ctx)
	if err != nil {
		return nil, ChangesOutput{}, err
	}
	var r protocol.WorkspaceChangesResult
	if err := c.Call(ctx, protocol.MethodWorkspaceChanges, protocol.WorkspaceChangesParams{WorkspaceID: ws.WorkspaceID}, &r); err != nil {
		return nil, ChangesOutput{}, fmt.Errorf("list the changes: %w", err)
	}
	out := ChangesOutput{Changes: []Change{}}
	var paths []string
	for _, ch := range r.Changes {
		if !underAny(ch.Path, in.Paths) {
			continue
		}
		out.Changes = append(out.Changes, Change{Path: ch.Path, Kind: string(ch.Kind), Size: ch.Size, Binary: ch.Binary})
		paths = append(paths, ch.Path)
	}
	if r.Ignored > 0 {
		out.Note = fmt.Sprintf("%d more changes are in paths the project's .gitignore ignores.", r.Ignored)
	}
	if in.Diff && len(paths) > 0 {
		var d protocol.WorkspaceDiffResult
		if err := c.Call(ctx, protocol.MethodWorkspaceDiff, protocol.WorkspaceDiffParams{WorkspaceID: ws.WorkspaceID, Paths: paths}, &d); err != nil {
			return nil, ChangesOutput{}, fmt.Errorf("diff the changes: %w", err)
		}
		var b strings.Builder
		for _, f := range d.Files {
			if f.Binary {
				fmt.Fprintf(&b, "Binary file %s %s\n", f.Path, f.Kind)
				continue
			}
			b.WriteString(f.Diff)
			if !strings.HasSuffix(f.Diff, "\n") {
				b.WriteByte('\n')
			}
		}
		out.Diff, _ = headTail(b.String(), diffShowBytes, "")
		if len(out.Diff) < b.Len() {
			out.Note = strings.TrimSpace(out.Note + " The diff is cut; ask for fewer paths to see all of it.")
		}
	}
	res, err := textResult(out)
	return res, out, err
}

// underAny reports whether p is at or below one of dirs (all when none).
func underAny(p string, dirs []string) bool {
	if len(dirs) == 0 {
		return true
	}
	for _, d := range dirs {
		d = strings.Trim(strings.TrimPrefix(d, "./"), "/")
		if d == "" || d == "." || p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// checkpoint is the checkpoint tool.
func (s *session) checkpoint(ctx context.Context, _ *sdk.CallToolRequest, in CheckpointInput) (*sdk.CallToolResult, CheckpointOutput, error) {
	c, ws, err := s.connect(ctx)
	if err != nil {
		return nil, CheckpointOutput{}, err
	}
	var cp protocol.Checkpoint
	if err := c.Call(ctx, protocol.MethodWorkspaceCheckpoint, protocol.WorkspaceCheckpointParams{WorkspaceID: ws.WorkspaceID, Name: in.Name}, &cp); err != nil {
		return nil, CheckpointOutput{}, fmt.Errorf("take a checkpoint: %w", err)
	}
	var list protocol.WorkspaceCheckpointsResult
	if err := c.Call(ctx, protocol.MethodWorkspaceCheckpoints, protocol.WorkspaceCheckpointsParams{WorkspaceID: ws.WorkspaceID}, &list); err != nil {
		return nil, CheckpointOutput{}, fmt.Errorf("list the checkpoints: %w", err)
	}
	out := CheckpointOutput{CheckpointID: cp.CheckpointID, Checkpoints: []CheckpointInfo{}}
	cps := list.Checkpoints
	slices.SortStableFunc(cps, func(a, b protocol.Checkpoint) int { return a.CreatedAt.Compare(b.CreatedAt) })
	if len(cps) > checkpointsShown {
		cps = cps[len(cps)-checkpointsShown:]
	}
	for _, x := range cps {
		out.Checkpoints = append(out.Checkpoints, CheckpointInfo{CheckpointID: x.CheckpointID, Name: x.Name, CreatedAt: x.CreatedAt, Files: x.Files, Auto: x.Auto})
	}
	res, err := textResult(out)
	return res, out, err
}

// restore is the restore tool: the restored paths are those whose change
// differs before and after.
func (s *session) restore(ctx context.Context, _ *sdk.CallToolRequest, in RestoreInput) (*sdk.CallToolResult, RestoreOutput, error) {
	c, ws, err := s.connect(ctx)
	if err != nil {
		return nil, RestoreOutput{}, err
	}
	before, err := s.changeSet(ctx, c, ws)
	if err != nil {
		return nil, RestoreOutput{}, err
	}
	s.autoCheckpoint(ctx, c, ws, "restore")
	p := protocol.WorkspaceRestoreParams{WorkspaceID: ws.WorkspaceID, CheckpointID: in.CheckpointID}
	if err := c.Call(ctx, protocol.MethodWorkspaceRestore, p, nil); err != nil {
		return nil, RestoreOutput{}, fmt.Errorf("restore checkpoint %s: %w", in.CheckpointID, err)
	}
	after, err := s.changeSet(ctx, c, ws)
	if err != nil {
		return nil, RestoreOutput{}, err
	}
	out := RestoreOutput{Restored: []string{},
		Note: "The files are as they were at the checkpoint (the state before is kept as a checkpoint too). The kernels' in-memory state is not rolled back: re-run what builds it, or stop with restart: true."}
	for p, b := range before {
		if a, ok := after[p]; !ok || a != b {
			out.Restored = append(out.Restored, p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			out.Restored = append(out.Restored, p)
		}
	}
	slices.Sort(out.Restored)
	res, err := textResult(out)
	return res, out, err
}

// changeSet is the workspace's changes by path, each as its kind and size.
func (s *session) changeSet(ctx context.Context, c Conn, ws protocol.WorkspaceInfo) (map[string]string, error) {
	var r protocol.WorkspaceChangesResult
	if err := c.Call(ctx, protocol.MethodWorkspaceChanges, protocol.WorkspaceChangesParams{WorkspaceID: ws.WorkspaceID, Ignored: true}, &r); err != nil {
		return nil, fmt.Errorf("list the changes: %w", err)
	}
	m := make(map[string]string, len(r.Changes))
	for _, ch := range r.Changes {
		v := string(ch.Kind)
		if ch.Size != nil {
			v += fmt.Sprintf(" %d", *ch.Size)
		}
		m[ch.Path] = v
	}
	return m, nil
}

// discard is the discard tool.
func (s *session) discard(ctx context.Context, _ *sdk.CallToolRequest, in DiscardInput) (*sdk.CallToolResult, DiscardOutput, error) {
	c, ws, err := s.connect(ctx)
	if err != nil {
		return nil, DiscardOutput{}, err
	}
	out := DiscardOutput{Checkpoint: s.autoCheckpoint(ctx, c, ws, "discard")}
	var r protocol.WorkspaceDiscardResult
	if err := c.Call(ctx, protocol.MethodWorkspaceDiscard, protocol.WorkspaceDiscardParams{WorkspaceID: ws.WorkspaceID, Paths: in.Paths}, &r); err != nil {
		return nil, DiscardOutput{}, fmt.Errorf("discard: %w", err)
	}
	out.Discarded = r.Discarded
	if out.Discarded == nil {
		out.Discarded = []string{}
	}
	res, err := textResult(out)
	return res, out, err
}

// commit is the commit tool: refused unless the server allows it.
func (srv *Server) commit(s *session, ctx context.Context, _ *sdk.CallToolRequest, in CommitInput) (*sdk.CallToolResult, CommitOutput, error) {
	if !srv.opts.AllowCommit {
		return nil, CommitOutput{}, inputErrorf("commit is off: the human reviews and commits from an editor (start cellbox mcp with --allow-commit to allow it)")
	}
	c, ws, err := s.connect(ctx)
	if err != nil {
		return nil, CommitOutput{}, err
	}
	var r protocol.WorkspaceCommitResult
	if err := c.Call(ctx, protocol.MethodWorkspaceCommit, protocol.WorkspaceCommitParams{WorkspaceID: ws.WorkspaceID, Paths: in.Paths}, &r); err != nil {
		return nil, CommitOutput{}, fmt.Errorf("commit: %w", err)
	}
	s.log.Info("committed", "applied", len(r.Applied), "conflicts", len(r.Conflicts), "message", in.Message)
	out := CommitOutput{Applied: r.Applied, Conflicts: []Conflict{}}
	if out.Applied == nil {
		out.Applied = []string{}
	}
	for _, x := range r.Conflicts {
		out.Conflicts = append(out.Conflicts, Conflict{Path: x.Path, Reason: x.Reason})
	}
	res, err := textResult(out)
	return res, out, err
}

// install is the install tool; the daemon's $/progress goes on as MCP
// progress when the request carries a token.
func (s *session) install(ctx context.Context, req *sdk.CallToolRequest, in InstallInput) (*sdk.CallToolResult, InstallOutput, error) {
	c, ws, err := s.connect(ctx)
	if err != nil {
		return nil, InstallOutput{}, err
	}
	s.autoCheckpoint(ctx, c, ws, "install")
	p := protocol.WorkspaceInstallParams{WorkspaceID: ws.WorkspaceID, Manager: protocol.PackageManager(in.Manager), Packages: in.Packages}
	if token := req.Params.GetProgressToken(); token != nil && req.Session != nil {
		relay := newProgressRelay(ctx, req.Session, token)
		tok, done := s.progressToken(relay.report)
		defer func() { done(); relay.close() }()
		p.WorkDoneToken = tok
	}
	var r protocol.WorkspaceInstallResult
	if err := c.Call(ctx, protocol.MethodWorkspaceInstall, p, &r); err != nil {
		return nil, InstallOutput{}, fmt.Errorf("install %s packages: %w", in.Manager, err)
	}
	out := InstallOutput{Installed: []Package{}, CacheHits: r.CacheHits, DownloadedBytes: r.DownloadedBytes, DurationMs: r.DurationMs}
	for _, x := range r.Installed {
		out.Installed = append(out.Installed, Package{Name: x.Name, Version: x.Version})
	}
	res, err := textResult(out)
	return res, out, err
}

// progressRelay sends the daemon's $/progress of a request as MCP progress,
// in order, from a goroutine of its own (reports come on the daemon
// connection's read goroutine, which must not wait on the MCP client).
type progressRelay struct {
	ss    *sdk.ServerSession
	token any
	ctx   context.Context
	msgs  chan string
	done  chan struct{}

	mu     sync.Mutex // guards closed
	closed bool
}

func newProgressRelay(ctx context.Context, ss *sdk.ServerSession, token any) *progressRelay {
	r := &progressRelay{ss: ss, token: token, ctx: ctx, msgs: make(chan string, 16), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		n := 0
		for m := range r.msgs {
			n++
			_ = r.ss.NotifyProgress(r.ctx, &sdk.ProgressNotificationParams{ProgressToken: r.token, Progress: float64(n), Message: m})
		}
	}()
	return r
}

// report queues v's message; one that finds the queue full is dropped.
func (r *progressRelay) report(v protocol.ProgressValue) {
	msg := v.Message
	if msg == "" {
		msg = v.Title
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	select {
	case r.msgs <- msg:
	default:
	}
}

// close stops the relay once what is queued is sent.
func (r *progressRelay) close() {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.msgs)
	}
	r.mu.Unlock()
	<-r.done
}
