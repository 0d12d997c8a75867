package kernel

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
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
	// ts runs esbuild for typescript kernels (tsworker.go).
	ts tsWorker

	// mu guards kernels, reserved and closed; it is taken with no other
	// lock held.
	mu      sync.Mutex
	kernels map[string]*Kernel
	// reserved counts kernels starting, so MaxKernels holds under races.
	reserved int
	closed   bool

	stop chan struct{}  // closed by Close: ends cullLoop
	wg   sync.WaitGroup // cullLoop

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
		m.wg.Go(m.cullLoop)
	}
	return m
}

// Stats returns the execution counters.
func (m *Manager) Stats() Stats {
	return Stats{Total: m.total.Load(), OK: m.ok.Load(), Error: m.failed.Load(), Timeout: m.timedOut.Load(), Interrupted: m.interrupted.Load()}
}

// MaxCodeBytes is the bound on one execution's code.
func (m *Manager) MaxCodeBytes() int { return m.opts.MaxCodeBytes }

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
		if k.out.openedBy(s) {
			wg.Go(func() { k.shutdown(ctx) })
		}
	}
	wg.Wait()
}

// Close shuts every kernel down and waits for the manager's goroutines
// (the daemon is ending); Start fails afterwards.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	close(m.stop)
	m.mu.Unlock()
	m.wg.Wait()
	var wg sync.WaitGroup
	for _, k := range m.snapshot() {
		wg.Go(func() { k.shutdown(context.Background()) })
	}
	wg.Wait()
	m.ts.close()
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

// RunningIn names the execution running in the workspace's kernels when
// exactly one kernel of it runs one (ok false otherwise): what asked for a
// connection its proxies saw, which knows a sandbox, not a process.
func (m *Manager) RunningIn(workspaceID string) (kernelID, executionID string, ok bool) {
	for _, k := range m.snapshot() {
		if k.ws.ID() != workspaceID {
			continue
		}
		k.mu.Lock()
		cur := k.current
		k.mu.Unlock()
		if cur == nil {
			continue
		}
		if ok {
			return "", "", false // two: cannot tell
		}
		kernelID, executionID, ok = k.id, cur.id, true
	}
	return kernelID, executionID, ok
}
