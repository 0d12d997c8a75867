package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// End-to-end tests of workspace/changes, diff, commit, discard and the
// checkpoints over the real binary, as root and as CELLBOX_TEST_USER.

// filesDaemon is a daemon and its client for these tests, run as root or
// as the test user (who then owns the project, as users do).
type filesDaemon struct {
	p       *stdioProc
	c       *client
	env     []string
	args    []string
	cred    *syscall.Credential
	project string
}

// newFilesDaemon starts a daemon over a fresh project holding files;
// asUser runs it (and owns the project) as CELLBOX_TEST_USER.
func newFilesDaemon(t testing.TB, asUser bool, files map[string]string, args ...string) *filesDaemon {
	t.Helper()
	d := &filesDaemon{args: args}
	if !asUser {
		d.project = t.TempDir()
		writeFiles(t, d.project, files)
		d.env = testEnv(t)
		d.start(t)
		return d
	}
	ut := newTestUserTree(t, "cellbox-e2e-user-", files, "state", "run")
	d.project = ut.project
	d.env = []string{"HOME=" + ut.u.HomeDir, "USER=" + ut.u.Username, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
		"CELLBOX_STATE_DIR=" + filepath.Join(ut.base, "state"), "XDG_RUNTIME_DIR=" + filepath.Join(ut.base, "run"), "CELLBOX_LOG_LEVEL=" + testLogLevel,
		"CELLBOX_TEST_BIN=" + ut.bin}
	d.cred = ut.cred
	d.start(t)
	return d
}

// testUserTree is a tree of CELLBOX_TEST_USER's own (the test's temporary
// directories are root's, 0700): base (0755) with dirs, bin/cellbox (a
// copy of the binary) and project/ holding files, all the user's.
type testUserTree struct {
	base, bin, project string
	u                  *user.User
	cred               *syscall.Credential
}

