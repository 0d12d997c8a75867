package jupyter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"sync"

	"github.com/go-zeromq/zmq4"
)

// IOPubHWM bounds the iopub messages queued for subscribers; past it new
// ones are dropped. The library keeps one queue for all subscribers (libzmq
// keeps one a subscriber), so a subscriber that stops reading would hold
// everyone's messages: the transport closes a connection whose writes stall
// (writeTimeout). Output is gathered into few large stream messages before
// it gets here.
const IOPubHWM = 1000

// quiet keeps the library's own log lines (a peer that failed its
// handshake) off the process's stderr, which a kernel's user may see.
var quiet = zmq4.WithLogger(log.New(io.Discard, "", 0))

// Socket is one ZeroMQ socket carrying Jupyter messages.
type Socket struct {
	z      zmq4.Socket
	signer *Signer
	mu     sync.Mutex // one Send at a time
}

// Recv waits for the next message. A message that fails its checks is
// returned as an error that is not net.ErrClosed; the socket stays usable.
func (s *Socket) Recv() (*Message, error) {
	zm, err := s.z.Recv()
	if err != nil {
		return nil, err
	}
	return s.signer.Decode(zm.Frames)
}

// Send signs and sends a message.
func (s *Socket) Send(m *Message) error {
	frames, err := s.signer.Encode(m)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.z.SendMulti(zmq4.NewMsgFrom(frames...))
}

// Close closes the socket.
func (s *Socket) Close() error { return s.z.Close() }

// Addr is the socket's bound address (tcp), for a port chosen by the OS.
func (s *Socket) Addr() net.Addr { return s.z.Addr() }

// Closed reports whether err means the socket was closed.
func Closed(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, context.Canceled)
}

// KernelSockets are a kernel's five sockets, bound.
type KernelSockets struct {
	Shell, Control, Stdin, IOPub *Socket
	hb                           zmq4.Socket
	cancel                       context.CancelFunc
	done                         chan struct{}
}

// Listen binds a kernel's sockets as ci says (ports 0 are chosen by the OS
// and written back into ci) and starts the heartbeat's echo.
func Listen(ctx context.Context, ci *ConnectionInfo, signer *Signer) (*KernelSockets, error) {
	registerTransports()
	ctx, cancel := context.WithCancel(ctx)
	k := &KernelSockets{cancel: cancel, done: make(chan struct{})}
	fail := func(err error) (*KernelSockets, error) {
		k.closeAll()
		cancel()
		return nil, err
	}
	bind := func(z zmq4.Socket, port *int, name string) (*Socket, error) {
		if err := z.Listen(ci.endpoint(*port)); err != nil {
			z.Close()
			return nil, fmt.Errorf("bind %s on %s: %w", name, ci.endpoint(*port), err)
		}
		if ci.Transport == "tcp" && *port == 0 {
			if a, ok := z.Addr().(*net.TCPAddr); ok {
				*port = a.Port
			}
		}
		return &Socket{z: z, signer: signer}, nil
	}
	var err error
	if k.Shell, err = bind(zmq4.NewRouter(ctx, quiet), &ci.ShellPort, "shell"); err != nil {
		return fail(err)
	}
	if k.Control, err = bind(zmq4.NewRouter(ctx, quiet), &ci.ControlPort, "control"); err != nil {
		return fail(err)
	}
	if k.Stdin, err = bind(zmq4.NewRouter(ctx, quiet), &ci.StdinPort, "stdin"); err != nil {
		return fail(err)
	}
	pub := zmq4.NewPub(ctx, quiet)
	if err := pub.SetOption(zmq4.OptionHWM, IOPubHWM); err != nil {
		pub.Close()
		return fail(fmt.Errorf("iopub high-water mark: %w", err))
	}
	if k.IOPub, err = bind(pub, &ci.IOPubPort, "iopub"); err != nil {
		return fail(err)
	}
	hb, err := bind(zmq4.NewRep(ctx, quiet), &ci.HBPort, "heartbeat")
	if err != nil {
		return fail(err)
	}
	k.hb = hb.z
	go k.heartbeat()
	return k, nil
}

