package workspace

import (
	"context"
	"fmt"

	"github.com/cellbox-dev/cellbox/protocol"
)

// ExportGit is PROTOCOL.md §10 workspace/exportGit.
func (w *Workspace) ExportGit(ctx context.Context, p protocol.WorkspaceExportGitParams) (*protocol.WorkspaceExportGitResult, error) {
	return nil, fmt.Errorf("export workspace %s to git: %w: not built yet", w.id, ErrInvalid)
}

// ExportPatch is workspace/exportPatch (extension of §10).
func (w *Workspace) ExportPatch(ctx context.Context, p protocol.WorkspaceExportPatchParams) (*protocol.WorkspaceExportPatchResult, error) {
	return nil, fmt.Errorf("export workspace %s as a patch: %w: not built yet", w.id, ErrInvalid)
}
