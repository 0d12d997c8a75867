package main

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/cellbox-dev/cellbox/protocol"
)

// TestCheckpointAutoE2E: undo of an execution over the real binary, as
// root and as CELLBOX_TEST_USER. A python kernel writes files; an execution
// with checkpoint runs rm -rf through a shell; the checkpoint its result
// names brings every file back byte for byte; an execution that changes
// nothing reuses the newest checkpoint; a fork starts with the source's
// changes, and writes in either are invisible to the other.
func TestCheckpointAutoE2E(t *testing.T) {
	for _, asUser := range []bool{false, true} {
		name := "root"
		if asUser {
			name = "user"
		}
		t.Run(name, func(t *testing.T) { checkpointAutoE2E(t, asUser) })
	}
}

// autoProject is the project: src/keep.py is modified by the kernel,
// src/gone.py deleted, the rest added.
var autoProject = map[string]string{
	"README.md":   "readme\n",
	"src/keep.py": "print('keep')\n",
	"src/gone.py": "print('gone')\n",
}

// autoWrite is what the kernel writes before the rm -rf.
const autoWrite = `
import os
os.makedirs("src/pkg/deep", exist_ok=True)
os.makedirs("data", exist_ok=True)
with open("src/keep.py", "a") as f: f.write("print('more')\n")
os.remove("src/gone.py")
with open("src/pkg/__init__.py", "w") as f: f.write("")
with open("src/pkg/deep/blob.bin", "wb") as f: f.write(bytes(range(256)) * 300)
with open("data/notes.txt", "w") as f: f.write("line\n" * 1000)
os.chmod("data/notes.txt", 0o600)
os.symlink("../src/keep.py", "data/link")
print("written")
`

// autoFiles are the files autoWrite leaves, with their content.
var autoFiles = []string{"src/keep.py", "src/pkg/__init__.py", "src/pkg/deep/blob.bin", "data/notes.txt", "data/link", "README.md"}

