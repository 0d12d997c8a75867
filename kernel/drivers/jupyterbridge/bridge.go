package jupyterbridge

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cellbox-dev/cellbox/kernel/drivers/driverio"
	"github.com/cellbox-dev/cellbox/kernel/jupyter"
)

// Bounds of a bridge.
const (
	// DefaultStartTimeout bounds a kernel's start when the config says
	// nothing: until it answers kernel_info_request on shell and speaks
	// on iopub.
	DefaultStartTimeout = 60 * time.Second
	// maxPending bounds the manager's requests waiting for the kernel's
	// reply (complete, inspect, isComplete).
	maxPending = 64
	// ipcPathMax is the longest path of a unix socket (sun_path, less the
	// "-N" of a channel and the terminating NUL).
	ipcPathMax = 104
)

// pendingTimeout bounds the wait for the kernel's reply to a request of
// the manager's (complete, inspect, isComplete): a kernel that never
// answers a message type, or answers with another parent header, would
// otherwise hold its place among the maxPending for good. A variable for
// the tests.
var pendingTimeout = 30 * time.Second

// bridge drives one Jupyter kernel for the manager.
type bridge struct {
	cfg    Config
	w      *wire
	sess   jupyter.Session
	ci     jupyter.ConnectionInfo
	signer *jupyter.Signer
	sock   *jupyter.ClientSockets
	kernel *kernelProc
	dir    string // the private directory of the connection file and sockets
	// fatal ends the bridge: the kernel can no longer be driven.
	fatal chan error
	reqs  *driverio.RequestPipe

	// mu guards the fields below. Lock order: wire.mu, then mu.
	mu     sync.Mutex
	closed bool
	// redialed is the iopub subscription when it was made anew
	// (sock.IOPub's connection was lost).
	redialed *jupyter.Socket
	cur      *execution
	pending  map[string]pendingRequest // by the msg_id of the request sent
	// lastIOPub is when the last iopub message was dealt with.
	lastIOPub time.Time
	// interruptBefore: an execute request that begins before this offset
	// of the request pipe was written before a SIGINT that came while
	// nothing ran; it is interrupted once the kernel runs it.
	interruptBefore int64
	// iopubUp is closed when the first iopub message arrives: the
	// subscription is in place (PUB drops what no subscriber takes).
	iopubUp   chan struct{}
	iopubOnce sync.Once
}

// pendingRequest is a request of the manager's waiting for the kernel's
// reply on shell.
type pendingRequest struct {
	op    string // complete, inspect, isComplete; kernel_info during the start
	id    string // the manager's request id
	reply chan *jupyter.Message
	// timer answers the manager with an error once pendingTimeout has
	// passed without the kernel's reply (nil during the start).
	timer *time.Timer
}

// env is what run needs of its process.
type env struct {
	environ []string // the kernel's environment before the kernelspec's
	dir     string   // the kernel's working directory
	tmp     string   // where the private directory is made
}

