//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cellbox-dev/cellbox/rpc"
)

// End-to-end tests of `cellbox mcp` (PROTOCOL.md §10) with real MCP
// clients: the official TypeScript SDK's Client over stdio and Streamable
// HTTP (rpc/mcp/test/mcp.test.mjs, run with node --test), the MCP
// Inspector's CLI, and the official Go SDK's client for the bad-input
// paths.

// mcpProject is the project every test starts from.
var mcpProject = map[string]string{
	"README.md":      "a project\n",
	"data/input.txt": "1 2 3\n",
}

// mcpTestDir is the node project of the TypeScript clients, with its
// packages installed (npm ci when they are missing or stale). Without node
// or the packages the test is skipped, and fails under CI.
func mcpTestDir(t *testing.T) string {
	t.Helper()
	need := func(format string, a ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, a...)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "rpc", "mcp", "test"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		need("node is not on PATH (apt-get install nodejs): %v", err)
	}
	lock, err := os.Stat(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err != nil || st.ModTime().Before(lock.ModTime()) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			need("npm ci in %s: %v\n%s", dir, err, out)
		}
	}
	return dir
}

// mcpEnv is a project, state and runtime dir, and the binary, for a
// daemon and its MCP servers run as root or, asUser, as CELLBOX_TEST_USER
// (who then owns them all, as users do).
type mcpEnv struct {
	env     []string
	project string
	bin     string
	cred    *syscall.Credential
}

func newMCPEnv(t *testing.T, asUser bool) *mcpEnv {
	t.Helper()
	e := &mcpEnv{bin: cellboxBin}
	if !asUser {
		e.project = t.TempDir()
		writeFiles(t, e.project, mcpProject)
		e.env = append(testEnv(t), "CELLBOX_LOG_LEVEL=info")
	} else {
		ut := newTestUserTree(t, "cellbox-mcp-user-", mcpProject, "state", "run", "home")
		base := ut.base
		e.bin, e.project = ut.bin, ut.project
		// HOME of its own: npm and node write caches there.
		e.env = []string{"HOME=" + filepath.Join(base, "home"), "USER=" + ut.u.Username, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
			"CELLBOX_STATE_DIR=" + filepath.Join(base, "state"), "XDG_RUNTIME_DIR=" + filepath.Join(base, "run"), "CELLBOX_LOG_LEVEL=info"}
		e.cred = ut.cred
	}
	state := envValue(e.env, "CELLBOX_STATE_DIR")
	t.Cleanup(func() {
		// The daemons cellbox mcp started (it does, as cellbox connect does).
		for _, pid := range e.daemons(t) {
			stopDaemon(t, pid)
		}
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(state, "daemon.log")); err == nil {
				t.Logf("daemon.log:\n%s", b)
			}
		}
	})
	return e
}

// daemons are the pids of the daemons running in e: those of the runtime
// files (read here, not with rpc.FindServers, which trusts only the
// files of its own user).
func (e *mcpEnv) daemons(t *testing.T) []int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(envValue(e.env, "XDG_RUNTIME_DIR"), "cellbox", "server-*.json"))
	var pids []int
	for _, f := range files {
		var info rpc.RuntimeInfo
		if b, err := os.ReadFile(f); err == nil && json.Unmarshal(b, &info) == nil && info.PID > 0 && syscall.Kill(info.PID, 0) == nil {
			pids = append(pids, info.PID)
		}
	}
	return pids
}

// stopDaemon ends a daemon that cellbox mcp started and waits until it
// has exited: gone, or a zombie of the cellbox mcp that started it and
// never waits for it.
func stopDaemon(t *testing.T, pid int) {
	t.Helper()
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && strings.HasPrefix(string(stat[i:]), ") Z") {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("daemon %d still runs 20s after SIGTERM", pid)
			return
		}
	}
}

// command is name args run in this environment (as its user).
func (e *mcpEnv) command(ctx context.Context, dir, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = e.env
	if e.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.cred}
	}
	return cmd
}

