package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// selfSourceForTest, when set, is the path the init binds at SelfPath in
// place of this binary (a test's, to make the bind fail).
var selfSourceForTest string

// Sandbox is a running sandbox: an init holding its namespaces and mounts,
// and a spawner that starts programs in it. Safe for concurrent use.
type Sandbox struct {
	cfg    Config
	init   *exec.Cmd
	ctl    *msgConn // to the init
	sp     *msgConn // to the spawner
	layers Layers
	stderr *capBuffer
	// selfMissing says why SelfPath is missing, when it is.
	selfMissing string

	done    chan struct{} // closed when the init has exited
	initErr error         // why, when it died on its own; read after done

	// listeners are the sandbox's Listeners by name (none with the host's
	// network); closed when the sandbox ends.
	listeners map[string]net.Listener

	mu     sync.Mutex // guards the fields below
	procs  map[uint64]*Process
	nextID uint64
	closed bool
	// dials are the DialPort calls waiting for the init's answer, by id.
	dials    map[uint64]chan dialed
	nextDial uint64
}

// Process is a program started in a sandbox.
type Process struct {
	s  *Sandbox
	id uint64
	// Pid is the program's pid in the sandbox's pid namespace.
	Pid int
	// PTY is the terminal's master side when the program runs on one; the
	// caller owns it.
	PTY *os.File

	started chan *msg    // the spawner's answer (plus PTY)
	hostPid atomic.Int64 // Pid as the daemon's /proc sees it, once looked up (usage_linux.go)
	exited  chan struct{}
	status  ExitStatus
	err     error
}

// Start builds a sandbox from cfg: it re-executes this binary as the
// sandbox's init in new user, mount, pid, ipc, uts, cgroup and (unless
// cfg.Network is host) network namespaces, and returns when the spawner is
// ready. A root daemon maps the sandbox to unprivileged host ids and shows
// it the project through an idmapped mount; an ordinary user's daemon maps
// the sandbox's root to itself. A Pool starts the processes ahead of time.
func Start(ctx context.Context, cfg Config) (*Sandbox, error) {
	l, err := launch(cfg.Network, cfg.ReadOnly, cfg.TmpBytes)
	if err != nil {
		return nil, err
	}
	return l.configure(ctx, cfg)
}

// launched is a sandbox's init (and the spawner it starts at once), waiting
// for its config: the part of building a sandbox that does not depend on
// the workspace, and the slow part (two processes and their runtimes).
type launched struct {
	network  Network
	readOnly []string
	tmpBytes int64
	ids      idMaps
	cmd      *exec.Cmd
	cfgW     *os.File
	ctl, sp  *msgConn
	stderr   *capBuffer
}

