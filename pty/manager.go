package pty

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
)

// Defaults of Options; doc.go says why these numbers.
const (
	// DefaultMaxPtys bounds the terminals one daemon runs at once
	// (initialize reports it as capabilities.limits.maxPtys).
	DefaultMaxPtys = 64
	// DefaultMaxPerWorkspace bounds the terminals of one workspace.
	DefaultMaxPerWorkspace = 16
	// DefaultScrollbackBytes bounds each terminal's scrollback ring.
	DefaultScrollbackBytes = 1 << 20
	// DefaultHighWater and DefaultLowWater: a terminal stops reading its
	// program's output when an attached connection has more than
	// HighWater bytes of it unacknowledged, and reads again when acks bring
	// that under LowWater.
	DefaultHighWater = 256 << 10
	DefaultLowWater  = 128 << 10
	// DefaultExitedTTL is how long an ended terminal stays attachable (for
	// its last output and pty/exit) unless closed.
	DefaultExitedTTL = time.Minute
)

// ChunkBytes bounds the terminal bytes of one pty/output (before encoding).
const ChunkBytes = 64 << 10

// MaxInputBytes bounds the pty/write input a terminal holds for a program
// that does not read it.
const MaxInputBytes = 1 << 20

// Options configure a Manager.
type Options struct {
	// Workspaces runs the workspaces (required).
	Workspaces *workspace.Manager
	// MaxPtys, MaxPerWorkspace: terminals running at once in the daemon
	// and in one workspace (0: the defaults); more are -32012.
	MaxPtys, MaxPerWorkspace int
	// ScrollbackBytes bounds each terminal's scrollback (0: the default).
	ScrollbackBytes int
	// HighWater and LowWater are flow control's marks (0: the defaults).
	HighWater, LowWater int
	// ExitedTTL: how long an ended terminal stays attachable (0: the default).
	ExitedTTL time.Duration
	// Shell is the default command's first choice ("": LoginShell()).
	Shell string
	// CullIdle closes a terminal that no connection is attached to and that
	// has had no output or input for this long (PROTOCOL.md §2); 0 never.
	CullIdle time.Duration
	Logger   *slog.Logger
}

// Manager owns the daemon's terminals.
type Manager struct {
	opts Options
	log  *slog.Logger
	wg   sync.WaitGroup // every session goroutine

	mu       sync.Mutex // guards the fields below
	sessions map[string]*Session
	running  int            // started or starting, not ended
	perWS    map[string]int // running, by workspace id
	exited   []*Session     // ended and still attachable, oldest first
	closed   bool
	stop     chan struct{} // closed by Close: ends cull
}

// NewManager returns a Manager.
func NewManager(opts Options) *Manager {
	if opts.Workspaces == nil {
		panic("pty.NewManager: Options.Workspaces is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxPtys <= 0 {
		opts.MaxPtys = DefaultMaxPtys
	}
	if opts.MaxPerWorkspace <= 0 {
		opts.MaxPerWorkspace = DefaultMaxPerWorkspace
	}
	if opts.ScrollbackBytes <= 0 {
		opts.ScrollbackBytes = DefaultScrollbackBytes
	}
	if opts.HighWater <= 0 {
		opts.HighWater = DefaultHighWater
	}
	if opts.LowWater <= 0 || opts.LowWater >= opts.HighWater {
		opts.LowWater = min(DefaultLowWater, opts.HighWater/2)
	}
	if opts.ExitedTTL <= 0 {
		opts.ExitedTTL = DefaultExitedTTL
	}
	if opts.Shell == "" {
		opts.Shell = LoginShell()
	}
	m := &Manager{
		opts:     opts,
		log:      opts.Logger,
		sessions: make(map[string]*Session),
		perWS:    make(map[string]int),
		stop:     make(chan struct{}),
	}
	if opts.CullIdle > 0 {
		m.wg.Add(1)
		go m.cull()
	}
	return m
}

// cull closes detached terminals idle for longer than CullIdle.
func (m *Manager) cull() {
	defer m.wg.Done()
	t := time.NewTicker(min(max(m.opts.CullIdle/4, 10*time.Millisecond), time.Minute))
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		for _, s := range m.snapshot() {
			if s.idleFor() > m.opts.CullIdle {
				m.log.Info("closing an idle terminal no client is attached to", "pty", s.id, "idle", m.opts.CullIdle)
				s.close(context.Background())
			}
		}
	}
}