// newTestUserTree makes one, or skips (fails under CI) without root and
// CELLBOX_TEST_USER.
func newTestUserTree(t testing.TB, prefix string, files map[string]string, dirs ...string) *testUserTree {
	t.Helper()
	name := os.Getenv("CELLBOX_TEST_USER")
	if name == "" || os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI must run these tests as root with CELLBOX_TEST_USER set")
		}
		t.Skip("set CELLBOX_TEST_USER (useradd -m cellboxtest) and run as root to run this as an unprivileged user")
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	base, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	for _, dir := range append([]string{"bin", "project"}, dirs...) {
		if err := os.MkdirAll(filepath.Join(base, dir), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	ut := &testUserTree{base: base, bin: filepath.Join(base, "bin", "cellbox"), project: filepath.Join(base, "project"), u: u,
		cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	if err := copyFile(cellboxBin, ut.bin); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, ut.project, files)
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := filepath.Walk(base, func(p string, _ os.FileInfo, err error) error {
		if err != nil || p == base {
			return err
		}
		return os.Lchown(p, uid, gid)
	}); err != nil {
		t.Fatal(err)
	}
	return ut
}

// start starts (or restarts) the daemon on the same state dir.
func (d *filesDaemon) start(t testing.TB) {
	t.Helper()
	bin := cellboxBin
	if b := envValue(d.env, "CELLBOX_TEST_BIN"); b != "" {
		bin = b
	}
	cmd := exec.Command(bin, append([]string{"serve", "--stdio", "--test-hooks"}, d.args...)...)
	cmd.Env = d.env
	if d.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: d.cred}
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.p = &stdioProc{cmd: cmd, stdin: stdin, stdout: stdout, stderr: startProc(t, cmd)}
	d.c = d.p.client()
	d.c.initialize(t)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// writeFiles writes a project (a value "->target" is a symlink).
func writeFiles(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		} else if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sh runs a script in the workspace and fails the test if it fails.
func (d *filesDaemon) sh(t testing.TB, ws, script string) string {
	t.Helper()
	var r execReply
	d.c.mustCall(t, "cellboxTest/exec", map[string]any{"workspaceId": ws, "argv": []string{"sh", "-ec", script}}, &r)
	if r.ExitCode != 0 {
		t.Fatalf("script failed (exit %d, %s): %s\nstderr: %s", r.ExitCode, r.Reason, script, r.Stderr)
	}
	return r.Stdout
}

func (d *filesDaemon) changes(t testing.TB, ws string) string {
	t.Helper()
	var res protocol.WorkspaceChangesResult
	d.c.mustCall(t, protocol.MethodWorkspaceChanges, protocol.WorkspaceChangesParams{WorkspaceID: ws}, &res)
	var lines []string
	for _, c := range res.Changes {
		l := string(c.Kind) + " " + c.Path
		if c.Size != nil {
			l += fmt.Sprintf(" %d", *c.Size)
		}
		if c.Binary {
			l += " binary"
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}

func sortedLines(lines ...string) string {
	lines = append([]string(nil), lines...)
	sort.Slice(lines, func(i, j int) bool { return pathOf(lines[i]) < pathOf(lines[j]) })
	return strings.Join(lines, "\n")
}

func pathOf(line string) string {
	f := strings.SplitN(line, " ", 2)[1]
	for _, suffix := range []string{" binary"} {
		f = strings.TrimSuffix(f, suffix)
	}
	if i := strings.LastIndexByte(f, ' '); i >= 0 {
		if _, err := strconv.Atoi(f[i+1:]); err == nil {
			f = f[:i]
		}
	}
	return f
}

var e2eProject = map[string]string{
	"keep.txt":         "keep\n",
	"mod.txt":          "old\n",
	"tree/a.txt":       "a\n",
	"tree/sub/b.txt":   "b\n",
	"opq/x.txt":        "x\n",
	"opq/y.txt":        "y\n",
	"ren.txt":          "renamed\n",
	"mode.sh":          "#!/bin/sh\n",
	"same.txt":         "same\n",
	"conflict.txt":     "v1\n",
	"esc/inside.txt":   "inside\n",
	"link":             "->keep.txt",
	"dir with space/f": "f\n",
}

const e2eScript = `
echo new > mod.txt
rm -rf tree
rm -rf opq && mkdir opq && echo z > opq/z.txt
mv ren.txt renamed.txt
chmod 755 mode.sh
cp same.txt /tmp/s && cat /tmp/s > same.txt
printf 'a\000b' > bin.dat
: > empty.txt
mkdir -p 'new dir' && echo u > 'new dir/ünï ✓.txt'
echo ws > conflict.txt
echo ws > esc/inside.txt
echo ws > esc/added.txt
ln -s mod.txt newlink
`

var e2eWant = []string{
	"modified mod.txt 4",
	"deleted tree/a.txt",
	"deleted tree/sub/b.txt",
	"deleted opq/x.txt",
	"deleted opq/y.txt",
	"added opq/z.txt 2",
	"deleted ren.txt",
	"added renamed.txt 8",
	"modified mode.sh 10",
	"added bin.dat 3 binary",
	"added empty.txt 0",
	"added new dir/ünï ✓.txt 2",
	"modified conflict.txt 3",
	"modified esc/inside.txt 3",
	"added esc/added.txt 3",
	"added newlink 7",
}

func TestWorkspaceFilesE2E(t *testing.T) {
	for _, asUser := range []bool{false, true} {
		name := "root"
		if asUser {
			name = "user"
		}
		t.Run(name, func(t *testing.T) { workspaceFilesE2E(t, asUser) })
	}
}

func workspaceFilesE2E(t *testing.T, asUser bool) {
	d := newFilesDaemon(t, asUser, e2eProject, "--max-checkpoints", "3")
	c := d.c
	ws := openWorkspace(t, c, d.project, "files")
	if got := d.changes(t, ws); got != "" {
		t.Fatalf("a fresh workspace has changes:\n%s", got)
	}
	d.sh(t, ws, e2eScript)
	want := sortedLines(e2eWant...)
	if got := d.changes(t, ws); got != want {
		t.Fatalf("changes:\n%s\nwant:\n%s", got, want)
	}

	// diff
	var diff protocol.WorkspaceDiffResult
	c.mustCall(t, protocol.MethodWorkspaceDiff, protocol.WorkspaceDiffParams{WorkspaceID: ws, Paths: []string{"mod.txt", "bin.dat", "opq"}}, &diff)
	got := map[string]protocol.FileDiff{}
	for _, f := range diff.Files {
		got[f.Path] = f
	}
	if len(diff.Files) != 5 || got["mod.txt"].Diff != "--- a/mod.txt\n+++ b/mod.txt\n@@ -1 +1 @@\n-old\n+new\n" ||
		!got["bin.dat"].Binary || got["bin.dat"].Diff != "" || got["opq/x.txt"].Kind != protocol.ChangeKindDeleted ||
		got["opq/z.txt"].Diff != "--- /dev/null\n+++ b/opq/z.txt\n@@ -0,0 +1 @@\n+z\n" {
		t.Fatalf("diff = %+v", diff.Files)
	}

	// checkpoint (taken before the commit and the discards below)
	var cp1 protocol.Checkpoint
	c.mustCall(t, protocol.MethodWorkspaceCheckpoint, protocol.WorkspaceCheckpointParams{WorkspaceID: ws, Name: "cp1"}, &cp1)
	if cp1.Name != "cp1" || cp1.Files != len(e2eWant) || cp1.Bytes == 0 || cp1.CreatedAt.IsZero() {
		t.Fatalf("checkpoint = %+v", cp1)
	}

	// A conflict: the project's file changes after the workspace saw it.
	writeFiles(t, d.project, map[string]string{"conflict.txt.new": "outside\n"})
	if err := os.Rename(filepath.Join(d.project, "conflict.txt.new"), filepath.Join(d.project, "conflict.txt")); err != nil {
		t.Fatal(err)
	}
	// A symlink escape: the project's esc/ becomes a symlink to a
	// directory outside the project.
	outside := t.TempDir()
	if err := os.Rename(filepath.Join(d.project, "esc"), filepath.Join(outside, "esc")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "esc"), filepath.Join(d.project, "esc")); err != nil {
		t.Fatal(err)
	}
	var res protocol.WorkspaceCommitResult
	c.mustCall(t, protocol.MethodWorkspaceCommit, protocol.WorkspaceCommitParams{WorkspaceID: ws, Paths: []string{"mod.txt", "tree", "opq", "renamed.txt", "ren.txt", "mode.sh", "new dir", "conflict.txt", "esc", "newlink"}}, &res)
	wantApplied := "mod.txt,new dir/ünï ✓.txt,newlink,opq/x.txt,opq/y.txt,opq/z.txt,ren.txt,renamed.txt,mode.sh,tree/a.txt,tree/sub/b.txt"
	sortedApplied := append([]string(nil), res.Applied...)
	sort.Strings(sortedApplied)
	wa := strings.Split(wantApplied, ",")
	sort.Strings(wa)
	if strings.Join(sortedApplied, ",") != strings.Join(wa, ",") {
		t.Fatalf("applied %q, want %q (conflicts %+v)", res.Applied, wa, res.Conflicts)
	}
	conflicts := map[string]string{}
	for _, cf := range res.Conflicts {
		conflicts[cf.Path] = cf.Reason
	}
	if len(conflicts) != 4 || !strings.Contains(conflicts["conflict.txt"], "modified in the project") ||
		!strings.Contains(conflicts["esc/added.txt"], "symlink") || !strings.Contains(conflicts["esc/inside.txt"], "symlink") || conflicts["esc"] == "" {
		t.Fatalf("conflicts = %+v", res.Conflicts)
	}
	for p, content := range map[string]string{"mod.txt": "new\n", "renamed.txt": "renamed\n", "new dir/ünï ✓.txt": "u\n", "opq/z.txt": "z\n", "conflict.txt": "outside\n"} {
		if b, err := os.ReadFile(filepath.Join(d.project, p)); err != nil || string(b) != content {
			t.Errorf("project %s = %q, %v; want %q", p, b, err, content)
		}
	}
	for _, p := range []string{"tree", "opq/x.txt", "ren.txt"} {
		if _, err := os.Lstat(filepath.Join(d.project, p)); !os.IsNotExist(err) {
			t.Errorf("%s is still in the project (%v)", p, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(d.project, "mode.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("mode.sh: %v %v", fi, err)
	}
	if l, err := os.Readlink(filepath.Join(d.project, "newlink")); err != nil || l != "mod.txt" {
		t.Errorf("newlink: %q %v", l, err)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "esc", "inside.txt")); string(b) != "inside\n" {
		t.Errorf("the commit wrote outside the project: %q", b)
	}
	if _, err := os.Stat(filepath.Join(outside, "esc", "added.txt")); !os.IsNotExist(err) {
		t.Errorf("the commit created a file outside the project: %v", err)
	}
	remaining := sortedLines("added bin.dat 3 binary", "added empty.txt 0", "modified conflict.txt 3",
		"deleted esc", "added esc/inside.txt 3", "added esc/added.txt 3")
	if got := d.changes(t, ws); got != remaining {
		t.Fatalf("changes after the commit:\n%s\nwant:\n%s", got, remaining)
	}

	// discard, while a program of the workspace runs
	running := make(chan error, 1)
	mark := fmt.Sprintf("3.%06d", time.Now().UnixNano()%1000000)
	go func() {
		running <- c.call(t, "cellboxTest/exec", map[string]any{"workspaceId": ws, "argv": []string{"sh", "-c", "exec 3<empty.txt; sleep " + mark}}, nil)
	}()
	if n := waitHostProcs(1, "sleep", mark); n != 1 {
		t.Fatalf("the program holding empty.txt does not run (%d)", n)
	}
	var disc protocol.WorkspaceDiscardResult
	c.mustCall(t, protocol.MethodWorkspaceDiscard, protocol.WorkspaceDiscardParams{WorkspaceID: ws, Paths: []string{"conflict.txt"}}, &disc)
	if strings.Join(disc.Discarded, ",") != "conflict.txt" {
		t.Fatalf("discarded %v", disc.Discarded)
	}
	if out := d.sh(t, ws, "cat conflict.txt"); out != "outside\n" {
		t.Fatalf("after discard conflict.txt = %q", out)
	}
	c.mustCall(t, protocol.MethodWorkspaceDiscard, protocol.WorkspaceDiscardParams{WorkspaceID: ws}, &disc)
	if len(disc.Discarded) != 5 {
		t.Fatalf("discarded %v", disc.Discarded)
	}
	if got := d.changes(t, ws); got != "" {
		t.Fatalf("changes after discarding all:\n%s", got)
	}
	if err := <-running; err != nil {
		t.Fatalf("the program running during the discard: %v", err)
	}

	// restore cp1: the workspace holds its files again; the state before
	// is kept as before-restore.
	c.mustCall(t, protocol.MethodWorkspaceRestore, protocol.WorkspaceRestoreParams{WorkspaceID: ws, CheckpointID: cp1.CheckpointID}, nil)
	if out := d.sh(t, ws, "cat mod.txt conflict.txt opq/z.txt; ls tree opq bin.dat empty.txt 2>&1 || true"); !strings.Contains(out, "new\nws\nz\n") || !strings.Contains(out, "No such file") || !strings.Contains(out, "bin.dat\nempty.txt") {
		t.Fatalf("after restore: %q", out)
	}
	var cps protocol.WorkspaceCheckpointsResult
	c.mustCall(t, protocol.MethodWorkspaceCheckpoints, protocol.WorkspaceCheckpointsParams{WorkspaceID: ws}, &cps)
	if len(cps.Checkpoints) != 2 || cps.Checkpoints[0].CheckpointID != cp1.CheckpointID || cps.Checkpoints[1].Name != "before-restore" || cps.Checkpoints[1].Files != 0 {
		t.Fatalf("checkpoints = %+v", cps.Checkpoints)
	}
	// The bound (--max-checkpoints 3): the oldest goes first.
	for i := range 2 {
		c.mustCall(t, protocol.MethodWorkspaceCheckpoint, protocol.WorkspaceCheckpointParams{WorkspaceID: ws, Name: fmt.Sprint("more", i)}, nil)
	}
	c.mustCall(t, protocol.MethodWorkspaceCheckpoints, protocol.WorkspaceCheckpointsParams{WorkspaceID: ws}, &cps)
	var names []string
	for _, cp := range cps.Checkpoints {
		names = append(names, cp.Name)
	}
	if strings.Join(names, ",") != "before-restore,more0,more1" {
		t.Fatalf("checkpoints over the bound: %v", names)
	}
	c.mustCall(t, protocol.MethodWorkspaceDeleteCheckpoint, protocol.WorkspaceDeleteCheckpointParams{WorkspaceID: ws, CheckpointID: cps.Checkpoints[0].CheckpointID}, nil)
	wantCode(t, c.call(t, protocol.MethodWorkspaceDeleteCheckpoint, protocol.WorkspaceDeleteCheckpointParams{WorkspaceID: ws, CheckpointID: cps.Checkpoints[0].CheckpointID}, nil), protocol.CodeNotFound)
	wantCode(t, c.call(t, protocol.MethodWorkspaceRestore, protocol.WorkspaceRestoreParams{WorkspaceID: ws, CheckpointID: cp1.CheckpointID}, nil), protocol.CodeNotFound)
	c.mustCall(t, protocol.MethodWorkspaceCheckpoints, protocol.WorkspaceCheckpointsParams{WorkspaceID: ws}, &cps)
	if len(cps.Checkpoints) != 2 {
		t.Fatalf("after a delete: %+v", cps.Checkpoints)
	}

	// Checkpoints survive a restart (they are on disk).
	c.mustCall(t, protocol.MethodShutdown, nil, nil)
	_ = c.conn.Notify(context.Background(), protocol.MethodExit, nil)
	d.p.wait(t)
	d.start(t)
	ws = openWorkspace(t, d.c, d.project, "files")
	var again protocol.WorkspaceCheckpointsResult
	d.c.mustCall(t, protocol.MethodWorkspaceCheckpoints, protocol.WorkspaceCheckpointsParams{WorkspaceID: ws}, &again)
	if len(again.Checkpoints) != 2 || again.Checkpoints[1].CheckpointID != cps.Checkpoints[1].CheckpointID {
		t.Fatalf("after a restart: %+v", again.Checkpoints)
	}
	if got := d.changes(t, ws); got != want2(remaining) {
		t.Fatalf("changes after a restart:\n%s", got)
	}
}

// want2 is what cp1 brings back after the commit: what the commit did not
// apply (the project holds the rest now).
func want2(string) string {
	return sortedLines("added bin.dat 3 binary", "added empty.txt 0", "modified conflict.txt 3",
		"deleted esc", "added esc/inside.txt 3", "added esc/added.txt 3")
}

// TestWorkspaceFilesErrors: bad requests get the codes of PROTOCOL.md §7.
func TestWorkspaceFilesErrors(t *testing.T) {
	d := newFilesDaemon(t, false, map[string]string{"a.txt": "a\n"})
	c := d.c
	ws := openWorkspace(t, c, d.project, "errors")
	for _, m := range []string{protocol.MethodWorkspaceChanges, protocol.MethodWorkspaceDiff, protocol.MethodWorkspaceCommit,
		protocol.MethodWorkspaceDiscard, protocol.MethodWorkspaceCheckpoint, protocol.MethodWorkspaceCheckpoints} {
		wantCode(t, c.call(t, m, map[string]any{}, nil), protocol.CodeInvalidParams)
		wantCode(t, c.call(t, m, map[string]any{"workspaceId": "ws-nope"}, nil), protocol.CodeNotFound)
	}
	for _, p := range []string{"../x", "/etc/passwd", "a/../../x"} {
		for _, m := range []string{protocol.MethodWorkspaceDiff, protocol.MethodWorkspaceCommit, protocol.MethodWorkspaceDiscard} {
			wantCode(t, c.call(t, m, map[string]any{"workspaceId": ws, "paths": []string{p}}, nil), protocol.CodePathOutsideWorkspace)
		}
	}
	wantCode(t, c.call(t, protocol.MethodWorkspaceRestore, map[string]any{"workspaceId": ws}, nil), protocol.CodeInvalidParams)
	for _, id := range []string{"cp-0000", "../x", "cp-../../etc"} {
		wantCode(t, c.call(t, protocol.MethodWorkspaceRestore, map[string]any{"workspaceId": ws, "checkpointId": id}, nil), protocol.CodeNotFound)
		wantCode(t, c.call(t, protocol.MethodWorkspaceDeleteCheckpoint, map[string]any{"workspaceId": ws, "checkpointId": id}, nil), protocol.CodeNotFound)
	}
	var scratch protocol.WorkspaceInfo
	c.mustCall(t, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Mode: protocol.WorkspaceModeScratch}, &scratch)
	wantCode(t, c.call(t, protocol.MethodWorkspaceChanges, map[string]any{"workspaceId": scratch.WorkspaceID}, nil), protocol.CodeInvalidParams)
	// Nothing to commit is an empty result, not an error.
	var res protocol.WorkspaceCommitResult
	c.mustCall(t, protocol.MethodWorkspaceCommit, protocol.WorkspaceCommitParams{WorkspaceID: ws}, &res)
	b, _ := json.Marshal(res)
	if string(b) != `{"applied":[],"conflicts":[]}` {
		t.Fatalf("empty commit = %s", b)
	}
}

// TestWorkspaceCommitProgress: a commit long enough sends $/progress
// begin, reports and end under its workDoneToken.
func TestWorkspaceCommitProgress(t *testing.T) {
	d := newFilesDaemon(t, false, map[string]string{"x": "x\n"})
	ws := openWorkspace(t, d.c, d.project, "progress")
	d.sh(t, ws, "mkdir -p many; for i in $(seq 1 3000); do echo $i > many/f$i; done")
	var res protocol.WorkspaceCommitResult
	d.c.mustCall(t, protocol.MethodWorkspaceCommit, protocol.WorkspaceCommitParams{WorkspaceID: ws, WorkDoneToken: "commit-1"}, &res)
	if len(res.Applied) != 3000 {
		t.Fatalf("applied %d", len(res.Applied))
	}
	kinds := progressKinds(d.c, "commit-1")
	if len(kinds) < 2 || kinds[0] != "begin" || kinds[len(kinds)-1] != "end" {
		t.Fatalf("$/progress kinds = %v (a 3000-file commit takes over 200 ms here?)", kinds)
	}
}

// progressKinds are the kinds of the $/progress notes under token.
func progressKinds(c *client, token string) []string {
	// The end note may trail the response by a moment.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var kinds []string
		c.mu.Lock()
		for _, n := range c.notes {
			if n.method != protocol.MethodProgress {
				continue
			}
			var p protocol.ProgressParams
			if json.Unmarshal(n.params, &p) == nil && p.Token == token {
				kinds = append(kinds, string(p.Value.Kind))
			}
		}
		c.mu.Unlock()
		if (len(kinds) > 0 && kinds[len(kinds)-1] == "end") || time.Now().After(deadline) {
			return kinds
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BenchmarkWorkspaceFiles measures, against the real binary (bench/workspace.sh):
//
//	changes-first-ms      workspace/changes on a 50,000-file project with
//	                      1,000 changes, the first time (baselines recorded)
//	changes-p50-ms/p99    the same, again (20 calls)
//	commit-p50-ms/max     workspace/commit of 1,000 changed files (each
//	                      fsynced, 5 rounds)
func BenchmarkWorkspaceFiles(b *testing.B) {
	testLogLevel = "warn"
	files := map[string]string{}
	for i := range 50_000 {
		files[fmt.Sprintf("pkg%03d/file%05d.txt", i/100, i)] = fmt.Sprintf("line one of file %d\nline two\n", i)
	}
	d := newFilesDaemon(b, false, files)
	var info protocol.WorkspaceInfo
	d.c.mustCall(b, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: d.project, Name: "bench"}, &info)
	ws := info.WorkspaceID
	// 1,000 changes: 600 modified, 200 added, 200 deleted.
	d.sh(b, ws, `python3 -c '
import os
for k in range(800):
    i = k * 50
    p = "pkg%03d/file%05d.txt" % (i // 100, i)
    if k % 4 == 0:
        os.remove(p)
    else:
        open(p, "a").write("changed\n")
for i in range(200):
    open("pkg%03d/new%03d.txt" % (i, i), "w").write("new\n")
'`)
	timeChanges := func() (time.Duration, int) {
		var res protocol.WorkspaceChangesResult
		start := time.Now()
		d.c.mustCall(b, protocol.MethodWorkspaceChanges, protocol.WorkspaceChangesParams{WorkspaceID: ws}, &res)
		return time.Since(start), len(res.Changes)
	}
	first, n := timeChanges()
	if n != 1000 {
		b.Fatalf("%d changes, want 1000", n)
	}
	var again []time.Duration
	for range 20 {
		dt, _ := timeChanges()
		again = append(again, dt)
	}
	var commits []time.Duration
	for round := range 5 {
		d.sh(b, ws, fmt.Sprintf(`python3 -c '
for i in range(1000):
    open("pkg%%03d/file%%05d.txt" %% (i // 20, i * 5 + 1), "w").write("round %d of file %%d\n" %% i)
'`, round))
		var res protocol.WorkspaceCommitResult
		start := time.Now()
		d.c.mustCall(b, protocol.MethodWorkspaceCommit, protocol.WorkspaceCommitParams{WorkspaceID: ws, Paths: commitPaths()}, &res)
		commits = append(commits, time.Since(start))
		if len(res.Applied) != 1000 || len(res.Conflicts) != 0 {
			b.Fatalf("round %d: applied %d, conflicts %d", round, len(res.Applied), len(res.Conflicts))
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(first), "changes-first-ms")
	b.ReportMetric(ms(pct(again, 50)), "changes-p50-ms")
	b.ReportMetric(ms(pct(again, 99)), "changes-p99-ms")
	b.ReportMetric(ms(pct(commits, 50)), "commit-p50-ms")
	b.ReportMetric(ms(pct(commits, 100)), "commit-max-ms")
	b.ReportMetric(0, "ns/op")
}

// commitPaths are the 1,000 files each commit round of the benchmark
// rewrites.
func commitPaths() []string {
	out := make([]string, 1000)
	for i := range out {
		out[i] = fmt.Sprintf("pkg%03d/file%05d.txt", i/20, i*5+1)
	}
	return out
}

func pct(ds []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}
