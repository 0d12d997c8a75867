package workspace

import (
	"fmt"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// Limits of PROTOCOL.md §4, with their defaults and maxima. A field of 0
// takes the default; a value over the maximum is an error (ErrLimit), never
// clamped. How each is enforced:
//
//	memoryBytes    RLIMIT_AS of each process (address space, not RSS: node
//	               reserves far more than it uses, python less)
//	cpuSeconds     RLIMIT_CPU of each process over its life (a kernel's
//	               per-execution budget is a timer in the daemon)
//	pids           RLIMIT_NPROC: every process of the sandbox runs as its one
//	               user, in its own user namespace, so this bounds the sandbox
//	fileSizeBytes  RLIMIT_FSIZE: a bigger write fails with EFBIG
//	diskBytes      the overlay's upper layer, measured by the daemon every
//	               quotaInterval while processes run; each file counts at
//	               least 4 KiB, which also bounds inode floods; over it, the
//	               workspace's processes are killed (RLIMIT_FSIZE is capped at
//	               diskBytes, so no single write overshoots)
//	openFiles      RLIMIT_NOFILE
//	outputBytes    output kept per execution (kernels)
//	timeoutMs      wall clock, a timer in the daemon (0: none)
var (
	DefaultLimits = protocol.Limits{
		MemoryBytes:   4 << 30,
		CPUSeconds:    0,
		Pids:          512,
		FileSizeBytes: 1 << 30,
		DiskBytes:     10 << 30,
		OpenFiles:     1024,
		OutputBytes:   8 << 20,
		TimeoutMs:     0,
	}
	MaxLimits = protocol.Limits{
		MemoryBytes:   64 << 30,
		CPUSeconds:    7 * 24 * 3600,
		Pids:          32768,
		FileSizeBytes: 64 << 30,
		DiskBytes:     1 << 40,
		OpenFiles:     65536,
		OutputBytes:   1 << 30,
		TimeoutMs:     7 * 24 * 3600 * 1000,
	}
)

// ResolveLimits fills l's zero fields from defaults and checks every field
// against MaxLimits.
func ResolveLimits(l *protocol.Limits, defaults protocol.Limits) (protocol.Limits, error) {
	var r protocol.Limits
	if l != nil {
		r = *l
	}
	fields := []struct {
		name      string
		v         *int64
		def, max_ int64
	}{
		{"memoryBytes", &r.MemoryBytes, defaults.MemoryBytes, MaxLimits.MemoryBytes},
		{"cpuSeconds", &r.CPUSeconds, defaults.CPUSeconds, MaxLimits.CPUSeconds},
		{"pids", &r.Pids, defaults.Pids, MaxLimits.Pids},
		{"fileSizeBytes", &r.FileSizeBytes, defaults.FileSizeBytes, MaxLimits.FileSizeBytes},
		{"diskBytes", &r.DiskBytes, defaults.DiskBytes, MaxLimits.DiskBytes},
		{"openFiles", &r.OpenFiles, defaults.OpenFiles, MaxLimits.OpenFiles},
		{"outputBytes", &r.OutputBytes, defaults.OutputBytes, MaxLimits.OutputBytes},
		{"timeoutMs", &r.TimeoutMs, defaults.TimeoutMs, MaxLimits.TimeoutMs},
	}
	for _, f := range fields {
		switch {
		case *f.v < 0:
			return r, fmt.Errorf("%w: limits.%s is %d; it must be positive (0 takes the default %d)", ErrLimit, f.name, *f.v, f.def)
		case *f.v == 0:
			*f.v = f.def
		case *f.v > f.max_:
			return r, fmt.Errorf("%w: limits.%s is %d, over its maximum %d", ErrLimit, f.name, *f.v, f.max_)
		}
	}
	return r, nil
}

// rlimits is the per-process part of l.
func rlimits(l protocol.Limits) sandbox.Limits {
	fsize := l.FileSizeBytes
	if l.DiskBytes > 0 && (fsize == 0 || fsize > l.DiskBytes) {
		fsize = l.DiskBytes
	}
	return sandbox.Limits{
		MemoryBytes:   l.MemoryBytes,
		CPUSeconds:    l.CPUSeconds,
		Pids:          l.Pids,
		FileSizeBytes: fsize,
		OpenFiles:     l.OpenFiles,
	}
}

// Limits of the file operations (fsops_linux.go).
const (
	// MaxFileBytes bounds the content of one fs/read or fs/write: the
	// file's bytes, before encoding (base64 makes them a third larger).
	// It matches the default --max-message-bytes, so a client with the
	// same limit can write what it read. Over it: ErrLimit (-32012).
	MaxFileBytes = 16 << 20
	// MaxListEntries bounds the entries of one fs/list; a larger tree is
	// listed one directory at a time. Over it: ErrLimit (-32012).
	MaxListEntries = 100_000
)