// nodeTest runs mcp.test.mjs with env added, failing with its output.
func (e *mcpEnv) nodeTest(t *testing.T, dir string, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := e.command(ctx, dir, "node", "--test", "--test-reporter=spec", "--test-timeout=600000", "mcp.test.mjs")
	cmd.Env = append(cmd.Env, append([]string{"CELLBOX_BIN=" + e.bin, "CELLBOX_MCP_PROJECT=" + e.project}, env...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("node --test mcp.test.mjs: %v\n%s", err, out)
		return
	}
	t.Logf("node --test mcp.test.mjs:\n%s", out)
}

// TestMCPStdioTypeScriptClient: the TypeScript SDK's Client spawns cellbox
// mcp (which starts the user's daemon) and runs the agent's loop: write a
// test and a bug, run, read the failure, fix with edits, run; files
// changed; a long run with progress and poll; checkpoint and restore; an
// image; commit refused, then done by a new server with --allow-commit
// that finds the same workspace and kernel. The MCP Inspector's CLI lists
// the tools and calls run.
func TestMCPStdioTypeScriptClient(t *testing.T) {
	dir := mcpTestDir(t)
	asUsers(t, func(t *testing.T, asUser bool) {
		e := newMCPEnv(t, asUser)
		e.nodeTest(t, dir, "CELLBOX_MCP_TRANSPORT=stdio")
		if asUser {
			return
		}
		inspector := func(args ...string) []byte {
			t.Helper()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			argv := []string{"--no-install", "@modelcontextprotocol/inspector", "--cli"}
			for _, kv := range []string{"CELLBOX_STATE_DIR", "XDG_RUNTIME_DIR", "HOME", "PATH"} {
				argv = append(argv, "-e", kv+"="+envValue(e.env, kv))
			}
			argv = append(argv, e.bin, "mcp", "--root", e.project)
			cmd := e.command(ctx, dir, "npx", append(argv, args...)...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("npx %s: %v\n%s%s", strings.Join(argv, " "), err, out, stderr.String())
			}
			return out
		}
		var list struct {
			Tools []struct {
				Name         string         `json:"name"`
				OutputSchema map[string]any `json:"outputSchema"`
			} `json:"tools"`
		}
		if out := inspector("--method", "tools/list"); json.Unmarshal(out, &list) != nil || len(list.Tools) != 11 {
			t.Fatalf("inspector tools/list: %d tools in\n%s", len(list.Tools), out)
		}
		for _, tool := range list.Tools {
			if tool.OutputSchema["type"] != "object" {
				t.Errorf("inspector: tool %s has no output schema", tool.Name)
			}
		}
		var call struct {
			IsError           bool `json:"isError"`
			StructuredContent struct {
				Status string `json:"status"`
				Stdout string `json:"stdout"`
			} `json:"structuredContent"`
		}
		out := inspector("--method", "tools/call", "--tool-name", "run", "--tool-arg", "code=print(6*7)")
		if json.Unmarshal(out, &call) != nil || call.IsError || call.StructuredContent.Status != "ok" || call.StructuredContent.Stdout != "42\n" {
			t.Fatalf("inspector tools/call run: %s", out)
		}
	})
}

// TestMCPHTTPTypeScriptClient: the same loop over Streamable HTTP at /mcp
// of `cellbox serve --listen`, whose workspace is the daemon's directory;
// /mcp is behind the token and Origin checks.
func TestMCPHTTPTypeScriptClient(t *testing.T) {
	dir := mcpTestDir(t)
	e := newMCPEnv(t, false)
	cmd := e.command(context.Background(), e.project, cellboxBin, "serve", "--listen", "127.0.0.1:0", "--mcp-toolsets", "apps")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := startProc(t, cmd)
	sc := bufio.NewScanner(stdout)
	var base, token string
	for sc.Scan() {
		if m := urlRE.FindStringSubmatch(sc.Text()); m != nil {
			base, token = m[0][:strings.Index(m[0], "/?")], m[1]
			break
		}
	}
	if base == "" {
		t.Fatalf("serve --listen printed no URL; stderr:\n%s", stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()

	for _, tt := range []struct {
		name   string
		header http.Header
		want   int
	}{
		{"no token", http.Header{}, http.StatusUnauthorized},
		{"foreign origin", http.Header{"Authorization": {"Bearer " + token}, "Origin": {"http://evil.example"}}, http.StatusForbidden},
	} {
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header = tt.header
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("POST /mcp with %s: %s, want %d", tt.name, resp.Status, tt.want)
		}
	}
	e.nodeTest(t, dir, "CELLBOX_MCP_TRANSPORT=http", "CELLBOX_MCP_URL="+base, "CELLBOX_MCP_TOKEN="+token)

	// A client names another project on the URL (the token too, here).
	other := t.TempDir()
	writeFiles(t, other, map[string]string{"README.md": "another project\n"})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	endpoint := base + "/mcp?token=" + token + "&root=" + other
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "cellbox-e2e", Version: "1"}, nil).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint}, nil)
	if err != nil {
		t.Fatalf("connect to %s/mcp?root=...: %v", base, err)
	}
	defer cs.Close()
	res, text := callTool(t, cs, "read_file", map[string]any{"path": "README.md"})
	if res.IsError || text != "another project\n" {
		t.Fatalf("read_file README.md in the workspace of ?root=: %q", text)
	}
	res, text = callTool(t, cs, "run", map[string]any{"code": "import os\nos.listdir('.')"})
	if res.IsError || !strings.Contains(text, `README.md`) || strings.Contains(text, "data") {
		t.Fatalf("run in the workspace of ?root=: %s", text)
	}
}

// mcpClient is the Go SDK's client of `cellbox mcp` run in e.
func mcpClient(t *testing.T, e *mcpEnv, args ...string) *sdk.ClientSession {
	t.Helper()
	cmd := e.command(context.Background(), e.project, e.bin, append([]string{"mcp", "--root", e.project}, args...)...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "cellbox-e2e", Version: "1"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to cellbox mcp: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		_ = cs.Close()
		if t.Failed() {
			t.Logf("cellbox mcp stderr:\n%s", stderr.String())
		}
	})
	return cs
}

