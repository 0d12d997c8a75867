package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The sandbox's init: pid 1 of the sandbox's pid namespace and root of its
// user namespace. It builds the root (mounts.go), starts the spawner in a
// nested user namespace, and then only reaps. It ignores every signal it
// can, so code in the sandbox cannot stop it; it exits, and the sandbox with
// it, when the daemon closes its control socket or kills it.

const (
	entryInit    = "init"
	entrySpawner = "spawner"

	// fds the init and the spawner are started with (ExtraFiles order).
	initConfigFD  = 3 // config JSON, until EOF
	initControlFD = 4 // seqpacket to the daemon
	initSpawnerFD = 5 // seqpacket to the daemon, handed to the spawner

	spawnerSocketFD = 3 // seqpacket to the daemon
	spawnerGoFD     = 4 // pipe from the init: EOF means "root built, go"
)

// initConfig is Config plus what the daemon tells the init about itself.
type initConfig struct {
	Config
	// Trees name the detached mounts (open_tree clones) a root daemon sends
	// after the config, in one "trees" message, in this order: its sandbox's
	// root is a range id that may not be able to walk to the host
	// directories by path (for example below /root). Names: layers (the
	// directory of the upper and work directories), scratch, and lower (the
	// project, idmapped).
	Trees []string `json:"trees,omitempty"`

	trees map[string]*os.File // received
	// envMounted: the overlay mode mounted /env with the workspace.
	envMounted bool
}

// prepConfig is what a sandbox's root needs that does not depend on the
// workspace: the init gets it at launch, before its config.
type prepConfig struct {
	Network  Network  `json:"network"`
	ReadOnly []string `json:"readOnly,omitempty"`
	TmpBytes int64    `json:"tmpBytes,omitempty"`
	// Self is the daemon's binary as its path names it, bound at SelfPath
	// (a root daemon sends the file as the tree "self" instead).
	Self string `json:"self,omitempty"`
	// SelfDev and SelfIno are the daemon's running binary's device and
	// inode: Self is bound only while it still names that file.
	SelfDev uint64 `json:"selfDev,omitempty"`
	SelfIno uint64 `json:"selfIno,omitempty"`
	// Trees name the detached clones a root daemon sends with this message:
	// the ReadOnly paths (ro:PATH) and its binary (self).
	Trees []string `json:"trees,omitempty"`
}

// tree returns the detached mount named name, or nil.
func (ic *initConfig) tree(name string) *os.File { return ic.trees[name] }

func init() {
	register(entryInit, initMain)
	register(entrySpawner, spawnerMain)
}

func initMain([]string) int {
	ctl, err := newMsgConn(os.NewFile(initControlFD, "control"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox init:", err)
		return 1
	}
	fail := func(err error) int {
		_ = ctl.send(&msg{Op: "error", Err: err.Error()})
		fmt.Fprintln(os.Stderr, "sandbox init:", err)
		return 1
	}
	// This process sees the host's /proc until it mounts one of its own pid
	// namespace, which starting a process in a new user namespace needs
	// (the uid_map written is /proc/PID/uid_map).
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fail(fmt.Errorf("make / private: %w", err))
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fail(fmt.Errorf("mount proc for the sandbox's pid namespace: %w", err))
	}

	// The spawner starts first, so that its runtime starts while the root is
	// built; it waits for goR to close before it looks at anything. (It
	// cannot start after the new root is stacked on "/": a process whose
	// root is not its mount namespace's may not create a user namespace.)
	goR, goW, err := os.Pipe()
	if err != nil {
		return fail(fmt.Errorf("pipe: %w", err))
	}
	sp, err := startSpawner(goR)
	goR.Close()
	if err != nil {
		return fail(err)
	}
	// Code in the sandbox runs as the same host uid as this process; it
	// must not be able to kill it (pid 1 ignores default-action signals,
	// but the Go runtime installs handlers for some). No code runs there
	// before the spawner is ready, so this waits until it is started.
	ignoreSignals()
	// What does not depend on the workspace is built now; a pooled init
	// then waits for its workspace.
	pm, pfiles, err := ctl.recv()
	if err != nil || pm.Op != "prep" || pm.Prep == nil || len(pfiles) != len(pm.Prep.Trees) {
		closeAll(pfiles)
		sp.Process.Kill()
		if err != nil {
			return 0 // the daemon let this init go
		}
		return fail(fmt.Errorf("receive the sandbox's preparation: op %v, %d of %d mounts", opOf(pm), len(pfiles), len(pm.Prep.Trees)))
	}
	roTrees := map[string]*os.File{}
	for i, name := range pm.Prep.Trees {
		roTrees[name] = pfiles[i]
	}
	prep, err := prepareRoot(pm.Prep, roTrees)
	closeAll(pfiles)
	if err != nil {
		sp.Process.Kill()
		return fail(err)
	}

	var cfg initConfig
	cf := os.NewFile(initConfigFD, "config")
	if err := json.NewDecoder(io.LimitReader(cf, maxMsgBytes)).Decode(&cfg); err != nil {
		sp.Process.Kill()
		if errors.Is(err, io.EOF) {
			return 0 // the daemon let this pooled init go
		}
		return fail(fmt.Errorf("read config: %w", err))
	}
	cf.Close()
	cfg.trees = map[string]*os.File{}
	if len(cfg.Trees) > 0 {
		m, files, err := ctl.recv()
		if err != nil || m.Op != "trees" || len(files) != len(cfg.Trees) {
			closeAll(files)
			sp.Process.Kill()
			return fail(fmt.Errorf("receive the project's mounts: %v (op %v, %d of %d)", err, opOf(m), len(files), len(cfg.Trees)))
		}
		for i, name := range cfg.Trees {
			cfg.trees[name] = files[i]
		}
	}
	layers, err := finishRoot(prep, &cfg, cfg.tree("lower"))
	for _, f := range cfg.trees {
		f.Close()
	}
	if err != nil {
		sp.Process.Kill()
		return fail(err)
	}
	goW.Close() // go

	// The listeners go to the daemon, which serves them; this process
	// keeps no copy (nothing in the sandbox holds them).
	lfds := make([]int, len(prep.listeners))
	for i, f := range prep.listeners {
		lfds[i] = int(f.Fd())
	}
	err = ctl.send(&msg{Op: "built", Layers: layers, SelfMissing: prep.selfMissing}, lfds...)
	closeAll(prep.listeners)
	if err != nil {
		return 1
	}
	return reap(ctl, sp.Process.Pid)
}