// Open starts a terminal, PROTOCOL.md §5 pty/open, with opener attached.
// With p.WorkspaceID it runs in that workspace's sandbox; with neither it
// and p.KernelID, in a fresh scratch workspace of its own, discarded when
// the program ends. p.KernelID must have been resolved to its workspace by
// the caller (pty cannot know kernels).
func (m *Manager) Open(ctx context.Context, p protocol.PtyOpenParams, opener Sink) (*Session, error) {
	if p.KernelID != "" {
		return nil, fmt.Errorf("%w: field \"kernelId\" must be resolved to its workspace before pty.Open", ErrInvalid)
	}
	if err := checkSize(p.Cols, p.Rows); err != nil {
		return nil, err
	}
	enc, err := checkEncoding(p.Encoding)
	if err != nil {
		return nil, err
	}
	argv, err := m.command(p.Command)
	if err != nil {
		return nil, err
	}
	env, err := buildEnv(p.Env)
	if err != nil {
		return nil, err
	}
	dir, err := workDir(p.Cwd)
	if err != nil {
		return nil, err
	}
	limits, err := workspace.ResolveLimits(nil, workspace.DefaultLimits)
	if err != nil {
		return nil, err
	}

	// Reserve a place in the daemon, then in the workspace; every failure
	// after this gives them back.
	if err := m.reserve(""); err != nil {
		return nil, err
	}
	var w *workspace.Workspace
	own := p.WorkspaceID == ""
	if own {
		w, err = m.opts.Workspaces.Open(ctx, protocol.WorkspaceOpenParams{Mode: protocol.WorkspaceModeScratch})
	} else {
		w, err = m.opts.Workspaces.Get(p.WorkspaceID)
	}
	if err != nil {
		m.release("")
		return nil, err
	}
	undo := func() {
		m.release("")
		if own {
			_ = m.opts.Workspaces.CloseWorkspace(context.WithoutCancel(ctx), w.ID(), true)
		}
	}
	if err := m.reserve(w.ID()); err != nil {
		undo()
		return nil, err
	}
	undoWS := func() { m.release(w.ID()); undo() }

	// A terminal joins the workspace's sandbox with the network it runs
	// with (a kernel may have asked for the host's), unless it asks for
	// one itself; none and allowlist set the workspace's policy (§9).
	network := w.Network()
	_, rules, err := workspace.ParseNetwork(p.Network, p.Allow)
	switch {
	case err != nil:
		undoWS()
		return nil, fmt.Errorf("invalid params for pty/open: %w", err)
	case p.Network == protocol.NetworkModeHost:
		network = protocol.NetworkModeHost
	case p.Network != "":
		if err := w.SetNetwork(p.Network, rules); err != nil {
			undoWS()
			return nil, err
		}
	}
	spec := workspace.ProcSpec{Argv: argv, Env: env, Dir: dir, Limits: limits, Network: network,
		PTY: &workspace.WinSize{Cols: uint16(p.Cols), Rows: uint16(p.Rows)}}
	proc, err := w.Spawn(ctx, spec)
	if err != nil {
		undoWS()
		if w.Sandbox() != nil && !errors.Is(err, context.Canceled) {
			// The sandbox runs: the program could not start (not found,
			// no such cwd).
			return nil, fmt.Errorf("%w: %v", ErrStart, err)
		}
		return nil, err
	}
	s := &Session{
		m: m, id: newID(), ws: w, ownWS: own, proc: proc, opener: opener, enc: enc,
		done: make(chan struct{}), subs: make(map[Sink]*sub), ring: newRing(m.opts.ScrollbackBytes),
		size: [2]int{p.Cols, p.Rows}, inKick: make(chan struct{}, 1),
	}
	s.touch()
	s.cond = sync.NewCond(&s.mu)
	m.mu.Lock()
	closed := m.closed
	if !closed {
		m.sessions[s.id] = s
	}
	m.mu.Unlock()
	if err := s.start(); err != nil || closed {
		_ = proc.SignalTree(syscall.SIGKILL)
		_, _ = proc.Wait()
		if proc.PTY != nil {
			proc.PTY.Close()
		}
		m.mu.Lock()
		delete(m.sessions, s.id)
		m.mu.Unlock()
		undoWS()
		if closed {
			return nil, ErrClosed
		}
		return nil, err
	}
	m.log.Info("terminal opened", "pty", s.id, "workspace", w.ID(), "argv0", argv[0], "cols", p.Cols, "rows", p.Rows)
	return s, nil
}

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "pty-" + hex.EncodeToString(b)
}

