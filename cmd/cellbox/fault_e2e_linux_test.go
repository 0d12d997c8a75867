package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Faults: processes of a kernel's sandbox killed with SIGKILL from the
// host, the daemon killed mid-execution, a full state dir, and a client
// that stops reading. Each test checks the daemon's defence: a clear error
// with a PROTOCOL.md §7 code, recovery, and no harm to other workspaces or
// clients.

// hostProc is a process of the host, named by its pid and start time (so
// that a reused pid is not taken for the same process).
type hostProc struct {
	pid   int
	start string
}

// procStat is the ppid and start time of pid, from /proc/PID/stat.
func procStat(pid int) (ppid int, start string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", false
	}
	// The command may hold spaces and parentheses: the fields after it
	// start after the last ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return 0, "", false
	}
	ppid, _ = strconv.Atoi(f[1])
	return ppid, f[19], true
}

// alive reports whether p still runs (a zombie does not count).
func (p hostProc) alive() bool {
	_, start, ok := procStat(p.pid)
	if !ok || start != p.start {
		return false
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
	return !strings.Contains(string(b), "State:\tZ")
}

// descendants are the processes below root, found by scanning /proc.
func descendants(root int) []hostProc {
	children := map[int][]hostProc{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, start, ok := procStat(pid); ok {
			children[ppid] = append(children[ppid], hostProc{pid, start})
		}
	}
	var out []hostProc
	queue := []int{root}
	for len(queue) > 0 {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
		queue = queue[1:]
	}
	return out
}

// procWithEnv is the descendant of root whose environment holds kv.
func procWithEnv(t testing.TB, root int, kv string) hostProc {
	t.Helper()
	for _, p := range descendants(root) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.pid))
		for _, e := range strings.Split(string(b), "\x00") {
			if e == kv {
				return p
			}
		}
	}
	t.Fatalf("no process below %d has %s in its environment", root, kv)
	return hostProc{}
}

func parentOf(t testing.TB, p hostProc) hostProc {
	t.Helper()
	ppid, _, ok := procStat(p.pid)
	if !ok {
		t.Fatalf("process %d is gone", p.pid)
	}
	_, start, ok := procStat(ppid)
	if !ok {
		t.Fatalf("process %d is gone", ppid)
	}
	return hostProc{ppid, start}
}

