package driverio

import "golang.org/x/sys/unix"

// pipeHolds is how many bytes the pipe fd holds (FIONREAD).
func pipeHolds(fd int) int {
	n, err := unix.IoctlGetInt(fd, unix.TIOCINQ)
	if err != nil {
		return 0
	}
	return n
}
