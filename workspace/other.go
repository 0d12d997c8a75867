//go:build !linux

package workspace

import (
	"io/fs"

	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// ReadFile needs a sandbox: Linux only.
func (w *Workspace) ReadFile(string) ([]byte, error) { return nil, sandbox.ErrLinuxOnly }

func (m *Manager) cleanup() {}

func blocks(fi fs.FileInfo) int64 { return fi.Size() }