// waitGone polls until none of procs runs, failing after d.
func waitGone(t testing.TB, procs []hostProc, d time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var left []string
		for _, p := range procs {
			if p.alive() {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.pid))
				left = append(left, fmt.Sprintf("%d (%s)", p.pid, strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still running after %v: %s", what, d, strings.Join(left, ", "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFor polls cond until it holds, failing after d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// asUsers runs f as root and, when CELLBOX_TEST_USER is set (or under CI),
// with the daemon run as that user.
func asUsers(t *testing.T, f func(t *testing.T, asUser bool)) {
	for _, asUser := range []bool{false, true} {
		name := "root"
		if asUser {
			name = "user"
		}
		t.Run(name, func(t *testing.T) { f(t, asUser) })
	}
}

// faultKernel is a python kernel in a workspace of its own, marked by an
// environment variable so its processes can be found on the host.
type faultKernel struct {
	ws, kid, mark string
}

func startFaultKernel(t testing.TB, d *filesDaemon, name string) faultKernel {
	t.Helper()
	ws := openWorkspace(t.(*testing.T), d.c, d.project, name)
	mark := fmt.Sprintf("CELLBOX_FAULT_MARK=%s-%d", name, time.Now().UnixNano())
	k := startKernel(t, d.c, protocol.KernelStartParams{Language: "python", WorkspaceID: ws,
		Env: map[string]string{"CELLBOX_FAULT_MARK": strings.TrimPrefix(mark, "CELLBOX_FAULT_MARK=")}})
	return faultKernel{ws: ws, kid: k.KernelID, mark: mark}
}

// printed runs code and returns its stdout, failing unless it ends ok.
func printed(t testing.TB, c *client, kid, code string) string {
	t.Helper()
	res, outs := execute(t, c, kid, code)
	wantOK(t, res, outs)
	return streamText(outs, protocol.StreamStdout)
}

// TestFaultKernelProcessKilled: SIGKILL from the host to a kernel's
// interpreter, to its sandbox's init, and to its sandbox's spawner, while
// the kernel runs code. The execution answers -32013 naming what died, the
// kernel's status says dead with the reason, kernel/restart brings up a new
// interpreter (in a new sandbox when the old one is gone), and a kernel of
// another workspace keeps its state.
func TestFaultKernelProcessKilled(t *testing.T) {
	for _, target := range []string{"interpreter", "init", "spawner"} {
		t.Run(target, func(t *testing.T) {
			asUsers(t, func(t *testing.T, asUser bool) { kernelProcessKilled(t, asUser, target) })
		})
	}
}

func kernelProcessKilled(t *testing.T, asUser bool, target string) {
	d := newFilesDaemon(t, asUser, map[string]string{"data.txt": "project\n"})
	victim := startFaultKernel(t, d, "victim")
	bystander := startFaultKernel(t, d, "bystander")
	printed(t, d.c, bystander.kid, "kept = 'bystander state'")
	printed(t, d.c, victim.kid, "open('before.txt', 'w').write('written before the kill')")

	daemon := d.p.cmd.Process.Pid
	interp := procWithEnv(t, daemon, victim.mark)
	spawner := parentOf(t, interp)
	init := parentOf(t, spawner)
	if init.pid == daemon || parentOf(t, init).pid != daemon {
		t.Fatalf("process tree: interpreter %d, spawner %d, init %d, daemon %d: the init is not the daemon's child", interp.pid, spawner.pid, init.pid, daemon)
	}
	oldSandbox := append(descendants(init.pid), init)
	kill := map[string]hostProc{"interpreter": interp, "init": init, "spawner": spawner}[target]

	n := len(statuses(t, d.c, victim.kid))
	done := make(chan error, 1)
	go func() {
		_, _, err := tryRun(t, d.c, victim.kid, "print('running', flush=True)\nimport time\ntime.sleep(120)")
		done <- err
	}()
	waitFor(t, 20*time.Second, "the victim's code to start", func() bool {
		return strings.Contains(streamText(kernelOutputs(t, d.c, ""), protocol.StreamStdout), "running\n")
	})
	if err := syscall.Kill(kill.pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s %d: %v", target, kill.pid, err)
	}

	var err error
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("kernel/execute did not answer within 20s of a SIGKILL to the kernel's %s", target)
	}
	msg := wantCode(t, err, protocol.CodeKernelDead)
	wantReason := map[string]string{
		"interpreter": "killed by SIGKILL",
		"init":        "sandbox's init was killed by SIGKILL",
		"spawner":     "sandbox's spawner was killed by SIGKILL",
	}[target]
	if !strings.Contains(msg, wantReason) {
		t.Fatalf("kernel/execute answered %q; want the reason %q", msg, wantReason)
	}
	st := waitStatus(t, d.c, victim.kid, protocol.KernelStateDead, n)
	if !strings.Contains(st.Reason, wantReason) {
		t.Fatalf("kernel/status dead with reason %q, want %q", st.Reason, wantReason)
	}
	t.Logf("SIGKILL to the %s: kernel/execute answered %q", target, msg)
	if target != "interpreter" {
		waitGone(t, oldSandbox, 10*time.Second, "the killed sandbox's processes")
	}
	// Still dead until restarted, with the reason.
	_, _, err = tryRun(t, d.c, victim.kid, "1")
	if msg := wantCode(t, err, protocol.CodeKernelDead); !strings.Contains(msg, wantReason) {
		t.Fatalf("a dead kernel's answer %q lacks the reason", msg)
	}

	d.c.mustCall(t, protocol.MethodKernelRestart, protocol.KernelIDParams{KernelID: victim.kid}, nil)
	if got := printed(t, d.c, victim.kid, "print(open('before.txt').read())"); got != "written before the kill\n" {
		t.Fatalf("after the restart: %q", got)
	}
	newInit := parentOf(t, parentOf(t, procWithEnv(t, daemon, victim.mark)))
	if target != "interpreter" && newInit == init {
		t.Fatalf("the kernel restarted in the dead sandbox's init %d", init.pid)
	}
	if target == "interpreter" && newInit != init {
		t.Fatalf("the kernel restarted in a new sandbox (init %d, was %d) though its sandbox was alive", newInit.pid, init.pid)
	}
	if got := printed(t, d.c, bystander.kid, "print(kept)"); got != "bystander state\n" {
		t.Fatalf("the other workspace's kernel: %q", got)
	}
	var r execReply
	d.c.mustCall(t, "cellboxTest/exec", map[string]any{"workspaceId": victim.ws, "argv": []string{"cat", "before.txt"}}, &r)
	if r.ExitCode != 0 || r.Stdout != "written before the kill" {
		t.Fatalf("cellboxTest/exec in the victim's workspace after the restart: %+v", r)
	}
}

// killDaemon kills the daemon with SIGKILL and waits, within a bounded
// time, until no process it had started runs any more: a sandbox whose
// daemon is gone must not outlive it.
func killDaemon(t testing.TB, d *filesDaemon) {
	t.Helper()
	procs := descendants(d.p.cmd.Process.Pid)
	if len(procs) == 0 {
		t.Fatal("the daemon has no child processes to check")
	}
	if err := d.p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = d.p.cmd.Wait()
	waitGone(t, procs, 10*time.Second, "processes of the killed daemon")
}

// TestFaultDaemonKilledMidExecution: the daemon is killed with SIGKILL
// while a kernel's code writes files. Every process of its sandboxes goes
// with it; a new daemon on the same state dir finds every file the code
// wrote before the kill among the workspace's changes, the project
// untouched, and new kernels work (in a fresh sandbox).
func TestFaultDaemonKilledMidExecution(t *testing.T) {
	asUsers(t, func(t *testing.T, asUser bool) {
		d := newFilesDaemon(t, asUser, map[string]string{"data.txt": "project\n"})
		k := startFaultKernel(t, d, "crash")
		other := startFaultKernel(t, d, "other")
		printed(t, d.c, other.kid, "x = 1")
		go func() {
			_, _, _ = tryRun(t, d.c, k.kid, `
import os, time
os.makedirs("out", exist_ok=True)
for i in range(100000):
    with open("out/f%d" % i, "w") as f:
        f.write("file %d\n" % i)
        f.flush()
        os.fsync(f.fileno())
    print("wrote", i, flush=True)
    time.sleep(0.01)
`)
		}()
		// Let some files be written, then kill the daemon in the middle.
		var written int
		waitFor(t, 30*time.Second, "the code to write 20 files", func() bool {
			lines := strings.Split(strings.TrimSpace(streamText(kernelOutputs(t, d.c, ""), protocol.StreamStdout)), "\n")
			if n, err := strconv.Atoi(strings.TrimPrefix(lines[len(lines)-1], "wrote ")); err == nil {
				written = n + 1
			}
			return written >= 20
		})
		killDaemon(t, d)

		d.start(t)
		ws := openWorkspace(t, d.c, d.project, "crash")
		if ws != k.ws {
			t.Fatalf("the workspace reopened as %s, was %s", ws, k.ws)
		}
		var ch protocol.WorkspaceChangesResult
		d.c.mustCall(t, protocol.MethodWorkspaceChanges, protocol.WorkspaceChangesParams{WorkspaceID: ws}, &ch)
		have := map[string]bool{}
		for _, c := range ch.Changes {
			if c.Kind != protocol.ChangeKindAdded {
				t.Fatalf("change %+v after the crash; the code only added files", c)
			}
			have[c.Path] = true
		}
		for i := range written {
			if !have[fmt.Sprintf("out/f%d", i)] {
				t.Fatalf("out/f%d, written before the kill, is not among the %d changes", i, len(ch.Changes))
			}
		}
		if b, err := os.ReadFile(filepath.Join(d.project, "data.txt")); err != nil || string(b) != "project\n" {
			t.Fatalf("the project's data.txt = %q, %v", b, err)
		}
		if _, err := os.Stat(filepath.Join(d.project, "out")); !os.IsNotExist(err) {
			t.Fatalf("the code's files reached the project: %v", err)
		}
		nk := startKernel(t, d.c, protocol.KernelStartParams{Language: "python", WorkspaceID: ws})
		got := printed(t, d.c, nk.KernelID, fmt.Sprintf("print(open('out/f%d').read(), end='')", written-1))
		if got != fmt.Sprintf("file %d\n", written-1) {
			t.Fatalf("a new kernel reads %q", got)
		}
		t.Logf("%d files written before the kill, %d changes after it", written, len(ch.Changes))
	})
}

// mountTmpfs mounts a tmpfs of size bytes on a new directory owned by the
// daemon's user, unmounted when the test ends.
func mountTmpfs(t *testing.T, d *filesDaemon, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs as the state dir needs root")
	}
	dir, err := os.MkdirTemp("", "cellbox-full-")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		os.Remove(dir)
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
		os.Remove(dir)
	})
	if d.cred != nil {
		if err := os.Chown(dir, int(d.cred.Uid), int(d.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fill writes dir/name until the filesystem is full, and returns the
// function that frees the space again.
func fill(t *testing.T, dir, name string) (free func()) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil || st.Type != 0x01021994 { // TMPFS_MAGIC
		t.Fatalf("%s is not the small tmpfs (statfs type %#x, %v): not filling it", dir, st.Type, err)
	}
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for i := 0; ; i++ {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			break
		}
		if i > 1<<14 {
			t.Fatalf("%s never filled", dir)
		}
	}
	return func() {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

// wantNoSpace checks an error of a full state dir: -32012 with a message
// that names the cause.
func wantNoSpace(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded on a full state dir", what)
	}
	msg := wantCode(t, err, protocol.CodeLimitExceeded)
	if !strings.Contains(msg, "no space left on device") {
		t.Fatalf("%s answered %q; want the cause, no space left on device", what, msg)
	}
	t.Logf("%s on a full state dir: %s", what, msg)
}

// TestFaultStateDirFull: the state dir's filesystem is full (a 2 MiB
// tmpfs, filled). workspace/open, fs/write, workspace/checkpoint and
// workspace/commit each answer -32012 naming "no space left on device";
// nothing half written is left (the list of workspaces and checkpoints,
// and a restore, still work, in this daemon and the next); once space is
// freed, the same operations succeed.
func TestFaultStateDirFull(t *testing.T) {
	asUsers(t, func(t *testing.T, asUser bool) {
		d := newFilesDaemon(t, asUser, map[string]string{"data.txt": "project\n"})
		d.p.cmd.Process.Kill()
		d.p.cmd.Wait()
		state := mountTmpfs(t, d, 2<<20)
		for i, kv := range d.env {
			if strings.HasPrefix(kv, "CELLBOX_STATE_DIR=") {
				d.env[i] = "CELLBOX_STATE_DIR=" + state
			}
		}
		d.start(t)

		ws := openWorkspace(t, d.c, d.project, "full")
		d.sh(t, ws, "echo one > a.txt")
		var cp1 protocol.Checkpoint
		d.c.mustCall(t, protocol.MethodWorkspaceCheckpoint, protocol.WorkspaceCheckpointParams{WorkspaceID: ws, Name: "one"}, &cp1)
		d.sh(t, ws, "echo two > a.txt; echo b > b.txt")
		if got := d.changes(t, ws); got != "added a.txt 4\nadded b.txt 2" {
			t.Fatalf("changes = %q", got)
		}

		free := fill(t, state, "filler")
		big := strings.Repeat("x", 256<<10)
		wantNoSpace(t, "workspace/open", d.c.call(t, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: d.project, Name: "new"}, nil))
		wantNoSpace(t, "fs/write", d.c.call(t, protocol.MethodFsWrite, protocol.FsWriteParams{WorkspaceID: ws, Path: "big.txt", Content: big}, nil))
		// A file the write would replace keeps its content.
		wantNoSpace(t, "fs/write over a file", d.c.call(t, protocol.MethodFsWrite, protocol.FsWriteParams{WorkspaceID: ws, Path: "a.txt", Content: big}, nil))
		if got := d.sh(t, ws, "cat a.txt"); got != "two\n" {
			t.Fatalf("a.txt after an fs/write failed for want of space: %q", got)
		}
		wantNoSpace(t, "workspace/checkpoint", d.c.call(t, protocol.MethodWorkspaceCheckpoint, protocol.WorkspaceCheckpointParams{WorkspaceID: ws, Name: "two"}, nil))
		wantNoSpace(t, "workspace/commit", d.c.call(t, protocol.MethodWorkspaceCommit, protocol.WorkspaceCommitParams{WorkspaceID: ws}, nil))

		// Nothing half done: the lists are whole, the project untouched.
		check := func(wantCps ...string) {
			t.Helper()
			var list protocol.WorkspaceListResult
			d.c.mustCall(t, protocol.MethodWorkspaceList, struct{}{}, &list)
			var ids []string
			for _, w := range list.Workspaces {
				ids = append(ids, w.WorkspaceID)
			}
			if !slices.Contains(ids, ws) {
				t.Fatalf("workspace/list = %v, lacks %s", ids, ws)
			}
			var cps protocol.WorkspaceCheckpointsResult
			d.c.mustCall(t, protocol.MethodWorkspaceCheckpoints, protocol.WorkspaceCheckpointsParams{WorkspaceID: ws}, &cps)
			var names []string
			for _, cp := range cps.Checkpoints {
				names = append(names, cp.Name)
			}
			if strings.Join(names, ",") != strings.Join(wantCps, ",") {
				t.Fatalf("checkpoints = %v, want %v", names, wantCps)
			}
		}
		check("one")
		if got := d.changes(t, ws); got != "added a.txt 4\nadded b.txt 2" {
			t.Fatalf("changes on a full state dir = %q", got)
		}
		if _, err := os.Stat(filepath.Join(d.project, "a.txt")); !os.IsNotExist(err) {
			t.Fatalf("a failed commit wrote the project: %v", err)
		}
		// A new daemon on the full state dir reads the same.
		killDaemon(t, d)
		d.start(t)
		ws = openWorkspace(t, d.c, d.project, "full")
		check("one")

		free()
		var opened protocol.WorkspaceInfo
		d.c.mustCall(t, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: d.project, Name: "new"}, &opened)
		d.c.mustCall(t, protocol.MethodFsWrite, protocol.FsWriteParams{WorkspaceID: ws, Path: "big.txt", Content: big}, nil)
		var cp2 protocol.Checkpoint
		d.c.mustCall(t, protocol.MethodWorkspaceCheckpoint, protocol.WorkspaceCheckpointParams{WorkspaceID: ws, Name: "two"}, &cp2)
		if cp2.Files != 3 {
			t.Fatalf("checkpoint after freeing space = %+v", cp2)
		}
		check("one", "two")
		d.c.mustCall(t, protocol.MethodWorkspaceRestore, protocol.WorkspaceRestoreParams{WorkspaceID: ws, CheckpointID: cp1.CheckpointID}, nil)
		if got := d.changes(t, ws); got != "added a.txt 4" {
			t.Fatalf("changes after restoring the first checkpoint = %q", got)
		}
		var res protocol.WorkspaceCommitResult
		d.c.mustCall(t, protocol.MethodWorkspaceCommit, protocol.WorkspaceCommitParams{WorkspaceID: ws}, &res)
		if b, _ := os.ReadFile(filepath.Join(d.project, "a.txt")); string(b) != "one\n" || len(res.Conflicts) != 0 {
			t.Fatalf("commit after freeing space: %+v, a.txt = %q", res, b)
		}
	})
}

