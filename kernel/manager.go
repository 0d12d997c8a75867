package kernel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
)

// Options configure a Manager.
type Options struct {
	// Workspaces opens the workspaces kernels run in (required).
	Workspaces *workspace.Manager
	// Languages returns the host's languages (DetectLanguages); it may
	// block until they are known.
	Languages func() []Language
	Logger    *slog.Logger
	// MaxKernels bounds the kernels running at once (DefaultMaxKernels).
	MaxKernels int
	// MaxCodeBytes bounds one execution's code (DefaultMaxCodeBytes).
	MaxCodeBytes int
	// ReplayBytes bounds the output a kernel keeps for kernel/attach
	// (DefaultReplayBytes).
	ReplayBytes int
	// HistoryEntries bounds a kernel's history (DefaultHistoryEntries).
	HistoryEntries int
	// Grace is how long an interrupted execution that timed out may take
	// to stop before its kernel is restarted (DefaultGrace).
	Grace time.Duration
	// StartTimeout bounds a driver's start (DefaultStartTimeout).
	StartTimeout time.Duration
	// CullIdle shuts down kernels that no client is attached to and that
	// have been idle this long (0: never).
	CullIdle time.Duration
	// AuditDir holds the audit log of executions ("": none).
	AuditDir string
	// AuditMaxBytes is the size at which the audit log rotates
	// (DefaultAuditMaxBytes).
	AuditMaxBytes int64
}

// Defaults of Options.
const (
	DefaultReplayBytes    = 4 << 20
	DefaultHistoryEntries = 1000
	DefaultGrace          = 2 * time.Second
	DefaultStartTimeout   = 30 * time.Second
	DefaultAuditMaxBytes  = 16 << 20
)

// Manager runs the daemon's kernels.
type Manager struct {
	opts  Options
	log   *slog.Logger
	audit *auditLog

	mu      sync.Mutex // guards kernels, reserved, closed
	kernels map[string]*Kernel
	// reserved counts kernels starting, so MaxKernels holds under races.
	reserved int
	closed   bool

	stop chan struct{}

	// Execution counters for daemon/stats.
	total, ok, failed, timedOut, interrupted atomic.Int64
}

// Stats are the execution counters of daemon/stats.
type Stats struct {
	Total, OK, Error, Timeout, Interrupted int64
}

