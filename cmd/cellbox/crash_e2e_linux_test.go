package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Crash safety: the daemon is killed with SIGKILL in the middle of a
// commit, a checkpoint and a restore; a new daemon on the same state dir
// finds every change of the workspace, every project file wholly old or
// wholly new, and every view file wholly of one state.
//
// The work is big enough (crashFiles files of tens of KiB, each fsynced)
// that it runs for a good while; the kill comes at the first $/progress
// report past a few files, so it lands in the middle.

const crashFiles = 1500

// crashContent is file i of a state ("old", "new", "A", "B"): a line
// repeated, of a length that differs by state.
func crashContent(state string, i int) string {
	n := map[string]int{"old": 3000, "new": 4000, "A": 3500, "B": 2500}[state]
	return strings.Repeat(fmt.Sprintf("%s-%d\n", state, i), n)
}

// crashWrite has code in the sandbox write every file in state.
func crashWrite(t *testing.T, d *filesDaemon, ws, state string) {
	t.Helper()
	n := map[string]int{"old": 3000, "new": 4000, "A": 3500, "B": 2500}[state]
	d.sh(t, ws, fmt.Sprintf(`python3 -c '
import os
os.makedirs("data", exist_ok=True)
for i in range(%d):
    with open("data/f%%d" %% i, "w") as f:
        f.write(("%s-%%d\n" %% i) * %d)
'`, crashFiles, state, n))
}

func crashProject(t *testing.T) map[string]string {
	files := map[string]string{}
	for i := range crashFiles {
		files[fmt.Sprintf("data/f%d", i)] = crashContent("old", i)
	}
	return files
}

