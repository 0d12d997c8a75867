package kernel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
)

// A kernel's life: Start, then restarts (kernel/restart, or an interrupt
// that did not stop the code) and deaths (watch), until shutdown.

// Start is kernel/start: it starts a kernel and returns once its driver is
// ready; opener (if not nil) is attached to it.
func (m *Manager) Start(ctx context.Context, p protocol.KernelStartParams, opener Sink) (*Kernel, error) {
	lang, err := m.language(p.Language)
	// A language the host lacks on PATH runs with the user's interpreter:
	// kernel/start's, or the project's (resolveInterpreter, below).
	langErr := err
	if err != nil && !(errors.Is(err, ErrLanguage) && lang.jupyter == nil && hasSpec(lang.ID)) {
		return nil, err
	}
	switch p.Sandbox {
	case "", protocol.SandboxModeRequired, protocol.SandboxModeBestEffort:
	default:
		return nil, fmt.Errorf("%w: invalid params for kernel/start: field \"sandbox\" must be \"required\" or \"best-effort\", got %q", ErrInvalid, p.Sandbox)
	}
	_, rules, err := workspace.ParseNetwork(p.Network, p.Allow)
	if err != nil {
		return nil, fmt.Errorf("invalid params for kernel/start: %w", err)
	}
	network := protocol.NetworkModeNone // the sandbox's kind: none and allowlist share one
	if p.Network == protocol.NetworkModeHost {
		network = protocol.NetworkModeHost
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
	if p.Network == protocol.NetworkModeNone || p.Network == protocol.NetworkModeAllowlist {
		if err := ws.SetNetwork(p.Network, rules); err != nil {
			if ownWS {
				_ = m.opts.Workspaces.CloseWorkspace(context.WithoutCancel(ctx), ws.ID(), true)
			}
			return nil, err
		}
	}
	interp, err := resolveInterpreter(ctx, lang, ws, m.opts.Workspaces.Hidden(), p.Interpreter)
	if err == nil && langErr != nil && interp.info.Source == SourceSystem {
		// No interpreter of the user's, none on PATH.
		err = langErr
		if interp.info.Warning != "" {
			err = fmt.Errorf("%w; %s", langErr, interp.info.Warning)
		}
	}
	if err != nil {
		if ownWS {
			_ = m.opts.Workspaces.CloseWorkspace(context.WithoutCancel(ctx), ws.ID(), true)
		}
		return nil, err
	}
	if interp.info.Warning != "" {
		m.log.Warn("kernel runs the host's interpreter", "kernel", id, "workspace", ws.ID(), "reason", interp.info.Warning)
	}
	now := time.Now()
	k := &Kernel{
		m: m, id: id, lang: p.Language, langInfo: lang, ws: ws, ownWS: ownWS, interp: interp,
		limits: limits, env: env, dir: dir, network: network,
		out:       newOutput(id, m.opts.ReplayBytes, opener),
		state:     protocol.KernelStateStarting,
		startedAt: now, lastActivity: now,
		wake:   make(chan struct{}, 1),
		closed: make(chan struct{}),
		ended:  make(chan struct{}),
	}
	d, err := k.startDriver(ctx)
	if err != nil {
		if ownWS {
			_ = m.opts.Workspaces.CloseWorkspace(context.WithoutCancel(ctx), ws.ID(), true)
		}
		return nil, err
	}
	k.drv = d
	k.setState(protocol.KernelStateIdle, "")
	// The kernel's goroutines are counted before anyone else can see it,
	// so that shutdown finds them all.
	k.wg.Go(k.loop)
	k.wg.Go(func() { k.watch(d) })
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
	m.log.Info("kernel started", "kernel", id, "language", k.lang, "workspace", ws.ID(), "version", d.version)
	return k, nil
}

// language is the host's language id, if a kernel can run it.
func (m *Manager) language(id string) (Language, error) {
	var langs []Language
	if m.opts.Languages != nil {
		langs = m.opts.Languages()
	}
	known := make([]string, 0, len(langs))
	for _, l := range langs {
		if l.ID == id {
			if _, ok := drivers[id]; !ok && l.jupyter == nil {
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

// startDriver starts the kernel's driver and waits until it is ready; a
// shutdown meanwhile ends the start.
func (k *Kernel) startDriver(ctx context.Context) (*driver, error) {
	spec := drivers[k.lang]
	argv, env := spec.argv, k.env
	switch {
	case k.langInfo.jupyter != nil:
		var err error
		if argv, env, err = jupyterDriver(k.langInfo.jupyter, env, k.m.opts.StartTimeout); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrLanguage, err)
		}
	case spec.entry != nil:
		var e string
		argv, e = spec.entry(k.langInfo.Path)
		env = append(slices.Clone(env), e)
	case k.interp.run != "":
		// The interpreter resolveInterpreter chose: the user's, or the one
		// DetectLanguages found (and initialize reported).
		argv = append([]string{k.interp.run}, argv[1:]...)
		env = k.interp.environ(append([]string(nil), env...))
	case k.langInfo.Path != "":
		// The interpreter DetectLanguages found (and initialize reported),
		// in a directory the sandbox has.
		argv = append([]string{k.langInfo.Path}, argv[1:]...)
	}
	return startDriver(ctx, driverConfig{
		kernelID: k.id, lang: k.lang, bashFraming: spec.bashFraming, interruptRequest: spec.interruptRequest,
		reopenPipes: spec.reopenPipes, gatherOutput: spec.gatherOutput,
		ws: k.ws, argv: argv, env: env, dir: k.dir, limits: k.limits, network: k.network, readOnly: k.interp.binds,
		startTimeout: k.m.opts.StartTimeout, log: k.m.log,
		out: k.out, prompt: k, stop: k.closed,
	})
}

// Restart is kernel/restart: a fresh interpreter, state and execution count
// reset. Queued executions end aborted; a running one ends aborted with
// error KernelRestarted.
func (k *Kernel) Restart(ctx context.Context) error {
	k.mu.Lock()
	d := k.drv
	k.mu.Unlock()
	return k.restart(ctx, d)
}

// restart replaces old with a new driver, unless it was replaced already.
func (k *Kernel) restart(ctx context.Context, old *driver) error {
	k.mu.Lock()
	if k.shut {
		k.mu.Unlock()
		return k.shutErr()
	}
	if k.restarting {
		// Someone else restarts it: answer when that restart is done.
		ch := k.restarted
		k.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	if k.drv != old {
		k.mu.Unlock()
		return nil // restarted already
	}
	k.restarting = true
	k.restarted = make(chan struct{})
	done := k.restarted
	k.mu.Unlock()
	defer close(done)
	k.setState(protocol.KernelStateRestarting, "")
	k.abortQueued("the kernel was restarted")
	if old != nil {
		old.kill()
	}
	k.setState(protocol.KernelStateStarting, "")
	d, err := k.startDriver(ctx)
	k.mu.Lock()
	k.restarting = false
	if k.shut {
		// Shut down meanwhile (shutdown waits for this restart): the new
		// driver goes too.
		k.drv = nil
		k.mu.Unlock()
		if d != nil {
			d.kill()
		}
		return k.shutErr()
	}
	if err != nil {
		k.drv = nil
		k.mu.Unlock()
		k.setState(protocol.KernelStateDead, err.Error())
		return err
	}
	k.drv = d
	k.count = 0
	k.history = nil
	busy := k.current != nil
	k.wg.Go(func() { k.watch(d) }) // under mu, not shut: shutdown will wait for it
	k.mu.Unlock()
	if busy {
		k.setState(protocol.KernelStateBusy, "")
	} else {
		k.setState(protocol.KernelStateIdle, "")
	}
	return nil
}

// watch reports the death of a driver that nobody killed on purpose.
func (k *Kernel) watch(d *driver) {
	select {
	case <-d.exited:
	case <-k.closed:
		return
	}
	k.mu.Lock()
	expected := k.shut || k.restarting || k.drv != d
	k.mu.Unlock()
	if expected {
		return
	}
	reason := d.deathReason()
	k.m.log.Info("kernel died", "kernel", k.id, "reason", reason)
	k.setState(protocol.KernelStateDead, reason)
}

// shutdown ends the kernel: when it returns, every process it started and
// every goroutine of it is gone, and a scratch workspace of its own is
// removed. A second call waits for the first.
func (k *Kernel) shutdown(ctx context.Context) {
	k.mu.Lock()
	if k.shut {
		k.mu.Unlock()
		<-k.ended
		return
	}
	k.shut = true
	restarting, restarted := k.restarting, k.restarted
	k.mu.Unlock()
	close(k.closed) // the loop, the watches and a start under way stop
	if restarting {
		<-restarted
	}
	k.mu.Lock()
	d := k.drv
	k.mu.Unlock()
	if d != nil {
		d.kill()
	}
	k.wg.Wait()
	k.m.forget(k)
	k.setState(protocol.KernelStateDead, "shut down")
	if k.ownWS {
		if err := k.m.opts.Workspaces.CloseWorkspace(context.WithoutCancel(ctx), k.ws.ID(), true); err != nil {
			k.m.log.Warn("cannot remove a kernel's scratch workspace", "kernel", k.id, "workspace", k.ws.ID(), "err", err)
		}
	}
	k.m.log.Info("kernel shut down", "kernel", k.id)
	close(k.ended)
}
