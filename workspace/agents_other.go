//go:build !linux

package workspace

import (
	"context"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// The §10 agent methods read the overlay: Linux only.

func (w *Workspace) ExportGit(context.Context, protocol.WorkspaceExportGitParams) (*protocol.WorkspaceExportGitResult, error) {
	return nil, sandbox.ErrLinuxOnly
}

func (w *Workspace) ExportPatch(context.Context, protocol.WorkspaceExportPatchParams) (*protocol.WorkspaceExportPatchResult, error) {
	return nil, sandbox.ErrLinuxOnly
}

func (m *Manager) Fork(context.Context, string, string) (*Workspace, error) {
	return nil, sandbox.ErrLinuxOnly
}

func (w *Workspace) AutoCheckpoint(context.Context, string) (protocol.Checkpoint, error) {
	return protocol.Checkpoint{}, sandbox.ErrLinuxOnly
}

// Tracker: see track_linux.go.
type Tracker struct{}

func (w *Workspace) Track() *Tracker { return nil }

func (t *Tracker) End() ([]protocol.PathChange, int) { return nil, 0 }

type trackState struct{}