func checkpointAutoE2E(t *testing.T, asUser bool) {
	d := newFilesDaemon(t, asUser, autoProject)
	c := d.c
	ws := openWorkspace(t, c, d.project, "auto")
	k := startKernel(t, c, protocol.KernelStartParams{Language: "python", WorkspaceID: ws})
	withCheckpoint := func(p *protocol.KernelExecuteParams) { p.Checkpoint = true }

	if res, _ := execute(t, c, k.KernelID, autoWrite); res.Status != protocol.ExecutionStatusOK {
		t.Fatalf("writing the files: %+v", res)
	}
	want := readAll(t, c, ws, autoFiles)
	changes := d.changes(t, ws)
	if !strings.Contains(changes, "deleted src/gone.py") || !strings.Contains(changes, "modified src/keep.py") {
		t.Fatalf("changes after the writes:\n%s", changes)
	}

	// rm -rf through a shell, in an execution with checkpoint.
	res, _ := execute(t, c, k.KernelID, `import subprocess; subprocess.run("rm -rf src data", shell=True, check=True)`, withCheckpoint)
	if res.Status != protocol.ExecutionStatusOK || !strings.HasPrefix(res.Checkpoint, "cp-") {
		t.Fatalf("rm -rf with checkpoint: %+v", res)
	}
	undo := res.Checkpoint
	for _, p := range []string{"src/keep.py", "data/notes.txt"} {
		wantCode(t, c.call(t, protocol.MethodFsRead, protocol.FsReadParams{WorkspaceID: ws, Path: p}, nil), protocol.CodeNotFound)
	}
	var cps protocol.WorkspaceCheckpointsResult
	c.mustCall(t, protocol.MethodWorkspaceCheckpoints, protocol.WorkspaceCheckpointsParams{WorkspaceID: ws}, &cps)
	if len(cps.Checkpoints) != 1 || cps.Checkpoints[0].CheckpointID != undo || !cps.Checkpoints[0].Auto {
		t.Fatalf("checkpoints = %+v", cps.Checkpoints)
	}

	// The rm changed the workspace: the next one is new; then nothing
	// changes, and it is reused.
	next, _ := execute(t, c, k.KernelID, "1 + 1", withCheckpoint)
	if next.Checkpoint == "" || next.Checkpoint == undo {
		t.Fatalf("after the rm, the automatic checkpoint is %q (the rm's: %s)", next.Checkpoint, undo)
	}
	again, _ := execute(t, c, k.KernelID, "2 + 2", withCheckpoint)
	if again.Checkpoint != next.Checkpoint {
		t.Fatalf("nothing changed, yet the automatic checkpoint is %q, not %q", again.Checkpoint, next.Checkpoint)
	}
	var reused protocol.Checkpoint
	c.mustCall(t, protocol.MethodWorkspaceCheckpoint, protocol.WorkspaceCheckpointParams{WorkspaceID: ws, Auto: true}, &reused)
	if !reused.Reused || reused.CheckpointID != next.Checkpoint {
		t.Fatalf("workspace/checkpoint auto with nothing changed = %+v", reused)
	}

	// Undo.
	c.mustCall(t, protocol.MethodWorkspaceRestore, protocol.WorkspaceRestoreParams{WorkspaceID: ws, CheckpointID: undo}, nil)
	if got := readAll(t, c, ws, autoFiles); got != want {
		t.Fatalf("after restoring %s:\n%s\nwant\n%s", undo, got, want)
	}
	wantCode(t, c.call(t, protocol.MethodFsRead, protocol.FsReadParams{WorkspaceID: ws, Path: "src/gone.py"}, nil), protocol.CodeNotFound)
	if got := d.changes(t, ws); got != changes {
		t.Fatalf("changes after the restore:\n%s\nwant\n%s", got, changes)
	}
	if out := d.sh(t, ws, "stat -c %a data/notes.txt; readlink data/link"); out != "600\n../src/keep.py\n" {
		t.Fatalf("mode and link after the restore: %q", out)
	}

	// Fork: the same changes; then independent.
	var fork protocol.WorkspaceInfo
	c.mustCall(t, protocol.MethodWorkspaceFork, protocol.WorkspaceForkParams{WorkspaceID: ws}, &fork)
	if fork.WorkspaceID == "" || fork.WorkspaceID == ws || fork.Name != "auto-fork-1" || fork.Mode != protocol.WorkspaceModeOverlay {
		t.Fatalf("fork = %+v", fork)
	}
	if got := d.changes(t, fork.WorkspaceID); got != changes {
		t.Fatalf("the fork's changes:\n%s\nwant the source's:\n%s", got, changes)
	}
	if got := readAll(t, c, fork.WorkspaceID, autoFiles); got != want {
		t.Fatalf("the fork's files:\n%s\nwant\n%s", got, want)
	}
	write := func(ws, path, content string) {
		c.mustCall(t, protocol.MethodFsWrite, protocol.FsWriteParams{WorkspaceID: ws, Path: path, Content: content}, nil)
	}
	write(fork.WorkspaceID, "fork.txt", "fork\n")
	write(fork.WorkspaceID, "src/keep.py", "fork's\n")
	write(ws, "source.txt", "source\n")
	wantCode(t, c.call(t, protocol.MethodFsRead, protocol.FsReadParams{WorkspaceID: ws, Path: "fork.txt"}, nil), protocol.CodeNotFound)
	wantCode(t, c.call(t, protocol.MethodFsRead, protocol.FsReadParams{WorkspaceID: fork.WorkspaceID, Path: "source.txt"}, nil), protocol.CodeNotFound)
	if got := readAll(t, c, ws, autoFiles); got != want {
		t.Fatalf("the source after writes in the fork:\n%s\nwant\n%s", got, want)
	}
	if got := readAll(t, c, fork.WorkspaceID, []string{"src/keep.py", "fork.txt"}); got != "src/keep.py fork's\n\nfork.txt fork\n\n" {
		t.Fatalf("the fork's own writes: %q", got)
	}
	// The kernel still runs in the source and sees its files, not the fork's.
	if res, outs := execute(t, c, k.KernelID, `import os; print(os.path.exists("fork.txt"), open("source.txt").read().strip())`); res.Status != protocol.ExecutionStatusOK ||
		!strings.Contains(streamText(outs, protocol.StreamStdout), "False source") {
		t.Fatalf("the source's kernel: %+v %s", res, streamText(outs, protocol.StreamStdout))
	}
}

// readAll reads each path with fs/read (base64, byte for byte; a symlink
// is read through) and prints "path content" lines.
func readAll(t *testing.T, c *client, ws string, paths []string) string {
	t.Helper()
	var b strings.Builder
	for _, p := range paths {
		var r protocol.FsReadResult
		c.mustCall(t, protocol.MethodFsRead, protocol.FsReadParams{WorkspaceID: ws, Path: p, Encoding: protocol.EncodingBase64}, &r)
		content, err := base64.StdEncoding.DecodeString(r.Content)
		if err != nil {
			t.Fatalf("fs/read %s: %v", p, err)
		}
		if strings.HasSuffix(p, ".bin") {
			fmt.Fprintf(&b, "%s %x\n", p, content)
		} else {
			fmt.Fprintf(&b, "%s %s\n", p, content)
		}
	}
	return b.String()
}
