package workspace

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Automatic checkpoints (PROTOCOL.md §10).

// AutoCheckpoint takes an automatic checkpoint (workspace/checkpoint with
// auto, and kernel/execute with checkpoint before an execution): one of a
// ring of its own, the newest MaxAutoCheckpoints kept, apart from the
// user's checkpoints. It is taken only when the workspace changed since
// the newest checkpoint of either kind; when the upper layer (and the
// project's files at its paths) has the same sum as when that one was
// taken, that one is the result, with Reused set, and nothing is taken.
// The test reads no file's content: a walk by stat (upperState).
func (w *Workspace) AutoCheckpoint(ctx context.Context, name string) (protocol.Checkpoint, error) {
	_, unlock, err := w.lockFiles(ctx)
	if err != nil {
		return protocol.Checkpoint{}, err
	}
	defer unlock()
	us, err := w.upperStateOrNil(ctx)
	if err != nil {
		return protocol.Checkpoint{}, err
	}
	if us != nil && us.sum != "" {
		if cp, ok := w.newestWithSum(us.sum); ok {
			cp.Reused = true
			return cp, nil
		}
	}
	return w.checkpointLocked(ctx, us, name, true, nil)
}

// newestWithSum is the newest checkpoint, if the upper layer had the sum
// sum when it was taken.
func (w *Workspace) newestWithSum(sum string) (protocol.Checkpoint, bool) {
	cps, err := w.listCheckpoints()
	if err != nil || len(cps) == 0 {
		return protocol.Checkpoint{}, false
	}
	cp := cps[len(cps)-1]
	b, err := os.ReadFile(filepath.Join(w.checkpointsDir(), cp.CheckpointID, "fingerprint"))
	if err != nil {
		return protocol.Checkpoint{}, false
	}
	var got string
	if json.Unmarshal(b, &got) != nil || got != sum {
		return protocol.Checkpoint{}, false
	}
	return cp, true
}