// ignoreSignals makes this process deaf to every signal a sandbox's code
// could send to stop or end it. They are caught and dropped, not ignored:
// an ignored signal stays ignored across exec, and the programs the spawner
// starts must get ^C, SIGTERM, SIGPIPE and SIGWINCH as usual (a caught one
// is reset to its default in a child).
func ignoreSignals() {
	sink := make(chan os.Signal, 1) // never read: Notify drops what does not fit
	signal.Notify(sink, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE, syscall.SIGALRM, syscall.SIGTSTP,
		syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGXCPU, syscall.SIGXFSZ, syscall.SIGVTALRM,
		syscall.SIGPROF, syscall.SIGCONT, syscall.SIGWINCH, syscall.SIGURG, syscall.SIGIO, syscall.SIGPWR, syscall.SIGSYS)
}

func opOf(m *msg) string {
	if m == nil {
		return "none"
	}
	return m.Op
}

// startSpawner starts the spawner in a user namespace nested in this one,
// where the sandbox user (SandboxUID) is this namespace's root, the owner
// of the project's files, and as pid 1 of a pid namespace of its own,
// which every program joins. It keeps CAP_SYS_RESOURCE (to cap namespace
// creation in its own namespace), CAP_SETPCAP (to empty its bounding set)
// and CAP_SYS_ADMIN (to mount its pid namespace's proc) across exec, and
// drops them itself.
func startSpawner(goR *os.File) (*exec.Cmd, error) {
	cmd := exec.Command(selfExe)
	cmd.Args = []string{argv0Prefix + entrySpawner}
	cmd.Env = helperEnv(entrySpawner)
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = []*os.File{os.NewFile(initSpawnerFD, "spawner"), goR}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:                 unix.CLONE_NEWUSER | unix.CLONE_NEWPID,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: SandboxUID, HostID: 0, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: SandboxGID, HostID: 0, Size: 1}},
		GidMappingsEnableSetgroups: false,
		AmbientCaps:                []uintptr{unix.CAP_SYS_RESOURCE, unix.CAP_SETPCAP, unix.CAP_SYS_ADMIN},
		Pdeathsig:                  syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the spawner in a nested user namespace: %w", err)
	}
	cmd.ExtraFiles[0].Close()
	return cmd, nil
}

// reap waits for every process that ends up parented to pid 1, until the
// spawner dies or the daemon goes away.
func reap(ctl *msgConn, spawner int) int {
	daemonGone := make(chan struct{})
	go func() {
		for {
			m, files, err := ctl.recv()
			closeAll(files)
			if err != nil {
				close(daemonGone)
				return
			}
			if m.Op == "dial" {
				go initDial(ctl, m.ID, m.Port)
			}
		}
	}()
	exited := make(chan string, 1)
	go func() {
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, 0, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil { // ECHILD: nothing left
				exited <- "is gone"
				return
			}
			if pid == spawner {
				if ws.Signaled() {
					exited <- "was killed by " + signalName(ws.Signal())
				} else {
					exited <- fmt.Sprintf("exited with code %d", ws.ExitStatus())
				}
				return
			}
		}
	}()
	select {
	case <-daemonGone:
		return 0
	case how := <-exited:
		_ = ctl.send(&msg{Op: "error", Err: "the sandbox's spawner " + how})
		return 1
	}
}

// writeFile writes a small generated file (passwd, hosts) into the new root.
func writeFile(path, content string, mode os.FileMode) error {
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func passwd() string {
	return strings.Join([]string{
		"root:x:0:0:root:/root:/usr/sbin/nologin",
		fmt.Sprintf("%s:x:%d:%d:cellbox sandbox user:%s:/bin/bash", SandboxUser, SandboxUID, SandboxGID, SandboxHome),
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin",
	}, "\n") + "\n"
}

func group() string {
	return strings.Join([]string{
		"root:x:0:",
		fmt.Sprintf("%s:x:%d:", SandboxUser, SandboxGID),
		"nogroup:x:65534:",
	}, "\n") + "\n"
}

var _ = filepath.Join
