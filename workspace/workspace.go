package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// Workspace is the place code runs: a project seen at /workspace through
// one sandbox (one overlay mount), started on first use and shared by every
// kernel and terminal of the workspace.
type Workspace struct {
	m         *Manager
	id        string
	root      string // the project (overlay, direct) or the scratch directory
	mode      protocol.WorkspaceMode
	name      string
	createdAt time.Time
	dir       string // this workspace's directory in the state dir
	// fileOps counts the daemon's own file operations on the workspace
	// (the view, changes, commit, discard, checkpoints): the quota tick
	// measures again after one (quota_linux.go).
	fileOps atomic.Int64
	wake    chan struct{} // Wake's (capacity 1)
	// measures counts the quota ticks that measured (the tests' view of
	// the idle gate).
	measures atomic.Int64

	mu      sync.Mutex // guards the fields below
	sb      *sandbox.Sandbox
	cg      *cgroup     // sb's cgroup where cgroups are delegated, else nil
	mem     memoryState // what the memory check keeps of cg
	network sandbox.Network
	// readOnly are the extra paths sb binds read-only (Options.ReadOnly
	// and the ProcSpec.ReadOnly of the programs it was started for).
	readOnly []string
	procs    map[*Proc]struct{}
	quota    int64 // bytes the writable layer may hold (the smallest diskBytes of the programs running)
	// starting holds the diskBytes of programs being started, not yet in
	// procs: their quota is in force from the start.
	starting map[*int64]struct{}
	closed   bool
	net      netState // the policy of the proxies (netpolicy.go)

	install *installRun // the install that runs, if one does

	installing chan struct{} // holds the install that runs: one at a time (capacity 1)

	track trackState                 // per-execution attribution (track_linux.go)
	execs []protocol.ExecutionRecord // the newest executions that changed files, oldest first

	pmu            sync.Mutex // guards the previews (previews.go) and the ports (ports_linux.go)
	previews       []*previewEntry
	previewsClosed bool
	// ports are the listening ports last reported (Options.OnPorts);
	// ownPorts those kernels opened for themselves while they started,
	// never reported; portHolds counts the kernels starting (HoldPorts).
	ports     []int
	ownPorts  map[int]bool
	portHolds int
}

// Wake tells the workspace's quota and memory watch that its programs are
// about to run (an execution, terminal input): it measures at its fast
// pace again at once, rather than when its slower idle tick sees activity.
func (w *Workspace) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Proc is a program running in a workspace.
type Proc struct {
	*sandbox.Process
	w *Workspace

	mu     sync.Mutex // guards reason
	reason string     // why the daemon killed it, if it did
	// memory is the program's memoryBytes (0: none), its share of what
	// the sandbox's programs may hold together (see memory_linux.go).
	memory int64
	// disk is the program's diskBytes (0: none).
	disk int64
}

// DefaultEnv is the environment of a program started without one.
func DefaultEnv() []string { return sandbox.DefaultEnv() }

// SandboxShows reports whether every sandbox has the host's file at the
// absolute, clean path p, at the same path (sandbox.Shows).
func SandboxShows(p string) bool { return sandbox.Shows(p) }

// WinSize is a terminal's size (columns and rows).
type WinSize = sandbox.WinSize

// ProcSpec is a program to start in a workspace.
type ProcSpec struct {
	Argv []string
	Env  []string // nil: sandbox.DefaultEnv
	Dir  string   // inside the sandbox; "": /workspace
	// Stdin, Stdout and Stderr are given to the program (nil: /dev/null),
	// unless PTY is set.
	Stdin, Stdout, Stderr *os.File
	PTY                   *WinSize
	// ExtraFiles become the program's fds 3, 4, ...
	ExtraFiles []*os.File
	// Limits, resolved (ResolveLimits); TimeoutMs kills the program's tree.
	Limits protocol.Limits
	// Network is the network of the workspace's sandbox; every program of
	// one workspace shares it, so a running sandbox with another network is
	// an error.
	Network protocol.NetworkMode
	// ReadOnly are absolute host directories the program needs bound
	// read-only at their own path (an interpreter's prefix outside /usr).
	// Binds are made when the sandbox starts: a running sandbox without
	// them is restarted when no program runs in it, else Spawn fails with
	// ErrInvalid (ensureSandbox).
	ReadOnly []string
}

// ProcStatus is how a program ended.
type ProcStatus struct {
	sandbox.ExitStatus
	// Reason is set when the daemon killed it: "killed: timeout",
	// "killed: disk quota exceeded".
	Reason string
}

// ID is the workspace's id.
func (w *Workspace) ID() string { return w.id }

// Info is the workspace as PROTOCOL.md §3 describes it.
func (w *Workspace) Info() protocol.WorkspaceInfo {
	return protocol.WorkspaceInfo{WorkspaceID: w.id, Root: w.root, Mode: w.mode, CreatedAt: w.createdAt, Name: w.name}
}

