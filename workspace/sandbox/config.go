package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// Mode is what a sandbox mounts at /workspace.
type Mode string

// Workspace modes (PROTOCOL.md §3).
const (
	// ModeOverlay: the project is the read-only lower layer of an overlay
	// whose upper layer is Config.Upper.
	ModeOverlay Mode = "overlay"
	// ModeScratch: Config.Scratch, an empty private directory, bound read-write.
	ModeScratch Mode = "scratch"
	// ModeDirect: the project itself, bound read-write.
	ModeDirect Mode = "direct"
)

// Network is the network a sandbox sees.
type Network string

// Network modes.
const (
	NetworkNone Network = "none" // a network namespace of its own: loopback, and the daemon's listeners
	NetworkHost Network = "host" // the host's network namespace
)

// Config describes one sandbox. Paths are host paths.
type Config struct {
	// ID names the sandbox in logs and process titles.
	ID string
	// Mode and the directories it uses: Project (overlay, direct), Upper and
	// Work (overlay: two directories in one directory, on a filesystem that
	// is not overlayfs), Scratch (scratch).
	Mode    Mode
	Project string
	Upper   string
	Work    string
	Scratch string
	// Network is NetworkNone unless the user asked for the host's.
	Network Network
	// Env is a host directory holding the upper and work directories of
	// what programs see read-write at /env (EnvPath): the workspace's
	// installed packages. In the overlay mode, in the directory of Upper,
	// it is an overlay on an empty directory, staged as the workspace's
	// layers are (no mount names a host path); elsewhere its upper
	// directory is bound. "": none.
	Env string
	// ReadOnly are extra host paths bound read-only at the same path, for
	// interpreters installed outside /usr (for example ~/.pyenv).
	ReadOnly []string
	// Landlock and Seccomp: whether each layer is required. A required layer
	// that cannot be installed fails Start; an optional one is skipped and
	// reported in Layers.
	RequireLandlock bool
	// TmpBytes sizes the sandbox's /tmp and /home/cellbox tmpfs mounts
	// (each; /dev/shm gets a quarter); 0 means 256 MiB.
	TmpBytes int64
	// Timeout bounds building the sandbox; 0 means 10 s.
	Timeout time.Duration
	// Hide are paths in the sandbox (below /workspace or a ReadOnly path)
	// that its programs must not see: an empty read-only directory is
	// mounted on each that is a directory (the daemon's state and runtime
	// directories, when a project or a bound path contains them).
	Hide []string
}

// Layers are the isolation layers in force in a running sandbox.
type Layers struct {
	UserNamespaces   bool    `json:"userNamespaces"`
	Overlay          bool    `json:"overlay"`
	PidNamespace     bool    `json:"pidNamespace"`
	NetworkNamespace bool    `json:"networkNamespace"`
	Seccomp          bool    `json:"seccomp"`
	Landlock         bool    `json:"landlock"`
	Cgroups          bool    `json:"cgroups"`
	Network          Network `json:"network"`
	// Reason says why an optional layer is not in force.
	Reason string `json:"reason,omitempty"`
}

// Limits are the per-process resource limits of a spawned program, applied
// as rlimits (soft = hard, so the program cannot raise them). Zero means
// no limit from cellbox (the host's applies).
type Limits struct {
	// MemoryBytes is RLIMIT_AS: address space, not resident memory.
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// CPUSeconds is RLIMIT_CPU over the process's whole life.
	CPUSeconds int64 `json:"cpuSeconds,omitempty"`
	// Pids is RLIMIT_NPROC: all processes of the sandbox's user count, so
	// it bounds the whole sandbox.
	Pids int64 `json:"pids,omitempty"`
	// FileSizeBytes is RLIMIT_FSIZE: a larger write fails with EFBIG.
	FileSizeBytes int64 `json:"fileSizeBytes,omitempty"`
	// OpenFiles is RLIMIT_NOFILE.
	OpenFiles int64 `json:"openFiles,omitempty"`
}

