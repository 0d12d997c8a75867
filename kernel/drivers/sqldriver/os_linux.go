package sqldriver

import (
	"syscall"
)

// peakMemory is the process's peak resident memory, in bytes.
func peakMemory() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Maxrss * 1024
}

// serverProcAttr starts postgres in a session of its own, killed when the
// driver dies.
func serverProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
}
