package rpc

import (
	"context"
	"fmt"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
)

// The changes of an overlay workspace (PROTOCOL.md §3): each method is one
// call on the workspace; workspace/changes_linux.go, commit_linux.go,
// discard_linux.go and checkpoint_linux.go say what they do.

func (c *conn) overlayWorkspace(method, id string) (*workspace.Workspace, error) {
	if id == "" {
		return nil, missingField(method, "workspaceId")
	}
	return c.d.opts.Workspaces.Get(id)
}

// progressFunc reports done/total files on pr.
func fileProgress(pr *progress, what string) func(done, total int) {
	if pr == nil {
		return nil
	}
	return func(done, total int) {
		pr.Report(fmt.Sprintf("%s %d of %d files", what, done, total), 100*done/max(total, 1))
	}
}

// WorkspaceChanges is §3 workspace/changes.
func (c *conn) WorkspaceChanges(ctx context.Context, p *protocol.WorkspaceChangesParams) (*protocol.WorkspaceChangesResult, error) {
	w, err := c.overlayWorkspace(protocol.MethodWorkspaceChanges, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	cs, ignored, err := w.ListChanges(ctx, workspace.ChangeOptions{Ignored: p.Ignored})
	if err != nil {
		return nil, err
	}
	return &protocol.WorkspaceChangesResult{Changes: cs, Ignored: ignored}, nil
}

// WorkspaceDiff is §3 workspace/diff.
func (c *conn) WorkspaceDiff(ctx context.Context, p *protocol.WorkspaceDiffParams) (*protocol.WorkspaceDiffResult, error) {
	w, err := c.overlayWorkspace(protocol.MethodWorkspaceDiff, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	files, err := w.DiffChanges(ctx, workspace.ChangeOptions{Paths: p.Paths, Ignored: p.Ignored})
	if err != nil {
		return nil, err
	}
	return &protocol.WorkspaceDiffResult{Files: files}, nil
}

// WorkspaceCommit is §3 workspace/commit, with $/progress under
// workDoneToken.
func (c *conn) WorkspaceCommit(ctx context.Context, p *protocol.WorkspaceCommitParams) (*protocol.WorkspaceCommitResult, error) {
	w, err := c.overlayWorkspace(protocol.MethodWorkspaceCommit, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	paths := p.Paths
	if len(paths) == 0 && !p.Ignored {
		// What was reviewed is what is committed: workspace/changes leaves
		// out the paths the project ignores.
		listed, hidden, err := w.ListChanges(ctx, workspace.ChangeOptions{})
		if err != nil {
			return nil, err
		}
		if hidden > 0 {
			if len(listed) == 0 {
				return &protocol.WorkspaceCommitResult{Applied: []string{}, Conflicts: []protocol.Conflict{}}, nil
			}
			for _, ch := range listed {
				paths = append(paths, ch.Path)
			}
		}
	}
	pr := c.startProgress(p.WorkDoneToken, "Committing "+p.WorkspaceID)
	res, err := w.Commit(ctx, paths, fileProgress(pr, "committed"))
	if err != nil {
		pr.End("failed")
		return nil, err
	}
	pr.End(fmt.Sprintf("%d applied, %d conflicts", len(res.Applied), len(res.Conflicts)))
	return res, nil
}

// WorkspaceDiscard is §3 workspace/discard.
func (c *conn) WorkspaceDiscard(ctx context.Context, p *protocol.WorkspaceDiscardParams) (*protocol.WorkspaceDiscardResult, error) {
	w, err := c.overlayWorkspace(protocol.MethodWorkspaceDiscard, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	done, err := w.Discard(ctx, p.Paths)
	if err != nil {
		return nil, err
	}
	if done == nil {
		done = []string{}
	}
	return &protocol.WorkspaceDiscardResult{Discarded: done}, nil
}

// WorkspaceCheckpoint is §3 workspace/checkpoint, with $/progress under
// workDoneToken; with auto, an automatic checkpoint (§10), taken only when
// the workspace changed since the newest checkpoint.
func (c *conn) WorkspaceCheckpoint(ctx context.Context, p *protocol.WorkspaceCheckpointParams) (*protocol.Checkpoint, error) {
	w, err := c.overlayWorkspace(protocol.MethodWorkspaceCheckpoint, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	pr := c.startProgress(p.WorkDoneToken, "Checkpointing "+p.WorkspaceID)
	var cp protocol.Checkpoint
	if p.Auto {
		cp, err = w.AutoCheckpoint(ctx, p.Name)
	} else {
		cp, err = w.Checkpoint(ctx, p.Name, fileProgress(pr, "saved"))
	}
	if err != nil {
		pr.End("failed")
		return nil, err
	}
	pr.End("done")
	return &cp, nil
}

// WorkspaceCheckpoints is §3 workspace/checkpoints, oldest first.
func (c *conn) WorkspaceCheckpoints(_ context.Context, p *protocol.WorkspaceCheckpointsParams) (*protocol.WorkspaceCheckpointsResult, error) {
	w, err := c.overlayWorkspace(protocol.MethodWorkspaceCheckpoints, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	cps, err := w.Checkpoints()
	if err != nil {
		return nil, err
	}
	return &protocol.WorkspaceCheckpointsResult{Checkpoints: cps}, nil
}

// WorkspaceRestore is §3 workspace/restore, with $/progress under
// workDoneToken.
func (c *conn) WorkspaceRestore(ctx context.Context, p *protocol.WorkspaceRestoreParams) (*protocol.Empty, error) {
	w, err := c.overlayWorkspace(protocol.MethodWorkspaceRestore, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	if p.CheckpointID == "" {
		return nil, missingField(protocol.MethodWorkspaceRestore, "checkpointId")
	}
	pr := c.startProgress(p.WorkDoneToken, "Restoring "+p.CheckpointID)
	if err := w.Restore(ctx, p.CheckpointID, fileProgress(pr, "restored")); err != nil {
		pr.End("failed")
		return nil, err
	}
	pr.End("done")
	return &protocol.Empty{}, nil
}

// WorkspaceDeleteCheckpoint is §3 workspace/deleteCheckpoint.
func (c *conn) WorkspaceDeleteCheckpoint(ctx context.Context, p *protocol.WorkspaceDeleteCheckpointParams) (*protocol.Empty, error) {
	w, err := c.overlayWorkspace(protocol.MethodWorkspaceDeleteCheckpoint, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	if p.CheckpointID == "" {
		return nil, missingField(protocol.MethodWorkspaceDeleteCheckpoint, "checkpointId")
	}
	if err := w.DeleteCheckpoint(ctx, p.CheckpointID); err != nil {
		return nil, err
	}
	return &protocol.Empty{}, nil
}
