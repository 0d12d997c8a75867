//go:build !linux

package workspace

import (
	"context"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// ReadFile needs a sandbox: Linux only.
func (w *Workspace) ReadFile(string) ([]byte, error) { return nil, sandbox.ErrLinuxOnly }

// File operations and watching go through the sandbox: Linux only.
func (w *Workspace) FsRead(protocol.FsReadParams) (*protocol.FsReadResult, error) {
	return nil, sandbox.ErrLinuxOnly
}

func (w *Workspace) FsWrite(protocol.FsWriteParams) (*protocol.FsWriteResult, error) {
	return nil, sandbox.ErrLinuxOnly
}

func (w *Workspace) FsList(protocol.FsListParams) (*protocol.FsListResult, error) {
	return nil, sandbox.ErrLinuxOnly
}

func (w *Workspace) FsStat(protocol.FsStatParams) (*protocol.FileEntry, error) {
	return nil, sandbox.ErrLinuxOnly
}

func (w *Workspace) FsDelete(protocol.FsDeleteParams) error { return sandbox.ErrLinuxOnly }
func (w *Workspace) FsRename(protocol.FsRenameParams) error { return sandbox.ErrLinuxOnly }
func (w *Workspace) FsMkdir(protocol.FsMkdirParams) error   { return sandbox.ErrLinuxOnly }

// Watch: see watch_linux.go.
type Watch struct{}

func (*Watch) Close() {}

func (w *Workspace) Watch(WatchOptions, func(WatchBatch)) (*Watch, error) {
	return nil, sandbox.ErrLinuxOnly
}

func (w *Workspace) CloseWatches() {}

// watchHub: see watchhub_linux.go (Manager.hubs stays empty here).
type watchHub struct{}

func (m *Manager) cleanup()     {}
func (m *Manager) openCgroups() {}

// cgroup: sandboxes have no cgroups here (see memory_linux.go).
type cgroup struct{}

func (*cgroup) Remove() error { return nil }

// No sandbox starts here (sandbox.Start answers ErrLinuxOnly), so none has
// a cgroup or a quota to watch.
func (w *Workspace) sandboxCgroup(*sandbox.Sandbox) *cgroup { return nil }
func (w *Workspace) watchQuota(*sandbox.Sandbox, *cgroup)   {}
func (w *Workspace) raiseMemoryMax(int64)                   {}

// memoryState is the memory check's state of a sandbox cgroup: none here.
type memoryState struct{}

// Changes, diff, commit, discard and checkpoints read the overlay: Linux only.
func (w *Workspace) Changes(context.Context) ([]protocol.Change, error) {
	return nil, sandbox.ErrLinuxOnly
}

func (w *Workspace) Diff(context.Context, []string) ([]protocol.FileDiff, error) {
	return nil, sandbox.ErrLinuxOnly
}

func (w *Workspace) Commit(context.Context, []string, func(done, total int)) (*protocol.WorkspaceCommitResult, error) {
	return nil, sandbox.ErrLinuxOnly
}

func (w *Workspace) Discard(context.Context, []string) ([]string, error) {
	return nil, sandbox.ErrLinuxOnly
}

func (w *Workspace) Checkpoint(context.Context, string, func(done, total int)) (protocol.Checkpoint, error) {
	return protocol.Checkpoint{}, sandbox.ErrLinuxOnly
}

func (w *Workspace) Checkpoints() ([]protocol.Checkpoint, error) { return nil, sandbox.ErrLinuxOnly }

func (w *Workspace) Restore(context.Context, string, func(done, total int)) error {
	return sandbox.ErrLinuxOnly
}

func (w *Workspace) DeleteCheckpoint(context.Context, string) error { return sandbox.ErrLinuxOnly }

// HoldPorts: no listening ports are read off Linux.
func (w *Workspace) HoldPorts() func(own bool) { return func(bool) {} }

// Ports: none off Linux.
func (w *Workspace) Ports() []int { return nil }
