package workspace

import (
	"context"
	"fmt"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Fork is PROTOCOL.md §10 workspace/fork: a new workspace over the same
// project that starts with a copy of id's changes.
func (m *Manager) Fork(ctx context.Context, id, name string) (*Workspace, error) {
	return nil, fmt.Errorf("fork workspace %s: %w: not built yet", id, ErrInvalid)
}

// AutoCheckpoint takes an automatic checkpoint (workspace/checkpoint with
// auto): in the ring of automatic checkpoints, and only when the workspace
// changed since the newest checkpoint (else that one, with Reused).
func (w *Workspace) AutoCheckpoint(ctx context.Context, name string) (protocol.Checkpoint, error) {
	return protocol.Checkpoint{}, fmt.Errorf("checkpoint workspace %s: %w: not built yet", w.id, ErrInvalid)
}
