package workspace

import (
	"os"
	"testing"

	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// TestMain lets the test binary be re-executed as a sandbox's init and
// spawner, as the cellbox binary is.
func TestMain(m *testing.M) {
	if sandbox.Main() {
		return
	}
	os.Exit(m.Run())
}