// NewManager returns a Manager.
func NewManager(opts Options) *Manager {
	if opts.Workspaces == nil {
		panic("kernel.NewManager: Options.Workspaces is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxKernels <= 0 {
		opts.MaxKernels = DefaultMaxKernels
	}
	if opts.MaxCodeBytes <= 0 {
		opts.MaxCodeBytes = DefaultMaxCodeBytes
	}
	if opts.ReplayBytes <= 0 {
		opts.ReplayBytes = DefaultReplayBytes
	}
	if opts.HistoryEntries <= 0 {
		opts.HistoryEntries = DefaultHistoryEntries
	}
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.AuditMaxBytes <= 0 {
		opts.AuditMaxBytes = DefaultAuditMaxBytes
	}
	m := &Manager{opts: opts, log: opts.Logger, kernels: make(map[string]*Kernel), stop: make(chan struct{})}
	if opts.AuditDir != "" {
		m.audit = newAuditLog(opts.AuditDir, opts.AuditMaxBytes, opts.Logger)
	}
	if opts.CullIdle > 0 {
		go m.cullLoop()
	}
	return m
}

// Stats returns the execution counters.
func (m *Manager) Stats() Stats {
	return Stats{Total: m.total.Load(), OK: m.ok.Load(), Error: m.failed.Load(), Timeout: m.timedOut.Load(), Interrupted: m.interrupted.Load()}
}

// MaxCodeBytes is the bound on one execution's code.
func (m *Manager) MaxCodeBytes() int { return m.opts.MaxCodeBytes }

func (m *Manager) language(id string) (Language, error) {
	var langs []Language
	if m.opts.Languages != nil {
		langs = m.opts.Languages()
	}
	known := make([]string, 0, len(langs))
	for _, l := range langs {
		if l.ID == id {
			if _, ok := drivers[id]; !ok {
				break
			}
			if !l.Available {
				return l, fmt.Errorf("%w: %s: %s", ErrLanguage, id, l.Reason)
			}
			return l, nil
		}
		known = append(known, l.ID)
	}
	return Language{}, fmt.Errorf("%w: invalid params for kernel/start: field \"language\" is %q; this daemon runs %s",
		ErrInvalid, id, strings.Join(known, ", "))
}

// Start starts a kernel; opener receives its notifications.
func (m *Manager) Start(ctx context.Context, p protocol.KernelStartParams, opener Sink) (*Kernel, error) {
	lang, err := m.language(p.Language)
	if err != nil {
		return nil, err
	}
	switch p.Sandbox {
	case "", protocol.SandboxModeRequired, protocol.SandboxModeBestEffort:
	default:
		return nil, fmt.Errorf("%w: invalid params for kernel/start: field \"sandbox\" must be \"required\" or \"best-effort\", got %q", ErrInvalid, p.Sandbox)
	}
	network := p.Network
	switch network {
	case "":
		network = protocol.NetworkModeNone
	case protocol.NetworkModeNone, protocol.NetworkModeHost:
	default:
		return nil, fmt.Errorf("%w: invalid params for kernel/start: field \"network\" must be \"none\" or \"host\", got %q", ErrInvalid, p.Network)
	}
	limits, err := workspace.ResolveLimits(p.Limits, workspace.DefaultLimits)
	if err != nil {
		return nil, err
	}
	dir, err := kernelDir(p.Cwd)
	if err != nil {
		return nil, err
	}
	env, err := kernelEnv(p.Env)
	if err != nil {
		return nil, err
	}
	if err := m.reserve(); err != nil {
		return nil, err
	}
	reserved := true
	defer func() {
		if reserved {
			m.unreserve()
		}
	}()

	id := newID()
	var ws *workspace.Workspace
	ownWS := p.WorkspaceID == ""
	if ownWS {
		ws, err = m.opts.Workspaces.Open(ctx, protocol.WorkspaceOpenParams{Mode: protocol.WorkspaceModeScratch, Name: "kernel-" + id})
	} else {
		ws, err = m.opts.Workspaces.Get(p.WorkspaceID)
	}
	if err != nil {
		return nil, err
	}
	now := time.Now()
	k := &Kernel{
		m: m, id: id, lang: p.Language, langInfo: lang, ws: ws, ownWS: ownWS,
		limits: limits, env: env, dir: dir, network: network,
		sinks:     map[Sink]struct{}{},
		state:     protocol.KernelStateStarting,
		startedAt: now, lastActivity: now,
		drainBuf: make([]byte, readChunk),
		wake:     make(chan struct{}, 1),
		closed:   make(chan struct{}),
	}
	if opener != nil {
		k.sinks[opener] = struct{}{}
	}
	k.opener = opener
	d, err := k.startDriver(ctx)
	if err != nil {
		if ownWS {
			_ = m.opts.Workspaces.Close(context.WithoutCancel(ctx), ws.ID(), true)
		}
		return nil, err
	}
	k.drv = d
	k.state = protocol.KernelStateIdle
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		k.shutdown(context.WithoutCancel(ctx))
		return nil, ErrClosed
	}
	m.kernels[id] = k
	m.reserved--
	reserved = false
	m.mu.Unlock()
	go k.loop()
	go k.watch(d)
	k.notifyStatus(protocol.KernelStateIdle, "")
	m.log.Info("kernel started", "kernel", id, "language", k.lang, "workspace", ws.ID(), "version", d.version)
	return k, nil
}

func (m *Manager) reserve() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if len(m.kernels)+m.reserved >= m.opts.MaxKernels {
		return fmt.Errorf("%w: %d kernels run, the most this daemon runs at once (--max-kernels); shut one down", ErrLimit, m.opts.MaxKernels)
	}
	m.reserved++
	return nil
}

func (m *Manager) unreserve() {
	m.mu.Lock()
	m.reserved--
	m.mu.Unlock()
}

