package kernel

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
)

// Sink receives a kernel's notifications: a connection that started it,
// attached to it, or is running an execution on it.
//
// A kernel calls its sinks one at a time, in seq order, with its output
// lock held: a Sink must not call back into the kernel, and one that blocks
// (a client that stops reading) holds up the kernel's output, so the code
// blocks on write and memory stays bounded. A Sink whose KernelOutput fails
// is detached.
type Sink interface {
	KernelOutput(protocol.KernelOutputParams) error
	KernelStatus(protocol.KernelStatusParams) error
}

// Kernel is a persistent interpreter in a workspace's sandbox.
//
// Output flows one way: the driver's read loop reports what it reads into
// out (a reporter), which numbers it, keeps it for replay and sends it to
// the sinks; out calls nothing of the kernel's. Input requests reach the
// kernel as a prompter.
//
// Lock order: output.mu before output.subMu; apart from that pair, none of
// the kernel's mutexes is held while another is taken (Kernel.mu,
// output.mu, driver.wmu, driver.mu, Manager.mu, auditLog.mu). output.mu is
// held while sinks are called, so only delivery waits for it: who is
// attached (kernel/list, detach, culling) is output.subMu's.
type Kernel struct {
	m        *Manager
	id       string
	lang     string
	langInfo Language
	interp   interpreter // what runs the driver (interpreters.go)
	ws       *workspace.Workspace
	ownWS    bool // a scratch workspace of its own, removed at shutdown
	limits   protocol.Limits
	env      []string
	dir      string
	network  protocol.NetworkMode

	// out is the kernel's kernel/output and kernel/status notifications on
	// their way to the sinks (output.go); it has its own lock.
	out *output

	// wg counts the kernel's goroutines (the execution loop, a watch per
	// driver, input requests waiting for the client); shutdown waits for
	// them. They are added before Start publishes the kernel, or later
	// under mu while shut is false (spawn, restart), never during Wait.
	wg sync.WaitGroup

	// mu guards the fields below; it is taken with no other lock held.
	mu           sync.Mutex
	drv          *driver
	state        protocol.KernelState
	deadReason   string
	queue        []*execution
	current      *execution
	count        int
	history      []protocol.HistoryEntry
	startedAt    time.Time
	lastActivity time.Time
	restarting   bool
	restarted    chan struct{} // closed when the restart under way ends
	shut         bool
	nextReq      int

	wake   chan struct{} // the queue changed
	closed chan struct{} // closed when shutdown begins: the loop and a start under way stop
	ended  chan struct{} // closed when shutdown is done
}

// ID is the kernel's id.
func (k *Kernel) ID() string { return k.id }

// Workspace is the workspace the kernel runs in.
func (k *Kernel) Workspace() *workspace.Workspace { return k.ws }

// StartResult is kernel/start's result.
func (k *Kernel) StartResult() protocol.KernelStartResult {
	k.mu.Lock()
	d := k.drv
	k.mu.Unlock()
	v := d.version
	if v == "" {
		v = k.langInfo.Version
	}
	spec := drivers[k.lang]
	info := protocol.LanguageInfo{Name: k.lang, Version: v, FileExtension: spec.extension, Mimetype: spec.mimetype}
	d.mu.Lock()
	if d.langInfo != nil {
		// A Jupyter kernel's own language_info.
		info = *d.langInfo
		info.Version = v
	}
	d.mu.Unlock()
	var sb protocol.SandboxInfo
	if l, ok := k.ws.SandboxLayers(); ok {
		sb = protocol.SandboxInfo{
			UserNamespaces: l.UserNamespaces, Overlay: l.Overlay, PidNamespace: l.PidNamespace,
			NetworkNamespace: l.NetworkNamespace, Seccomp: l.Seccomp, Landlock: l.Landlock, Cgroups: l.Cgroups,
			Network: protocol.NetworkMode(l.Network), Reason: l.Reason,
		}
	}
	res := protocol.KernelStartResult{
		KernelID: k.id, Language: k.lang,
		LanguageInfo: info,
		Sandbox:      sb,
	}
	if k.interp.run != "" {
		in := k.interp.info
		if v != "" {
			in.Version = v
		}
		res.Interpreter = &in
	}
	return res
}

// Info is the kernel's kernel/list entry, with the CPU time and memory of
// its driver's processes measured now (cheap: a few /proc reads a process).
func (k *Kernel) Info() protocol.KernelInfo {
	_, outAt := k.out.activity()
	k.mu.Lock()
	info := protocol.KernelInfo{
		KernelID: k.id, Language: k.lang, WorkspaceID: k.ws.ID(), State: k.state,
		ExecutionCount: k.count, StartedAt: k.startedAt, LastActivity: latest(k.lastActivity, outAt),
	}
	d := k.drv
	k.mu.Unlock()
	if d != nil && d.proc != nil {
		if u, err := d.proc.Usage(); err == nil {
			ms := u.CPU.Milliseconds()
			info.CPUMs, info.MemoryBytes = &ms, u.RSSBytes
		}
	}
	return info
}

// idleFor is how long the kernel has had no client attached, nothing to
// run and no output; 0 when it has any.
func (k *Kernel) idleFor() time.Duration {
	attached, outAt := k.out.activity()
	k.mu.Lock()
	defer k.mu.Unlock()
	if attached || k.current != nil || len(k.queue) > 0 || k.shut {
		return 0
	}
	return time.Since(latest(k.lastActivity, outAt))
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// setState records and announces the kernel's state.
func (k *Kernel) setState(st protocol.KernelState, reason string) {
	k.mu.Lock()
	k.state = st
	if st == protocol.KernelStateDead {
		k.deadReason = reason
	}
	k.mu.Unlock()
	k.out.setStatus(protocol.KernelStatusParams{KernelID: k.id, State: st, Reason: reason})
}

// deadErr is what every request to a dead kernel answers (-32013
// KernelDead), with the reason it died.
func (k *Kernel) deadErr(reason string) error {
	return fmt.Errorf("%w: kernel %s died (%s); restart it with kernel/restart", ErrDead, k.id, reason)
}

// shutErr is what a request to a kernel that was shut down answers.
func (k *Kernel) shutErr() error {
	return fmt.Errorf("%w: no kernel %q (it was shut down)", ErrNotFound, k.id)
}

// driverErr is a driver's error as the kernel's: a driver that is gone
// makes the kernel dead.
func (k *Kernel) driverErr(err error) error {
	if g := (*driverGone)(nil); errors.As(err, &g) {
		return k.deadErr(g.reason)
	}
	return err
}

// spawn runs f on a goroutine of the kernel's, which shutdown waits for;
// once shutdown has begun it runs nothing and says so.
func (k *Kernel) spawn(f func()) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.shut {
		return false
	}
	k.wg.Go(f)
	return true
}