// UpperDir is the overlay's upper layer on disk ("" for other modes). Read
// it only to measure; changes go through the live mount (ARCHITECTURE.md).
func (w *Workspace) UpperDir() string {
	if w.mode != protocol.WorkspaceModeOverlay {
		return ""
	}
	return filepath.Join(w.dir, "upper")
}

// Network is the network of the workspace's running sandbox, or "" when
// none runs (the next program chooses).
func (w *Workspace) Network() protocol.NetworkMode {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sb == nil || w.sb.Err() != nil {
		return ""
	}
	return protocol.NetworkMode(w.network)
}

// Sandbox returns the running sandbox, or nil.
func (w *Workspace) Sandbox() *sandbox.Sandbox {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sb != nil && w.sb.Err() != nil {
		return nil
	}
	return w.sb
}

// ensureSandbox starts the workspace's sandbox if it is not running. need
// are extra read-only binds the caller needs (ProcSpec.ReadOnly); disk, if
// not nil, is registered in w.starting under the same lock, so that no
// other start takes the sandbox for idle and restarts it meanwhile.
func (w *Workspace) ensureSandbox(ctx context.Context, network sandbox.Network, need []string, disk *int64) (*sandbox.Sandbox, error) {
	if network != sandbox.NetworkHost {
		network = sandbox.NetworkNone // none and allowlist: a namespace of its own, the policy is the proxies'
	}
	if err := w.m.checkBinds(need); err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, ErrClosed
	}
	register := func() {
		if disk == nil {
			return
		}
		if w.starting == nil {
			w.starting = make(map[*int64]struct{})
		}
		w.starting[disk] = struct{}{}
	}
	if w.sb != nil && w.sb.Err() == nil {
		if w.network != network {
			return nil, fmt.Errorf("%w: workspace %s already runs with network %q; its programs share one network namespace, so %q needs another workspace",
				ErrInvalid, w.id, w.network, network)
		}
		missing := missingBinds(w.readOnly, need)
		if len(missing) == 0 {
			register()
			return w.sb, nil
		}
		if n := len(w.procs) + len(w.starting); n > 0 {
			return nil, fmt.Errorf("%w: workspace %s's sandbox does not bind %s, and a sandbox gets its binds when it starts; %d program(s) run in it: shut down the workspace's kernels and terminals (this one then starts a sandbox with the bind), or use another workspace",
				ErrInvalid, w.id, strings.Join(missing, ", "), n)
		}
		// Nothing runs in it: a new sandbox with the binds.
		w.m.log.Info("sandbox restarted for read-only binds", "workspace", w.id, "binds", missing)
		sb, cg := w.sb, w.cg
		w.sb, w.cg = nil, nil
		_ = sb.Close()
		if cg != nil {
			if err := cg.Remove(); err != nil {
				w.m.log.Warn("sandbox cgroup left behind", "workspace", w.id, "err", err)
			}
		}
	}
	if w.mode != protocol.WorkspaceModeScratch && w.m.opts.ProjectReadOnly != nil {
		project := w.m.opts.ProjectReadOnly(w.root, w.m.Hidden())
		if err := w.m.checkBinds(project); err != nil {
			w.m.log.Warn("the project's interpreters are not bound", "workspace", w.id, "err", err)
		} else {
			need = append(slices.Clip(need), project...)
		}
	}
	readOnly := unionBinds(w.m.opts.ReadOnly, need)
	cfg := sandbox.Config{
		ID:       w.id,
		Network:  network,
		ReadOnly: readOnly,
		Timeout:  w.m.opts.StartTimeout,
	}
	if w.mode != protocol.WorkspaceModeScratch {
		cfg.Hide = w.m.hideIn(w.root, cfg.ReadOnly)
	}
	if err := w.prepareEnv(); err != nil {
		return nil, err
	}
	cfg.Env = w.envDir()
	switch w.mode {
	case protocol.WorkspaceModeOverlay:
		cfg.Mode, cfg.Project = sandbox.ModeOverlay, w.root
		cfg.Upper, cfg.Work = filepath.Join(w.dir, "upper"), filepath.Join(w.dir, "work")
	case protocol.WorkspaceModeScratch:
		cfg.Mode, cfg.Scratch = sandbox.ModeScratch, w.root
	case protocol.WorkspaceModeDirect:
		cfg.Mode, cfg.Project = sandbox.ModeDirect, w.root
	}
	start := sandbox.Start
	if w.m.pool != nil {
		start = w.m.pool.Start
	}
	sb, err := start(ctx, cfg)
	if err != nil {
		var le *sandbox.LayerError
		if errors.As(err, &le) {
			return nil, fmt.Errorf("%w: %v", ErrSandboxUnavailable, err)
		}
		return nil, fmt.Errorf("start the sandbox of workspace %s: %w", w.id, err)
	}
	w.sb, w.network, w.readOnly = sb, network, readOnly
	register()
	cg := w.sandboxCgroup(sb)
	w.cg = cg
	w.m.log.Debug("sandbox started", "workspace", w.id, "init_pid", sb.InitPID(), "layers", sb.Layers(), "cgroup", cg != nil)
	go w.watchQuota(sb, cg)
	go w.serveNetwork(sb)
	return sb, nil
}