// heartbeat echoes every ping, as Jupyter's heartbeat does.
func (k *KernelSockets) heartbeat() {
	defer close(k.done)
	for {
		m, err := k.hb.Recv()
		if err != nil {
			if Closed(err) {
				return
			}
			continue
		}
		if err := k.hb.Send(m); err != nil && Closed(err) {
			return
		}
	}
}

func (k *KernelSockets) closeAll() {
	for _, s := range []*Socket{k.Shell, k.Control, k.Stdin, k.IOPub} {
		if s != nil {
			s.Close()
		}
	}
	if k.hb != nil {
		k.hb.Close()
	}
}

// Close closes the five sockets.
func (k *KernelSockets) Close() {
	k.closeAll()
	k.cancel()
	if k.hb != nil {
		<-k.done
	}
}

// ClientSockets are a Jupyter client's five sockets, connected to a
// kernel.
type ClientSockets struct {
	Shell, Control, Stdin, IOPub *Socket
	HB                           zmq4.Socket
	cancel                       context.CancelFunc
}

// Dial connects a client's sockets to the kernel ci describes. Shell and
// stdin share an identity, so the kernel's input requests reach this
// client.
func Dial(ctx context.Context, ci *ConnectionInfo, signer *Signer, session Session) (*ClientSockets, error) {
	registerTransports()
	ctx, cancel := context.WithCancel(ctx)
	c := &ClientSockets{cancel: cancel}
	fail := func(err error) (*ClientSockets, error) {
		c.Close()
		return nil, err
	}
	id := zmq4.SocketIdentity(session.ID)
	dial := func(z zmq4.Socket, port int, name string) (*Socket, error) {
		if err := z.Dial(ci.endpoint(port)); err != nil {
			z.Close()
			return nil, fmt.Errorf("connect %s to %s: %w", name, ci.endpoint(port), err)
		}
		return &Socket{z: z, signer: signer}, nil
	}
	var err error
	if c.Shell, err = dial(zmq4.NewDealer(ctx, quiet, zmq4.WithID(id)), ci.ShellPort, "shell"); err != nil {
		return fail(err)
	}
	if c.Control, err = dial(zmq4.NewDealer(ctx, quiet, zmq4.WithID(zmq4.SocketIdentity(session.ID+"-control"))), ci.ControlPort, "control"); err != nil {
		return fail(err)
	}
	if c.Stdin, err = dial(zmq4.NewDealer(ctx, quiet, zmq4.WithID(id)), ci.StdinPort, "stdin"); err != nil {
		return fail(err)
	}
	sub := zmq4.NewSub(ctx, quiet)
	if err := sub.SetOption(zmq4.OptionSubscribe, ""); err != nil {
		sub.Close()
		return fail(fmt.Errorf("subscribe iopub: %w", err))
	}
	if c.IOPub, err = dial(sub, ci.IOPubPort, "iopub"); err != nil {
		return fail(err)
	}
	hb, err := dial(zmq4.NewReq(ctx, quiet), ci.HBPort, "heartbeat")
	if err != nil {
		return fail(err)
	}
	c.HB = hb.z
	return c, nil
}

// Close closes the client's sockets.
func (c *ClientSockets) Close() {
	for _, s := range []*Socket{c.Shell, c.Control, c.Stdin, c.IOPub} {
		if s != nil {
			s.Close()
		}
	}
	if c.HB != nil {
		c.HB.Close()
	}
	c.cancel()
}

// Ports lists ci's five ports, for a sandbox rule that allows exactly them.
func (ci *ConnectionInfo) Ports() []uint16 {
	var out []uint16
	for _, p := range ci.ports() {
		if p.port > 0 && p.port <= 65535 {
			out = append(out, uint16(p.port))
		}
	}
	return out
}
