package sqldriver

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// pipeHolds is how many bytes the pipe fd holds (FIONREAD).
func pipeHolds(fd int) int {
	n, err := unix.IoctlGetInt(fd, unix.TIOCINQ)
	if err != nil {
		return 0
	}
	return n
}

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
