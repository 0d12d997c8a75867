package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
)

func TestLifecycle(t *testing.T) {
	tc := startInProc(t, Options{Version: "test", Capabilities: func(context.Context) protocol.ServerCapabilities {
		return protocol.ServerCapabilities{Languages: []protocol.LanguageCapability{{ID: "python", Available: true}}}
	}})
	err := tc.call(t, protocol.MethodDaemonStats, struct{}{}, nil)
	wantCode(t, err, protocol.CodeServerNotInitialized)

	var res protocol.InitializeResult
	if err := tc.call(t, protocol.MethodInitialize, protocol.InitializeParams{ProtocolVersion: 1}, &res); err != nil {
		t.Fatal(err)
	}
	if res.ProtocolVersion != 1 || res.ServerInfo.Name != "cellbox" || res.ServerInfo.Version != "test" {
		t.Fatalf("initialize result = %+v", res)
	}
	if len(res.Capabilities.Languages) != 1 || res.Capabilities.PositionEncoding != protocol.PositionEncodingUTF32 {
		t.Fatalf("capabilities = %+v", res.Capabilities)
	}
	wantCode(t, tc.call(t, protocol.MethodInitialize, protocol.InitializeParams{ProtocolVersion: 1}, nil), protocol.CodeInvalidRequest)
	if err := tc.conn.Notify(context.Background(), protocol.MethodInitialized, struct{}{}); err != nil {
		t.Fatal(err)
	}
	var stats protocol.DaemonStats
	if err := tc.call(t, protocol.MethodDaemonStats, struct{}{}, &stats); err != nil {
		t.Fatal(err)
	}
	if stats.Connections != 1 || stats.UptimeMs < 0 || stats.MemoryBytes <= 0 {
		t.Fatalf("stats = %+v", stats)
	}
	var null json.RawMessage
	if err := tc.call(t, protocol.MethodShutdown, nil, &null); err != nil || string(null) != "null" {
		t.Fatalf("shutdown = %s, %v; want null", null, err)
	}
	wantCode(t, tc.call(t, protocol.MethodDaemonStats, struct{}{}, nil), protocol.CodeInvalidRequest)
	if err := tc.conn.Notify(context.Background(), protocol.MethodExit, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-tc.exit:
		if code != 0 {
			t.Fatalf("exit after shutdown: code %d, want 0", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("exit did not end the connection")
	}
}

func TestExitWithoutShutdown(t *testing.T) {
	tc := startInProc(t, Options{})
	tc.initialize(t)
	_ = tc.conn.Notify(context.Background(), protocol.MethodExit, nil)
	select {
	case code := <-tc.exit:
		if code != 1 {
			t.Fatalf("exit without shutdown: code %d, want 1", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("exit did not end the connection")
	}
}

func TestInitializeBadParams(t *testing.T) {
	tc := startInProc(t, Options{})
	for _, tt := range []struct {
		params string
		want   string
	}{
		{`{"protocolVersion":"one"}`, `"protocolVersion" must be an integer`},
		{`{"protocolVersion":1.5}`, `"protocolVersion" must be an integer, got number 1.5`},
		{`{}`, `"protocolVersion" is required`},
		{`{"protocolVersion":2}`, `speaks protocol version 1`},
		{`[1]`, `must be a JSON object`},
		{`{"protocolVersion":1,"capabilities":{"positionEncoding":"ebcdic"}}`, `positionEncoding`},
		{`{"protocolVersion":1,"capabilities":{"inputRequest":"yes"}}`, `"capabilities.inputRequest" must be a boolean`},
	} {
		err := tc.call(t, protocol.MethodInitialize, json.RawMessage(tt.params), nil)
		je := wantCode(t, err, protocol.CodeInvalidParams)
		if !strings.Contains(je.Message, tt.want) {
			t.Errorf("initialize %s: message %q does not contain %q", tt.params, je.Message, tt.want)
		}
	}
	tc.initialize(t) // the failures left the connection uninitialized and usable
}

func TestUnknownMethod(t *testing.T) {
	tc := startInProc(t, Options{})
	tc.initialize(t)
	je := wantCode(t, tc.call(t, "kernel/frobnicate", struct{}{}, nil), protocol.CodeMethodNotFound)
	if !strings.Contains(je.Message, "kernel/frobnicate") {
		t.Fatalf("message %q does not name the method", je.Message)
	}
	// A known method with a missing field names the field.
	je = wantCode(t, tc.call(t, protocol.MethodKernelStart, struct{}{}, nil), protocol.CodeInvalidParams)
	if !strings.Contains(je.Message, "kernel/start") || !strings.Contains(je.Message, `"language"`) {
		t.Fatalf("message %q does not name the method and the field", je.Message)
	}
	// Unknown notifications are ignored and the connection goes on.
	_ = tc.conn.Notify(context.Background(), "some/notification", map[string]int{"a": 1})
	if err := tc.call(t, protocol.MethodDaemonStats, nil, nil); err != nil {
		t.Fatal(err)
	}
}

// TestCancelRequest is also the regression test for jsonrpc2's pooled
// request contexts: run with -race, a context derived from the pooled one
// reports a race or panics with "cannot create context from nil parent".
func TestCancelRequest(t *testing.T) {
	rc := startRaw(t, Options{})
	rc.initialize(t)
	for i := 0; i < 20; i++ {
		id := 100 + i
		start := time.Now()
		rc.send(t, map[string]any{"jsonrpc": "2.0", "id": id, "method": "cellboxTest/sleep", "params": map[string]any{"ms": 30000}})
		rc.send(t, map[string]any{"jsonrpc": "2.0", "method": protocol.MethodCancelRequest, "params": map[string]any{"id": id}})
		resp := rc.waitID(t, id)
		if code := resp.errCode(); code != protocol.CodeRequestCancelled {
			t.Fatalf("cancelled request answered %s", resp.raw)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("cancel took %v", d)
		}
	}
	// A string id, and a cancel for an unknown id (ignored).
	rc.send(t, map[string]any{"jsonrpc": "2.0", "id": "abc", "method": "cellboxTest/sleep", "params": map[string]any{"ms": 30000}})
	rc.send(t, map[string]any{"jsonrpc": "2.0", "method": protocol.MethodCancelRequest, "params": map[string]any{"id": "nope"}})
	rc.send(t, map[string]any{"jsonrpc": "2.0", "method": protocol.MethodCancelRequest, "params": map[string]any{"id": "abc"}})
	if code := rc.waitID(t, "abc").errCode(); code != protocol.CodeRequestCancelled {
		t.Fatalf("string-id cancel answered %d", code)
	}
	rc.send(t, map[string]any{"jsonrpc": "2.0", "id": 7, "method": protocol.MethodDaemonStats})
	if resp := rc.waitID(t, 7); resp.errCode() != 0 {
		t.Fatalf("connection unusable after cancel: %s", resp.raw)
	}
}

func TestSlowRequestDoesNotBlock(t *testing.T) {
	tc := startInProc(t, Options{})
	tc.initialize(t)
	var slowDone atomic.Bool
	go func() {
		_ = tc.call(t, "cellboxTest/sleep", map[string]any{"ms": 30000, "workDoneToken": "slow"}, nil)
		slowDone.Store(true)
	}()
	waitProgress(t, tc, "slow", 1) // the slow request runs
	for i := 0; i < 10; i++ {
		if err := tc.call(t, protocol.MethodDaemonStats, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if slowDone.Load() {
		t.Fatal("fast requests were answered only after the slow one")
	}
}

func TestServerToClientRequest(t *testing.T) {
	tc := startInProc(t, Options{})
	tc.initialize(t)
	tc.mu.Lock()
	tc.answer = func(method string, params json.RawMessage) (any, error) {
		if method != protocol.MethodKernelInputRequest {
			return nil, jsonrpc2.ErrMethodNotFound
		}
		var p protocol.KernelInputRequestParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, err
		}
		return protocol.KernelInputReply{Value: "answer to " + p.Prompt}, nil
	}
	tc.mu.Unlock()
	var reply protocol.KernelInputReply
	if err := tc.call(t, "cellboxTest/askClient", map[string]string{"prompt": "name?"}, &reply); err != nil {
		t.Fatal(err)
	}
	if reply.Value != "answer to name?" {
		t.Fatalf("reply = %q", reply.Value)
	}
}

func TestProgress(t *testing.T) {
	tc := startInProc(t, Options{})
	tc.initialize(t)
	if err := tc.call(t, "cellboxTest/sleep", map[string]any{"ms": 50, "workDoneToken": "quick"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := tc.call(t, "cellboxTest/sleep", map[string]any{"ms": 600, "workDoneToken": "tok"}, nil); err != nil {
		t.Fatal(err)
	}
	// The client handles notifications on goroutines of their own: the
	// end may trail the response.
	var kinds []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		kinds = kinds[:0]
		for _, raw := range tc.notifications(protocol.MethodProgress) {
			var p protocol.ProgressParams
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatal(err)
			}
			if p.Token != "tok" {
				t.Fatalf("progress for token %v: work under 200 ms must send none", p.Token)
			}
			kinds = append(kinds, string(p.Value.Kind))
		}
		if (len(kinds) > 0 && kinds[len(kinds)-1] == "end") || time.Now().After(deadline) {
			break
		}
	}
	if len(kinds) < 3 || kinds[0] != "begin" || kinds[len(kinds)-1] != "end" || kinds[1] != "report" {
		t.Fatalf("progress kinds = %v, want begin, report..., end", kinds)
	}
}

func TestHandlerPanic(t *testing.T) {
	tc := startInProc(t, Options{})
	tc.initialize(t)
	wantCode(t, tc.call(t, "cellboxTest/panic", struct{}{}, nil), protocol.CodeInternalError)
	if err := tc.call(t, protocol.MethodDaemonStats, nil, nil); err != nil {
		t.Fatalf("connection unusable after a handler panic: %v", err)
	}
}

func TestTestHooksOffByDefault(t *testing.T) {
	d := newTestDaemon(t, Options{})
	c := &conn{d: d}
	if _, ok := c.lookup("cellboxTest/sleep"); ok {
		t.Fatal("test hooks reachable without --test-hooks")
	}
}

func TestInFlightLimit(t *testing.T) {
	tc := startInProc(t, Options{MaxInFlight: 2})
	tc.initialize(t)
	for i := 0; i < 2; i++ {
		go func() {
			_ = tc.call(t, "cellboxTest/sleep", map[string]any{"ms": 30000, "workDoneToken": fmt.Sprint("held", i)}, nil)
		}()
	}
	// Both run (their progress began), so both hold their places.
	waitProgress(t, tc, "held0", 1)
	waitProgress(t, tc, "held1", 1)
	je := wantCode(t, tc.call(t, protocol.MethodDaemonStats, nil, nil), protocol.CodeLimitExceeded)
	var data protocol.ErrorData
	_ = json.Unmarshal(je.Data, &data)
	if data.RetryAfterMs <= 0 {
		t.Fatalf("LimitExceeded without retryAfterMs: %s", je.Data)
	}
}

// Every client-to-server method of protocol.Server is dispatched.
func TestMethodTableComplete(t *testing.T) {
	for _, m := range []string{
		protocol.MethodInitialize, protocol.MethodShutdown, protocol.MethodDaemonStats,
		protocol.MethodWorkspaceOpen, protocol.MethodFsWatch, protocol.MethodKernelExecute,
		protocol.MethodKernelVariables, protocol.MethodPtyAck, protocol.MethodPtyClose,
	} {
		if _, ok := methodTable[m]; !ok {
			t.Errorf("%s is not dispatched", m)
		}
	}
	// protocol.Server has 4 lifecycle methods, 2 of them notifications.
	if want := reflect.TypeOf((*protocol.Server)(nil)).Elem().NumMethod() - 2; len(methodTable) != want {
		t.Errorf("methodTable has %d methods, protocol.Server %d requests", len(methodTable), want)
	}
}

// TestPipelinedLifecycle: a client that writes initialize, a request,
// shutdown and exit without waiting gets every answer in order and exit 0.
func TestPipelinedLifecycle(t *testing.T) {
	slow := func(ctx context.Context) protocol.ServerCapabilities {
		time.Sleep(200 * time.Millisecond) // a host probe still running
		return protocol.ServerCapabilities{}
	}
	rc := startRaw(t, Options{Capabilities: slow})
	rc.sendBody(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	rc.sendBody(t, `{"jsonrpc":"2.0","id":2,"method":"daemon/stats"}`)
	rc.sendBody(t, `{"jsonrpc":"2.0","id":3,"method":"shutdown"}`)
	rc.sendBody(t, `{"jsonrpc":"2.0","method":"exit"}`)
	// Concurrent requests may be answered in any order; each succeeds.
	seen := map[string]bool{}
	for range 3 {
		m := rc.next(t)
		if m.errCode() != 0 {
			t.Fatalf("answer %s: %s", m.m["id"], m.raw)
		}
		seen[string(m.m["id"])] = true
	}
	if !seen["1"] || !seen["2"] || !seen["3"] {
		t.Fatalf("answered ids %v, want 1, 2 and 3", seen)
	}
	select {
	case code := <-rc.exit:
		if code != 0 {
			t.Fatalf("exit code %d, want 0", code)
		}
	case <-timeoutC():
		t.Fatal("no exit")
	}
}

func TestWorkspaceErrorCodes(t *testing.T) {
	for _, tt := range []struct {
		err  error
		code protocol.ErrorCode
	}{
		{fmt.Errorf("open: %w: no such workspace", workspace.ErrNotFound), protocol.CodeNotFound},
		{fmt.Errorf("%w: root must be absolute", workspace.ErrInvalid), protocol.CodeInvalidParams},
		{fmt.Errorf("%w: memoryBytes over its maximum", workspace.ErrLimit), protocol.CodeLimitExceeded},
		{fmt.Errorf("%w: seccomp: not in this kernel", workspace.ErrSandboxUnavailable), protocol.CodeSandboxUnavailable},
		{errors.New("disk on fire"), protocol.CodeInternalError},
	} {
		pe := toProtocolError(tt.err)
		if pe.Code != tt.code || pe.Message != tt.err.Error() && tt.code != protocol.CodeInternalError {
			t.Errorf("%v -> %d %q, want %d", tt.err, pe.Code, pe.Message, tt.code)
		}
	}
}

// TestShutdownAnswersRequestsInFlight: shutdown cancels a long request and
// answers only after it, so nothing is lost to the exit that follows.
func TestShutdownAnswersRequestsInFlight(t *testing.T) {
	rc := startRaw(t, Options{})
	rc.initialize(t)
	rc.sendBody(t, `{"jsonrpc":"2.0","id":2,"method":"cellboxTest/sleep","params":{"ms":30000}}`)
	rc.sendBody(t, `{"jsonrpc":"2.0","id":3,"method":"shutdown"}`)
	rc.sendBody(t, `{"jsonrpc":"2.0","method":"exit"}`)
	first, second := rc.next(t), rc.next(t)
	if string(first.m["id"]) != "2" || first.errCode() != protocol.CodeRequestCancelled {
		t.Fatalf("first answer %s, want the sleep cancelled", first.raw)
	}
	if string(second.m["id"]) != "3" || second.errCode() != 0 {
		t.Fatalf("second answer %s, want shutdown's", second.raw)
	}
	if code := <-rc.exit; code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// waitProgress waits until the client has n $/progress notifications under
// token: a request that reports progress is running.
func waitProgress(t *testing.T, tc *testClient, token string, n int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		got := 0
		for _, raw := range tc.notifications(protocol.MethodProgress) {
			var p protocol.ProgressParams
			if json.Unmarshal(raw, &p) == nil && p.Token == token {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d $/progress under %q, want %d", got, token, n)
		}
	}
}
