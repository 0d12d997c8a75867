package driverio

import (
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// RequestPipe is the manager's request pipe, read through a count of what
// was taken from it, so that a SIGINT can be placed among the requests:
// what the manager had written when it sent the signal is what was taken
// plus what the pipe holds (Mark). The signal is for the last execute the
// manager had written by then.
type RequestPipe struct {
	f  *os.File // kept: its finalizer would close fd
	fd int
	mu sync.Mutex // guards n and makes a read and the count one step
	n  int64      // bytes read from the pipe
}

// NewRequestPipe reads f, the requests (Channel), through a count.
func NewRequestPipe(f *os.File) *RequestPipe {
	return &RequestPipe{f: f, fd: int(f.Fd())} // Fd makes it blocking
}

func (p *RequestPipe) Read(b []byte) (int, error) {
	for {
		// Wait outside the lock: Mark must not wait for the manager.
		pfd := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
		switch _, err := unix.Poll(pfd, -1); {
		case err == unix.EINTR:
			// A signal (the SIGINT of an interrupt) ended the wait: wait
			// again. Reading now would block holding mu, and the
			// interrupt's Mark with it, until the next request came.
			continue
		case err != nil:
			return 0, err
		}
		p.mu.Lock()
		n, err := unix.Read(p.fd, b)
		if n > 0 {
			p.n += int64(n)
		}
		p.mu.Unlock()
		switch {
		case n > 0:
			return n, nil
		case err == unix.EAGAIN || err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		}
		return 0, io.EOF
	}
}

// Mark is how many bytes the manager has written to the pipe so far.
func (p *RequestPipe) Mark() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n + int64(pipeHolds(p.fd))
}
