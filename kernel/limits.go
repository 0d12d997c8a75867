package kernel

// Daemon-wide limits reported in initialize's capabilities.limits
// (PROTOCOL.md §2). Each is checked on input and answered -32012
// LimitExceeded when exceeded.
const (
	// DefaultMaxCodeBytes bounds the code of one kernel/execute (1 MiB).
	DefaultMaxCodeBytes = 1 << 20
	// DefaultMaxOutputBytes bounds the output one execution streams
	// (8 MiB); past it the head is kept and outputTruncated is set.
	DefaultMaxOutputBytes = 8 << 20
	// DefaultMaxKernels bounds the kernels one daemon runs at once.
	DefaultMaxKernels = 128
)
