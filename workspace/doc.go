// Package workspace is where code runs: a project directory that programs
// see at /workspace, inside one sandbox (package sandbox) shared by every
// kernel, terminal and command of the workspace, and nothing else.
//
// A [Manager] opens workspaces ([Manager.Open]) in one of three modes:
// overlay (the default: /workspace is an overlay over the project, and
// nothing reaches the project until [Workspace.Commit]), scratch (an empty
// directory of its own) and direct (the project itself, read-write). Each
// keeps its state on disk under the state dir, so that changes and
// checkpoints outlive the daemon.
//
// The rules it keeps (README.md tells them in full; ARCHITECTURE.md names
// the file each lives in):
//   - Every daemon-side file operation goes through the live mount, the
//     sandbox's own view of /workspace (view_linux.go), with confined opens
//     (at_linux.go); never through the upper or lower directory behind it.
//   - [Workspace.Changes], [Workspace.Diff], [Workspace.Commit],
//     [Workspace.Discard], checkpoints and restore walk by descriptors,
//     bounded, and share one preamble (withChanges). Commit refuses to
//     overwrite a project file that changed since the workspace saw it.
//   - Limits hold for the sandbox as a whole: the disk quota counts what the
//     upper layer holds, unlinked files included (quota_linux.go); memory is
//     one budget (memory_linux.go; cgroups v2 where delegated).
//   - Names are carried losslessly (names.go), file changes are watched
//     through the view and coalesced (watch_linux.go, watchhub_linux.go).
//
// [Workspace.Spawn] starts a program in the workspace's sandbox; kernels
// and terminals are such programs. The package is Linux only at run time:
// elsewhere it builds, and opening a sandbox fails with
// sandbox.ErrLinuxOnly.
package workspace
