package gitexport

import "errors"

// Sentinel errors; the workspace package maps them to its own.
var (
	// ErrNotRepository: the project is not inside a git repository's
	// working tree.
	ErrNotRepository = errors.New("not a git repository")
	// ErrInvalid: the export cannot be made as asked (a branch name git
	// refuses, the branch the project has checked out, git missing).
	ErrInvalid = errors.New("invalid git export")
	// ErrConflict: the branch exists and points elsewhere than the commit
	// the export builds on, or moved while the export ran.
	ErrConflict = errors.New("branch conflict")
	// ErrLimit: the patch is over MaxPatch bytes.
	ErrLimit = errors.New("limit exceeded")
)