func launch(network Network, readOnly []string, tmpBytes int64) (_ *launched, err error) {
	if _, ok := os.LookupEnv(ReexecEnv); ok {
		return nil, errEntryNotHandled
	}
	if network == "" {
		network = NetworkNone
	}
	ids, err := hostIDs()
	if err != nil {
		return nil, err
	}
	var cleanups []func()
	defer func() {
		if err != nil {
			for i := len(cleanups) - 1; i >= 0; i-- {
				cleanups[i]()
			}
		}
	}()
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	cleanups = append(cleanups, func() { cfgR.Close(); cfgW.Close() })
	ctlP, ctlC, err := socketPair()
	if err != nil {
		return nil, err
	}
	cleanups = append(cleanups, func() { ctlP.Close(); ctlC.Close() })
	spP, spC, err := socketPair()
	if err != nil {
		return nil, err
	}
	cleanups = append(cleanups, func() { spP.Close(); spC.Close() })

	flags := uintptr(unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC |
		unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP)
	if network != NetworkHost {
		flags |= unix.CLONE_NEWNET
	}
	for _, p := range readOnly {
		if !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("read-only bind %q is not an absolute path", p)
		}
	}
	l := &launched{network: network, readOnly: readOnly, tmpBytes: tmpBytes, ids: ids, cfgW: cfgW, stderr: &capBuffer{max: 4096}}
	newCmd := func(exe string) *exec.Cmd {
		cmd := exec.Command(exe)
		cmd.Args = []string{argv0Prefix + entryInit}
		cmd.Env = helperEnv(entryInit)
		cmd.Stderr = l.stderr
		cmd.ExtraFiles = []*os.File{cfgR, ctlC, spC}
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:                 flags,
			UidMappings:                ids.uid,
			GidMappings:                ids.gid,
			GidMappingsEnableSetgroups: false,
			Pdeathsig:                  syscall.SIGKILL,
		}
		if ids.root {
			// Host root is not mapped in the sandbox: become its root (a
			// range id) before exec, or the init would be its nobody.
			cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true}
		}
		return cmd
	}
	start := func(cmd *exec.Cmd) error {
		// Pdeathsig fires when the thread that started the child exits.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		return cmd.Start()
	}
	exe := initExe()
	cmd := newCmd(exe)
	err = start(cmd)
	if err != nil && exe != selfExe && execRefused(err) {
		// A host that lets a memfd be made but not executed (an LSM's
		// policy): this binary from now on, if it starts where the helper
		// did not (else the refusal was not the helper's).
		helperErr := err
		cmd = newCmd(selfExe)
		if err = start(cmd); err == nil {
			helperRefused(helperErr)
		}
	}
	if err != nil {
		return nil, &LayerError{Layer: "userNamespaces", Reason: fmt.Sprintf("start the sandbox init: %v", err)}
	}
	l.cmd = cmd
	cleanups = append(cleanups, func() { cmd.Process.Kill(); cmd.Wait() })
	cfgR.Close()
	ctlC.Close()
	spC.Close()
	if l.ctl, err = newMsgConn(ctlP); err != nil {
		return nil, err
	}
	if l.sp, err = newMsgConn(spP); err != nil {
		l.ctl.close()
		return nil, err
	}
	// What the root needs that does not depend on the workspace: a root
	// daemon's sandbox gets the read-only paths as detached clones.
	prep := &prepConfig{Network: network, ReadOnly: readOnly, TmpBytes: tmpBytes}
	var trees []*os.File
	defer func() { closeAll(trees) }()
	// The init's own executable is a mount of this namespace, which it
	// cannot bind in its own: an ordinary user's init binds the same path,
	// a root daemon sends a clone (the range ids may not walk to it).
	prep.Self, _ = os.Readlink(selfExe)
	if selfSourceForTest != "" {
		prep.Self = selfSourceForTest
	}
	// What the binary running now is, for the init (which may run the
	// lean helper) to check that the path still names it.
	var self unix.Stat_t
	if unix.Stat(selfExe, &self) == nil {
		prep.SelfDev, prep.SelfIno = self.Dev, self.Ino
	}
	if ids.root {
		if f, err := openTree(selfExe); err == nil && selfSourceForTest == "" {
			prep.Trees, trees = append(prep.Trees, "self"), append(trees, f)
		} else if err == nil {
			f.Close()
		}
		for _, p := range readOnly {
			if _, err := os.Stat(p); err != nil {
				continue
			}
			f, err := openTree(p)
			if err != nil {
				l.ctl.close()
				l.sp.close()
				return nil, err
			}
			prep.Trees, trees = append(prep.Trees, "ro:"+p), append(trees, f)
		}
	}
	fds := make([]int, len(trees))
	for i, f := range trees {
		fds[i] = int(f.Fd())
	}
	if err := l.ctl.send(&msg{Op: "prep", Prep: prep}, fds...); err != nil {
		l.ctl.close()
		l.sp.close()
		return nil, err
	}
	return l, nil
}

