package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/cellbox-dev/cellbox/protocol"
)

// session is what one MCP session works on: a connection to the daemon,
// the overlay workspace of its root and name, a kernel per language, and
// the executions it ran. Workspaces and kernels are the daemon's, so they
// outlive the session: a new session (or a new server) opens the same
// workspace with its changes and attaches to its kernels.
//
// When the daemon connection is lost, the next tool call dials again (a
// daemon that went away is started again, as `cellbox connect` does);
// executions that were running report the loss.
type session struct {
	srv        *Server
	root, name string
	log        *slog.Logger

	// dialMu serialises connecting, kernelMu finding and starting kernels.
	// Lock order: kernelMu, dialMu, mu; e.mu after mu.
	dialMu   sync.Mutex
	kernelMu sync.Mutex

	mu   sync.Mutex // guards the fields below
	conn Conn
	ws   protocol.WorkspaceInfo
	// kernels are the kernel ids of conn's workspace by language; lost
	// names the languages whose kernel (and its memory) was lost, for the
	// note of the next run.
	kernels map[string]string
	lost    map[string]string
	execs   map[string]*execution
	order   []*execution // oldest first
	// progress routes the daemon's $/progress by token.
	progress map[string]func(protocol.ProgressValue)
	nextTok  int
	// noAuto: the daemon takes no automatic checkpoints (autoCheckpoint).
	noAuto bool
	closed bool

	wg sync.WaitGroup // the executions' goroutines (added under mu while not closed)
}

func newSession(srv *Server, root, name string) *session {
	return &session{
		srv: srv, root: root, name: name,
		log:      srv.log.With("root", root, "name", name),
		kernels:  map[string]string{},
		lost:     map[string]string{},
		execs:    map[string]*execution{},
		progress: map[string]func(protocol.ProgressValue){},
	}
}

// errClosed is a call on a session whose MCP session has ended.
var errClosed = errors.New("the MCP session has ended")

// connErr is an error of the connection to the daemon (as opposed to an
// error the daemon answered): the tool result calls it a sandbox failure.
type connErr struct{ err error }

func (e *connErr) Error() string { return e.err.Error() }
func (e *connErr) Unwrap() error { return e.err }

