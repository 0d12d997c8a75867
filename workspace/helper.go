package workspace

import (
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
	"github.com/cellbox-dev/cellbox/workspace/sandbox/helper"
)

// Every sandbox of a workspace runs its init and spawner from the lean
// helper the binary carries (workspace/sandbox/helper), not from a
// re-execution of the daemon's own binary.
func init() { sandbox.UseHelper(helper.Binary) }
