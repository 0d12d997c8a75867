package sandbox

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// The daemon talks to a sandbox's init and spawner over SOCK_SEQPACKET
// Unix socket pairs: one JSON message per packet, with file descriptors
// passed alongside (SCM_RIGHTS).
//
//	daemon                    init (pid 1, sandbox root)        spawner (nested userns)
//	  |                          | starts ------------------------->| (waits for go)
//	  | -- {prep} [+ ro fds] --->| builds the root but /workspace   |
//	  |    (a pooled init waits here for a workspace)               |
//	  | -- config (fd 3 pipe) -->|                                  |
//	  | -- {trees} + fds ------>| (root daemon: layers, idmapped project)
//	  |                          | mounts /workspace, pivot_root    |
//	  |                          | -- go (fd 4 pipe) -------------->| locks itself down
//	  |<-- {built} [+ listeners]-| (3128, 1080, 3141 in its network namespace)
//	  |<---------------------------------------------- {ready} -----|
//	  | -- {spawn} + stdio fds ---------------------------------->|
//	  |<---------------------------------- {started pid} [+pty] ---|
//	  |<---------------------------------- {exited status} --------|
//	  | -- {dial port} --------->| connects to the port in its network namespace
//	  |<-- {dialed} [+ conn] ----|
//	  |<-- {error} / EOF ------- | init died: the sandbox is gone
//
// EOF on the init's control socket tells the init that the daemon died; it
// exits, and the kernel kills every process of the sandbox with it.

const maxMsgBytes = 1 << 20 // one message; argv and env included

// msg is every message of the sandbox protocol; Op says which fields matter.
type msg struct {
	Op string `json:"op"`
	ID uint64 `json:"id,omitempty"`

	// spawn
	Argv   []string `json:"argv,omitempty"`
	Env    []string `json:"env,omitempty"`
	Dir    string   `json:"dir,omitempty"`
	PTY    *WinSize `json:"pty,omitempty"`
	Limits Limits   `json:"limits,omitempty"`
	// Stdio says which of stdin, stdout, stderr come as fds, in order.
	Stdio [3]bool `json:"stdio,omitempty"`
	// Extra is how many fds after the stdio ones become fds 3, 4, ...
	Extra int `json:"extra,omitempty"`

	// started, exited, signal
	Pid    int   `json:"pid,omitempty"`
	Code   int   `json:"code,omitempty"`
	Signal int   `json:"signal,omitempty"`
	CPUNs  int64 `json:"cpuNs,omitempty"`
	MaxRSS int64 `json:"maxRss,omitempty"`
	Tree   bool  `json:"tree,omitempty"`
	Group  bool  `json:"group,omitempty"`

	// ready
	Layers *Layers `json:"layers,omitempty"`
	// built: why SelfPath is missing, when it is
	SelfMissing string `json:"selfMissing,omitempty"`

	// prep
	Prep *prepConfig `json:"prep,omitempty"`

	// dial (daemon to init) and dialed (its answer, with the connection)
	Port int `json:"port,omitempty"`

	Err string `json:"err,omitempty"`
}

// msgConn is one end of a seqpacket socket pair.
type msgConn struct {
	c *net.UnixConn

	wmu sync.Mutex // one sender at a time
	rmu sync.Mutex // guards oob
	oob []byte
}

// socketPair returns a connected seqpacket pair, both ends close-on-exec.
func socketPair() (*os.File, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "sandbox-sock"), os.NewFile(uintptr(fds[1]), "sandbox-sock"), nil
}

// newMsgConn takes over f (which it closes when the conn is closed).
func newMsgConn(f *os.File) (*msgConn, error) {
	fc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("sandbox socket: %w", err)
	}
	uc, ok := fc.(*net.UnixConn)
	if !ok {
		fc.Close()
		return nil, fmt.Errorf("sandbox socket is a %T, not a unix socket", fc)
	}
	return &msgConn{c: uc}, nil
}

func (c *msgConn) send(m *msg, fds ...int) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %s message: %w", m.Op, err)
	}
	if len(b) > maxMsgBytes {
		return fmt.Errorf("%s message of %d bytes is over the %d-byte limit", m.Op, len(b), maxMsgBytes)
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, _, err := c.c.WriteMsgUnix(b, oob, nil); err != nil {
		return fmt.Errorf("send %s message: %w", m.Op, err)
	}
	return nil
}

// recv reads one message; received fds are close-on-exec and owned by the
// caller.
func (c *msgConn) recv() (*msg, []*os.File, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.oob == nil {
		c.oob = make([]byte, unix.CmsgSpace(8*4))
	}
	rc, err := c.c.SyscallConn()
	if err != nil {
		return nil, nil, err
	}
	// A reader waits without a buffer, and then takes one the packet's
	// size: hundreds of sandboxes each have two readers blocked here.
	var buf []byte
	var n, oobn, flags int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		size, _, err := unix.Recvfrom(int(fd), nil, unix.MSG_PEEK|unix.MSG_TRUNC|unix.MSG_DONTWAIT)
		if err == unix.EAGAIN || err == unix.EINTR {
			return false
		}
		if err != nil {
			rerr = err
			return true
		}
		buf = make([]byte, min(size, maxMsgBytes+1))
		n, oobn, flags, _, err = unix.Recvmsg(int(fd), buf, c.oob, unix.MSG_CMSG_CLOEXEC|unix.MSG_DONTWAIT)
		if err == unix.EAGAIN || err == unix.EINTR {
			return false
		}
		rerr = err
		return true
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return nil, nil, err
	}
	files, ferr := parseRights(c.oob[:oobn])
	if flags&(syscall.MSG_TRUNC|syscall.MSG_CTRUNC) != 0 || n > maxMsgBytes {
		closeAll(files)
		return nil, nil, fmt.Errorf("sandbox message truncated (flags %#x)", flags)
	}
	if ferr != nil {
		return nil, nil, ferr
	}
	if n == 0 {
		closeAll(files)
		return nil, nil, errEOF
	}
	m := new(msg)
	if err := json.Unmarshal(buf[:n], m); err != nil {
		closeAll(files)
		return nil, nil, fmt.Errorf("decode sandbox message: %w", err)
	}
	return m, files, nil
}

var errEOF = fmt.Errorf("sandbox socket closed")

func (c *msgConn) close() error { return c.c.Close() }

func parseRights(oob []byte) ([]*os.File, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	scms, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("parse control message: %w", err)
	}
	var files []*os.File
	for _, scm := range scms {
		fds, err := unix.ParseUnixRights(&scm)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "passed-fd"))
		}
	}
	return files, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}