// killDuring sends method with a workDoneToken and kills the daemon with
// SIGKILL once a $/progress report says at least min files are done (and
// fails if the request ends first); no process of the killed daemon's
// sandboxes may outlive it.
func killDuring(t *testing.T, d *filesDaemon, method string, params map[string]any) {
	t.Helper()
	token := "crash-" + strings.ReplaceAll(method, "/", "-")
	params["workDoneToken"] = token
	done := make(chan error, 1)
	go func() { done <- d.c.call(t, method, params, nil) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if pct := lastReport(d.c, token); pct >= 2 {
			if pct >= 90 {
				t.Fatalf("%s was at %d%% when seen; the test wants to kill it in the middle", method, pct)
			}
			break
		}
		select {
		case err := <-done:
			t.Fatalf("%s ended (%v) before the daemon could be killed in its middle", method, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no $/progress report from %s", method)
		}
		time.Sleep(2 * time.Millisecond)
	}
	killDaemon(t, d) // and waits until its sandboxes are gone too
	<-done
}

// lastReport is the last percentage reported under token (-1: none).
func lastReport(c *client, token string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	pct := -1
	for _, n := range c.notes {
		if n.method != protocol.MethodProgress {
			continue
		}
		var p protocol.ProgressParams
		if json.Unmarshal(n.params, &p) == nil && p.Token == token && p.Value.Kind == protocol.ProgressReport && p.Value.Percentage != nil {
			pct = *p.Value.Percentage
		}
	}
	return pct
}

// viewStates has code in the sandbox classify each data file as a whole
// state or "torn", and returns the count of each.
func viewStates(t *testing.T, d *filesDaemon, ws string, states ...string) map[string]int {
	t.Helper()
	out := d.sh(t, ws, fmt.Sprintf(`python3 -c '
import collections
states = %q.split(",")
counts = collections.Counter()
for i in range(%d):
    try:
        b = open("data/f%%d" %% i).read()
    except FileNotFoundError:
        counts["missing"] += 1
        continue
    for s in states:
        line = "%%s-%%d\n" %% (s, i)
        if b == line * (len(b) // len(line)) and len(b) %% len(line) == 0 and b.count(line) == {"old": 3000, "new": 4000, "A": 3500, "B": 2500}[s]:
            counts[s] += 1
            break
    else:
        counts["torn"] += 1
print(" ".join("%%s=%%d" %% kv for kv in sorted(counts.items())))
'`, strings.Join(states, ","), crashFiles))
	counts := map[string]int{}
	for _, kv := range strings.Fields(out) {
		var v int
		k, vs, _ := strings.Cut(kv, "=")
		fmt.Sscan(vs, &v)
		counts[k] = v
	}
	return counts
}

// projectStates classifies the project's data files.
func projectStates(t *testing.T, project string) (counts map[string]int, temps []string) {
	t.Helper()
	counts = map[string]int{}
	for i := range crashFiles {
		b, err := os.ReadFile(filepath.Join(project, "data", fmt.Sprintf("f%d", i)))
		switch {
		case err != nil:
			counts["missing"]++
		case string(b) == crashContent("old", i):
			counts["old"]++
		case string(b) == crashContent("new", i):
			counts["new"]++
		default:
			counts["torn"]++
		}
	}
	entries, _ := os.ReadDir(filepath.Join(project, "data"))
	for _, e := range entries {
		if strings.Contains(e.Name(), ".cellbox-tmp-") {
			temps = append(temps, e.Name())
		}
	}
	return counts, temps
}

func (d *filesDaemon) changeCount(t testing.TB, ws string) int {
	t.Helper()
	var res protocol.WorkspaceChangesResult
	d.c.mustCall(t, protocol.MethodWorkspaceChanges, protocol.WorkspaceChangesParams{WorkspaceID: ws}, &res)
	return len(res.Changes)
}

func TestCrashDuringCommit(t *testing.T) {
	d := newFilesDaemon(t, false, crashProject(t))
	ws := openWorkspace(t, d.c, d.project, "crash")
	crashWrite(t, d, ws, "new")
	if n := d.changeCount(t, ws); n != crashFiles {
		t.Fatalf("%d changes, want %d", n, crashFiles)
	}
	killDuring(t, d, protocol.MethodWorkspaceCommit, map[string]any{"workspaceId": ws})

	counts, temps := projectStates(t, d.project)
	t.Logf("after the kill the project holds %v and %d temporary files", counts, len(temps))
	if counts["torn"] != 0 || counts["missing"] != 0 || counts["old"] == 0 || counts["new"] == 0 {
		t.Fatalf("the project after a commit was killed: %v (want only whole old and new files, some of each)", counts)
	}

	d.start(t)
	ws = openWorkspace(t, d.c, d.project, "crash")
	if got := viewStates(t, d, ws, "new"); got["new"] != crashFiles {
		t.Fatalf("the workspace after the crash holds %v, want %d new files", got, crashFiles)
	}
	if n := d.changeCount(t, ws); n != counts["old"] {
		t.Fatalf("%d changes after the restart, want the %d files not committed", n, counts["old"])
	}
	var res protocol.WorkspaceCommitResult
	d.c.mustCall(t, protocol.MethodWorkspaceCommit, protocol.WorkspaceCommitParams{WorkspaceID: ws}, &res)
	if len(res.Applied) != counts["old"] || len(res.Conflicts) != 0 {
		t.Fatalf("the commit after the restart applied %d with conflicts %v; want %d and none", len(res.Applied), res.Conflicts, counts["old"])
	}
	counts, temps = projectStates(t, d.project)
	if counts["new"] != crashFiles || len(temps) != 0 {
		t.Fatalf("after the second commit the project holds %v and temporary files %v", counts, temps)
	}
	// A kernel of the new daemon works in the workspace.
	k := startKernel(t, d.c, protocol.KernelStartParams{Language: "python", WorkspaceID: ws})
	if got := printed(t, d.c, k.KernelID, "print(open('data/f7').read() == "+fmt.Sprintf("%q", crashContent("new", 7))+")"); got != "True\n" {
		t.Fatalf("a kernel after the crash reads data/f7: %q", got)
	}
	if n := d.changeCount(t, ws); n != 0 {
		t.Fatalf("%d changes after everything was committed", n)
	}
}

func TestCrashDuringCheckpoint(t *testing.T) {
	d := newFilesDaemon(t, false, crashProject(t))
	ws := openWorkspace(t, d.c, d.project, "crash")
	crashWrite(t, d, ws, "new")
	killDuring(t, d, protocol.MethodWorkspaceCheckpoint, map[string]any{"workspaceId": ws, "name": "killed"})

	d.start(t)
	ws = openWorkspace(t, d.c, d.project, "crash")
	var cps protocol.WorkspaceCheckpointsResult
	d.c.mustCall(t, protocol.MethodWorkspaceCheckpoints, protocol.WorkspaceCheckpointsParams{WorkspaceID: ws}, &cps)
	if len(cps.Checkpoints) != 0 {
		t.Fatalf("a killed checkpoint is listed: %+v", cps.Checkpoints)
	}
	if got := viewStates(t, d, ws, "new"); got["new"] != crashFiles {
		t.Fatalf("the workspace after the crash holds %v", got)
	}
	if n := d.changeCount(t, ws); n != crashFiles {
		t.Fatalf("%d changes after the restart, want %d", n, crashFiles)
	}
	var cp protocol.Checkpoint
	d.c.mustCall(t, protocol.MethodWorkspaceCheckpoint, protocol.WorkspaceCheckpointParams{WorkspaceID: ws, Name: "again"}, &cp)
	if cp.Files != crashFiles {
		t.Fatalf("checkpoint after the restart = %+v", cp)
	}
	entries, _ := os.ReadDir(filepath.Join(envValue(d.env, "CELLBOX_STATE_DIR"), "workspaces", ws, "checkpoints"))
	if len(entries) != 1 || entries[0].Name() != cp.CheckpointID {
		t.Fatalf("the checkpoints directory holds %v, want only %s (the killed one's leftovers removed)", entries, cp.CheckpointID)
	}
}

func TestCrashDuringRestore(t *testing.T) {
	d := newFilesDaemon(t, false, crashProject(t))
	ws := openWorkspace(t, d.c, d.project, "crash")
	crashWrite(t, d, ws, "A")
	var cpA protocol.Checkpoint
	d.c.mustCall(t, protocol.MethodWorkspaceCheckpoint, protocol.WorkspaceCheckpointParams{WorkspaceID: ws, Name: "A"}, &cpA)
	crashWrite(t, d, ws, "B")
	killDuring(t, d, protocol.MethodWorkspaceRestore, map[string]any{"workspaceId": ws, "checkpointId": cpA.CheckpointID})

	d.start(t)
	ws = openWorkspace(t, d.c, d.project, "crash")
	got := viewStates(t, d, ws, "A", "B")
	t.Logf("after the kill the workspace holds %v", got)
	if got["A"]+got["B"] != crashFiles || got["A"] == 0 || got["B"] == 0 {
		t.Fatalf("the workspace after a restore was killed: %v (want only whole A and B files, some of each)", got)
	}
	var cps protocol.WorkspaceCheckpointsResult
	d.c.mustCall(t, protocol.MethodWorkspaceCheckpoints, protocol.WorkspaceCheckpointsParams{WorkspaceID: ws}, &cps)
	if len(cps.Checkpoints) != 2 || cps.Checkpoints[1].Name != "before-restore" || cps.Checkpoints[1].Files != crashFiles {
		t.Fatalf("checkpoints after the crash: %+v", cps.Checkpoints)
	}
	// Nothing was lost: both states come back whole.
	d.c.mustCall(t, protocol.MethodWorkspaceRestore, protocol.WorkspaceRestoreParams{WorkspaceID: ws, CheckpointID: cps.Checkpoints[1].CheckpointID}, nil)
	if got := viewStates(t, d, ws, "B"); got["B"] != crashFiles {
		t.Fatalf("restoring before-restore gives %v", got)
	}
	d.c.mustCall(t, protocol.MethodWorkspaceRestore, protocol.WorkspaceRestoreParams{WorkspaceID: ws, CheckpointID: cpA.CheckpointID}, nil)
	if got := viewStates(t, d, ws, "A"); got["A"] != crashFiles {
		t.Fatalf("restoring A gives %v", got)
	}
	if counts, _ := projectStates(t, d.project); counts["old"] != crashFiles {
		t.Fatalf("the project changed: %v", counts)
	}
}
