package workspace

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"

	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// OwnerProblem is a project file the sandbox cannot write through its
// overlay, because the sandbox cannot map its owner or group.
type OwnerProblem struct {
	Path     string // relative to the project
	UID, GID int
}

func (p OwnerProblem) String() string {
	return fmt.Sprintf("%s (owned by %d:%d)", p.Path, p.UID, p.GID)
}

// UnmappedOwners looks at up to maxScan entries of the project and returns
// up to maxReport whose owner the sandbox cannot map, with the number
// found. Writing such a file in the sandbox fails with EOVERFLOW; `cellbox
// doctor` and workspace/open report them so the error is not a surprise.
func UnmappedOwners(root string, maxScan, maxReport int) (found []OwnerProblem, count int, err error) {
	var st syscall.Stat_t
	if err := syscall.Stat(root, &st); err != nil {
		return nil, 0, fmt.Errorf("stat %s: %w", root, err)
	}
	owner, group := int(st.Uid), int(st.Gid)
	scanned := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if scanned++; scanned > maxScan {
			return filepath.SkipAll
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		s, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || sandbox.Mapped(int(s.Uid), int(s.Gid), owner, group) {
			return nil
		}
		count++
		if len(found) < maxReport {
			rel, _ := filepath.Rel(root, path)
			found = append(found, OwnerProblem{Path: rel, UID: int(s.Uid), GID: int(s.Gid)})
		}
		return nil
	})
	return found, count, err
}