// openTree returns a detached clone of the mount tree at path.
func openTree(path string) (*os.File, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return nil, fmt.Errorf("open_tree %s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// errLaunchedOther: a launched init was prepared for another network,
// read-only binds or tmpfs size than the config asks.
var errLaunchedOther = errors.New("sandbox launched with other settings")

// kill ends a launched init that will not be used.
func (l *launched) kill() {
	l.cfgW.Close()
	l.ctl.close()
	l.sp.close()
	_ = l.cmd.Process.Kill()
	_ = l.cmd.Wait()
}

// configure sends the init its config and the host directories it needs,
// and waits until the root is built and the spawner is ready.
func (l *launched) configure(ctx context.Context, cfg Config) (_ *Sandbox, err error) {
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer func() {
		if err != nil {
			l.kill()
		}
	}()
	if cfg.Mode == "" {
		cfg.Mode = ModeOverlay
	}
	if cfg.Network == "" {
		cfg.Network = NetworkNone
	}
	if cfg.Network != l.network || !slices.Equal(cfg.ReadOnly, l.readOnly) || cfg.TmpBytes != l.tmpBytes {
		return nil, errLaunchedOther
	}

	// A root daemon's sandbox is a range id that may not be able to walk to
	// the host directories it binds (for example below /root): it gets
	// detached clones of their mounts (open_tree), and the project as an
	// idmapped clone.
	var names []string
	var files []*os.File
	defer func() { closeAll(files) }()
	clone := func(name, path string) error {
		f, err := openTree(path)
		if err != nil {
			return err
		}
		names, files = append(names, name), append(files, f)
		return nil
	}
	if l.ids.root {
		switch cfg.Mode {
		case ModeScratch:
			err = clone("scratch", cfg.Scratch)
		case ModeOverlay:
			err = clone("layers", filepath.Dir(cfg.Upper))
		}
		if err != nil {
			return nil, err
		}
		if cfg.Env != "" && cfg.Mode != ModeOverlay { // the overlay mode's is in the layers' directory
			if err := clone("env", filepath.Join(cfg.Env, "upper")); err != nil {
				return nil, err
			}
		}
		if cfg.Mode != ModeScratch {
			tree, err := idmappedTree(cfg.Project, l.cmd.Process.Pid, l.ids)
			if err != nil {
				return nil, err
			}
			names, files = append(names, "lower"), append(files, tree)
		}
	}

	if err := json.NewEncoder(l.cfgW).Encode(initConfig{Config: cfg, Trees: names}); err != nil {
		return nil, fmt.Errorf("send the sandbox config: %w", err)
	}
	l.cfgW.Close()
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		if err := l.ctl.send(&msg{Op: "trees"}, fds...); err != nil {
			return nil, err
		}
	}

	s := &Sandbox{cfg: cfg, init: l.cmd, ctl: l.ctl, sp: l.sp, stderr: l.stderr, done: make(chan struct{}), procs: make(map[uint64]*Process)}
	// Wait for the init's "built" and the spawner's "ready".
	type result struct {
		m     *msg
		files []*os.File // the built message's: the listeners
		err   error
	}
	ctlc, spc := make(chan result, 1), make(chan result, 1)
	go func() {
		m, files, err := s.ctl.recv()
		if err != nil || m.Op != "built" {
			closeAll(files)
			files = nil
		}
		ctlc <- result{m, files, err}
	}()
	go func() { m, files, err := s.sp.recv(); closeAll(files); spc <- result{m, nil, err} }()
	var built, ready *msg
	var listenerFiles []*os.File
	defer func() {
		if built == nil {
			// Given up before the init's answer: the listeners it may
			// still send are closed when they come (the init is killed).
			go func() { closeAll((<-ctlc).files) }()
		}
	}()
	for built == nil || ready == nil {
		select {
		case r := <-ctlc:
			if r.err != nil || r.m.Op != "built" {
				built = &msg{} // answered: nothing more comes
				return nil, s.startError("init", r.m, r.err)
			}
			built, listenerFiles = r.m, r.files
		case r := <-spc:
			if r.err != nil || r.m.Op != "ready" {
				closeAll(listenerFiles)
				return nil, s.startError("spawner", r.m, r.err)
			}
			ready = r.m
		case <-ctx.Done():
			closeAll(listenerFiles)
			return nil, fmt.Errorf("build the sandbox: %w (init stderr: %s)", ctx.Err(), strings.TrimSpace(l.stderr.String()))
		}
	}
	if err := s.takeListeners(listenerFiles); err != nil {
		return nil, err
	}
	if built.Layers != nil {
		s.layers = *built.Layers
	}
	s.selfMissing = built.SelfMissing
	if ready.Layers != nil {
		s.layers.Seccomp = ready.Layers.Seccomp
		s.layers.Landlock = ready.Layers.Landlock
		s.layers.Reason = ready.Layers.Reason
	}
	if cfg.RequireLandlock && !s.layers.Landlock {
		s.closeListeners()
		return nil, &LayerError{Layer: "landlock", Reason: s.layers.Reason}
	}
	go s.watchInit()
	go s.readSpawner()
	return s, nil
}

// startError explains why building the sandbox failed.
func (s *Sandbox) startError(who string, m *msg, err error) error {
	if m != nil && m.Err != "" {
		var le *LayerError
		if m.Op == "error" && strings.Contains(m.Err, "sandbox layer") {
			return errors.New(m.Err)
		}
		_ = le
		return fmt.Errorf("build the sandbox (%s): %s", who, m.Err)
	}
	time.Sleep(10 * time.Millisecond) // let the init's last words reach stderr
	return fmt.Errorf("build the sandbox (%s): %v; init stderr: %s", who, err, strings.TrimSpace(s.stderr.String()))
}

// watchInit marks the sandbox closed when its init exits.
func (s *Sandbox) watchInit() {
	ctlDone := make(chan struct{})
	go func() {
		defer close(ctlDone)
		for {
			m, files, err := s.ctl.recv()
			if err != nil {
				closeAll(files)
				return
			}
			switch m.Op {
			case "error":
				closeAll(files)
				s.mu.Lock()
				s.initErr = errors.New(m.Err)
				s.mu.Unlock()
			case "dialed":
				s.answerDial(m, files)
			default:
				closeAll(files)
			}
		}
	}()
	_ = s.init.Wait()
	s.mu.Lock()
	s.closed = true // no more programs, though the reason may yet come
	s.mu.Unlock()
	// The init's last message (why its spawner ended) may still be on its
	// way: its socket ends once the init and the spawner are gone.
	select {
	case <-ctlDone:
	case <-time.After(time.Second):
	}
	s.mu.Lock()
	s.closed = true
	if s.initErr == nil {
		s.initErr = initEnded(s.init.ProcessState)
	}
	cause := s.initErr
	procs := s.procs
	s.procs = map[uint64]*Process{}
	s.mu.Unlock()
	// Every program of the sandbox died with it: say why.
	err := fmt.Errorf("%w (%v)", ErrClosed, cause)
	for _, p := range procs {
		p.finish(ExitStatus{Code: -1, Signal: syscall.SIGKILL}, err)
	}
	s.closeListeners()
	s.ctl.close()
	s.sp.close()
	close(s.done)
}

// initEnded says how the sandbox's init ended.
func initEnded(ps *os.ProcessState) error {
	if ps == nil {
		return errors.New("the sandbox's init ended")
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return errors.New("the sandbox's init was killed by " + signalName(ws.Signal()))
	}
	return fmt.Errorf("the sandbox's init exited with code %d", ps.ExitCode())
}

// readSpawner routes the spawner's messages to their processes.
func (s *Sandbox) readSpawner() {
	for {
		m, files, err := s.sp.recv()
		if err != nil {
			return
		}
		s.mu.Lock()
		p := s.procs[m.ID]
		s.mu.Unlock()
		if p == nil {
			closeAll(files)
			continue
		}
		switch m.Op {
		case "started":
			if len(files) > 0 {
				p.PTY = files[0]
				closeAll(files[1:])
			}
			p.started <- m
		case "exited":
			closeAll(files)
			s.mu.Lock()
			delete(s.procs, m.ID)
			s.mu.Unlock()
			st := ExitStatus{Code: m.Code, Signal: syscall.Signal(m.Signal), CPU: time.Duration(m.CPUNs), MaxRSSBytes: m.MaxRSS}
			var err error
			if m.Err != "" {
				err = errors.New(m.Err)
			}
			p.finish(st, err)
		default:
			closeAll(files)
		}
	}
}

// Layers returns the isolation layers in force.
func (s *Sandbox) Layers() Layers { return s.layers }

// InitPID is the init's pid on the host; /proc/InitPID/root is the
// sandbox's root as the daemon can reach it.
func (s *Sandbox) InitPID() int { return s.init.Process.Pid }

// Done is closed when the sandbox has ended (closed, or its init died).
func (s *Sandbox) Done() <-chan struct{} { return s.done }

// takeListeners turns the init's listening sockets into the sandbox's
// listeners: none, or one for each of Listeners, in order.
func (s *Sandbox) takeListeners(files []*os.File) error {
	defer closeAll(files) // net.FileListener dups
	if len(files) == 0 {
		return nil
	}
	if len(files) != len(Listeners) {
		return fmt.Errorf("the sandbox's init sent %d listeners, not %d", len(files), len(Listeners))
	}
	s.listeners = make(map[string]net.Listener, len(files))
	for i, f := range files {
		l, err := net.FileListener(f)
		if err != nil {
			s.closeListeners()
			return fmt.Errorf("the sandbox's %s listener: %w", Listeners[i].Name, err)
		}
		s.listeners[Listeners[i].Name] = l
	}
	return nil
}

func (s *Sandbox) closeListeners() {
	for _, l := range s.listeners {
		l.Close()
	}
}

// Listener returns the sandbox's listener of that name (see Listeners),
// or nil when the sandbox has the host's network. The caller serves it;
// it is closed when the sandbox ends.
func (s *Sandbox) Listener(name string) net.Listener { return s.listeners[name] }

// Err says why the sandbox ended; nil while it runs. It is not nil from
// the moment the sandbox takes no more programs (closed, or its init
// found dead), before Done is closed: a caller told that one of its
// programs died with the sandbox must not be handed it again.
func (s *Sandbox) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !s.closed:
		return nil
	case s.initErr != nil:
		return s.initErr
	default:
		return ErrClosed
	}
}

