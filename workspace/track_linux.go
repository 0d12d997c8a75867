package workspace

import "github.com/cellbox-dev/cellbox/protocol"

// trackState is a workspace's per-execution attribution.
type trackState struct{}

// Tracker records the paths of a workspace that change from Track to End.
type Tracker struct{}

// Track starts recording the changes made to the workspace view.
func (w *Workspace) Track() *Tracker { return nil }

// End stops recording and returns the paths that changed, at most
// maxTracked, and how many more did.
func (t *Tracker) End() ([]protocol.PathChange, int) { return nil, 0 }
