package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
)

// The Client tests run against the real daemon: the cellbox binary, built
// once for the package's tests that need it, started by Dial itself.
var (
	cellboxBinOnce sync.Once
	cellboxBinDir  string
	cellboxBinPath string
	cellboxBinErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if cellboxBinDir != "" {
		os.RemoveAll(cellboxBinDir)
	}
	os.Exit(code)
}

// cellboxBinary builds cmd/cellbox (as releases are built: CGO_ENABLED=0)
// on first use.
func cellboxBinary(t *testing.T) string {
	t.Helper()
	cellboxBinOnce.Do(func() {
		cellboxBinDir, cellboxBinErr = os.MkdirTemp("", "cellbox-rpc-test-")
		if cellboxBinErr != nil {
			return
		}
		cellboxBinPath = filepath.Join(cellboxBinDir, "cellbox")
		build := exec.Command("go", "build", "-o", cellboxBinPath, "github.com/cellbox-dev/cellbox/cmd/cellbox")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			cellboxBinErr = fmt.Errorf("build cellbox: %v\n%s", err, out)
		}
	})
	if cellboxBinErr != nil {
		t.Fatal(cellboxBinErr)
	}
	return cellboxBinPath
}

// daemonEnv gives the test its own state and runtime dirs, and stops every
// daemon started in them when the test ends.
func daemonEnv(t *testing.T) (state string) {
	t.Helper()
	state = t.TempDir()
	run := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", run) // the started daemon inherits it
	t.Cleanup(func() {
		servers, _ := FindServers(RuntimeDir(state))
		for _, s := range servers {
			stopDaemon(t, s.PID)
		}
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(state, "daemon.log")); err == nil {
				t.Logf("daemon.log:\n%s", b)
			}
		}
	})
	return state
}

// stopDaemon ends a daemon this process started (so its parent) and reaps it.
func stopDaemon(t *testing.T, pid int) {
	t.Helper()
	_ = unix.Kill(pid, unix.SIGTERM)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		if wpid == pid || errors.Is(err, unix.ECHILD) {
			return
		}
		if time.Now().After(deadline) {
			_ = unix.Kill(pid, unix.SIGKILL)
			t.Errorf("daemon %d still runs 20s after SIGTERM", pid)
			return
		}
	}
}

// notes records the notifications a Client gets.
type notes struct {
	mu   sync.Mutex
	list []note
}

func (n *notes) add(method string, params json.RawMessage) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.list = append(n.list, note{method, params})
}

// waitFor waits for a notification of method for which match is true.
func (n *notes) waitFor(t *testing.T, method string, match func(json.RawMessage) bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n.mu.Lock()
		found := slices.ContainsFunc(n.list, func(x note) bool { return x.Method == method && match(x.Params) })
		n.mu.Unlock()
		if found {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s notification as expected after 20s", method)
		}
	}
}

func dialTest(t *testing.T, state string, o ClientOptions) *Client {
	t.Helper()
	o.StateDir = state
	o.Executable = cellboxBinary(t)
	o.ServeArgs = []string{"--log-level", "debug"}
	o.ClientInfo = protocol.ClientInfo{Name: "rpc-client-test", Version: "1"}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, o)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func callTest(t *testing.T, c *Client, method string, params, result any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := c.Call(ctx, method, params, result); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
}

// TestClientDial: Dial starts the daemon and initializes; errors come back
// as *protocol.Error; notifications arrive; a second Dial reuses the
// daemon; Close leaves it running.
func TestClientDial(t *testing.T) {
	state := daemonEnv(t)
	var got notes
	c := dialTest(t, state, ClientOptions{OnNotify: got.add})

	servers, err := FindServers(RuntimeDir(state))
	if err != nil || len(servers) != 1 {
		t.Fatalf("after Dial: %d daemons (%v), want 1 started", len(servers), err)
	}
	daemon := servers[0]
	caps := c.Capabilities()
	if !slices.ContainsFunc(caps.Languages, func(l protocol.LanguageCapability) bool { return l.ID == "python" }) {
		t.Errorf("initialize capabilities list no python: %+v", caps.Languages)
	}

	err = c.Call(t.Context(), "no/such/method", struct{}{}, nil)
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeMethodNotFound || pe.Message == "" || pe.Detail == "" {
		t.Fatalf("unknown method: %#v, want a *protocol.Error -32601 with a message and detail", err)
	}

	// A notification: fs/didChange of a file written through the client.
	if !caps.Sandbox.Overlay {
		t.Skipf("no overlay sandbox on this host: %s", caps.Sandbox.Reason)
	}
	project := t.TempDir()
	var ws protocol.WorkspaceInfo
	callTest(t, c, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: project}, &ws)
	var watch protocol.FsWatchResult
	callTest(t, c, protocol.MethodFsWatch, protocol.FsWatchParams{WorkspaceID: ws.WorkspaceID}, &watch)
	callTest(t, c, protocol.MethodFsWrite, protocol.FsWriteParams{WorkspaceID: ws.WorkspaceID, Path: "new.txt", Content: "hi\n"}, nil)
	got.waitFor(t, protocol.MethodFsDidChange, func(raw json.RawMessage) bool {
		var p protocol.FsDidChangeParams
		return json.Unmarshal(raw, &p) == nil && p.WatchID == watch.WatchID &&
			slices.ContainsFunc(p.Changes, func(fc protocol.FileChange) bool { return fc.Path == "new.txt" })
	})

	// A second client finds the same daemon, and sees the first's workspace.
	c2 := dialTest(t, state, ClientOptions{})
	if s, _ := FindServers(RuntimeDir(state)); len(s) != 1 || s[0].PID != daemon.PID {
		t.Fatalf("daemons after the second Dial: %+v, want only pid %d", s, daemon.PID)
	}
	var stats protocol.DaemonStats
	callTest(t, c2, protocol.MethodDaemonStats, struct{}{}, &stats)
	if stats.Connections != 2 {
		t.Errorf("daemon/stats connections = %d with two clients, want 2", stats.Connections)
	}

	// Close ends the connection, not the daemon.
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case <-c.Done():
	default:
		t.Error("Done is not closed after Close")
	}
	if err := c.Call(t.Context(), protocol.MethodDaemonStats, struct{}{}, nil); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Call after Close = %v, want an error saying the client is closed", err)
	}
	if err := checkHealth(t.Context(), daemon); err != nil {
		t.Fatalf("the daemon after Close: %v", err)
	}
	var changes protocol.WorkspaceChangesResult
	callTest(t, c2, protocol.MethodWorkspaceChanges, protocol.WorkspaceChangesParams{WorkspaceID: ws.WorkspaceID}, &changes)
	if len(changes.Changes) != 1 || changes.Changes[0].Path != "new.txt" {
		t.Errorf("changes after the first client closed = %+v, want new.txt", changes.Changes)
	}
	// The daemon saw a clean close: it counts one connection again.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		callTest(t, c2, protocol.MethodDaemonStats, struct{}{}, &stats)
		if stats.Connections == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon/stats connections = %d after Close, want 1", stats.Connections)
		}
	}
}