// Spawn starts a program in the sandbox.
func (s *Sandbox) Spawn(ctx context.Context, spec Spec) (*Process, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("spawn: empty argv")
	}
	if spec.Argv[0] == SelfPath && s.selfMissing != "" {
		return nil, fmt.Errorf("the cellbox binary is not visible in this sandbox: %s", s.selfMissing)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	s.nextID++
	p := &Process{s: s, id: s.nextID, started: make(chan *msg, 1), exited: make(chan struct{})}
	s.procs[p.id] = p
	s.mu.Unlock()

	m := &msg{Op: "spawn", ID: p.id, Argv: spec.Argv, Env: spec.Env, Dir: spec.Dir, PTY: spec.PTY, Limits: spec.Limits}
	var fds []int
	if spec.PTY == nil {
		for i, f := range []*os.File{spec.Stdin, spec.Stdout, spec.Stderr} {
			if f != nil {
				m.Stdio[i] = true
				fds = append(fds, int(f.Fd()))
			}
		}
	}
	for _, f := range spec.ExtraFiles {
		fds = append(fds, int(f.Fd()))
	}
	m.Extra = len(spec.ExtraFiles)
	err := s.sp.send(m, fds...)
	for _, f := range []*os.File{spec.Stdin, spec.Stdout, spec.Stderr} {
		runtime.KeepAlive(f)
	}
	runtime.KeepAlive(spec.ExtraFiles)
	if err != nil {
		s.forget(p.id)
		return nil, fmt.Errorf("spawn %s: %w", spec.Argv[0], err)
	}
	select {
	case r := <-p.started:
		if r.Err != "" {
			s.forget(p.id)
			return nil, fmt.Errorf("spawn %s: %s", spec.Argv[0], r.Err)
		}
		p.Pid = r.Pid
		return p, nil
	case <-p.exited:
		// A program that ran and ended at once: its "started" came first.
		select {
		case r := <-p.started:
			if r.Err == "" {
				p.Pid = r.Pid
				return p, nil
			}
			return nil, fmt.Errorf("spawn %s: %s", spec.Argv[0], r.Err)
		default:
		}
		err := p.err
		if err == nil {
			err = ErrClosed
		}
		return nil, fmt.Errorf("spawn %s: %w", spec.Argv[0], err)
	case <-ctx.Done():
		// It may still start; make sure it does not run unseen.
		go func() {
			select {
			case <-p.started:
				_ = p.Kill()
			case <-p.exited:
			}
		}()
		return nil, fmt.Errorf("spawn %s: %w", spec.Argv[0], ctx.Err())
	}
}