// vmRSS is pid's resident memory in bytes.
func vmRSS(t testing.TB, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb)
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS for %d", pid)
	return 0
}

// TestFaultClientStopsReading: a websocket client runs code that floods
// output and never reads its socket. The daemon's memory stays bounded,
// another client keeps getting answers at once, and once the stuck client
// has taken nothing for the stall timeout (3 s here, by a test hook; 30 s
// by default), the daemon closes its connection with code 1008 and a
// reason that says why, which the client reads when it reads again.
func TestFaultClientStopsReading(t *testing.T) {
	const stall = 3 * time.Second
	env := testEnv(t)
	env = append(env, fmt.Sprintf("CELLBOX_TEST_WS_STALL_MS=%d", stall.Milliseconds()))
	cmd := exec.Command(cellboxBin, "serve", "--listen", "127.0.0.1:0", "--test-hooks")
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &listenProc{cmd: cmd, env: env, stderr: startProc(t, cmd)}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if m := urlRE.FindStringSubmatch(sc.Text()); m != nil {
			p.url, p.token = m[0], m[1]
			p.base = strings.TrimSuffix(m[0][:strings.Index(m[0], "/?")], "/")
			break
		}
	}
	if p.url == "" {
		t.Fatalf("serve --listen printed no URL; stderr:\n%s", p.stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	daemon := cmd.Process.Pid

	c, _ := p.wsClient(t)
	c.initialize(t)
	other := startKernel(t, c, protocol.KernelStartParams{Language: "python"})
	printed(t, c, other.KernelID, "print('ready')")
	base := vmRSS(t, daemon)

	// The stuck client: it starts a kernel, sends a flood, and reads no more.
	stuck, _, err := p.dial(t, http.Header{"Authorization": {"Bearer " + p.token}})
	if err != nil {
		t.Fatal(err)
	}
	send := func(s string) {
		t.Helper()
		if err := stuck.WriteMessage(websocket.TextMessage, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"kernel/start","params":{"language":"python","limits":{"outputBytes":1073741824}}}`)
	var kid string
	_ = stuck.SetReadDeadline(time.Now().Add(30 * time.Second))
	for kid == "" {
		_, b, err := stuck.ReadMessage()
		if err != nil {
			t.Fatalf("the stuck client's kernel/start: %v", err)
		}
		var m struct {
			ID     int                        `json:"id"`
			Result protocol.KernelStartResult `json:"result"`
		}
		if json.Unmarshal(b, &m) == nil && m.ID == 2 {
			kid = m.Result.KernelID
			if kid == "" {
				t.Fatalf("kernel/start answered %s", b)
			}
		}
	}
	send(fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"kernel/execute","params":{"kernelId":%q,"code":"while True: print('x' * 4000)"}}`, kid))

	// Until the daemon gives up on it: bounded memory, prompt answers.
	var peak int64
	var slowest time.Duration
	giveUp := time.Now().Add(4*stall + 20*time.Second)
	for !strings.Contains(p.stderr.String(), "stopped reading") {
		if rss := vmRSS(t, daemon); rss > peak {
			peak = rss
		}
		if peak > base+96<<20 {
			t.Fatalf("the daemon's RSS grew from %d MiB to %d MiB with a client that does not read", base>>20, peak>>20)
		}
		start := time.Now()
		var stats protocol.DaemonStats
		c.mustCall(t, protocol.MethodDaemonStats, struct{}{}, &stats)
		if got := printed(t, c, other.KernelID, "print(6*7)"); got != "42\n" {
			t.Fatalf("the other client's kernel printed %q", got)
		}
		if d := time.Since(start); d > slowest {
			slowest = d
		}
		if slowest > 2*time.Second {
			t.Fatalf("the other client waited %v for daemon/stats and an execution while a client did not read", slowest)
		}
		if time.Now().After(giveUp) {
			t.Fatalf("the daemon did not give up on the client that stopped reading")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("daemon RSS %d MiB before, at most %d MiB while the client did not read; the other client's slowest round trip %v", base>>20, peak>>20, slowest)

	// The stuck client reads again: the backlog, then the close frame.
	_ = stuck.SetReadDeadline(time.Now().Add(30 * time.Second))
	var n int
	for {
		_, _, err := stuck.ReadMessage()
		if err == nil {
			n++
			continue
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation || !strings.Contains(ce.Text, "stopped reading") {
			t.Fatalf("after %d messages the stuck client got %v; want close 1008 saying it stopped reading", n, err)
		}
		t.Logf("the stuck client read %d messages, then close %d %q", n, ce.Code, ce.Text)
		break
	}
	// Its code runs on (PROTOCOL.md §2) until another client stops it;
	// then the connection is gone.
	c.mustCall(t, protocol.MethodKernelInterrupt, protocol.KernelIDParams{KernelID: kid}, nil)
	waitFor(t, 10*time.Second, "the stuck connection to end", func() bool {
		var stats protocol.DaemonStats
		c.mustCall(t, protocol.MethodDaemonStats, struct{}{}, &stats)
		return stats.Connections == 1
	})
	if got := printed(t, c, other.KernelID, "print('still here')"); got != "still here\n" {
		t.Fatalf("the other client's kernel printed %q", got)
	}
}