// TestClientKernel: a cancelled Call sends $/cancelRequest (the execution
// is interrupted), and OnRequest answers kernel/inputRequest.
func TestClientKernel(t *testing.T) {
	state := daemonEnv(t)
	var got notes
	c := dialTest(t, state, ClientOptions{
		OnNotify:     got.add,
		Capabilities: protocol.ClientCapabilities{InputRequest: true},
		OnRequest: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
			if method != protocol.MethodKernelInputRequest {
				return nil, protocol.Errorf(protocol.CodeMethodNotFound, "unexpected %s", method)
			}
			var p protocol.KernelInputRequestParams
			if err := json.Unmarshal(params, &p); err != nil {
				return nil, err
			}
			return protocol.KernelInputReply{Value: "answer to " + p.Prompt}, nil
		},
	})
	caps := c.Capabilities()
	i := slices.IndexFunc(caps.Languages, func(l protocol.LanguageCapability) bool { return l.ID == "python" })
	if i < 0 || !caps.Languages[i].Available {
		t.Skipf("no python kernel on this host: %+v", caps.Languages)
	}
	var k protocol.KernelStartResult
	callTest(t, c, protocol.MethodKernelStart, protocol.KernelStartParams{Language: "python"}, &k)
	t.Cleanup(func() {
		_ = c.Call(context.Background(), protocol.MethodKernelShutdown, map[string]string{"kernelId": k.KernelID}, nil)
	})

	var res protocol.ExecuteResult
	callTest(t, c, protocol.MethodKernelExecute, protocol.KernelExecuteParams{KernelID: k.KernelID, AllowStdin: true,
		Code: "x = input('q?')\nprint('got', x)"}, &res)
	got.waitFor(t, protocol.MethodKernelOutput, func(raw json.RawMessage) bool {
		var p protocol.KernelOutputParams
		return json.Unmarshal(raw, &p) == nil && strings.Contains(p.Text, "got answer to q?")
	})

	// The context ends first: the execution is cancelled on the daemon,
	// so the next one runs at once rather than after the sleep.
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	keepOn := false // the next execution is not aborted by this one's end
	err := c.Call(ctx, protocol.MethodKernelExecute, protocol.KernelExecuteParams{KernelID: k.KernelID, Code: "import time\ntime.sleep(60)", StopOnError: &keepOn}, nil)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Fatalf("Call with an expiring context = %v after %v, want DeadlineExceeded at once", err, time.Since(start))
	}
	start = time.Now()
	callTest(t, c, protocol.MethodKernelExecute, protocol.KernelExecuteParams{KernelID: k.KernelID, Code: "print('after')"}, &res)
	if d := time.Since(start); d > 20*time.Second || res.Status != protocol.ExecutionStatusOK {
		t.Fatalf("the execution after the cancelled one: %+v after %v; the sleep was not interrupted", res, d)
	}
}

// TestClientDaemonDies: the daemon is killed; Done closes and a Call fails
// at once rather than hang.
func TestClientDaemonDies(t *testing.T) {
	state := daemonEnv(t)
	c := dialTest(t, state, ClientOptions{})
	servers, err := FindServers(RuntimeDir(state))
	if err != nil || len(servers) != 1 {
		t.Fatalf("after Dial: %d daemons (%v), want 1", len(servers), err)
	}
	pid := servers[0].PID

	// A call in flight when the daemon dies fails too.
	inflight := make(chan error, 1)
	go func() {
		inflight <- c.Call(context.Background(), protocol.MethodKernelStart, protocol.KernelStartParams{Language: "python"}, nil)
	}()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	stopDaemon(t, pid) // reaps it
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed 10s after the daemon was killed")
	}
	select {
	case <-inflight: // an answer, if it came first, or an error
	case <-time.After(10 * time.Second):
		t.Fatal("a call in flight still waits 10s after the daemon was killed")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err = c.Call(ctx, protocol.MethodDaemonStats, struct{}{}, nil)
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "connection to the daemon lost") {
		t.Fatalf("Call after the daemon died = %v (ctx: %v), want a lost-connection error at once", err, ctx.Err())
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close after the daemon died: %v", err)
	}
}
