//go:build !linux

package workspace

import (
	"context"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// Export reads the workspace through its sandbox: Linux only.
func (w *Workspace) Export(context.Context, protocol.WorkspaceExportParams, ExportProgress) (*protocol.WorkspaceExportResult, error) {
	return nil, sandbox.ErrLinuxOnly
}
