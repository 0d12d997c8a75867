//go:build !linux

package workspace

import (
	"context"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// Listing and diffing changes read the overlay: Linux only.

func (w *Workspace) ListChanges(context.Context, ChangeOptions) ([]protocol.Change, int, error) {
	return nil, 0, sandbox.ErrLinuxOnly
}

func (w *Workspace) DiffChanges(context.Context, ChangeOptions) ([]protocol.FileDiff, error) {
	return nil, sandbox.ErrLinuxOnly
}
