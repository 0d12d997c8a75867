// Package driverio is what the drivers that are entries of the cellbox
// binary (kernel/drivers/jupyterbridge, sqldriver, godriver) share of the
// driver contract (kernel/drivers/README.md): taking the manager's channel
// off fds 3 and 4, and reading its request lines, bounded.
package driverio

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Channel moves the manager's requests (fd 3) and events (fd 4) to
// descriptors above 200, close-on-exec, and closes 3 and 4, so that the
// programs a driver starts do not inherit them.
func Channel() (reqs, evs *os.File, err error) {
	var fds [2]int
	for i, fd := range []int{3, 4} {
		nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 200)
		if err != nil {
			if i == 1 {
				unix.Close(fds[0])
			}
			return nil, nil, fmt.Errorf("move fd %d: %w", fd, err)
		}
		unix.Close(fd)
		fds[i] = nfd
	}
	return os.NewFile(uintptr(fds[0]), "requests"), os.NewFile(uintptr(fds[1]), "events"), nil
}

// MaxLine bounds one request line. The manager bounds code far below it;
// a longer line is a broken manager.
const MaxLine = 256 << 20

// maxLine is MaxLine; tests lower it.
var maxLine = MaxLine

// ErrLineTooLong is a request line over MaxLine.
var ErrLineTooLong = errors.New("a request line is longer than the limit")

// ReadLine reads the next line, its newline included; a last line without
// one counts. With an error (io.EOF when the manager closed the pipe, or
// ErrLineTooLong) line holds the bytes read, which the caller may count.
func ReadLine(r *bufio.Reader) (line []byte, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > maxLine {
			return line, ErrLineTooLong
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case len(bytes.TrimSpace(line)) == 0:
			return line, err
		default:
			return line, nil // a last line without its newline
		}
	}
}
