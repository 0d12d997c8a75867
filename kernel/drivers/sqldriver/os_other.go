//go:build !linux

package sqldriver

import "syscall"

// peakMemory is unknown here.
func peakMemory() int64 { return 0 }

// serverProcAttr starts postgres in a session of its own.
func serverProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true}
}
