package rpc

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/workspace"

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
	addTest("cellboxTest/exec", testExec)
}

// testWSStall, when set (by CELLBOX_TEST_WS_STALL_MS under --test-hooks),
// replaces wsStallTimeout, so a test of a client that stops reading does
// not wait 30 s.
var testWSStall atomic.Int64

func setTestWSStall() {
	if ms, err := strconv.Atoi(os.Getenv("CELLBOX_TEST_WS_STALL_MS")); err == nil && ms > 0 {
		testWSStall.Store(int64(time.Duration(ms) * time.Millisecond))
	}
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

type execParams struct {
	WorkspaceID string               `json:"workspaceId"`
	Argv        []string             `json:"argv"`
	Env         []string             `json:"env,omitempty"`
	Cwd         string               `json:"cwd,omitempty"`
	Stdin       string               `json:"stdin,omitempty"`
	Limits      *protocol.Limits     `json:"limits,omitempty"`
	Network     protocol.NetworkMode `json:"network,omitempty"`
}

type execResult struct {
	ExitCode        int    `json:"exitCode"`
	Signal          string `json:"signal,omitempty"`
	Reason          string `json:"reason,omitempty"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	CPUMs           int64  `json:"cpuMs"`
	PeakMemoryBytes int64  `json:"peakMemoryBytes"`
	DurationMs      int64  `json:"durationMs"`
}

// testExec runs a program in a workspace's sandbox and returns its output
// (the first MiB of each stream): the attack suite's way in until kernels
// and terminals exist. Cancelling the request kills the program.
func testExec(c *conn, ctx context.Context, p *execParams) (*execResult, error) {
	w, err := c.d.opts.Workspaces.Get(p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	limits, err := workspace.ResolveLimits(p.Limits, workspace.DefaultLimits)
	if err != nil {
		return nil, err
	}
	res, err := workspace.Run(ctx, w, workspace.ProcSpec{
		Argv: p.Argv, Env: p.Env, Dir: p.Cwd, Limits: limits, Network: p.Network,
	}, strings.NewReader(p.Stdin), 1<<20)
	if err != nil {
		return nil, err
	}
	out := &execResult{
		ExitCode: res.Status.Code, Reason: res.Status.Reason,
		Stdout: string(res.Stdout), Stderr: string(res.Stderr),
		CPUMs: res.Status.CPU.Milliseconds(), PeakMemoryBytes: res.Status.MaxRSSBytes, DurationMs: res.Duration.Milliseconds(),
	}
	if res.Status.Signal != 0 {
		out.Signal = unix.SignalName(res.Status.Signal)
	}
	return out, nil
}
