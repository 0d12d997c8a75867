package workspace

import "github.com/cellbox-dev/cellbox/protocol"

// What a client asks of fs/watch and what it gets; the watching itself is
// Linux only (watch_linux.go).

// DefaultWatchQueue bounds the distinct paths a watch holds while they
// wait to be sent. Past it, new paths are dropped and the next batch says
// Overflow: the client must rescan.
const DefaultWatchQueue = 32768

// WatchOptions configure a Watch.
type WatchOptions struct {
	// Globs select the paths reported (doublestar syntax, matched against
	// workspace-relative paths); none: every path.
	Globs []string
	// Queue bounds the paths waiting to be sent (0: DefaultWatchQueue).
	Queue int
}

// WatchBatch is one coalesced batch of changes: one entry per path.
type WatchBatch struct {
	Changes []protocol.FileChange
	// Overflow: changes were lost (this watch's queue was full, or the
	// kernel's inotify queue overflowed); the client should rescan.
	Overflow bool
}
