package packages

import "errors"

// Sentinel errors. The handler answers them with HTTP statuses (status in
// handler.go); callers of the package see them wrapped with what was being done.
var (
	// ErrInvalidName: a project, package or file name, or a hash, that the
	// cache does not accept (400).
	ErrInvalidName = errors.New("invalid name")
	// ErrNotFound: the upstream has no such project or package, or no index
	// page the cache kept lists the file asked for (404).
	ErrNotFound = errors.New("not found")
	// ErrHashMismatch: a fetched file's hash is not the one its index
	// published; nothing was stored (502).
	ErrHashMismatch = errors.New("hash mismatch")
	// ErrTooLarge: a page or file over its bound (502).
	ErrTooLarge = errors.New("too large")
	// ErrUpstream: the upstream registry could not be reached or answered
	// with an error, and no kept copy could stand in (502).
	ErrUpstream = errors.New("upstream failed")
	// ErrClosed: the cache was closed (503).
	ErrClosed = errors.New("package cache closed")
)
