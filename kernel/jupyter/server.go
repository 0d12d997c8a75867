package jupyter

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// A Server makes a cellbox kernel a Jupyter kernel: it answers Jupyter
// clients on a kernel's five sockets and carries each request out as the
// PROTOCOL.md §4 method that does the same, through a Caller (in
// `cellbox jupyter-kernel`, a connection to the user's daemon). The
// kernel's notifications come back through Output and its input requests
// through Input.
//
// Shell requests run one at a time, in order, each between a busy and an
// idle status on iopub, as in ipykernel; control requests (interrupt,
// shutdown) are served at once, beside them.
type Server struct {
	o       ServerOptions
	session Session

	shell    chan *Message
	inputs   chan *Message // input_reply from the stdin socket
	done     chan struct{}
	doneOnce sync.Once

	mu    sync.Mutex // the running execution and its stream buffer
	cur   *execution
	count int // the kernel's execution count, as last reported

	// started is closed when the cellbox kernel has started (Started);
	// kid, li and startErr are set before.
	started     chan struct{}
	startedOnce sync.Once
	kid         string
	li          protocol.LanguageInfo
	startErr    error
}

// Caller carries out a PROTOCOL.md method.
type Caller interface {
	Call(ctx context.Context, method string, params, result any) error
}

// ServerOptions configure a Server.
type ServerOptions struct {
	Sockets *KernelSockets
	Caller  Caller
	// KernelID is the cellbox kernel's; when it is empty, the kernel is
	// still starting and Started says when it has.
	KernelID string
	// Language is the cellbox kernel's, from kernel/start (or, while it
	// starts, from initialize's languages): kernel_info_reply's
	// language_info.
	Language protocol.LanguageInfo
	// Banner is kernel_info_reply's banner.
	Banner string
	// Version is cellbox's version, the implementation_version.
	Version string
	Logger  *slog.Logger
	// StreamDelay is how long stream output that follows other stream
	// output is gathered before it is sent (default 50 ms), so a flood of
	// lines reaches a client as a few large stream messages; the first
	// output after a quiet spell is sent at once.
	StreamDelay time.Duration
}

// streamFlushBytes sends gathered stream text at once past this size.
const streamFlushBytes = 1 << 20

// NewServer returns a server; Serve runs it.
func NewServer(o ServerOptions) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.StreamDelay == 0 {
		o.StreamDelay = 50 * time.Millisecond
	}
	s := &Server{
		o:       o,
		session: NewSession("cellbox"),
		shell:   make(chan *Message, 256),
		inputs:  make(chan *Message, 1),
		done:    make(chan struct{}),
		started: make(chan struct{}),
	}
	if o.KernelID != "" {
		s.Started(o.KernelID, o.Language, nil)
	}
	return s
}

// Started says the cellbox kernel has started (or failed to, with err).
// Until then the server answers kernel_info and holds every request that
// needs the kernel, so a Jupyter client is ready while the kernel starts.
func (s *Server) Started(kernelID string, li protocol.LanguageInfo, err error) {
	s.startedOnce.Do(func() {
		s.kid, s.li, s.startErr = kernelID, li, err
		close(s.started)
	})
}

// kernel waits for the cellbox kernel and returns its id.
func (s *Server) kernel(ctx context.Context) (string, error) {
	select {
	case <-s.started:
	default:
		select {
		case <-s.started:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	if s.startErr != nil {
		return "", fmt.Errorf("the cellbox kernel did not start: %w", s.startErr)
	}
	return s.kid, nil
}

// kernelNow is the cellbox kernel's id, or "" while it starts.
func (s *Server) kernelNow() string {
	select {
	case <-s.started:
		return s.kid
	default:
		return ""
	}
}

// Done is closed when a client asked the kernel to shut down.
func (s *Server) Done() <-chan struct{} { return s.done }

// Serve answers the sockets until ctx ends or a client shuts the kernel
// down (it has then called kernel/shutdown).
func (s *Server) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	k := s.o.Sockets
	var wg sync.WaitGroup
	wg.Go(func() {
		s.read(ctx, k.Shell, "shell", func(m *Message) {
			select {
			case s.shell <- m:
			case <-ctx.Done():
			}
		})
	})
	wg.Go(func() { s.read(ctx, k.Control, "control", func(m *Message) { s.control(ctx, m) }) })
	wg.Go(func() {
		s.read(ctx, k.Stdin, "stdin", func(m *Message) {
			if m.Header.MsgType != "input_reply" {
				return
			}
			select {
			case s.inputs <- m:
			default: // nobody waits for it
			}
		})
	})
	wg.Go(func() { s.serveShell(ctx) })
	select {
	case <-ctx.Done():
	case <-s.done:
	}
	cancel()
	k.Close() // ends the readers
	wg.Wait()
	return ctx.Err()
}

// read receives a socket's messages until it closes; a message that fails
// its checks is logged (the first, then every 1000th) and dropped.
func (s *Server) read(ctx context.Context, sock *Socket, name string, handle func(*Message)) {
	bad := 0
	for {
		m, err := sock.Recv()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if Closed(err) {
				return
			}
			if bad%1000 == 0 {
				s.o.Logger.Warn("dropped a message", "socket", name, "err", err, "dropped", bad+1)
			}
			bad++
			continue
		}
		select {
		case <-ctx.Done():
			return
		default:
		}
		handle(m)
	}
}

