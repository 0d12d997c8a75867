package kernel

import "errors"

// Sentinel errors; rpc maps them to PROTOCOL.md §7 codes.
var (
	// ErrNotFound: no kernel with that id.
	ErrNotFound = errors.New("kernel not found")
	// ErrDead: the kernel died; restart it to go on.
	ErrDead = errors.New("kernel dead")
	// ErrLanguage: no interpreter for that language on this host.
	ErrLanguage = errors.New("language unavailable")
	// ErrLimit: code too large, too many kernels.
	ErrLimit = errors.New("limit exceeded")
	// ErrInvalid: a request that cannot be carried out as asked.
	ErrInvalid = errors.New("invalid kernel request")
	// ErrClosed: the manager is shutting down.
	ErrClosed = errors.New("kernel manager closed")
)

// driverGone is a driver's answer to a request once it is gone: it died,
// or stopped reading requests. The kernel answers it as deadErr.
type driverGone struct{ reason string }

func (e *driverGone) Error() string { return ErrDead.Error() + ": " + e.reason }
func (e *driverGone) Unwrap() error { return ErrDead }
