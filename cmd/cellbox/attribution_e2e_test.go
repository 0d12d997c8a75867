package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cellbox-dev/cellbox/protocol"
)

// TestExecutionFilesChanged: kernel/execute reports the workspace paths
// its execution created, changed or deleted (PROTOCOL.md §10
// filesChanged), whatever wrote them: python, a `!cmd` shell escape, a
// subprocess, a rename and a delete; the workspace keeps the record
// (workspace/executions). As root and as CELLBOX_TEST_USER.
func TestExecutionFilesChanged(t *testing.T) {
	for _, asUser := range []bool{false, true} {
		name := "root"
		if asUser {
			name = "user"
		}
		t.Run(name, func(t *testing.T) { executionFilesChanged(t, asUser) })
	}
}

func executionFilesChanged(t *testing.T, asUser bool) {
	d := newFilesDaemon(t, asUser, map[string]string{"keep.txt": "keep\n", "old.txt": "old\n", "doomed.txt": "bye\n", "data/x.csv": "1,2\n"})
	c := d.c
	var ws protocol.WorkspaceInfo
	c.mustCall(t, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: d.project}, &ws)
	kid := startKernel(t, c, protocol.KernelStartParams{Language: "python", WorkspaceID: ws.WorkspaceID}).KernelID

	list := func(cs []protocol.PathChange) string {
		var l []string
		for _, ch := range cs {
			l = append(l, fmt.Sprintf("%s %s", ch.Kind, ch.Path))
		}
		return strings.Join(l, "\n")
	}

	// Nothing written: nothing reported.
	res, outs := execute(t, c, kid, "x = 1 + 1")
	wantOK(t, res, outs)
	if len(res.FilesChanged) != 0 {
		t.Fatalf("an execution that wrote nothing reported %s", list(res.FilesChanged))
	}

	code := `import os, subprocess
open('made.py', 'w').write('print(1)\n')
with open('keep.txt', 'a') as f: f.write('more\n')
!echo from-shell > shell.txt
subprocess.run(['sh', '-c', 'mkdir -p out && echo sub > out/sub.txt'], check=True)
os.rename('old.txt', 'new.txt')
os.remove('doomed.txt')
open('tmp.txt', 'w').write('x'); os.remove('tmp.txt')`
	res, outs = execute(t, c, kid, code)
	wantOK(t, res, outs)
	want := `modified keep.txt
deleted doomed.txt
added made.py
added new.txt
deleted old.txt
added out/sub.txt
added shell.txt`
	if got := list(res.FilesChanged); got != sortedByPath(want) {
		t.Fatalf("filesChanged:\n%s\nwant:\n%s", got, sortedByPath(want))
	}

	// The next execution reports only its own writes.
	res, outs = execute(t, c, kid, "!rm -r data")
	wantOK(t, res, outs)
	if got := list(res.FilesChanged); got != "deleted data" && got != "deleted data\ndeleted data/x.csv" {
		t.Fatalf("rm -r data reported:\n%s", got)
	}

	// The record, oldest first, and one by id.
	var recs protocol.WorkspaceExecutionsResult
	c.mustCall(t, protocol.MethodWorkspaceExecutions, protocol.WorkspaceExecutionsParams{WorkspaceID: ws.WorkspaceID}, &recs)
	if len(recs.Executions) != 2 || recs.Executions[1].ExecutionID != res.ExecutionID || recs.Executions[1].KernelID != kid ||
		recs.Executions[1].ExecutionCount != res.ExecutionCount || list(recs.Executions[0].FilesChanged) != sortedByPath(want) {
		t.Fatalf("workspace/executions: %+v", recs)
	}
	c.mustCall(t, protocol.MethodWorkspaceExecutions, protocol.WorkspaceExecutionsParams{WorkspaceID: ws.WorkspaceID, ExecutionID: res.ExecutionID}, &recs)
	if len(recs.Executions) != 1 || recs.Executions[0].ExecutionID != res.ExecutionID {
		t.Fatalf("workspace/executions of %s: %+v", res.ExecutionID, recs)
	}
	wantCode(t, c.call(t, protocol.MethodWorkspaceExecutions, protocol.WorkspaceExecutionsParams{WorkspaceID: ws.WorkspaceID, ExecutionID: "e-none"}, nil), protocol.CodeNotFound)
	wantCode(t, c.call(t, protocol.MethodWorkspaceExecutions, protocol.WorkspaceExecutionsParams{WorkspaceID: "ws-none"}, nil), protocol.CodeNotFound)
}

// sortedByPath sorts the lines of s by path (the second field), as
// filesChanged is sorted.
func sortedByPath(s string) string {
	lines := strings.Split(s, "\n")
	for i := 1; i < len(lines); i++ {
		for j := i; j > 0 && strings.SplitN(lines[j], " ", 2)[1] < strings.SplitN(lines[j-1], " ", 2)[1]; j-- {
			lines[j], lines[j-1] = lines[j-1], lines[j]
		}
	}
	return strings.Join(lines, "\n")
}