func (s *Server) serveShell(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-s.shell:
			s.publish(m, "status", map[string]string{"execution_state": "busy"})
			abort := s.dispatch(ctx, m)
			s.publish(m, "status", map[string]string{"execution_state": "idle"})
			s.abortQueued(ctx, abort)
		}
	}
}

// abortQueued answers the first n requests queued behind a failed
// execution (stop_on_error), those that were queued when it ended: execute
// requests with status aborted, as ipykernel does, others as usual.
func (s *Server) abortQueued(ctx context.Context, n int) {
	for ; n > 0; n-- {
		select {
		case m := <-s.shell:
			s.publish(m, "status", map[string]string{"execution_state": "busy"})
			if m.Header.MsgType == "execute_request" {
				s.reply(m, "execute_reply", map[string]any{"status": "aborted", "execution_count": s.count})
			} else {
				s.dispatch(ctx, m)
			}
			s.publish(m, "status", map[string]string{"execution_state": "idle"})
		default:
			return
		}
	}
}

// dispatch handles one shell request; for an execution that failed with
// stop_on_error, it returns how many requests were queued behind it.
func (s *Server) dispatch(ctx context.Context, m *Message) (abort int) {
	switch m.Header.MsgType {
	case "execute_request":
		return s.execute(ctx, m)
	case "kernel_info_request":
		s.reply(m, "kernel_info_reply", s.kernelInfo())
	case "complete_request":
		s.complete(ctx, m)
	case "inspect_request":
		s.inspect(ctx, m)
	case "is_complete_request":
		s.isComplete(ctx, m)
	case "history_request":
		s.history(ctx, m)
	case "comm_info_request":
		s.reply(m, "comm_info_reply", map[string]any{"status": "ok", "comms": map[string]any{}})
	case "shutdown_request":
		s.shutdown(ctx, m, s.o.Sockets.Shell)
	case "comm_open", "comm_msg", "comm_close":
		// No comm targets: ignored, as a kernel without them does.
	default:
		s.o.Logger.Info("unknown shell message", "msg_type", m.Header.MsgType)
	}
	return 0
}

func (s *Server) control(ctx context.Context, m *Message) {
	switch m.Header.MsgType {
	case "interrupt_request":
		s.replyOn(s.o.Sockets.Control, m, "interrupt_reply", statusOf(s.Interrupt(ctx)))
	case "shutdown_request":
		s.shutdown(ctx, m, s.o.Sockets.Control)
	case "kernel_info_request":
		s.replyOn(s.o.Sockets.Control, m, "kernel_info_reply", s.kernelInfo())
	default:
		s.replyOn(s.o.Sockets.Control, m, strings.TrimSuffix(m.Header.MsgType, "_request")+"_reply",
			errorContent("NotImplemented", "cellbox kernels do not serve "+m.Header.MsgType))
	}
}

// Interrupt interrupts the running code (a SIGINT sent to the kernel
// process, Jupyter's signal interrupt mode).
func (s *Server) Interrupt(ctx context.Context) error {
	s.mu.Lock()
	e := s.cur
	s.mu.Unlock()
	if e != nil { // sent, maybe not yet begun: the interrupt must come after it
		select {
		case <-e.started:
		case <-ctx.Done():
			return ctx.Err()
		}
		s.mu.Lock()
		running := s.cur == e
		s.mu.Unlock()
		if !running {
			return nil // it ended meanwhile: the interrupt must not reach the next one
		}
	}
	id := s.kernelNow()
	if id == "" {
		return nil // nothing runs yet
	}
	return s.o.Caller.Call(ctx, protocol.MethodKernelInterrupt, protocol.KernelIDParams{KernelID: id}, nil)
}

