//go:build !linux

package sqldriver

import "syscall"

// pipeHolds is how many bytes the pipe fd holds (unknown here: the driver
// runs in Linux sandboxes only).
func pipeHolds(int) int { return 0 }

// peakMemory is unknown here.
func peakMemory() int64 { return 0 }

// serverProcAttr starts postgres in a session of its own.
func serverProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true}
}
