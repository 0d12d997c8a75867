package jupyter

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
)

// The ZeroMQ library allocates a frame's body at the size its header
// claims, and completes a connection's handshake on its accept loop. A peer
// that claims a frame of a terabyte, or connects and says nothing, would
// take the process's memory or every later connection. So the sockets use
// transports of our own ("cellbox+tcp", "cellbox+ipc") whose connections
// check each frame's size, and each message's, as the bytes pass, before
// the library sees a header, and give the handshake a deadline.
const (
	// MaxMessageBytes bounds one message: the sum of its frames. Above it
	// the peer's connection is closed (other peers are not affected).
	MaxMessageBytes = 64 << 20
	// MaxFrames bounds the frames of one message (identities, the
	// delimiter, signature, four dicts and buffers).
	MaxFrames = 1024
)

// handshakeTimeout bounds the ZMTP greeting and the first command (a
// variable for tests). The library completes handshakes one at a time on
// its accept loop, so a peer that connects and stays silent holds up the
// clients behind it this long; Jupyter's clients greet at once.
var handshakeTimeout atomic.Int64 // nanoseconds

func init() {
	handshakeTimeout.Store(int64(3 * time.Second))
	writeTimeout.Store(int64(10 * time.Second))
}

// writeTimeout bounds one write to a peer (a variable for tests). The
// library's PUB socket writes to its subscribers in turn, holding its
// lock, and its ROUTER waits for each send: a peer that stops reading (a
// suspended client, or anyone subscribing to a tcp iopub port without the
// key, which a subscription does not need) would stall every client. Its
// connection is closed instead.
var writeTimeout atomic.Int64 // nanoseconds

// maxConns bounds the live connections of one listener: each can hold a
// message in the making (up to MaxMessageBytes) before its signature is
// checked. Jupyter's clients use one a socket.
const maxConns = 64

const (
	tcpScheme = "cellbox+tcp"
	ipcScheme = "cellbox+ipc"
)

var registerOnce sync.Once

func registerTransports() {
	registerOnce.Do(func() {
		// Errors only on a duplicate name, which Once rules out.
		_ = zmq4.RegisterTransport(tcpScheme, guarded{transport.New("tcp"), "tcp"})
		_ = zmq4.RegisterTransport(ipcScheme, guarded{transport.New("unix"), "unix"})
	})
}

// guarded is a zmq4 transport whose connections are frame guards.
type guarded struct {
	inner transport.Transport
	prot  string
}

func (g guarded) Dial(ctx context.Context, d transport.Dialer, addr string) (net.Conn, error) {
	c, err := g.inner.Dial(ctx, d, addr)
	if err != nil {
		return nil, err
	}
	return newGuardConn(c), nil
}

func (g guarded) Listen(ctx context.Context, addr string) (net.Listener, error) {
	l, err := g.inner.Listen(ctx, addr)
	if err != nil {
		return nil, err
	}
	return guardListener{l, new(atomic.Int32)}, nil
}

func (g guarded) Addr(ep string) (string, error) {
	if g.prot == "unix" {
		return ep, nil
	}
	return g.inner.Addr(ep)
}

type guardListener struct {
	net.Listener
	live *atomic.Int32
}

func (l guardListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.live.Add(1) > maxConns {
			l.live.Add(-1)
			_ = c.Close()
			continue
		}
		g := newGuardConn(c)
		g.release = func() { l.live.Add(-1) }
		return g, nil
	}
}

// guardConn checks the ZMTP 3 stream it reads: the 64-byte greeting, then
// frames (a flags byte; a size of one byte, or eight when the LONG flag is
// set; the body). It also gathers what it writes into one write a message:
// the library writes each frame's header and body apart, unbuffered, so a
// six-frame Jupyter message would otherwise be twelve system calls and as
// many packets.
type guardConn struct {
	net.Conn
	g frameGuard

	wmu  sync.Mutex
	w    frameGuard // follows what is written, to find where a message ends
	wbuf []byte

	closeOnce sync.Once
	release   func() // gives the listener's slot back
}

func (c *guardConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() {
		if c.release != nil {
			c.release()
		}
	})
	return err
}

// write writes to the peer within writeTimeout, closing the connection
// when it does not read.
func (c *guardConn) write(p []byte) (int, error) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(time.Duration(writeTimeout.Load())))
	n, err := c.Conn.Write(p)
	if err != nil {
		_ = c.Close()
	}
	return n, err
}

// coalesceMax is the most a connection gathers before it writes; a larger
// write goes out as it is.
const coalesceMax = 64 << 10