// callTool calls a tool and returns its result and content text.
func callTool(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) (*sdk.CallToolResult, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	return res, strings.Join(text, "\n")
}

func wantToolError(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any, want string) {
	t.Helper()
	res, text := callTool(t, cs, name, args)
	if !res.IsError || !strings.Contains(text, want) {
		t.Fatalf("%s %v: isError %v, %q; want a tool error with %q", name, args, res.IsError, text, want)
	}
}

// structured is a tool result's structured content.
func structured(t *testing.T, res *sdk.CallToolResult, v any) {
	t.Helper()
	raw, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(raw, v)
	}
	if err != nil {
		t.Fatalf("structured content %v: %v", res.StructuredContent, err)
	}
}

// TestMCPBadInput: bad input is a tool error that says what is wrong, and
// a daemon that goes away under a run is a clear tool error, after which
// the server (still up) reconnects to a new daemon.
func TestMCPBadInput(t *testing.T) {
	asUsers(t, func(t *testing.T, asUser bool) {
		e := newMCPEnv(t, asUser)
		cs := mcpClient(t, e)
		wantToolError(t, cs, "poll", map[string]any{"executionId": "mcp-000000000000"}, `unknown executionId "mcp-000000000000"`)
		wantToolError(t, cs, "write_file", map[string]any{"path": "README.md", "edits": []map[string]string{{"search": "no such text", "replace": "x"}}},
			`README.md: edit 1: search text not found ("no such text")`)
		wantToolError(t, cs, "write_file", map[string]any{"path": "README.md", "content": "x", "edits": []map[string]string{{"search": "a", "replace": "b"}}},
			"give either content")
		wantToolError(t, cs, "read_file", map[string]any{"path": "../../etc/passwd"}, "PathOutsideWorkspace: ")
		wantToolError(t, cs, "read_file", map[string]any{"path": "no/such/file"}, "NotFound: ")
		wantToolError(t, cs, "restore", map[string]any{"checkpointId": "cp-nope"}, "NotFound: ")
		wantToolError(t, cs, "run", map[string]any{"code": "1", "timeoutS": -1}, "timeoutS")
		wantToolError(t, cs, "run", map[string]any{"waitS": 1}, `missing properties: ["code"]`)

		// The daemon goes away while code runs.
		res, text := callTool(t, cs, "run", map[string]any{"code": "import time\nwhile True:\n    time.sleep(0.1)", "waitS": 1})
		var run struct {
			Status      string `json:"status"`
			ExecutionID string `json:"executionId"`
		}
		structured(t, res, &run)
		if res.IsError || run.Status != "running" {
			t.Fatalf("run: %s", text)
		}
		daemons := e.daemons(t)
		if len(daemons) != 1 {
			t.Fatalf("the daemon cellbox mcp started: %v", daemons)
		}
		stopDaemon(t, daemons[0])
		res, text = callTool(t, cs, "poll", map[string]any{"executionId": run.ExecutionID, "waitS": 10})
		if !res.IsError || !strings.HasPrefix(text, "sandbox failure: ") || !strings.Contains(text, "lost") {
			t.Fatalf("poll after the daemon went away: isError %v, %q; want a sandbox failure saying the connection was lost", res.IsError, text)
		}
		// The server is still up, and the next run reconnects (starting a
		// daemon again), in the same workspace, with a new kernel.
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if tools, err := cs.ListTools(ctx, nil); err != nil || len(tools.Tools) != 11 {
			t.Fatalf("tools/list after the daemon went away: %v", err)
		}
		res, text = callTool(t, cs, "run", map[string]any{"code": "print(open('README.md').read())"})
		var again struct {
			Status, Stdout, Note string
		}
		structured(t, res, &again)
		if res.IsError || again.Status != "ok" || again.Stdout != "a project\n\n" || !strings.Contains(again.Note, "A new python kernel was started") {
			t.Fatalf("run after reconnecting: %s", text)
		}
	})
}

// TestMCPHelp: cellbox help mcp documents the flags and how to add it.
func TestMCPHelp(t *testing.T) {
	out, err := exec.Command(cellboxBin, "help", "mcp").CombinedOutput()
	if err != nil {
		t.Fatalf("cellbox help mcp: %v\n%s", err, out)
	}
	for _, want := range []string{"--root", "--name", "--allow-commit", "--language", "CELLBOX_ALLOW_COMMIT", "claude mcp add cellbox -- cellbox mcp", "/mcp"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("cellbox help mcp lacks %q", want)
		}
	}
	var ee *exec.ExitError
	if err := exec.Command(cellboxBin, "mcp", "--bogus").Run(); !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("cellbox mcp --bogus: %v, want exit 2", err)
	}
}