// SandboxLayers is what the workspace's sandbox has in force, if it runs:
// the sandbox's layers, and whether it has a cgroup of its own.
func (w *Workspace) SandboxLayers() (sandbox.Layers, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sb == nil {
		return sandbox.Layers{}, false
	}
	l := w.sb.Layers()
	l.Cgroups = w.cg != nil
	return l, true
}

// Spawn starts a program in the workspace's sandbox.
func (w *Workspace) Spawn(ctx context.Context, spec ProcSpec) (*Proc, error) {
	// A program that may end before the next tick leaves no run time
	// behind for the idle gate to see: it measures at its fast pace.
	defer w.Wake()
	disk := spec.Limits.DiskBytes
	sb, err := w.ensureSandbox(ctx, sandbox.Network(spec.Network), spec.ReadOnly, &disk)
	if err != nil {
		return nil, err
	}
	defer func() {
		w.mu.Lock()
		delete(w.starting, &disk)
		w.mu.Unlock()
	}()
	w.raiseMemoryMax(spec.Limits.MemoryBytes)
	sp, err := sb.Spawn(ctx, sandbox.Spec{
		Argv: spec.Argv, Env: withNetworkEnv(spec.Env, sb.Listener(sandbox.ListenerHTTPProxy) != nil), Dir: spec.Dir,
		Stdin: spec.Stdin, Stdout: spec.Stdout, Stderr: spec.Stderr,
		PTY: spec.PTY, ExtraFiles: spec.ExtraFiles, Limits: rlimits(spec.Limits),
	})
	if err != nil {
		return nil, err
	}
	p := &Proc{Process: sp, w: w, memory: spec.Limits.MemoryBytes, disk: spec.Limits.DiskBytes}
	w.mu.Lock()
	w.procs[p] = struct{}{}
	// The quota in force is the smallest diskBytes of the programs
	// running (quotaInForce); this one's counts from now.
	if q := spec.Limits.DiskBytes; q > 0 && q < w.quota {
		w.quota = q
	}
	w.mu.Unlock()
	go func() {
		var timeout <-chan time.Time
		if spec.Limits.TimeoutMs > 0 {
			t := time.NewTimer(time.Duration(spec.Limits.TimeoutMs) * time.Millisecond)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-sp.Exited():
		case <-timeout:
			p.kill("killed: timeout")
		}
		<-sp.Exited()
		w.mu.Lock()
		delete(w.procs, p)
		w.mu.Unlock()
	}()
	return p, nil
}

// Wait waits for the program and says why it ended.
func (p *Proc) Wait() (ProcStatus, error) {
	st, err := p.Process.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return ProcStatus{ExitStatus: st, Reason: p.reason}, err
}

// kill kills the program's tree, recording why.
func (p *Proc) kill(reason string) {
	p.setReason(reason)
	_ = p.Process.SignalTree(syscall.SIGKILL)
}

func (p *Proc) setReason(reason string) {
	p.mu.Lock()
	if p.reason == "" {
		p.reason = reason
	}
	p.mu.Unlock()
}

// stop closes the sandbox (every process goes) and keeps the files.
func (w *Workspace) stop() {
	w.mu.Lock()
	sb, cg := w.sb, w.cg
	w.sb, w.cg = nil, nil
	w.mu.Unlock()
	if sb != nil {
		_ = sb.Close()
	}
	if cg != nil {
		// Here, not only in the quota watch, which a daemon that is
		// ending does not wait for.
		if err := cg.Remove(); err != nil {
			w.m.log.Warn("sandbox cgroup left behind", "workspace", w.id, "err", err)
		}
	}
}

// RegisterHelper adds an entry of this binary that the daemon runs as a
// helper process of its own, outside every sandbox (HelperCommand), for
// work that must not take the daemon down if it crashes. Call it from an
// init function (sandbox.Register).
func RegisterHelper(name string, fn func(args []string) int) { sandbox.Register(name, fn) }

// HelperCommand is a command that runs this binary's entry name
// (RegisterHelper) as a child of the daemon.
func HelperCommand(name string) *exec.Cmd {
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), sandbox.ReexecEnv+"="+name)
	return cmd
}

// SandboxOwner is the host uid and gid that a sandbox's user has: a file
// the daemon makes for a sandboxed program to open by path (a pipe it
// reopens through /proc/self/fd) belongs to them, mode 0600.
func SandboxOwner() (uid, gid int) { return sandbox.SandboxRootHostIDs() }
