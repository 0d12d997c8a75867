package main

// The attack suite over the wire: bombs run through cellboxTest/exec in
// the real daemon, which keeps answering, and bad requests get their
// PROTOCOL.md §7 codes. The attacks themselves are tried one by one in
// workspace/attack_linux_test.go.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// attackReply is the result of cellboxTest/exec.
type attackReply struct {
	ExitCode   int    `json:"exitCode"`
	Signal     string `json:"signal"`
	Reason     string `json:"reason"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	DurationMs int64  `json:"durationMs"`
}

func attackProject(t *testing.T) string {
	t.Helper()
	project := t.TempDir()
	if err := os.WriteFile(filepath.Join(project, "hello.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return project
}

func openWorkspace(t *testing.T, c *client, root, name string) string {
	t.Helper()
	var ws protocol.WorkspaceInfo
	c.mustCall(t, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: root, Name: name}, &ws)
	if ws.WorkspaceID == "" {
		t.Fatalf("workspace/open gave %+v", ws)
	}
	return ws.WorkspaceID
}

func execIn(t *testing.T, c *client, id string, limits *protocol.Limits, argv ...string) attackReply {
	t.Helper()
	var r attackReply
	c.mustCall(t, "cellboxTest/exec", map[string]any{"workspaceId": id, "argv": argv, "limits": limits}, &r)
	return r
}

// bombsWhileOthersWork runs a fork bomb and a memory bomb through bomber
// in one workspace while other (another connection, or the same one)
// keeps using the daemon and a second workspace.
func bombsWhileOthersWork(t *testing.T, bomber, other *client, project string) {
	t.Helper()
	bombWS := openWorkspace(t, bomber, project, "bomb")
	otherWS := openWorkspace(t, other, project, "bystander")
	if r := execIn(t, other, otherWS, nil, "true"); r.ExitCode != 0 {
		t.Fatalf("bystander: %+v", r)
	}

	done := make(chan attackReply, 1)
	go func() {
		var r attackReply
		err := bomber.call(t, "cellboxTest/exec", map[string]any{
			"workspaceId": bombWS, "argv": []string{"bash", "-c", ":(){ :|:& };:; sleep 60"},
			"limits": protocol.Limits{Pids: 64, TimeoutMs: 8000},
		}, &r)
		if err != nil {
			t.Errorf("fork bomb: %v", err)
		}
		done <- r
	}()
	// The bomb has filled (half) its pids.
	bombs := func() int {
		n := 0
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.HasSuffix(string(b), "\x00-c\x00:(){ :|:& };:; sleep 60\x00") {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(20 * time.Second); bombs() < 32; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the fork bomb never reached 32 processes (%d)", bombs())
		}
	}
	for i := 0; i < 4; i++ {
		start := time.Now()
		var stats protocol.DaemonStats
		other.mustCall(t, protocol.MethodDaemonStats, struct{}{}, &stats)
		r := execIn(t, other, otherWS, nil, "/bin/echo", "still here")
		if d := time.Since(start); d > 5*time.Second || r.Stdout != "still here\n" || stats.Workspaces < 2 {
			t.Errorf("during the fork bomb: daemon/stats %+v and exec %+v took %v", stats, r, d)
		}
	}
	select {
	case <-done:
		t.Fatal("the fork bomb ended before its timeout")
	default:
	}
	r := <-done
	t.Logf("fork bomb: exit %d signal %s reason %q after %d ms", r.ExitCode, r.Signal, r.Reason, r.DurationMs)
	if r.Reason != "killed: timeout" || r.Signal != "SIGKILL" {
		t.Errorf("fork bomb ended with %+v, want killed: timeout", r)
	}
	if !strings.Contains(r.Stderr, "Resource temporarily unavailable") {
		t.Errorf("the fork bomb never met the pids limit; stderr %.300q", r.Stderr)
	}

	m := execIn(t, bomber, bombWS, &protocol.Limits{MemoryBytes: 512 << 20, TimeoutMs: 30000}, "python3", "-c",
		"a = []\nfor i in range(200): a.append(bytearray(16 << 20))\nprint('survived')")
	t.Logf("memory bomb: exit %d signal %s reason %q; stderr %.200q", m.ExitCode, m.Signal, m.Reason, m.Stderr)
	if m.ExitCode == 0 || m.Reason != "" || strings.Contains(m.Stdout, "survived") || !strings.Contains(m.Stderr, "MemoryError") {
		t.Errorf("memory bomb: %+v; want MemoryError at the 512 MiB limit", m)
	}

	// Both workspaces and the daemon still work.
	for _, w := range []struct {
		c  *client
		id string
	}{{bomber, bombWS}, {other, otherWS}} {
		if r := execIn(t, w.c, w.id, nil, "/bin/echo", "ok"); r.ExitCode != 0 || r.Stdout != "ok\n" {
			t.Errorf("workspace %s after the bombs: %+v", w.id, r)
		}
	}
	var stats protocol.DaemonStats
	bomber.mustCall(t, protocol.MethodDaemonStats, struct{}{}, &stats)
}

func TestAttackOverStdio(t *testing.T) {
	project := attackProject(t)
	p := startStdio(t)
	c := p.client()
	c.initialize(t)
	_ = c.conn.Notify(context.Background(), protocol.MethodInitialized, struct{}{})
	// One connection: its requests run side by side.
	bombsWhileOthersWork(t, c, c, project)

	// Bad requests get their codes, and the daemon goes on.
	ws := openWorkspace(t, c, project, "bomb")
	wantCode(t, c.call(t, "cellboxTest/exec", map[string]any{"workspaceId": "ws-000000000000", "argv": []string{"true"}}, nil), protocol.CodeNotFound)
	wantCode(t, c.call(t, "cellboxTest/exec", map[string]any{"workspaceId": ws, "argv": []string{"true"}, "limits": protocol.Limits{MemoryBytes: 1 << 50}}, nil), protocol.CodeLimitExceeded)
	wantCode(t, c.call(t, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: "relative/project"}, nil), protocol.CodeInvalidParams)
	wantCode(t, c.call(t, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: project, Mode: protocol.WorkspaceModeDirect}, nil), protocol.CodeInvalidParams)
	var stats protocol.DaemonStats
	c.mustCall(t, protocol.MethodDaemonStats, struct{}{}, &stats)
	if stats.Workspaces != 2 {
		t.Errorf("daemon/stats after the attacks: %+v, want 2 workspaces", stats)
	}
	if b, _ := os.ReadFile(filepath.Join(project, "hello.txt")); string(b) != "hello\n" {
		t.Errorf("the project changed: %q", b)
	}
}

func TestAttackOverWebsocket(t *testing.T) {
	project := attackProject(t)
	p := startListen(t)
	bomber, _ := p.wsClient(t)
	bomber.initialize(t)
	other, _ := p.wsClient(t)
	other.initialize(t)
	// Two connections: the bomber's does not hold up the other's.
	bombsWhileOthersWork(t, bomber, other, project)
	var stats protocol.DaemonStats
	other.mustCall(t, protocol.MethodDaemonStats, struct{}{}, &stats)
	if stats.Connections != 2 {
		t.Errorf("daemon/stats: %+v, want 2 connections", stats)
	}
}