// connect returns the connection to the daemon and the workspace, dialling
// and opening it when there is none or the last one was lost.
func (s *session) connect(ctx context.Context) (Conn, protocol.WorkspaceInfo, error) {
	s.dialMu.Lock()
	defer s.dialMu.Unlock()
	s.mu.Lock()
	c, ws, closed := s.conn, s.ws, s.closed
	s.mu.Unlock()
	if closed {
		return nil, ws, errClosed
	}
	if c != nil {
		select {
		case <-c.Done():
			s.dropConn(c)
		default:
			return c, ws, nil
		}
	}
	c, err := s.srv.opts.Dial(ctx, s.notify)
	if err != nil {
		return nil, ws, &connErr{fmt.Errorf("cannot reach the cellbox daemon: %w", err)}
	}
	p := protocol.WorkspaceOpenParams{Root: s.root, Mode: protocol.WorkspaceModeOverlay, Name: s.name}
	if err := c.Call(ctx, protocol.MethodWorkspaceOpen, p, &ws); err != nil {
		_ = c.Close()
		return nil, ws, fmt.Errorf("open the workspace of %s: %w", s.root, err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = c.Close()
		return nil, ws, errClosed
	}
	s.conn, s.ws = c, ws
	s.mu.Unlock()
	s.log.Info("workspace open", "workspace", ws.WorkspaceID)
	// Kernels of this workspace that run already (this server's before a
	// restart, an editor's) are used rather than new ones.
	if err := s.adoptKernels(ctx, c, ws, ""); err != nil {
		s.log.Warn("find the workspace's kernels", "err", err)
	}
	return c, ws, nil
}

// dropConn forgets a lost connection: its kernels are looked up again on
// the next one (they live on in the daemon if it does).
func (s *session) dropConn(c Conn) {
	s.mu.Lock()
	if s.conn == c {
		s.conn = nil
		for lang, id := range s.kernels {
			s.lost[lang] = "the connection to the daemon was lost; kernel " + id + " may be gone with its memory"
		}
		clear(s.kernels)
	}
	s.mu.Unlock()
	_ = c.Close()
	s.log.Warn("connection to the daemon lost")
}

// adoptKernels attaches to the newest live kernel of each language (or of
// language only) of the workspace that the daemon runs already.
func (s *session) adoptKernels(ctx context.Context, c Conn, ws protocol.WorkspaceInfo, language string) error {
	var list protocol.KernelListResult
	if err := c.Call(ctx, protocol.MethodKernelList, protocol.KernelListParams{}, &list); err != nil {
		return err
	}
	best := map[string]protocol.KernelInfo{}
	for _, k := range list.Kernels {
		if k.WorkspaceID != ws.WorkspaceID || k.State == protocol.KernelStateDead || language != "" && k.Language != language {
			continue
		}
		if b, ok := best[k.Language]; !ok || k.LastActivity.After(b.LastActivity) {
			best[k.Language] = k
		}
	}
	for lang, k := range best {
		if err := c.Call(ctx, protocol.MethodKernelAttach, protocol.KernelAttachParams{KernelID: k.KernelID}, nil); err != nil {
			s.log.Warn("attach to the workspace's kernel", "kernel", k.KernelID, "err", err)
			continue
		}
		s.mu.Lock()
		s.kernels[lang] = k.KernelID
		delete(s.lost, lang)
		s.mu.Unlock()
		s.log.Info("attached to kernel", "kernel", k.KernelID, "language", lang, "executions", k.ExecutionCount)
	}
	return nil
}

// kernel returns the workspace's kernel of language, attaching to one the
// daemon runs or starting one. note says when a kernel the session used
// before was lost (its memory with it).
func (s *session) kernel(ctx context.Context, language string) (c Conn, kernelID, note string, err error) {
	s.kernelMu.Lock()
	defer s.kernelMu.Unlock()
	c, ws, err := s.connect(ctx)
	if err != nil {
		return nil, "", "", err
	}
	s.mu.Lock()
	id, lost := s.kernels[language], s.lost[language]
	s.mu.Unlock()
	if id != "" {
		return c, id, "", nil
	}
	if err := s.adoptKernels(ctx, c, ws, language); err != nil {
		return nil, "", "", fmt.Errorf("find the workspace's %s kernel: %w", language, err)
	}
	s.mu.Lock()
	id = s.kernels[language]
	s.mu.Unlock()
	if id != "" {
		return c, id, "", nil
	}
	var res protocol.KernelStartResult
	p := protocol.KernelStartParams{Language: language, WorkspaceID: ws.WorkspaceID, Env: kernelEnv}
	if err := c.Call(ctx, protocol.MethodKernelStart, p, &res); err != nil {
		return nil, "", "", fmt.Errorf("start a %s kernel: %w", language, err)
	}
	s.mu.Lock()
	s.kernels[language] = res.KernelID
	delete(s.lost, language)
	s.mu.Unlock()
	s.log.Info("kernel started", "kernel", res.KernelID, "language", language)
	if lost != "" {
		note = fmt.Sprintf("A new %s kernel was started (%s): variables and imports of earlier runs are gone.", language, lost)
	}
	return c, res.KernelID, note, nil
}

// kernelEnv is the environment of the kernels the server starts. Python
// writes no bytecode caches: an edit that keeps a module's size within the
// same second as its last import would otherwise be imported from the
// stale cache, and __pycache__ directories would be changes to review.
var kernelEnv = map[string]string{"PYTHONDONTWRITEBYTECODE": "1"}

// forgetKernel drops a kernel that is dead or gone, so that the next run
// of its language starts another.
func (s *session) forgetKernel(kernelID, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for lang, id := range s.kernels {
		if id == kernelID {
			delete(s.kernels, lang)
			s.lost[lang] = why
		}
	}
}

// notify takes the daemon's notifications, on the connection's read
// goroutine: it only looks up and appends.
func (s *session) notify(method string, params json.RawMessage) {
	switch method {
	case protocol.MethodKernelOutput:
		var p protocol.KernelOutputParams
		if json.Unmarshal(params, &p) != nil {
			return
		}
		s.mu.Lock()
		e := s.execs[p.ExecutionID]
		s.mu.Unlock()
		if e != nil {
			e.add(&p)
		}
	case protocol.MethodKernelStatus:
		var p protocol.KernelStatusParams
		if json.Unmarshal(params, &p) == nil && p.State == protocol.KernelStateDead {
			s.forgetKernel(p.KernelID, "kernel "+p.KernelID+" died: "+p.Reason)
		}
	case protocol.MethodProgress:
		var p protocol.ProgressParams
		if json.Unmarshal(params, &p) != nil {
			return
		}
		tok, _ := p.Token.(string)
		s.mu.Lock()
		f := s.progress[tok]
		s.mu.Unlock()
		if f != nil {
			f(p.Value)
		}
	}
}

// progressToken registers f for the daemon's $/progress under a new
// token; done unregisters it.
func (s *session) progressToken(f func(protocol.ProgressValue)) (token string, done func()) {
	s.mu.Lock()
	s.nextTok++
	token = fmt.Sprintf("mcp-progress-%d", s.nextTok)
	s.progress[token] = f
	s.mu.Unlock()
	return token, func() {
		s.mu.Lock()
		delete(s.progress, token)
		s.mu.Unlock()
	}
}

// addExecution keeps e, dropping the oldest finished executions past
// keptExecutions or keptBytes, and counts the goroutine that runs it
// (which calls s.wg.Done).
func (s *session) addExecution(e *execution) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	s.wg.Add(1)
	s.execs[e.id] = e
	s.order = append(s.order, e)
	total := 0
	for _, x := range s.order {
		total += x.size()
	}
	for i := 0; i < len(s.order) && (len(s.order) > keptExecutions || total > keptBytes); {
		x := s.order[i]
		if x == e || x.running() {
			i++
			continue
		}
		total -= x.size()
		delete(s.execs, x.id)
		s.order = slices.Delete(s.order, i, i+1)
	}
	return nil
}

// execution is the kept execution id.
func (s *session) execution(id string) (*execution, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.execs[id]
	return e, ok
}

// running is the newest execution still running, if any.
func (s *session) running() *execution {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.order) - 1; i >= 0; i-- {
		if s.order[i].running() {
			return s.order[i]
		}
	}
	return nil
}

// close ends the session: its daemon connection is closed (kernels,
// workspace and running code stay in the daemon), and its goroutines end.
func (s *session) close() {
	s.mu.Lock()
	s.closed = true
	c := s.conn
	s.conn = nil
	s.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
	s.wg.Wait()
}