// run drives the kernel of cfg: it starts it, tells the manager it is
// ready, answers the manager's requests from reqs until they end, and
// returns the bridge's exit code (the kernel's, when it died).
func run(ctx context.Context, cfg Config, e env, reqs *os.File, w *wire, interrupts <-chan os.Signal) int {
	b := &bridge{cfg: cfg, w: w, reqs: driverio.NewRequestPipe(reqs), pending: map[string]pendingRequest{}, iopubUp: make(chan struct{}), fatal: make(chan error, 1)}
	timeout := DefaultStartTimeout
	if cfg.StartTimeoutMs > 0 {
		timeout = time.Duration(cfg.StartTimeoutMs) * time.Millisecond
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	info, err := b.start(ctx, e, time.Now().Add(timeout))
	if err != nil {
		code := b.failed(err)
		b.close()
		return code
	}
	ready := &event{Ev: "ready", Version: info.Version, Pid: b.kernel.pid, LanguageInfo: info}
	w.send(ready)

	ended := make(chan error, 1)
	go func() { ended <- b.serve(bufio.NewReaderSize(b.reqs, 64<<10)) }()
	for {
		select {
		case <-interrupts:
			b.interrupt()
		case err := <-ended:
			// The manager closed the request pipe: it is done with us.
			b.close()
			if err != nil && !errors.Is(err, io.EOF) {
				b.w.stream("stderr", []byte("jupyter bridge: "+err.Error()+"\n"))
				return 1
			}
			return 0
		case <-b.kernel.exited:
			code := b.kernelDied()
			b.close()
			return code
		case err := <-b.fatal:
			b.w.stream("stderr", []byte("\n[cellbox: jupyter kernel "+b.cfg.Name+": "+err.Error()+"]\n"))
			b.close()
			return 1
		case <-ctx.Done():
			b.close()
			return 1
		}
	}
}

// start makes the private directory and the connection file, starts the
// kernel, connects to its sockets and waits for its kernel_info_reply.
func (b *bridge) start(ctx context.Context, e env, deadline time.Time) (*languageInfo, error) {
	tmp := e.tmp
	if tmp == "" || len(tmp) > ipcPathMax-40 {
		tmp = "/tmp"
	}
	dir, err := os.MkdirTemp(tmp, "cellbox-jupyter-")
	if err != nil {
		return nil, fmt.Errorf("make the kernel's socket directory: %w", err)
	}
	b.dir = dir // MkdirTemp makes it 0700
	var key [32]byte
	_, _ = rand.Read(key[:])
	b.ci = jupyter.ConnectionInfo{
		Transport: "ipc", IP: filepath.Join(dir, "kernel"),
		ShellPort: 1, IOPubPort: 2, StdinPort: 3, ControlPort: 4, HBPort: 5,
		Key: hex.EncodeToString(key[:]), SignatureScheme: "hmac-sha256", KernelName: b.cfg.Name,
	}
	ci := &b.ci
	connFile := filepath.Join(dir, "kernel.json")
	data, err := json.MarshalIndent(ci, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(connFile, data, 0o600); err != nil {
		return nil, fmt.Errorf("write the connection file: %w", err)
	}

	argv := kernelArgv(b.cfg.Argv, connFile, b.cfg.ResourceDir)
	kenv := kernelEnv(e.environ, b.cfg.Env)
	path, err := lookPath(argv[0], kenv, isExecutable)
	if err != nil {
		return nil, err
	}
	k, err := startKernel(path, argv, kenv, e.dir, b.forward)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	b.kernel = k

	// The sockets exist once the kernel has bound them all; a client
	// dialling earlier would give up after the library's few retries.
	if err := b.waitSockets(ctx, ci.IP, deadline); err != nil {
		return nil, err
	}
	if b.signer, err = jupyter.NewSigner(ci.SignatureScheme, []byte(ci.Key)); err != nil {
		return nil, err
	}
	b.sess = jupyter.NewSession("cellbox")
	sock, err := jupyter.Dial(ctx, ci, b.signer, b.sess)
	if err != nil {
		return nil, fmt.Errorf("connect to the kernel: %w", err)
	}
	b.sock = sock
	go b.iopubLoop(ctx)
	go b.shellLoop()
	go b.stdinLoop()
	go b.drain(sock.Control)
	return b.kernelInfo(deadline)
}

// waitSockets waits until the kernel has made its five ipc sockets, as
// jupyter_client names them (IP-PORT). A kernel that speaks only tcp never
// does (kernel/README.md: ipc, not tcp).
func (b *bridge) waitSockets(ctx context.Context, ip string, deadline time.Time) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		missing := ""
		for port := 1; port <= 5; port++ {
			p := fmt.Sprintf("%s-%d", ip, port)
			if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeSocket == 0 {
				missing = p
				break
			}
		}
		if missing == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the kernel did not make its ipc socket %s within %v (a kernel that speaks only tcp cannot run in a cellbox sandbox)", missing, b.startTimeout())
		}
		select {
		case <-tick.C:
		case <-b.kernel.exited:
			return errKernelExited
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// errKernelExited: the kernel ended while the bridge waited for it.
var errKernelExited = errors.New("the kernel exited")

func (b *bridge) startTimeout() time.Duration {
	if b.cfg.StartTimeoutMs > 0 {
		return time.Duration(b.cfg.StartTimeoutMs) * time.Millisecond
	}
	return DefaultStartTimeout
}

// kernelInfo sends kernel_info_request until the kernel has answered one
// on shell and said something on iopub, as Jupyter's clients wait for a
// kernel (jupyter_client's wait_for_ready): a subscription made after the
// kernel published misses what it published, so the client nudges.
func (b *bridge) kernelInfo(deadline time.Time) (*languageInfo, error) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	replies := make(chan *jupyter.Message, 1)
	var info *languageInfo
	nudge := time.NewTicker(100 * time.Millisecond)
	defer nudge.Stop()
	send := func() error {
		m, err := b.sess.New("kernel_info_request", nil, map[string]any{})
		if err != nil {
			return err
		}
		b.mu.Lock()
		b.pending[m.Header.MsgID] = pendingRequest{op: "kernel_info", reply: replies}
		b.mu.Unlock()
		return b.sock.Shell.Send(m)
	}
	if err := send(); err != nil {
		return nil, fmt.Errorf("send kernel_info_request: %w", err)
	}
	for {
		if info != nil {
			select {
			case <-b.iopubUp:
				b.dropPending("kernel_info")
				return info, nil
			default:
			}
		}
		select {
		case m := <-replies:
			if info == nil {
				info = parseKernelInfo(m)
			}
		case <-b.iopubUp:
		case <-nudge.C:
			if info != nil {
				if err := send(); err != nil {
					return nil, fmt.Errorf("send kernel_info_request: %w", err)
				}
			}
		case <-b.kernel.exited:
			return nil, errKernelExited
		case <-timer.C:
			if info == nil {
				return nil, fmt.Errorf("the kernel did not answer kernel_info_request within %v", b.startTimeout())
			}
			return nil, fmt.Errorf("the kernel answered kernel_info_request but published nothing on iopub within %v", b.startTimeout())
		}
	}
}

// parseKernelInfo reads a kernel_info_reply's language_info; what is
// missing or of another type stays empty.
func parseKernelInfo(m *jupyter.Message) *languageInfo {
	var c struct {
		LanguageInfo struct {
			Name          any `json:"name"`
			Version       any `json:"version"`
			FileExtension any `json:"file_extension"`
			Mimetype      any `json:"mimetype"`
		} `json:"language_info"`
	}
	_ = json.Unmarshal(m.Content, &c)
	l := c.LanguageInfo
	return &languageInfo{Name: str(l.Name), Version: str(l.Version), FileExtension: str(l.FileExtension), Mimetype: str(l.Mimetype)}
}

// str is v if it is a string, bounded; else "".
func str(v any) string {
	s, _ := v.(string)
	const most = 256
	if len(s) > most {
		s = strings.ToValidUTF8(s[:most], "")
	}
	return s
}

func (b *bridge) dropPending(op string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, p := range b.pending {
		if p.op == op {
			delete(b.pending, id)
		}
	}
}

// failed reports a start that failed: why, with what the kernel wrote to
// its stderr, and the exit code (the kernel's, when it exited).
func (b *bridge) failed(err error) int {
	if errors.Is(err, errKernelExited) {
		return b.kernelDied()
	}
	msg := "jupyter kernel " + b.cfg.Name + ": " + err.Error()
	if b.kernel != nil {
		if tail := b.kernel.unforwarded(); tail != "" {
			msg = strings.TrimRight(tail, "\n") + "\n" + msg
		}
	}
	b.w.stream("stderr", []byte(msg+"\n"))
	return 1
}

// kernelDied reports the kernel's end on stderr, with what it wrote there
// that nobody saw, and returns the exit code that says how it ended.
func (b *bridge) kernelDied() int {
	k := b.kernel
	k.waitOutput(time.Second)
	st := k.status()
	msg := fmt.Sprintf("[cellbox: the jupyter kernel %s %s]", b.cfg.Name, st)
	if tail := k.unforwarded(); tail != "" {
		msg = strings.TrimRight(tail, "\n") + "\n" + msg
	}
	b.w.stream("stderr", []byte(msg+"\n"))
	return st.exitCode()
}

// close ends the kernel and everything of the bridge's.
func (b *bridge) close() {
	if b.kernel != nil {
		b.kernel.kill()
	}
	b.mu.Lock()
	b.closed = true
	for _, p := range b.pending {
		if p.timer != nil {
			p.timer.Stop()
		}
	}
	redialed := b.redialed
	b.mu.Unlock()
	if redialed != nil {
		redialed.Close()
	}
	if b.sock != nil {
		b.sock.Close()
	}
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

// drain reads a socket whose messages the bridge does not use (control:
// interrupt_reply), so that they do not pile up.
func (b *bridge) drain(s *jupyter.Socket) {
	for {
		if _, err := s.Recv(); err != nil && !b.recvFailed("control", err) {
			return
		}
	}
}

// recvFailed handles a socket's receive error and says whether to go on
// reading it: a message that failed its checks is skipped; a closed socket
// ends its reader; a message over the size limit lost its connection, which
// the bridge cannot do without (iopub is dialled anew by its reader).
func (b *bridge) recvFailed(channel string, err error) bool {
	switch {
	case jupyter.Closed(err):
		return false
	case jupyter.TooLarge(err):
		select {
		case b.fatal <- fmt.Errorf("it sent a message of more than %d bytes on %s, which closed that connection", jupyter.MaxMessageBytes, channel):
		default:
		}
		return false
	}
	return true
}

// redialIOPub makes the iopub subscription anew after the kernel sent a
// message over the size limit, and says so on the output.
func (b *bridge) redialIOPub(ctx context.Context, old *jupyter.Socket) *jupyter.Socket {
	b.w.stream("stderr", []byte(fmt.Sprintf("\n[cellbox: the kernel sent an output of more than %d bytes, the most a message may hold; it was dropped]\n", jupyter.MaxMessageBytes)))
	s, err := jupyter.DialIOPub(ctx, &b.ci, b.signer)
	if err != nil {
		select {
		case b.fatal <- fmt.Errorf("its iopub connection was lost and cannot be made again: %v", err):
		default:
		}
		return nil
	}
	b.mu.Lock()
	closed := b.closed
	if !closed {
		b.redialed = s
	}
	b.mu.Unlock()
	if old != b.sock.IOPub {
		old.Close()
	}
	if closed {
		s.Close()
		return nil
	}
	return s
}

// forward is what the kernel process writes to its own fds 1 and 2 (not
// through iopub: C code, child processes): during an execution it is the
// execution's output; between executions nobody would see it, so it is
// only kept to explain a death.
func (b *bridge) forward(name string, p []byte) bool {
	b.w.mu.Lock()
	defer b.w.mu.Unlock()
	b.mu.Lock()
	running := b.cur != nil
	b.mu.Unlock()
	if running {
		b.w.streamLocked(name, p)
	}
	return running
}
