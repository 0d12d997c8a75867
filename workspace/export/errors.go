package export

import "errors"

// Sentinel errors; the workspace package passes them on to rpc, which maps
// them to PROTOCOL.md §7 codes.
var (
	// ErrInvalid: the export cannot be carried out as asked (a relative or
	// non-empty destination, an unknown format, no base image for an OCI
	// layout, a command that is not a command).
	ErrInvalid = errors.New("invalid export request")
	// ErrLimit: the tree is over one of the export's bounds (tree.go, deps.go).
	ErrLimit = errors.New("export limit exceeded")
	// ErrReplaced: a Tree's Open found something other than a regular file
	// at a path that was one when listed (the sandbox changed it).
	ErrReplaced = errors.New("not a regular file any more (replaced while exported)")
)