func (s *Sandbox) forget(id uint64) {
	s.mu.Lock()
	delete(s.procs, id)
	s.mu.Unlock()
}

// KillAll kills every program of the sandbox and everything they started,
// tracked or not; the sandbox stays up.
func (s *Sandbox) KillAll() error { return s.sp.send(&msg{Op: "killall"}) }

// Close kills every process of the sandbox and waits until they are gone.
// The sandbox's files (the overlay's upper layer) stay on disk.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	_ = s.init.Process.Signal(syscall.SIGKILL)
	<-s.done
	return nil
}

func (p *Process) finish(st ExitStatus, err error) {
	p.status, p.err = st, err
	select {
	case <-p.exited:
	default:
		close(p.exited)
	}
}

// Wait waits for the program to end.
func (p *Process) Wait() (ExitStatus, error) {
	<-p.exited
	return p.status, p.err
}

// Exited is closed when the program has ended.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Signal sends sig to the program.
func (p *Process) Signal(sig syscall.Signal) error {
	return p.s.sp.send(&msg{Op: "signal", ID: p.id, Signal: int(sig)})
}

// SignalTree sends sig to the program and to every process it started,
// however they left its session and ancestry: every process in the
// program's own mount namespace, which code cannot leave.
func (p *Process) SignalTree(sig syscall.Signal) error {
	return p.s.sp.send(&msg{Op: "signal", ID: p.id, Signal: int(sig), Tree: true})
}

// SignalGroup sends sig to the program's process group (it leads one: every
// program starts in a session of its own), as a terminal's ^C does.
func (p *Process) SignalGroup(sig syscall.Signal) error {
	return p.s.sp.send(&msg{Op: "signal", ID: p.id, Signal: int(sig), Group: true})
}

// Kill kills the program and everything it started.
func (p *Process) Kill() error { return p.SignalTree(syscall.SIGKILL) }

func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return fmt.Sprintf("signal %d", int(s))
}
