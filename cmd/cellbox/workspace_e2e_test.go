package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

type execReply struct {
	ExitCode int    `json:"exitCode"`
	Signal   string `json:"signal"`
	Reason   string `json:"reason"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
}

// TestWorkspaceLifecycle: open, reopen (same id), list, run code that
// writes, close, and a new daemon on the same state dir finds the changes.
func TestWorkspaceLifecycle(t *testing.T) {
	project := t.TempDir()
	if err := os.WriteFile(filepath.Join(project, "a.txt"), []byte("project\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startStdio(t)
	c := p.client()
	c.initialize(t)
	var ws, again protocol.WorkspaceInfo
	c.mustCall(t, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: project, Name: "e2e"}, &ws)
	c.mustCall(t, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: project, Name: "e2e"}, &again)
	if ws.WorkspaceID == "" || again.WorkspaceID != ws.WorkspaceID || ws.Mode != protocol.WorkspaceModeOverlay || ws.CreatedAt.IsZero() {
		t.Fatalf("open = %+v, reopen = %+v", ws, again)
	}
	var other protocol.WorkspaceInfo
	c.mustCall(t, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: project, Name: "other"}, &other)
	if other.WorkspaceID == ws.WorkspaceID {
		t.Fatal("another name gave the same workspace")
	}
	var list protocol.WorkspaceListResult
	c.mustCall(t, protocol.MethodWorkspaceList, struct{}{}, &list)
	if len(list.Workspaces) != 2 {
		t.Fatalf("list = %+v", list)
	}

	var r execReply
	c.mustCall(t, "cellboxTest/exec", map[string]any{"workspaceId": ws.WorkspaceID, "argv": []string{"sh", "-c", "cat a.txt; echo sandbox > a.txt; echo new > b.txt; id -un; hostname"}}, &r)
	if r.ExitCode != 0 || r.Stdout != "project\ncellbox\ncellbox\n" {
		t.Fatalf("exec = %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(project, "a.txt")); string(b) != "project\n" {
		t.Fatalf("the project changed: a.txt = %q", b)
	}
	if _, err := os.Stat(filepath.Join(project, "b.txt")); !os.IsNotExist(err) {
		t.Fatalf("b.txt reached the project: %v", err)
	}
	var stats protocol.DaemonStats
	c.mustCall(t, protocol.MethodDaemonStats, struct{}{}, &stats)
	if stats.Workspaces != 2 {
		t.Fatalf("stats.workspaces = %d", stats.Workspaces)
	}
	c.mustCall(t, protocol.MethodWorkspaceClose, protocol.WorkspaceCloseParams{WorkspaceID: ws.WorkspaceID}, nil)
	wantCode(t, c.call(t, "cellboxTest/exec", map[string]any{"workspaceId": ws.WorkspaceID, "argv": []string{"true"}}, nil), protocol.CodeNotFound)
	c.mustCall(t, protocol.MethodShutdown, nil, nil)
	_ = c.conn.Notify(context.Background(), protocol.MethodExit, nil)
	p.wait(t)

	// A new daemon on the same state dir: the same root+name has the changes.
	q := startStdioEnv(t, p.cmd.Env)
	d := q.client()
	d.initialize(t)
	var reopened protocol.WorkspaceInfo
	d.mustCall(t, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: project, Name: "e2e"}, &reopened)
	if reopened.WorkspaceID != ws.WorkspaceID || !reopened.CreatedAt.Equal(ws.CreatedAt) {
		t.Fatalf("reopened = %+v, first = %+v", reopened, ws)
	}
	d.mustCall(t, "cellboxTest/exec", map[string]any{"workspaceId": ws.WorkspaceID, "argv": []string{"cat", "a.txt", "b.txt"}}, &r)
	if r.Stdout != "sandbox\nnew\n" {
		t.Fatalf("after a restart the workspace shows %q", r.Stdout)
	}
	// close with discard removes the changes.
	d.mustCall(t, protocol.MethodWorkspaceClose, protocol.WorkspaceCloseParams{WorkspaceID: ws.WorkspaceID, Discard: true}, nil)
	d.mustCall(t, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: project, Name: "e2e"}, &reopened)
	d.mustCall(t, "cellboxTest/exec", map[string]any{"workspaceId": reopened.WorkspaceID, "argv": []string{"cat", "a.txt"}}, &r)
	if r.Stdout != "project\n" {
		t.Fatalf("after discard a.txt = %q", r.Stdout)
	}
}

// TestDaemonKilledLeavesNoSandbox: kill -9 the daemon while a sandboxed
// program runs; the sandbox's processes go with it.
func TestDaemonKilledLeavesNoSandbox(t *testing.T) {
	project := t.TempDir()
	p := startStdio(t)
	c := p.client()
	c.initialize(t)
	var ws protocol.WorkspaceInfo
	c.mustCall(t, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: project}, &ws)
	marker := "cellbox-e2e-marker-" + strings.ReplaceAll(t.Name(), "/", "-")
	go func() {
		_ = c.call(t, "cellboxTest/exec", map[string]any{"workspaceId": ws.WorkspaceID, "argv": []string{"bash", "-c", "exec -a " + marker + " sleep 1000"}}, nil)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(pgrep(marker)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the sandboxed sleep never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The sleep's parent is the sandbox's spawner, whose parent is its init.
	sleepPid := pgrep(marker)[0]
	spawner := ppid(t, sleepPid)
	init := ppid(t, spawner)
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	deadline = time.Now().Add(10 * time.Second)
	for _, pid := range []string{sleepPid, spawner, init} {
		for exists(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("sandbox process %s outlived the killed daemon", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func ppid(t *testing.T, pid string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return f[1]
}

func exists(pid string) bool {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return f[0] != "Z"
}

// pgrep lists host pids whose command line starts with prefix.
func pgrep(prefix string) []string {
	out, _ := exec.Command("pgrep", "-f", "^"+prefix).Output()
	return strings.Fields(string(out))
}
