package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/rpc"
)

// burnCPU keeps every core busy with spinning processes until the test
// ends: the ordering tests run on a loaded machine, where goroutines are
// scheduled late and out of turn.
func burnCPU(t testing.TB) {
	t.Helper()
	for range runtime.NumCPU() {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start a CPU burner: %v", err)
		}
		t.Cleanup(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		})
	}
}

// rawSession speaks frames to `serve --stdio` directly, so that a test can
// pipeline many requests in one write: exactly the bytes an editor sends.
type rawSession struct {
	t     testing.TB
	p     *stdioProc
	r     *bufio.Reader
	mu    sync.Mutex
	notes []map[string]json.RawMessage
}

func newRawSession(t testing.TB) *rawSession {
	p := startStdio(t)
	s := &rawSession{t: t, p: p, r: bufio.NewReaderSize(p.stdout, 1<<20)}
	s.send(frame(1, protocol.MethodInitialize, map[string]any{"protocolVersion": 1}))
	s.await(map[string]bool{"1": true}, time.Minute)
	return s
}

// frame is one request's frame.
func frame(id any, method string, params any) []byte {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		panic(err)
	}
	return rpc.AppendFrame(nil, b)
}

func (s *rawSession) send(b []byte) {
	s.t.Helper()
	if _, err := s.p.stdin.Write(b); err != nil {
		s.t.Fatalf("write: %v", err)
	}
}

// await reads until every id in want is answered and returns the answers
// by id (as the JSON of the id). Notifications are kept in s.notes, in the
// order they came.
func (s *rawSession) await(want map[string]bool, limit time.Duration) map[string]map[string]json.RawMessage {
	s.t.Helper()
	got := make(map[string]map[string]json.RawMessage)
	type msg struct {
		m   map[string]json.RawMessage
		err error
	}
	deadline := time.After(limit)
	for len(got) < len(want) {
		ch := make(chan msg, 1)
		go func() {
			body, err := rpc.ReadFrame(s.r, 1<<26, nil)
			var m map[string]json.RawMessage
			if err == nil {
				err = json.Unmarshal(body, &m)
			}
			ch <- msg{m, err}
		}()
		var in msg
		select {
		case in = <-ch:
		case <-deadline:
			s.t.Fatalf("%d of %d answers after %v (stderr: %s)", len(got), len(want), limit, s.p.stderr.String())
		}
		if in.err != nil {
			s.t.Fatalf("read: %v (stderr: %s)", in.err, s.p.stderr.String())
		}
		id, ok := in.m["id"]
		if !ok {
			s.mu.Lock()
			s.notes = append(s.notes, in.m)
			s.mu.Unlock()
			continue
		}
		if want[string(id)] {
			got[string(id)] = in.m
		}
	}
	return got
}

// result decodes an answer's result, failing on an error answer.
func (s *rawSession) result(m map[string]json.RawMessage, into any) {
	s.t.Helper()
	if e, ok := m["error"]; ok {
		s.t.Fatalf("request %s failed: %s", m["id"], e)
	}
	if err := json.Unmarshal(m["result"], into); err != nil {
		s.t.Fatalf("decode result %s: %v", m["result"], err)
	}
}