func (c *guardConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.w.feed(p); err != nil {
		return 0, err // the library wrote what is not ZMTP: a bug, not input
	}
	if len(c.wbuf)+len(p) > coalesceMax {
		if err := c.flush(); err != nil {
			return 0, err
		}
		if len(p) >= coalesceMax {
			return c.write(p)
		}
	}
	c.wbuf = append(c.wbuf, p...)
	if c.w.atBoundary() {
		if err := c.flush(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (c *guardConn) flush() error {
	if len(c.wbuf) == 0 {
		return nil
	}
	_, err := c.write(c.wbuf)
	c.wbuf = c.wbuf[:0]
	if cap(c.wbuf) > coalesceMax {
		c.wbuf = nil
	}
	return err
}

func newGuardConn(c net.Conn) *guardConn {
	_ = c.SetReadDeadline(time.Now().Add(time.Duration(handshakeTimeout.Load())))
	return &guardConn{Conn: c, g: frameGuard{maxMessage: MaxMessageBytes, maxFrames: MaxFrames},
		w: frameGuard{maxMessage: math.MaxInt64, maxFrames: math.MaxInt}}
}

func (c *guardConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		// A connection that cannot be read is done: closed here, as the
		// library does not close one whose handshake failed, and its
		// listener's slot goes back.
		_ = c.Close()
	}
	if n > 0 {
		shaken := c.g.handshook
		if gerr := c.g.feed(p[:n]); gerr != nil {
			_ = c.Close()
			return 0, gerr
		}
		if !shaken && c.g.handshook {
			_ = c.Conn.SetReadDeadline(time.Time{})
		}
	}
	return n, err
}

// errFrameTooLarge is what a guard answers a peer's oversized message with.
var errFrameTooLarge = errors.New("jupyter: message larger than the limit")

// frameGuard follows a ZMTP 3 byte stream and refuses a message whose
// frames add up to more than maxMessage bytes or number more than
// maxFrames, before a byte of its body is read.
type frameGuard struct {
	maxMessage int64
	maxFrames  int

	greeting  int // greeting bytes seen, up to 64
	handshook bool
	ended     bool // the last byte seen ended the greeting or a message

	state   int // 0: flags, 1: size bytes, 2: body
	flags   byte
	sizeBuf [8]byte
	sizeGot int
	sizeLen int
	body    int64 // body bytes left
	msgSize int64 // bytes of the message so far
	frames  int
}

const (
	flagMore    = 0x01
	flagLong    = 0x02
	flagCommand = 0x04
	greetingLen = 64
)

// atBoundary reports whether the bytes fed so far end the greeting or a
// whole message.
func (g *frameGuard) atBoundary() bool { return g.ended }

func (g *frameGuard) feed(b []byte) error {
	if len(b) > 0 {
		g.ended = false
	}
	for len(b) > 0 {
		if g.greeting < greetingLen {
			n := min(greetingLen-g.greeting, len(b))
			if g.greeting == 0 && b[0] != 0xff {
				return fmt.Errorf("jupyter: not a ZMTP greeting (first byte %#x)", b[0])
			}
			g.greeting += n
			b = b[n:]
			g.ended = g.greeting == greetingLen
			continue
		}
		g.ended = false
		switch g.state {
		case 0:
			g.flags = b[0]
			b = b[1:]
			if g.flags&^(flagMore|flagLong|flagCommand) != 0 {
				return fmt.Errorf("jupyter: bad ZMTP frame flags %#x", g.flags)
			}
			g.sizeLen, g.sizeGot = 1, 0
			if g.flags&flagLong != 0 {
				g.sizeLen = 8
			}
			g.state = 1
		case 1:
			n := min(g.sizeLen-g.sizeGot, len(b))
			copy(g.sizeBuf[g.sizeGot:], b[:n])
			g.sizeGot += n
			b = b[n:]
			if g.sizeGot < g.sizeLen {
				continue
			}
			var size uint64
			if g.sizeLen == 1 {
				size = uint64(g.sizeBuf[0])
			} else {
				size = binary.BigEndian.Uint64(g.sizeBuf[:8])
			}
			g.frames++
			if size > uint64(g.maxMessage) || g.msgSize+int64(size) > g.maxMessage {
				return fmt.Errorf("%w: a frame of %d bytes (limit %d a message)", errFrameTooLarge, size, g.maxMessage)
			}
			if g.frames > g.maxFrames {
				return fmt.Errorf("%w: more than %d frames", errFrameTooLarge, g.maxFrames)
			}
			g.msgSize += int64(size)
			g.body = int64(size)
			g.state = 2
			if g.body == 0 {
				g.endFrame()
			}
		case 2:
			n := int64(len(b))
			if n > g.body {
				n = g.body
			}
			g.body -= n
			b = b[n:]
			if g.body == 0 {
				g.endFrame()
			}
		}
	}
	return nil
}

func (g *frameGuard) endFrame() {
	g.state = 0
	if g.flags&flagCommand != 0 {
		g.handshook = true // the peer's READY: the handshake is done
	}
	if g.flags&flagMore == 0 || g.flags&flagCommand != 0 {
		g.msgSize, g.frames = 0, 0
		g.ended = true
	}
}