// shutdown shuts the cellbox kernel down and ends Serve. A restart is a
// shutdown too: Jupyter's kernel manager starts a new kernel process after
// this one exits.
func (s *Server) shutdown(ctx context.Context, m *Message, on *Socket) {
	var c struct {
		Restart bool `json:"restart"`
	}
	_ = json.Unmarshal(m.Content, &c)
	id, err := s.kernel(ctx)
	if err == nil {
		err = s.o.Caller.Call(ctx, protocol.MethodKernelShutdown, protocol.KernelIDParams{KernelID: id}, nil)
	}
	content := statusOf(err)
	content["restart"] = c.Restart
	s.replyOn(on, m, "shutdown_reply", content)
	s.publish(m, "shutdown_reply", content) // iopub too, as ipykernel 6
	s.doneOnce.Do(func() { close(s.done) })
}

func statusOf(err error) map[string]any {
	if err != nil {
		return errorContent("CellboxError", err.Error())
	}
	return map[string]any{"status": "ok"}
}

func errorContent(ename, evalue string) map[string]any {
	return map[string]any{"status": "error", "ename": ename, "evalue": evalue, "traceback": []string{ename + ": " + evalue}}
}

func (s *Server) kernelInfo() map[string]any {
	li := s.o.Language
	if s.kernelNow() != "" {
		li = s.li
	}
	if li.Mimetype == "" {
		li.Mimetype = map[string]string{"python": "text/x-python", "javascript": "application/javascript", "typescript": "text/typescript", "bash": "text/x-sh"}[li.Name]
	}
	info := map[string]any{
		"name": li.Name, "version": li.Version, "mimetype": li.Mimetype, "file_extension": li.FileExtension,
	}
	switch li.Name {
	case "python":
		info["pygments_lexer"] = "ipython3"
		info["codemirror_mode"] = map[string]any{"name": "ipython", "version": 3}
		info["nbconvert_exporter"] = "python"
	case "javascript":
		info["pygments_lexer"] = "javascript"
		info["codemirror_mode"] = "javascript"
	case "typescript":
		info["pygments_lexer"] = "typescript"
		info["codemirror_mode"] = "text/typescript"
	case "bash":
		info["pygments_lexer"] = "bash"
		info["codemirror_mode"] = "shell"
	}
	return map[string]any{
		"status": "ok", "protocol_version": ProtocolVersion,
		"implementation": "cellbox", "implementation_version": s.o.Version,
		"language_info": info, "banner": s.o.Banner, "help_links": []any{}, "debugger": false,
	}
}

// reply answers a shell request.
func (s *Server) reply(parent *Message, msgType string, content any) {
	s.replyOn(s.o.Sockets.Shell, parent, msgType, content)
}

func (s *Server) replyOn(sock *Socket, parent *Message, msgType string, content any) {
	m, err := s.session.New(msgType, parent, content)
	if err != nil {
		s.o.Logger.Error("make a reply", "msg_type", msgType, "err", err)
		return
	}
	m.Identities = parent.Identities
	if err := sock.Send(m); err != nil && !Closed(err) {
		s.o.Logger.Warn("send a reply", "msg_type", msgType, "err", err)
	}
}

// publish sends a message on iopub, its topic the message type.
func (s *Server) publish(parent *Message, msgType string, content any) {
	m, err := s.session.New(msgType, parent, content)
	if err != nil {
		s.o.Logger.Error("make an iopub message", "msg_type", msgType, "err", err)
		return
	}
	m.Identities = [][]byte{[]byte("kernel." + s.session.ID + "." + msgType)}
	if err := s.o.Sockets.IOPub.Send(m); err != nil && !Closed(err) {
		s.o.Logger.Warn("publish", "msg_type", msgType, "err", err)
	}
}

// camel turns a §7 error name into an exception-like one: kernel_dead →
// KernelDead.
func camel(name string) string {
	var b strings.Builder
	for _, w := range strings.Split(name, "_") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}
