package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/rpc"
)

// connectProc is `cellbox connect`, as an editor starts it.
type connectProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	c     *client
	errb  *syncBuffer
}

func startConnect(t *testing.T, env []string) *connectProc {
	t.Helper()
	return startConnectIn(t, env, "")
}

// startConnectIn starts connect in dir, as an editor opened there does.
func startConnectIn(t *testing.T, env []string, dir string) *connectProc {
	t.Helper()
	cmd := exec.Command(cellboxBin, "connect", "--log-level", "debug")
	cmd.Env = env
	cmd.Dir = dir
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	return &connectProc{cmd: cmd, stdin: stdin, errb: startProc(t, cmd), c: newClient(headerStream(stdout, stdin))}
}

func (p *connectProc) wait(t *testing.T) int { return waitExit(t, p.cmd) }

// TestConnect: connect starts the long-lived daemon when none runs, the
// daemon outlives the editor, the next connect reuses it, and the exit code
// follows §2.
func TestConnect(t *testing.T) {
	env := testEnv(t)
	rtDir := filepath.Join(envValue(env, "XDG_RUNTIME_DIR"), "cellbox")

	// Whatever happens below, no daemon this test started outlives it.
	t.Cleanup(func() {
		servers, _ := rpc.FindServers(rtDir)
		for _, s := range servers {
			_ = syscall.Kill(s.PID, syscall.SIGTERM)
		}
	})
	firstDir, secondDir := t.TempDir(), t.TempDir()
	first := startConnectIn(t, env, firstDir)
	res := first.c.initialize(t)
	checkCapabilities(t, res)
	servers, err := rpc.FindServers(rtDir)
	if err != nil || len(servers) != 1 {
		t.Fatalf("after the first connect: %d daemons (%v), want 1", len(servers), err)
	}
	daemon := servers[0]
	t.Cleanup(func() { _ = syscall.Kill(daemon.PID, syscall.SIGTERM) })

	// The daemon runs in the user's home, not in "/" nor in the first
	// editor's directory; a workspace/open without a root opens the
	// directory of the editor that asks.
	home, _ := os.UserHomeDir()
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", daemon.PID)); err != nil || cwd != home {
		t.Errorf("the daemon runs in %q (%v), want the home %q", cwd, err, home)
	}
	var ws protocol.WorkspaceInfo
	first.c.mustCall(t, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{}, &ws)
	if ws.Root != firstDir {
		t.Errorf("workspace/open without a root over connect opened %q, want the editor's %q", ws.Root, firstDir)
	}

	// The editor goes away without shutdown: connect exits 0 (stdin closed)
	// and the daemon keeps running.
	_ = first.stdin.Close()
	if code := first.wait(t); code != 0 {
		t.Fatalf("connect exit code %d after stdin closed, want 0", code)
	}
	healthz(t, daemon)

	// The next editor finds the same daemon.
	second := startConnectIn(t, env, secondDir)
	second.c.initialize(t)
	second.c.mustCall(t, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{}, &ws)
	if ws.Root != secondDir {
		t.Errorf("the second editor's workspace/open without a root opened %q, want %q", ws.Root, secondDir)
	}
	second.c.mustCall(t, protocol.MethodDaemonStats, struct{}{}, nil)
	if servers, _ := rpc.FindServers(rtDir); len(servers) != 1 || servers[0].PID != daemon.PID {
		t.Fatalf("daemons after the second connect: %+v, want only pid %d", servers, daemon.PID)
	}
	second.c.mustCall(t, protocol.MethodShutdown, nil, nil)
	_ = second.c.conn.Notify(context.Background(), protocol.MethodExit, nil)
	if code := second.wait(t); code != 0 {
		t.Fatalf("connect exit code %d after shutdown+exit, want 0", code)
	}

	third := startConnect(t, env)
	third.c.initialize(t)
	_ = third.c.conn.Notify(context.Background(), protocol.MethodExit, nil)
	if code := third.wait(t); code != 1 {
		t.Fatalf("connect exit code %d after exit without shutdown, want 1", code)
	}
	healthz(t, daemon) // shutdown ends a connection, not the daemon

	// The daemon's log went to the state dir, not to the editor.
	if _, err := os.Stat(filepath.Join(envValue(env, "CELLBOX_STATE_DIR"), "daemon.log")); err != nil {
		t.Fatalf("daemon.log: %v", err)
	}
	_ = syscall.Kill(daemon.PID, syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if s, _ := rpc.FindServers(rtDir); len(s) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the daemon's runtime file stayed after SIGTERM")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func healthz(t *testing.T, info rpc.RuntimeInfo) {
	t.Helper()
	u, _ := http.NewRequest("GET", info.URL, nil)
	req, _ := http.NewRequest("GET", "http://"+u.URL.Host+"/healthz", nil)
	req.Header.Set("Authorization", "Bearer "+info.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("daemon not reachable: %v", err)
	}
	defer resp.Body.Close()
	var body map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != 200 || body["status"] != "ok" {
		t.Fatalf("healthz = %d %v", resp.StatusCode, body)
	}
}
