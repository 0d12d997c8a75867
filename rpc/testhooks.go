package rpc

import (
	"context"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Test hooks: methods under cellboxTest/ exist only when the daemon runs
// with --test-hooks (CELLBOX_TEST_HOOKS=1). They let the end-to-end tests
// exercise the transport with a slow request, a server-to-client request and
// a failing handler before any service provides one. They are not part of
// the protocol and a daemon without the flag answers them -32601.
var testMethods = map[string]handlerFunc{}

func init() {
	addTest("cellboxTest/sleep", testSleep)
	addTest("cellboxTest/askClient", testAskClient)
	addTest("cellboxTest/panic", testPanic)
}

func addTest[P, R any](method string, f func(*conn, context.Context, *P) (R, error)) {
	saved := methodTable[method]
	add(method, f)
	testMethods[method] = methodTable[method]
	if saved == nil {
		delete(methodTable, method)
	} else {
		methodTable[method] = saved
	}
}

type sleepParams struct {
	Ms            int64                  `json:"ms"`
	WorkDoneToken protocol.ProgressToken `json:"workDoneToken,omitempty"`
}

type sleepResult struct {
	SleptMs int64 `json:"sleptMs"`
}

// testSleep waits ms milliseconds (at most a minute) or until cancelled,
// reporting $/progress every 100 ms when given a token.
func testSleep(c *conn, ctx context.Context, p *sleepParams) (*sleepResult, error) {
	if p.Ms < 0 || p.Ms > 60_000 {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for cellboxTest/sleep: field \"ms\" must be 0..60000, got %d", p.Ms)
	}
	start := time.Now()
	pr := c.startProgress(p.WorkDoneToken, "sleeping")
	defer pr.End("done")
	deadline := time.NewTimer(time.Duration(p.Ms) * time.Millisecond)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return &sleepResult{SleptMs: time.Since(start).Milliseconds()}, nil
		case <-tick.C:
			pr.Report("sleeping", int(100*time.Since(start).Milliseconds()/max(p.Ms, 1)))
		}
	}
}

type askParams struct {
	Prompt string `json:"prompt"`
}

// testAskClient sends kernel/inputRequest to the client and returns its reply.
func testAskClient(c *conn, ctx context.Context, p *askParams) (*protocol.KernelInputReply, error) {
	var reply protocol.KernelInputReply
	req := protocol.KernelInputRequestParams{KernelID: "test", ExecutionID: "test", Prompt: p.Prompt}
	if err := c.callClient(ctx, protocol.MethodKernelInputRequest, req, &reply); err != nil {
		return nil, err
	}
	return &reply, nil
}

func testPanic(*conn, context.Context, *protocol.Empty) (*protocol.Empty, error) {
	panic("cellboxTest/panic called")
}
