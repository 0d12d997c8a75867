package network

import "errors"

// Sentinel errors.
var (
	// ErrInvalidRule: an allowlist entry that does not parse. The error
	// names the rule and says why.
	ErrInvalidRule = errors.New("invalid network rule")
	// ErrRefused: the policy refuses the connection. The reason Check
	// returns with it is a sentence for the user.
	ErrRefused = errors.New("refused by the network policy")
	// ErrServerClosed: Serve was called on, or ended by, a closed Server.
	ErrServerClosed = errors.New("network: server closed")
)