// Sandbox identities: code runs as this uid and gid (user "cellbox") in a
// user namespace nested in the sandbox's, mapped to the sandbox's root,
// which owns the project's files.
const (
	SandboxUID  = 1000
	SandboxGID  = 1000
	SandboxUser = "cellbox"
	SandboxHome = "/home/cellbox"
	Hostname    = "cellbox"
)

// Spec is a program to start in a sandbox.
type Spec struct {
	// Argv[0] is looked up on the sandbox's PATH when it has no slash.
	Argv []string
	// Env is the whole environment; nil means DefaultEnv.
	Env []string
	// Dir is the working directory inside the sandbox; "" means /workspace.
	Dir string
	// Stdin, Stdout and Stderr are given to the program; nil means /dev/null.
	// Ignored when PTY is set.
	Stdin, Stdout, Stderr *os.File
	// PTY, when set, runs the program on a new terminal of the sandbox's
	// own devpts as its controlling terminal; Process.PTY is the master.
	PTY *WinSize
	// ExtraFiles become the program's fds 3, 4, ... (with or without PTY).
	ExtraFiles []*os.File
	// Limits of the program.
	Limits Limits
}

// WinSize is a terminal size.
type WinSize struct {
	Cols, Rows uint16
}

// ExitStatus is how a program ended.
type ExitStatus struct {
	// Code is the exit code, or -1 when killed by Signal.
	Code   int
	Signal syscall.Signal
	// CPU is user+system time of the program and its waited-for children.
	CPU time.Duration
	// MaxRSSBytes is the peak resident memory of the program or of its
	// largest waited-for child.
	MaxRSSBytes int64
}

func (s ExitStatus) String() string {
	if s.Signal != 0 {
		return "killed by " + signalName(s.Signal)
	}
	return fmt.Sprintf("exited with code %d", s.Code)
}

// LayerError says which layer a sandbox could not get, and why.
type LayerError struct {
	Layer  string
	Reason string
}

func (e *LayerError) Error() string { return "sandbox layer " + e.Layer + " unavailable: " + e.Reason }

// Sentinel errors.
var (
	// ErrClosed: the sandbox was closed or its init died.
	ErrClosed = errors.New("sandbox: closed")
)

// topLinks are the host's top-level library and binary directories: kept
// as symlinks where the host has merged /usr, bound where they are real.
var topLinks = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// Shows reports whether every sandbox has the host's file at the absolute,
// clean path p, at the same path: below /usr or a top-level binary or
// library directory, which the root binds read-only. (Config.ReadOnly
// adds paths to one sandbox; /etc holds only some of the host's files.)
func Shows(p string) bool {
	for _, d := range append([]string{"usr"}, topLinks...) {
		if p == "/"+d || strings.HasPrefix(p, "/"+d+"/") {
			return true
		}
	}
	return false
}

// DefaultEnv is the environment of a program started without one.
func DefaultEnv() []string {
	return []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + SandboxHome,
		"USER=" + SandboxUser,
		"LOGNAME=" + SandboxUser,
		"SHELL=/bin/bash",
		"LANG=C.UTF-8",
		"TMPDIR=/tmp",
	}
}

// EnvPath is where Config.Env is in the sandbox.
const EnvPath = "/env"

// A Listener is a TCP socket the init of a sandbox with a network
// namespace of its own (every network but host) listens on, on
// 127.0.0.1 in that namespace, and hands to the daemon, which serves it
// (Sandbox.Listener): the only way out of the namespace. The socket is the
// sandbox's identity; nothing in the sandbox serves it.
type Listener struct {
	Name string
	Port uint16
}

// Listeners are the sandbox's listeners: the HTTP proxy, the SOCKS5 proxy
// and the package index.
var Listeners = []Listener{
	{ListenerHTTPProxy, 3128},
	{ListenerSOCKS, 1080},
	{ListenerPackages, 3141},
}

// Names of Listeners.
const (
	ListenerHTTPProxy = "http"
	ListenerSOCKS     = "socks"
	ListenerPackages  = "packages"
)
