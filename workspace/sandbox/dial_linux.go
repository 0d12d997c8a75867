package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// A sandbox with a network namespace of its own can be reached from the
// host only through its init: DialPort asks the init to connect to a port
// of the namespace's loopback, and the init passes the connected socket
// back. Nothing of the host becomes reachable from the sandbox by this; the
// daemon decides which port is dialed and when (the previews of
// workspace/exposePort).

// dialTimeout bounds one connect in the init. A loopback connect completes
// or is refused at once unless the server's accept queue is full.
const dialTimeout = 5 * time.Second

// maxDials is how many connects the init runs at once; more are refused.
const maxDials = 64

// ErrNotListening: nothing listens on the port in the sandbox.
var ErrNotListening = errors.New("nothing listens on that port in the sandbox")

// dialed is the init's answer to one dial.
type dialed struct {
	conn *os.File
	err  error
}

// DialPort connects to a TCP port of the sandbox's network namespace
// (127.0.0.1, then ::1), as its init, and returns the connection. A
// sandbox with the host's network is dialed the same way, in the host's
// namespace. Nothing listening is ErrNotListening.
func (s *Sandbox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("dial port %d: not a TCP port", port)
	}
	ch := make(chan dialed, 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if s.dials == nil {
		s.dials = make(map[uint64]chan dialed)
	}
	s.nextDial++
	id := s.nextDial
	s.dials[id] = ch
	s.mu.Unlock()
	if err := s.ctl.send(&msg{Op: "dial", ID: id, Port: port}); err != nil {
		s.giveUpDial(id, ch)
		return nil, fmt.Errorf("dial port %d: ask the sandbox's init: %w", port, err)
	}
	select {
	case d := <-ch:
		if d.err != nil {
			return nil, fmt.Errorf("dial port %d: %w", port, d.err)
		}
		c, err := net.FileConn(d.conn)
		d.conn.Close()
		if err != nil {
			return nil, fmt.Errorf("dial port %d: the init's connection: %w", port, err)
		}
		return c, nil
	case <-ctx.Done():
		s.giveUpDial(id, ch)
		return nil, fmt.Errorf("dial port %d: %w", port, ctx.Err())
	case <-s.done:
		s.giveUpDial(id, ch)
		return nil, ErrClosed
	}
}

// giveUpDial forgets a dial whose caller stopped waiting. Under s.mu, as
// answerDial delivers: either the answer is in ch already (its connection
// is closed here), or answerDial will find no waiter and close it itself.
func (s *Sandbox) giveUpDial(id uint64, ch chan dialed) {
	s.mu.Lock()
	delete(s.dials, id)
	select {
	case d := <-ch:
		if d.conn != nil {
			d.conn.Close()
		}
	default:
	}
	s.mu.Unlock()
}

// answerDial hands the init's answer to the waiting DialPort.
func (s *Sandbox) answerDial(m *msg, files []*os.File) {
	d := dialed{}
	switch {
	case m.Err == errNotListening:
		d.err = ErrNotListening
	case m.Err != "":
		d.err = errors.New(m.Err)
	case len(files) != 1:
		d.err = fmt.Errorf("the sandbox's init answered with %d connections, not 1", len(files))
	default:
		d.conn, files = files[0], nil
	}
	closeAll(files)
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.dials[m.ID]
	delete(s.dials, m.ID)
	if ch == nil {
		if d.conn != nil {
			d.conn.Close() // its caller gave up
		}
		return
	}
	ch <- d // capacity 1, one answer per id: never blocks
}

// errNotListening is how the init says ECONNREFUSED.
const errNotListening = "not listening"

// dialSlots bounds the init's connects under way.
var dialSlots = make(chan struct{}, maxDials)

// initDial runs in the init: it connects to port on the loopback of the
// init's network namespace and sends the socket to the daemon.
func initDial(ctl *msgConn, id uint64, port int) {
	select {
	case dialSlots <- struct{}{}:
		defer func() { <-dialSlots }()
	default:
		_ = ctl.send(&msg{Op: "dialed", ID: id, Err: fmt.Sprintf("more than %d connections are being opened at once", maxDials)})
		return
	}
	if port < 1 || port > 65535 {
		_ = ctl.send(&msg{Op: "dialed", ID: id, Err: fmt.Sprintf("port %d is not a TCP port", port)})
		return
	}
	fd, err := connectLoopback(port)
	if err != nil {
		text := err.Error()
		if errors.Is(err, unix.ECONNREFUSED) {
			text = errNotListening
		}
		_ = ctl.send(&msg{Op: "dialed", ID: id, Err: text})
		return
	}
	_ = ctl.send(&msg{Op: "dialed", ID: id}, fd)
	unix.Close(fd)
}

// connectLoopback connects a TCP socket to 127.0.0.1:port, or [::1]:port
// when that is refused, within dialTimeout.
func connectLoopback(port int) (int, error) {
	fd, err := connectTCP(unix.AF_INET, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
	if errors.Is(err, unix.ECONNREFUSED) {
		if fd6, err6 := connectTCP(unix.AF_INET6, &unix.SockaddrInet6{Port: port, Addr: [16]byte{15: 1}}); err6 == nil {
			return fd6, nil
		} else if !errors.Is(err6, unix.ECONNREFUSED) && !errors.Is(err6, unix.EAFNOSUPPORT) && !errors.Is(err6, unix.EADDRNOTAVAIL) {
			return -1, err6
		}
	}
	return fd, err
}

func connectTCP(family int, sa unix.Sockaddr) (int, error) {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	err = unix.Connect(fd, sa)
	if errors.Is(err, unix.EINPROGRESS) {
		err = awaitConnect(fd)
	}
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("connect: %w", err)
	}
	return fd, nil
}

// awaitConnect waits for a non-blocking connect and returns its outcome.
func awaitConnect(fd int) error {
	deadline := time.Now().Add(dialTimeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return unix.ETIMEDOUT
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(pfd, int(left/time.Millisecond)+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			continue
		}
		soErr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil {
			return err
		}
		if soErr != 0 {
			return unix.Errno(soErr)
		}
		return nil
	}
}