// kernelDir is the driver's working directory: cwd relative to /workspace.
func kernelDir(cwd string) (string, error) {
	if cwd == "" {
		return "/workspace", nil
	}
	if strings.HasPrefix(cwd, "/") {
		clean := path.Clean(cwd)
		if clean == "/workspace" || strings.HasPrefix(clean, "/workspace/") {
			return clean, nil
		}
		return "", fmt.Errorf("%w: kernel/start cwd %q is absolute; it is relative to the workspace", workspace.ErrPathOutside, cwd)
	}
	clean := path.Clean(cwd)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%w: kernel/start cwd %q climbs out of the workspace", workspace.ErrPathOutside, cwd)
	}
	return path.Join("/workspace", clean), nil
}

// kernelEnv is the sandbox's default environment with extra added.
func kernelEnv(extra map[string]string) ([]string, error) {
	env := workspace.DefaultEnv()
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := extra[k]
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("%w: invalid params for kernel/start: field \"env\" has a bad entry %q", ErrInvalid, k)
		}
		env = setEnv(env, k, v)
	}
	return env, nil
}

func setEnv(env []string, k, v string) []string {
	for i, kv := range env {
		if strings.HasPrefix(kv, k+"=") {
			env[i] = k + "=" + v
			return env
		}
	}
	return append(env, k+"="+v)
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "k-" + hex.EncodeToString(b[:])
}

// Get returns a kernel.
func (m *Manager) Get(id string) (*Kernel, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, ok := m.kernels[id]
	if !ok {
		return nil, fmt.Errorf("%w: no kernel %q", ErrNotFound, id)
	}
	return k, nil
}

// List is kernel/list.
func (m *Manager) List() []protocol.KernelInfo {
	ks := m.snapshot()
	out := make([]protocol.KernelInfo, 0, len(ks))
	for _, k := range ks {
		out = append(out, k.Info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StartedAt.Before(out[j].StartedAt) })
	return out
}

// Len is how many kernels run.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.kernels)
}

func (m *Manager) snapshot() []*Kernel {
	m.mu.Lock()
	defer m.mu.Unlock()
	ks := make([]*Kernel, 0, len(m.kernels))
	for _, k := range m.kernels {
		ks = append(ks, k)
	}
	return ks
}

// Shutdown is kernel/shutdown.
func (m *Manager) Shutdown(ctx context.Context, id string) error {
	k, err := m.Get(id)
	if err != nil {
		return err
	}
	k.shutdown(ctx)
	return nil
}

// DetachAll detaches s from every kernel (its connection ended).
func (m *Manager) DetachAll(s Sink) {
	for _, k := range m.snapshot() {
		k.Detach(s)
	}
}

// ShutdownOpenedBy shuts down the kernels s started (§2 shutdown).
func (m *Manager) ShutdownOpenedBy(ctx context.Context, s Sink) {
	var wg sync.WaitGroup
	for _, k := range m.snapshot() {
		if k.opener == s {
			wg.Go(func() { k.shutdown(ctx) })
		}
	}
	wg.Wait()
}

// Close shuts every kernel down (the daemon is ending).
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	close(m.stop)
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, k := range m.snapshot() {
		wg.Go(func() { k.shutdown(context.Background()) })
	}
	wg.Wait()
	if m.audit != nil {
		m.audit.close()
	}
}

func (m *Manager) forget(k *Kernel) {
	m.mu.Lock()
	delete(m.kernels, k.id)
	m.mu.Unlock()
}

// cullLoop shuts down kernels that no client is attached to and that have
// been idle for CullIdle (PROTOCOL.md §2).
func (m *Manager) cullLoop() {
	every := min(m.opts.CullIdle/4, time.Minute)
	every = max(every, 100*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		for _, k := range m.snapshot() {
			if k.idleFor() >= m.opts.CullIdle {
				m.log.Info("culling an idle kernel", "kernel", k.id, "idle", m.opts.CullIdle)
				k.shutdown(context.Background())
			}
		}
	}
}