// reserve takes a running place in the daemon (wsID "") or in a workspace.
func (m *Manager) reserve(wsID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if wsID == "" {
		if m.running >= m.opts.MaxPtys {
			return fmt.Errorf("%w: %d terminals are running, the daemon's limit (--max-terminals; close one with pty/close)", ErrLimit, m.running)
		}
		m.running++
		return nil
	}
	if n := m.perWS[wsID]; n >= m.opts.MaxPerWorkspace {
		return fmt.Errorf("%w: workspace %s has %d terminals running, its limit (close one with pty/close)", ErrLimit, wsID, n)
	}
	m.perWS[wsID]++
	return nil
}

func (m *Manager) release(wsID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if wsID == "" {
		m.running--
		return
	}
	if m.perWS[wsID]--; m.perWS[wsID] <= 0 {
		delete(m.perWS, wsID)
	}
}

// releasePlaces gives back a session's running places, in the daemon and
// in its workspace, once its program ended and before pty/exit goes out.
func (m *Manager) releasePlaces(s *Session) {
	m.release(s.ws.ID())
	m.release("")
}

// ended is called by a session once pty/exit went out: its own workspace
// is discarded, and it stays attachable for ExitedTTL (the oldest ended
// ones go first past MaxPtys of them).
func (m *Manager) ended(s *Session) {
	if s.ownWS {
		if err := m.opts.Workspaces.CloseWorkspace(context.Background(), s.ws.ID(), true); err != nil {
			m.log.Warn("closing a terminal's own workspace", "pty", s.id, "workspace", s.ws.ID(), "err", err)
		}
	}
	m.mu.Lock()
	if _, ok := m.sessions[s.id]; ok && !m.closed {
		m.exited = append(m.exited, s)
		if len(m.exited) > m.opts.MaxPtys {
			m.forgetLocked(m.exited[0])
		}
		s.ttl = time.AfterFunc(m.opts.ExitedTTL, func() { m.forget(s) })
	} else {
		delete(m.sessions, s.id)
	}
	m.mu.Unlock()
	if exit := s.Exit(); exit != nil {
		m.log.Info("terminal ended", "pty", s.id, "exit_code", exit.ExitCode, "signal", exit.Signal)
	}
}

// forget removes an ended session.
func (m *Manager) forget(s *Session) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgetLocked(s)
}

func (m *Manager) forgetLocked(s *Session) {
	if s.ttl != nil {
		s.ttl.Stop()
		s.ttl = nil
	}
	if m.sessions[s.id] == s {
		delete(m.sessions, s.id)
	}
	for i, x := range m.exited {
		if x == s {
			m.exited = append(m.exited[:i], m.exited[i+1:]...)
			break
		}
	}
}

// Get returns a terminal, running or ended but not yet forgotten.
func (m *Manager) Get(id string) (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.sessions[id]; ok {
		return s, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
}

// CloseSession is pty/close: the program and everything it started are
// killed (pty/exit still goes out), and the terminal is forgotten.
func (m *Manager) CloseSession(ctx context.Context, id string) error {
	s, err := m.Get(id)
	if err != nil {
		return err
	}
	s.close(ctx)
	m.forget(s)
	return nil
}

// Len is the number of terminals running.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running
}

// DetachAll detaches k from every terminal: its connection ended. The
// terminals run on (PROTOCOL.md §2 ownership).
func (m *Manager) DetachAll(k Sink) {
	for _, s := range m.snapshot() {
		s.Detach(k)
	}
}

// CloseOpenedBy closes every terminal k opened: its client sent shutdown
// (PROTOCOL.md §2: the ptys of this connection are stopped). A terminal
// dies with its opener's shutdown even when other connections are
// attached to it; attaching never makes a connection an owner.
func (m *Manager) CloseOpenedBy(ctx context.Context, k Sink) {
	var wg sync.WaitGroup
	for _, s := range m.snapshot() {
		if s.opener != k {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.close(ctx)
			m.forget(s)
		}()
	}
	wg.Wait()
}

// Close closes every terminal and waits for their goroutines (the daemon
// is ending); Open fails afterwards.
func (m *Manager) Close() {
	m.mu.Lock()
	if !m.closed {
		close(m.stop)
	}
	m.closed = true
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range m.snapshot() {
		wg.Add(1)
		go func() { defer wg.Done(); s.close(context.Background()) }()
	}
	wg.Wait()
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeWait):
		m.log.Warn("terminals still ending after shutdown")
	}
}

func (m *Manager) snapshot() []*Session {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		out = append(out, s)
	}
	return out
}
