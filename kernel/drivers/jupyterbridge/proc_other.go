//go:build !linux

package jupyterbridge

import (
	"os"
	"syscall"
	"time"
)

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func kernelCPU(int) time.Duration { return -1 }

func kernelPeakRSS(int) int64 { return 0 }

func dieOf(sig syscall.Signal) { os.Exit(128 + int(sig)) }