// TestPipelinedWireOrder: a notebook's "Run all" and an editor's
// save-then-run pipeline many requests on one connection without waiting
// for answers. On a machine with every core busy, every kernel/execute of
// every language runs in the order it was sent, an fs/write is seen by the
// kernel/execute sent after it and by the fs/read sent after it, and a
// rename sent after a write moves what was written.
func TestPipelinedWireOrder(t *testing.T) {
	s := newRawSession(t)
	root := t.TempDir()
	s.send(frame(2, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: root}))
	var ws protocol.WorkspaceInfo
	s.result(s.await(map[string]bool{"2": true}, time.Minute)["2"], &ws)

	langs := []string{"python", "javascript", "bash"}
	code := map[string]string{
		"python":     `print(open("order/python-%d.txt").read())`,
		"javascript": `console.log(require("fs").readFileSync("order/javascript-%d.txt", "utf8"))`,
		"bash":       `cat order/bash-%d.txt; echo`,
	}
	kernels := map[string]string{}
	for i, lang := range langs {
		id := 10 + i
		s.send(frame(id, protocol.MethodKernelStart, protocol.KernelStartParams{Language: lang, WorkspaceID: ws.WorkspaceID}))
		var k protocol.KernelStartResult
		s.result(s.await(map[string]bool{fmt.Sprint(id): true}, time.Minute)[fmt.Sprint(id)], &k)
		kernels[lang] = k.KernelID
	}

	burnCPU(t)
	const rounds = 30
	var buf []byte
	want := map[string]bool{}
	id := 100
	next := func(method string, params any) int {
		id++
		want[fmt.Sprint(id)] = true
		buf = append(buf, frame(id, method, params)...)
		return id
	}
	type sent struct{ write, exec, read, rename, readRenamed int }
	plan := map[string][]sent{}
	for i := range rounds {
		for _, lang := range langs {
			var r sent
			content := fmt.Sprintf("%s-%d", lang, i)
			r.write = next(protocol.MethodFsWrite, protocol.FsWriteParams{WorkspaceID: ws.WorkspaceID,
				Path: fmt.Sprintf("order/%s-%d.txt", lang, i), Content: content, CreateParents: true})
			r.exec = next(protocol.MethodKernelExecute, protocol.KernelExecuteParams{KernelID: kernels[lang],
				Code: fmt.Sprintf(code[lang], i), ExecutionID: content})
			// The same file written every round: each read must see the
			// write just before it, not a later or earlier one.
			next(protocol.MethodFsWrite, protocol.FsWriteParams{WorkspaceID: ws.WorkspaceID,
				Path: "order/" + lang + "-last.txt", Content: content, CreateParents: true})
			r.read = next(protocol.MethodFsRead, protocol.FsReadParams{WorkspaceID: ws.WorkspaceID, Path: "order/" + lang + "-last.txt"})
			r.rename = next(protocol.MethodFsRename, protocol.FsRenameParams{WorkspaceID: ws.WorkspaceID,
				From: "order/" + lang + "-last.txt", To: "order/" + lang + "-moved.txt", Overwrite: true})
			r.readRenamed = next(protocol.MethodFsRead, protocol.FsReadParams{WorkspaceID: ws.WorkspaceID, Path: "order/" + lang + "-moved.txt"})
			plan[lang] = append(plan[lang], r)
		}
	}
	s.send(buf)
	got := s.await(want, 5*time.Minute)

	for _, lang := range langs {
		var counts []int
		var wrong []string
		for i, r := range plan[lang] {
			content := fmt.Sprintf("%s-%d", lang, i)
			var res protocol.ExecuteResult
			if err := decodeAnswer(got[fmt.Sprint(r.exec)], &res); err != nil {
				wrong = append(wrong, fmt.Sprintf("execute %d: %v", i, err))
			}
			counts = append(counts, res.ExecutionCount)
			if res.Status != protocol.ExecutionStatusOK {
				wrong = append(wrong, fmt.Sprintf("execute %d: status %s %+v", i, res.Status, res.Error))
			}
			if out := s.stdout(content); strings.TrimSpace(out) != content {
				wrong = append(wrong, fmt.Sprintf("execute %d printed %q, want the file written before it (%q)", i, out, content))
			}
			for _, rd := range []int{r.read, r.readRenamed} {
				var fr protocol.FsReadResult
				if err := decodeAnswer(got[fmt.Sprint(rd)], &fr); err != nil {
					wrong = append(wrong, fmt.Sprintf("round %d: fs/read %d: %v", i, rd, err))
				} else if fr.Content != content {
					wrong = append(wrong, fmt.Sprintf("round %d: fs/read %d = %q, want %q", i, rd, fr.Content, content))
				}
			}
		}
		for i, n := range counts {
			if n != i+1 {
				wrong = append(wrong, fmt.Sprintf("executionCount in send order = %v, want 1..%d", counts, rounds))
				break
			}
		}
		if len(wrong) > 0 {
			t.Errorf("%s: %d requests out of wire order:\n%s", lang, len(wrong), strings.Join(wrong, "\n"))
		}
	}
}

// decodeAnswer decodes an answer's result, or returns its error.
func decodeAnswer(m map[string]json.RawMessage, into any) error {
	if e, ok := m["error"]; ok {
		return fmt.Errorf("answered %s", e)
	}
	return json.Unmarshal(m["result"], into)
}

// stdout is the stdout text of an execution, from the notifications kept.
func (s *rawSession) stdout(execID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, n := range s.notes {
		if string(n["method"]) != `"`+protocol.MethodKernelOutput+`"` {
			continue
		}
		var o protocol.KernelOutputParams
		if json.Unmarshal(n["params"], &o) == nil && o.ExecutionID == execID && o.Kind == protocol.OutputKindStream && o.Name == protocol.StreamStdout {
			b.WriteString(o.Text)
		}
	}
	return b.String()
}
