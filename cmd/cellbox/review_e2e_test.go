package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/rpc"
)

// reviewDaemon is the user's daemon as the review commands find it, with
// a Go client of it standing in for the code that writes the workspace
// (a notebook's kernel, an editor).
type reviewDaemon struct {
	env []string
	c   *rpc.Client
}

func startReviewDaemon(t *testing.T) *reviewDaemon {
	t.Helper()
	env := testEnv(t)
	state, run := envValue(env, "CELLBOX_STATE_DIR"), envValue(env, "XDG_RUNTIME_DIR")
	t.Setenv("XDG_RUNTIME_DIR", run) // for Dial here, and the daemon it starts
	t.Cleanup(func() {
		servers, _ := rpc.FindServers(rpc.RuntimeDir(state))
		for _, s := range servers {
			stopReviewDaemon(t, s.PID)
		}
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(state, "daemon.log")); err == nil {
				t.Logf("daemon.log:\n%s", b)
			}
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := rpc.Dial(ctx, rpc.ClientOptions{StateDir: state, Executable: cellboxBin, ServeArgs: []string{"--log-level", testLogLevel}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &reviewDaemon{env: env, c: c}
}

// stopReviewDaemon ends the daemon and waits for it to be gone (this
// process started it, so it reaps it).
func stopReviewDaemon(t *testing.T, pid int) {
	t.Helper()
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var ws syscall.WaitStatus
		wpid, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		if wpid == pid || errors.Is(err, syscall.ECHILD) && syscall.Kill(pid, 0) != nil {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("daemon %d still runs 20s after SIGTERM", pid)
			return
		}
	}
}

func (d *reviewDaemon) call(t *testing.T, method string, params, result any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := d.c.Call(ctx, method, params, result); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
}

func (d *reviewDaemon) write(t *testing.T, ws, path, content string) {
	t.Helper()
	d.call(t, protocol.MethodFsWrite, protocol.FsWriteParams{WorkspaceID: ws, Path: path, Content: content, CreateParents: true}, nil)
}

type cliResult struct {
	stdout, stderr string
	code           int
}

// cellbox runs the binary in dir with the daemon's environment.
func (d *reviewDaemon) cellbox(t *testing.T, dir string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cellboxBin, args...)
	cmd.Dir = dir
	cmd.Env = append(d.env, "CELLBOX_LOG_LEVEL=warn")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := cliResult{stdout.String(), stderr.String(), 0}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("cellbox %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// want checks one command's result.
func (r cliResult) want(t *testing.T, what string, code int, stdout string) {
	t.Helper()
	if r.code != code || r.stdout != stdout {
		t.Fatalf("%s: exit %d, stdout %q, stderr %q; want exit %d, stdout %q", what, r.code, r.stdout, r.stderr, code, stdout)
	}
}

func readFile(t *testing.T, path string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

// TestReview: code writes the workspace of a project over the daemon; the
// user reviews it with the review commands, run in the project.
func TestReview(t *testing.T) {
	d := startReviewDaemon(t)
	project := t.TempDir()
	if err := os.WriteFile(filepath.Join(project, "base.txt"), []byte("base\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ws protocol.WorkspaceInfo
	d.call(t, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: project}, &ws)
	d.write(t, ws.WorkspaceID, "new.txt", "hello\n")

	d.cellbox(t, project, "changes").want(t, "changes", 0, "A new.txt\n")
	var changes protocol.WorkspaceChangesResult
	r := d.cellbox(t, project, "changes", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &changes); err != nil || len(changes.Changes) != 1 || changes.Changes[0].Kind != protocol.ChangeKindAdded {
		t.Fatalf("changes --json = %q (%v)", r.stdout, err)
	}

	r = d.cellbox(t, project, "diff")
	if r.code != 0 || !strings.Contains(r.stdout, "+++ b/new.txt\n") || !strings.Contains(r.stdout, "\n+hello\n") || strings.Contains(r.stdout, "\x1b[") {
		t.Fatalf("diff: exit %d, stdout %q, stderr %q; want the uncoloured + line", r.code, r.stdout, r.stderr)
	}
	if r = d.cellbox(t, project, "diff", "--color=always", "new.txt"); !strings.Contains(r.stdout, "\x1b[32m+hello\x1b[m\n") {
		t.Fatalf("diff --color=always new.txt = %q, want the + line green", r.stdout)
	}

	// commit: the file reaches the project only then.
	if _, ok := readFile(t, filepath.Join(project, "new.txt")); ok {
		t.Fatal("new.txt is in the project before the commit")
	}
	d.cellbox(t, project, "commit", "new.txt").want(t, "commit new.txt", 0, "committed new.txt\n")
	if got, _ := readFile(t, filepath.Join(project, "new.txt")); got != "hello\n" {
		t.Fatalf("after commit the project's new.txt = %q", got)
	}
	d.cellbox(t, project, "changes").want(t, "changes after commit", 0, "")

	// discard needs paths or --all.
	d.write(t, ws.WorkspaceID, "scratch.txt", "tmp\n")
	d.write(t, ws.WorkspaceID, "base.txt", "edited\n")
	if r = d.cellbox(t, project, "discard"); r.code != 2 || !strings.Contains(r.stderr, "--all") {
		t.Fatalf("discard without paths: exit %d, stderr %q; want 2 naming --all", r.code, r.stderr)
	}
	d.cellbox(t, project, "changes").want(t, "changes", 0, "M base.txt\nA scratch.txt\n")
	d.cellbox(t, project, "discard", "--all").want(t, "discard --all", 0, "discarded base.txt\ndiscarded scratch.txt\n")
	d.cellbox(t, project, "changes").want(t, "changes after discard", 0, "")
	if got, _ := readFile(t, filepath.Join(project, "base.txt")); got != "base\n" {
		t.Fatalf("discard touched the project: base.txt = %q", got)
	}
	if _, ok := readFile(t, filepath.Join(project, "scratch.txt")); ok {
		t.Fatal("discard wrote scratch.txt into the project")
	}

	// checkpoint, checkpoints, restore.
	d.write(t, ws.WorkspaceID, "cp.txt", "one\n")
	if r = d.cellbox(t, project, "checkpoint", "first"); r.code != 0 || !strings.Contains(r.stdout, " first: 1 file, 4 bytes") {
		t.Fatalf("checkpoint first: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	d.write(t, ws.WorkspaceID, "cp.txt", "two\n")
	if r = d.cellbox(t, project, "checkpoints"); r.code != 0 || !strings.HasPrefix(r.stdout, "ID ") || !strings.Contains(r.stdout, " first ") {
		t.Fatalf("checkpoints: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r = d.cellbox(t, project, "restore", "first"); r.code != 0 || !strings.Contains(r.stdout, "restored checkpoint") {
		t.Fatalf("restore first: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	var read protocol.FsReadResult
	d.call(t, protocol.MethodFsRead, protocol.FsReadParams{WorkspaceID: ws.WorkspaceID, Path: "cp.txt"}, &read)
	if read.Content != "one\n" {
		t.Fatalf("after restore cp.txt = %q, want one", read.Content)
	}
	if r = d.cellbox(t, project, "checkpoints"); !strings.Contains(r.stdout, " before-restore ") {
		t.Fatalf("checkpoints after restore = %q, want before-restore", r.stdout)
	}
	if r = d.cellbox(t, project, "restore", "nosuch"); r.code != 1 || !strings.Contains(r.stderr, `cellbox restore: no checkpoint has the id or name "nosuch"`) {
		t.Fatalf("restore nosuch: exit %d, stderr %q", r.code, r.stderr)
	}
	d.cellbox(t, project, "discard", "cp.txt").want(t, "discard cp.txt", 0, "discarded cp.txt\n")

	// From a subdirectory: the project's workspace, paths relative to it.
	sub := filepath.Join(project, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	d.write(t, ws.WorkspaceID, "sub/deep.txt", "deep\n")
	d.cellbox(t, sub, "changes").want(t, "changes in sub", 0, "A deep.txt\n")
	d.cellbox(t, sub, "commit", "deep.txt").want(t, "commit in sub", 0, "committed deep.txt\n")
	if got, _ := readFile(t, filepath.Join(sub, "deep.txt")); got != "deep\n" {
		t.Fatalf("after commit from sub, sub/deep.txt = %q", got)
	}

	// Paths outside the root, and paths that name no change, are refused.
	outside := filepath.Join(filepath.Dir(project), "elsewhere.txt")
	for _, args := range [][]string{{"diff", "../elsewhere.txt"}, {"commit", outside}, {"discard", "sub/../../x"}} {
		if r = d.cellbox(t, project, args...); r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "cellbox "+args[0]+": ") || !strings.Contains(r.stderr, "is outside the workspace's root "+ws.Root) {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q; want 1 and outside the root", args, r.code, r.stdout, r.stderr)
		}
	}
	if r = d.cellbox(t, project, "commit", "typo.txt"); r.code != 1 || !strings.Contains(r.stderr, "cellbox commit: no change at typo.txt") {
		t.Fatalf("commit typo.txt: exit %d, stderr %q", r.code, r.stderr)
	}

	// A conflict: the project's file changed behind the workspace.
	d.write(t, ws.WorkspaceID, "base.txt", "workspace\n")
	d.cellbox(t, project, "changes").want(t, "changes", 0, "M base.txt\n")
	if err := os.WriteFile(filepath.Join(project, "base.txt"), []byte("edited in the project\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = d.cellbox(t, project, "commit")
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "conflict base.txt: ") ||
		!strings.Contains(r.stderr, "cellbox commit: 1 path not committed: it conflicts with the project (Conflict") {
		t.Fatalf("commit with a conflict: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if got, _ := readFile(t, filepath.Join(project, "base.txt")); got != "edited in the project\n" {
		t.Fatalf("the conflicting commit overwrote base.txt: %q", got)
	}

	// A protocol error: its message and its §7 name.
	if r = d.cellbox(t, project, "changes", "--root", "/"); r.code != 1 || !strings.HasPrefix(r.stderr, "cellbox changes: ") || !strings.Contains(r.stderr, "(InvalidParams)") {
		t.Fatalf("changes --root /: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestReviewNamedWorkspace: --name picks a workspace of the same project,
// and the review commands started the daemon themselves when none ran.
func TestReviewNamedWorkspace(t *testing.T) {
	env := testEnv(t)
	state := envValue(env, "CELLBOX_STATE_DIR")
	t.Setenv("XDG_RUNTIME_DIR", envValue(env, "XDG_RUNTIME_DIR"))
	t.Cleanup(func() {
		servers, _ := rpc.FindServers(rpc.RuntimeDir(state))
		for _, s := range servers {
			stopReviewDaemon(t, s.PID)
		}
	})
	d := &reviewDaemon{env: env}
	project := t.TempDir()
	d.cellbox(t, project, "changes", "--name", "nb").want(t, "changes --name nb with no daemon", 0, "")
	servers, err := rpc.FindServers(rpc.RuntimeDir(state))
	if err != nil || len(servers) != 1 {
		t.Fatalf("after a review command: %d daemons (%v), want the one it started", len(servers), err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if d.c, err = rpc.Dial(ctx, rpc.ClientOptions{StateDir: state}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.c.Close() })
	var ws protocol.WorkspaceInfo
	d.call(t, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: project, Name: "nb"}, &ws)
	d.write(t, ws.WorkspaceID, "out.csv", "a,b\n")
	d.cellbox(t, project, "changes", "--name", "nb").want(t, "changes --name nb", 0, "A out.csv\n")
	d.cellbox(t, project, "changes").want(t, "changes of the unnamed workspace", 0, "")
	elsewhere := t.TempDir()
	rel, _ := filepath.Rel(elsewhere, filepath.Join(project, "out.csv")) // paths print relative to the current directory
	d.cellbox(t, elsewhere, "commit", "--root", project, "--name=nb").want(t, "commit --root --name", 0, "committed "+rel+"\n")
	if got, _ := readFile(t, filepath.Join(project, "out.csv")); got != "a,b\n" {
		t.Fatalf("after commit out.csv = %q", got)
	}
	if r := d.cellbox(t, project, "help", "discard"); r.code != 0 || !strings.Contains(r.stdout, "--all") || !strings.Contains(r.stdout, "CELLBOX_STATE_DIR") {
		t.Fatalf("help discard: %q", r.stdout)
	}
}

// TestReviewArgs: the command line of the review commands, without a daemon.
func TestReviewArgs(t *testing.T) {
	for _, tt := range []struct {
		args      []string
		wantPos   []string
		wantName  string
		wantAll   bool
		wantError string
	}{
		{args: []string{"a.txt", "--name", "nb", "b.txt"}, wantPos: []string{"a.txt", "b.txt"}, wantName: "nb"},
		{args: []string{"--all"}, wantAll: true},
		{args: []string{"--name=nb", "--", "--all", "-x"}, wantPos: []string{"--all", "-x"}, wantName: "nb"},
		{args: []string{"a.txt", "-m", "msg"}, wantError: "flag provided but not defined: -m"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Setenv("CELLBOX_ALL", "true") // never sets --all
			var cfg reviewConfig
			fs := reviewFlags("discard", &cfg)
			fs.SetOutput(io.Discard)
			pos, err := parseReviewArgs(fs, tt.args, func(fs *flag.FlagSet) { addAllFlag(fs, &cfg) })
			if tt.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantError) {
					t.Fatalf("err = %v, want %q", err, tt.wantError)
				}
				return
			}
			if err != nil || !slices.Equal(pos, tt.wantPos) || cfg.name != tt.wantName || cfg.all != tt.wantAll {
				t.Fatalf("= %q, name %q, all %v, %v; want %q, name %q, all %v", pos, cfg.name, cfg.all, err, tt.wantPos, tt.wantName, tt.wantAll)
			}
		})
	}

	r := &review{cwd: "/p/sub", root: "/p", ws: protocol.WorkspaceInfo{Root: "/p"}}
	for _, tt := range []struct{ arg, want, wantError string }{
		{arg: "a.txt", want: "sub/a.txt"},
		{arg: "../b", want: "b"},
		{arg: "..", want: "."},
		{arg: "/p/c/d", want: "c/d"},
		{arg: `"caf\351"`, want: `"sub/caf\xe9"`},
		{arg: "../../x", wantError: "../../x is outside the workspace's root /p"},
		{arg: "/elsewhere", wantError: "outside"},
		{arg: "", wantError: "empty PATH"},
	} {
		got, err := r.workspacePath(tt.arg)
		if tt.wantError != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantError) {
				t.Errorf("workspacePath(%q) = %q, %v; want an error with %q", tt.arg, got, err, tt.wantError)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("workspacePath(%q) = %q, %v; want %q", tt.arg, got, err, tt.want)
		}
	}
	for code, want := range map[protocol.ErrorCode]string{protocol.CodePathOutsideWorkspace: "PathOutsideWorkspace",
		protocol.CodeConflict: "Conflict", protocol.CodeMethodNotFound: "MethodNotFound", -32099: "error -32099"} {
		if got := codeName(code); got != want {
			t.Errorf("codeName(%d) = %q, want %q", code, got, want)
		}
	}
}
