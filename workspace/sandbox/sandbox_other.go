//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
)

// Sandbox needs Linux; elsewhere Start fails with ErrLinuxOnly.
type Sandbox struct{}

// Process is a program in a sandbox.
type Process struct {
	Pid int
	PTY *os.File
}

// Start fails: sandboxes need Linux.
func Start(context.Context, Config) (*Sandbox, error) { return nil, ErrLinuxOnly }

func (s *Sandbox) Spawn(context.Context, Spec) (*Process, error) { return nil, ErrLinuxOnly }
func (s *Sandbox) Close() error                                  { return nil }
func (s *Sandbox) KillAll() error                                { return ErrLinuxOnly }
func (s *Sandbox) Layers() Layers                                { return Layers{} }
func (s *Sandbox) InitPID() int                                  { return 0 }
func (s *Sandbox) Err() error                                    { return ErrLinuxOnly }
func (s *Sandbox) Done() <-chan struct{}                         { c := make(chan struct{}); close(c); return c }
func (s *Sandbox) Listener(string) net.Listener                  { return nil }

func (p *Process) Wait() (ExitStatus, error)       { return ExitStatus{}, ErrLinuxOnly }
func (p *Process) Exited() <-chan struct{}         { c := make(chan struct{}); close(c); return c }
func (p *Process) Signal(syscall.Signal) error     { return ErrLinuxOnly }
func (p *Process) SignalTree(syscall.Signal) error { return ErrLinuxOnly }
func (p *Process) Kill() error                     { return ErrLinuxOnly }
func (p *Process) Usage() (Usage, error)           { return Usage{}, ErrLinuxOnly }
func SandboxRootHostIDs() (uid, gid int)           { return os.Getuid(), os.Getgid() }
func signalName(s syscall.Signal) string           { return s.String() }

// Mapped is true: there are no sandboxes here.
func Mapped(uid, gid, ownerUID, ownerGID int) bool { return true }

// Pool is a pool of nothing: sandboxes need Linux.
type Pool struct{}

func NewPool(readOnly ...string) *Pool                                  { return &Pool{} }
func (p *Pool) Start(ctx context.Context, cfg Config) (*Sandbox, error) { return nil, ErrLinuxOnly }
func (p *Pool) Close()                                                  {}

func (s *Sandbox) DialPort(context.Context, int) (net.Conn, error) { return nil, ErrLinuxOnly }

// ErrNotListening: nothing listens on that port in the sandbox.
var ErrNotListening = errors.New("nothing listens on that port in the sandbox")
