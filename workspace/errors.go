package workspace

import "errors"

// Sentinel errors; rpc maps them to PROTOCOL.md §7 codes.
var (
	// ErrNotFound: no workspace with that id.
	ErrNotFound = errors.New("workspace not found")
	// ErrInvalid: the request cannot be carried out as asked (bad mode,
	// missing root, a root that is not a directory).
	ErrInvalid = errors.New("invalid workspace request")
	// ErrLimit: a limit over its maximum, or a quota hit.
	ErrLimit = errors.New("limit exceeded")
	// ErrSandboxUnavailable: the sandbox asked for cannot be built here.
	ErrSandboxUnavailable = errors.New("sandbox unavailable")
	// ErrClosed: the workspace was closed.
	ErrClosed = errors.New("workspace closed")
	// ErrPathOutside: a path given to a daemon-side file operation is
	// absolute, or leaves /workspace with "..".
	ErrPathOutside = errors.New("path outside the workspace")
	// ErrConflict: a commit or restore would overwrite newer work.
	ErrConflict = errors.New("conflict")
)
