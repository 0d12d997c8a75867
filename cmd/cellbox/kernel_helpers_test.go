package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Helpers of the kernel end-to-end tests (kernel_*_e2e_test.go).

// startKernel starts a kernel of lang over c and returns its id.
func startKernel(t testing.TB, c *client, p protocol.KernelStartParams) protocol.KernelStartResult {
	t.Helper()
	var res protocol.KernelStartResult
	c.mustCall(t, protocol.MethodKernelStart, p, &res)
	if res.KernelID == "" || res.Language != p.Language {
		t.Fatalf("kernel/start = %+v", res)
	}
	return res
}

var execSeq int

// execute runs code and returns the result and the outputs of the
// execution, in seq order (checked consecutive).
func execute(t testing.TB, c *client, kid, code string, opts ...func(*protocol.KernelExecuteParams)) (protocol.ExecuteResult, []protocol.KernelOutputParams) {
	t.Helper()
	res, outs, err := tryRun(t, c, kid, code, opts...)
	if err != nil {
		t.Fatalf("kernel/execute %q: %v", code, err)
	}
	return res, outs
}

func tryRun(t testing.TB, c *client, kid, code string, opts ...func(*protocol.KernelExecuteParams)) (protocol.ExecuteResult, []protocol.KernelOutputParams, error) {
	t.Helper()
	execSeq++
	p := protocol.KernelExecuteParams{KernelID: kid, Code: code, ExecutionID: fmt.Sprintf("e2e-%d-%d", time.Now().UnixNano(), execSeq)}
	for _, o := range opts {
		o(&p)
	}
	var res protocol.ExecuteResult
	err := c.call(t, protocol.MethodKernelExecute, p, &res)
	if err != nil {
		return res, outputsOf(t, c, p.ExecutionID), err
	}
	if res.ExecutionID != p.ExecutionID {
		t.Fatalf("executionId = %q, want %q", res.ExecutionID, p.ExecutionID)
	}
	return res, outputsOf(t, c, p.ExecutionID), nil
}

// outputsOf returns the kernel/output of an execution in seq order
// (checked consecutive). The daemon sends them before the execution's
// response and the client records notifications in wire order, so they
// are all there once the call has returned.
func outputsOf(t testing.TB, c *client, execID string) []protocol.KernelOutputParams {
	t.Helper()
	outs := kernelOutputs(t, c, execID)
	if !consecutive(outs) {
		t.Fatalf("outputs of %s are not consecutive: %v", execID, seqs(outs))
	}
	return outs
}

// waitOutput waits until an execution's stdout holds text: its code is
// running past the point that printed it.
func waitOutput(t testing.TB, c *client, execID, text string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if strings.Contains(streamText(kernelOutputs(t, c, execID), protocol.StreamStdout), text) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %s never printed %q; outputs %+v", execID, text, kernelOutputs(t, c, execID))
		}
	}
}

// waitKernelState waits until kernel/list shows kid in state st.
func waitKernelState(t testing.TB, c *client, kid string, st protocol.KernelState) {
	t.Helper()
	var last protocol.KernelListResult
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c.mustCall(t, protocol.MethodKernelList, protocol.KernelListParams{}, &last)
		for _, k := range last.Kernels {
			if k.KernelID == kid && k.State == st {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("kernel %s never %s: %+v", kid, st, last.Kernels)
		}
	}
}

// waitSent waits until the kernel/execute of execID has been written to
// the daemon, so requests sent one after another arrive in that order.
func waitSent(t testing.TB, tap *tapStream, execID string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		tap.mu.Lock()
		_, ok := tap.ids[execID]
		tap.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no kernel/execute sent for %s", execID)
		}
	}
}

func kernelOutputs(t testing.TB, c *client, execID string) []protocol.KernelOutputParams {
	c.mu.Lock()
	notes := append([]note(nil), c.notes...)
	c.mu.Unlock()
	var outs []protocol.KernelOutputParams
	for _, n := range notes {
		if n.method != protocol.MethodKernelOutput {
			continue
		}
		var o protocol.KernelOutputParams
		if err := json.Unmarshal(n.params, &o); err != nil {
			t.Fatalf("bad kernel/output %s: %v", n.params, err)
		}
		if execID == "" || o.ExecutionID == execID {
			outs = append(outs, o)
		}
	}
	sort.Slice(outs, func(i, j int) bool { return outs[i].Seq < outs[j].Seq })
	return outs
}

func consecutive(outs []protocol.KernelOutputParams) bool {
	for i := 1; i < len(outs); i++ {
		if outs[i].Seq != outs[i-1].Seq+1 {
			return false
		}
	}
	return true
}

func seqs(outs []protocol.KernelOutputParams) []int64 {
	s := make([]int64, len(outs))
	for i, o := range outs {
		s[i] = o.Seq
	}
	return s
}

// streamText is the text of the execution's outputs on one stream.
func streamText(outs []protocol.KernelOutputParams, name protocol.StreamName) string {
	var b strings.Builder
	for _, o := range outs {
		if o.Kind == protocol.OutputKindStream && o.Name == name {
			b.WriteString(o.Text)
		}
	}
	return b.String()
}

