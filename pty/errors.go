package pty

import "errors"

// Sentinel errors; rpc maps them to PROTOCOL.md §7 codes.
var (
	// ErrNotFound: no terminal with that id (-32001).
	ErrNotFound = errors.New("terminal not found")
	// ErrExited: the terminal's program has ended; it can still be
	// attached (for its scrollback and exit) and closed, not written to or
	// resized (-32001: the running terminal is gone).
	ErrExited = errors.New("terminal has exited")
	// ErrInvalid: bad params; the message names the field (-32602).
	ErrInvalid = errors.New("invalid params")
	// ErrLimit: too many terminals in the daemon or in one workspace, or
	// too much input the program does not read (-32012).
	ErrLimit = errors.New("limit exceeded")
	// ErrStart: the program could not be started (not found in the
	// sandbox, a cwd that does not exist); the message says why (-32602).
	ErrStart = errors.New("cannot start the terminal's program")
	// ErrClosed: the manager is shutting down (-32001).
	ErrClosed = errors.New("terminals are shutting down")
)