// ofKind are the outputs of one kind.
func ofKind(outs []protocol.KernelOutputParams, kind protocol.OutputKind) []protocol.KernelOutputParams {
	var r []protocol.KernelOutputParams
	for _, o := range outs {
		if o.Kind == kind {
			r = append(r, o)
		}
	}
	return r
}

// resultText is the text/plain of the execution's result output ("" if none).
func resultText(t testing.TB, outs []protocol.KernelOutputParams) string {
	t.Helper()
	rs := ofKind(outs, protocol.OutputKindResult)
	if len(rs) == 0 {
		return ""
	}
	if len(rs) > 1 {
		t.Fatalf("%d results, want 1: %+v", len(rs), rs)
	}
	s, _ := rs[0].Data["text/plain"].(string)
	return s
}

// wantOK fails unless the execution ended ok.
func wantOK(t testing.TB, res protocol.ExecuteResult, outs []protocol.KernelOutputParams) {
	t.Helper()
	if res.Status != protocol.ExecutionStatusOK {
		t.Fatalf("status %s, error %+v, outputs %+v", res.Status, res.Error, outs)
	}
}

// statuses are the kernel/status notifications the client got for kid.
func statuses(t testing.TB, c *client, kid string) []protocol.KernelStatusParams {
	c.mu.Lock()
	notes := append([]note(nil), c.notes...)
	c.mu.Unlock()
	var out []protocol.KernelStatusParams
	for _, n := range notes {
		if n.method != protocol.MethodKernelStatus {
			continue
		}
		var s protocol.KernelStatusParams
		if err := json.Unmarshal(n.params, &s); err != nil {
			t.Fatalf("bad kernel/status %s: %v", n.params, err)
		}
		if s.KernelID == kid {
			out = append(out, s)
		}
	}
	return out
}

// waitStatus waits for a kernel/status of kid in state st and returns it.
func waitStatus(t testing.TB, c *client, kid string, st protocol.KernelState, after int) protocol.KernelStatusParams {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		ss := statuses(t, c, kid)
		for i := after; i < len(ss); i++ {
			if ss[i].State == st {
				return ss[i]
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no kernel/status %s for %s; got %+v", st, kid, statuses(t, c, kid))
	return protocol.KernelStatusParams{}
}

func withSource(path string, line int) func(*protocol.KernelExecuteParams) {
	return func(p *protocol.KernelExecuteParams) { p.Source = &protocol.SourceLocation{Path: path, Line: line} }
}

func withStdin(s string, allow bool) func(*protocol.KernelExecuteParams) {
	return func(p *protocol.KernelExecuteParams) { p.Stdin, p.AllowStdin = s, allow }
}

func withTimeout(ms int64) func(*protocol.KernelExecuteParams) {
	return func(p *protocol.KernelExecuteParams) { p.TimeoutMs = ms }
}

func withID(id string) func(*protocol.KernelExecuteParams) {
	return func(p *protocol.KernelExecuteParams) { p.ExecutionID = id }
}

// tapStream records the JSON-RPC id of each kernel/execute by its
// executionId, so a test can send $/cancelRequest for it (go.lsp.dev's
// Call does not send one when its context ends).
type tapStream struct {
	jsonrpc2.Stream
	mu  sync.Mutex
	ids map[string]json.RawMessage
}

func (s *tapStream) Write(ctx context.Context, m jsonrpc2.Message) (int64, error) {
	// The library hands the stream its own unexported call type: look at
	// its JSON. The id is recorded once the request is written.
	var execID string
	var id json.RawMessage
	if b, err := jsonrpc2.EncodeMessage(m); err == nil {
		var call struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ExecutionID string `json:"executionId"`
			} `json:"params"`
		}
		if json.Unmarshal(b, &call) == nil && len(call.ID) > 0 && call.Method == protocol.MethodKernelExecute {
			execID, id = call.Params.ExecutionID, call.ID
		}
	}
	n, err := s.Stream.Write(ctx, m)
	if err == nil && id != nil {
		s.mu.Lock()
		s.ids[execID] = id
		s.mu.Unlock()
	}
	return n, err
}

// tappedClient is p.client() with a tapStream.
func (p *stdioProc) tappedClient() (*client, *tapStream) {
	tap := &tapStream{Stream: headerStream(p.stdout, p.stdin), ids: map[string]json.RawMessage{}}
	return newClient(tap), tap
}

// cancelExecution sends $/cancelRequest for the kernel/execute of execID.
func cancelExecution(t testing.TB, c *client, tap *tapStream, execID string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		tap.mu.Lock()
		id, ok := tap.ids[execID]
		tap.mu.Unlock()
		if ok {
			if err := c.conn.Notify(context.Background(), protocol.MethodCancelRequest, map[string]any{"id": id}); err != nil {
				t.Fatal(err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no kernel/execute sent for %s", execID)
		}
		time.Sleep(time.Millisecond)
	}
}
