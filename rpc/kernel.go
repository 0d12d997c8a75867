package rpc

import (
	"context"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/cellbox-dev/cellbox/kernel"
	"github.com/cellbox-dev/cellbox/protocol"
)

// §4 kernels: each method hands off to the kernel.Manager; a connection is
// a kernel.Sink of the kernels it started, attached to, or runs code on.

var _ kernel.Sink = (*conn)(nil)

// KernelStart is §4 kernel/start. The connection is attached to the kernel.
func (c *conn) KernelStart(ctx context.Context, p *protocol.KernelStartParams) (*protocol.KernelStartResult, error) {
	if p.Language == "" {
		return nil, missingField(protocol.MethodKernelStart, "language")
	}
	prog := c.startProgress(p.WorkDoneToken, "Starting the "+p.Language+" kernel")
	k, err := c.d.opts.Kernels.Start(ctx, *p, c)
	prog.End("")
	if err != nil {
		return nil, err
	}
	c.detachKernelsOnClose()
	c.seeWorkspace(k.Workspace().ID())
	res := k.StartResult()
	return &res, nil
}

// KernelExecute is §4 kernel/execute: every kernel/output of the execution
// is sent before this answer.
func (c *conn) KernelExecute(ctx context.Context, p *protocol.KernelExecuteParams) (*protocol.ExecuteResult, error) {
	k, err := c.kernel(protocol.MethodKernelExecute, p.KernelID)
	if err != nil {
		return nil, err
	}
	req := kernel.ExecRequest{Params: *p, Sink: c, Conn: fmt.Sprintf("%s-%d", c.transport, c.num),
		// Once the code is in the kernel's queue, the requests behind it
		// may go on: the kernel runs its queue in order.
		Queued: func() { passTurn(ctx) }}
	c.mu.Lock()
	canAsk := c.caps.InputRequest
	c.mu.Unlock()
	if canAsk {
		req.Ask = func(ctx context.Context, ip protocol.KernelInputRequestParams) (string, error) {
			var reply protocol.KernelInputReply
			if err := c.callClient(ctx, protocol.MethodKernelInputRequest, ip, &reply); err != nil {
				return "", err
			}
			return reply.Value, nil
		}
	}
	// The code runs on when the connection drops (PROTOCOL.md §2: its
	// output is kept for a client that reconnects); only $/cancelRequest
	// (or shutdown) interrupts it.
	ectx, cancel := explicitCancel(ctx)
	defer cancel()
	return k.Execute(ectx, req)
}

// explicitCancel returns a context that ends when the request is cancelled
// by $/cancelRequest or shutdown, not when its connection ends.
func explicitCancel(ctx context.Context) (context.Context, context.CancelFunc) {
	fl, _ := ctx.Value(inflightKey{}).(*inflight)
	out, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		select {
		case <-ctx.Done():
			if fl == nil || fl.cancelled.Load() {
				cancel()
			}
		case <-out.Done():
		}
	}()
	return out, cancel
}

// KernelInterrupt is §4 kernel/interrupt.
func (c *conn) KernelInterrupt(_ context.Context, p *protocol.KernelIDParams) (*protocol.Empty, error) {
	k, err := c.kernel(protocol.MethodKernelInterrupt, p.KernelID)
	if err != nil {
		return nil, err
	}
	if err := k.Interrupt(); err != nil {
		return nil, err
	}
	return &protocol.Empty{}, nil
}

// KernelRestart is §4 kernel/restart.
func (c *conn) KernelRestart(ctx context.Context, p *protocol.KernelIDParams) (*protocol.Empty, error) {
	k, err := c.kernel(protocol.MethodKernelRestart, p.KernelID)
	if err != nil {
		return nil, err
	}
	if err := k.Restart(ctx); err != nil {
		return nil, err
	}
	return &protocol.Empty{}, nil
}

// KernelShutdown is §4 kernel/shutdown: every process of the kernel is gone
// when this answers.
func (c *conn) KernelShutdown(ctx context.Context, p *protocol.KernelIDParams) (*protocol.Empty, error) {
	if p.KernelID == "" {
		return nil, missingField(protocol.MethodKernelShutdown, "kernelId")
	}
	if err := c.d.opts.Kernels.Shutdown(ctx, p.KernelID); err != nil {
		return nil, err
	}
	return &protocol.Empty{}, nil
}

// KernelAttach is §4 kernel/attach.
func (c *conn) KernelAttach(_ context.Context, p *protocol.KernelAttachParams) (*protocol.Empty, error) {
	k, err := c.kernel(protocol.MethodKernelAttach, p.KernelID)
	if err != nil {
		return nil, err
	}
	if err := k.Attach(c, p.FromSeq); err != nil {
		return nil, err
	}
	c.detachKernelsOnClose()
	c.seeWorkspace(k.Workspace().ID())
	return &protocol.Empty{}, nil
}

// KernelDetach is §4 kernel/detach.
func (c *conn) KernelDetach(_ context.Context, p *protocol.KernelIDParams) (*protocol.Empty, error) {
	k, err := c.kernel(protocol.MethodKernelDetach, p.KernelID)
	if err != nil {
		return nil, err
	}
	k.Detach(c)
	return &protocol.Empty{}, nil
}

// KernelHistory is §4 kernel/history.
func (c *conn) KernelHistory(_ context.Context, p *protocol.KernelHistoryParams) (*protocol.KernelHistoryResult, error) {
	k, err := c.kernel(protocol.MethodKernelHistory, p.KernelID)
	if err != nil {
		return nil, err
	}
	return k.History(*p)
}

// KernelList is §4 kernel/list.
func (c *conn) KernelList(context.Context, *protocol.KernelListParams) (*protocol.KernelListResult, error) {
	return &protocol.KernelListResult{Kernels: c.d.opts.Kernels.List()}, nil
}

// KernelComplete is §4 kernel/complete, positions in the connection's
// encoding.
func (c *conn) KernelComplete(ctx context.Context, p *protocol.KernelCompleteParams) (*protocol.KernelCompleteResult, error) {
	k, err := c.kernel(protocol.MethodKernelComplete, p.KernelID)
	if err != nil {
		return nil, err
	}
	enc := c.encoding()
	pos, err := toCodePoints(p.Code, p.CursorPos, enc)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for kernel/complete: field \"cursorPos\": %v", err)
	}
	res, err := k.Complete(ctx, p.Code, pos)
	if err != nil {
		return nil, err
	}
	res.CursorStart = fromCodePoints(p.Code, res.CursorStart, enc)
	res.CursorEnd = fromCodePoints(p.Code, res.CursorEnd, enc)
	return res, nil
}

// KernelInspect is §4 kernel/inspect.
func (c *conn) KernelInspect(ctx context.Context, p *protocol.KernelInspectParams) (*protocol.KernelInspectResult, error) {
	k, err := c.kernel(protocol.MethodKernelInspect, p.KernelID)
	if err != nil {
		return nil, err
	}
	if p.DetailLevel != 0 && p.DetailLevel != 1 {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for kernel/inspect: field \"detailLevel\" must be 0 or 1, got %d", p.DetailLevel)
	}
	pos, err := toCodePoints(p.Code, p.CursorPos, c.encoding())
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for kernel/inspect: field \"cursorPos\": %v", err)
	}
	return k.Inspect(ctx, p.Code, pos, p.DetailLevel)
}

// KernelIsComplete is §4 kernel/isComplete.
func (c *conn) KernelIsComplete(ctx context.Context, p *protocol.KernelIsCompleteParams) (*protocol.KernelIsCompleteResult, error) {
	k, err := c.kernel(protocol.MethodKernelIsComplete, p.KernelID)
	if err != nil {
		return nil, err
	}
	return k.IsComplete(ctx, p.Code)
}

// KernelVariables is §4 kernel/variables.
func (c *conn) KernelVariables(ctx context.Context, p *protocol.KernelIDParams) (*protocol.KernelVariablesResult, error) {
	k, err := c.kernel(protocol.MethodKernelVariables, p.KernelID)
	if err != nil {
		return nil, err
	}
	return k.Variables(ctx)
}

func (c *conn) kernel(method, id string) (*kernel.Kernel, error) {
	if id == "" {
		return nil, missingField(method, "kernelId")
	}
	return c.d.opts.Kernels.Get(id)
}

func (c *conn) encoding() protocol.PositionEncoding {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.caps.PositionEncoding
}

// detachKernelsOnClose makes the end of this connection detach it from every
// kernel; they run on (PROTOCOL.md §2 ownership).
func (c *conn) detachKernelsOnClose() {
	c.onClose("kernel", func() { c.d.opts.Kernels.DetachAll(c) })
}

// KernelOutput is kernel.Sink: a kernel/output notification.
func (c *conn) KernelOutput(p protocol.KernelOutputParams) error {
	return c.notify(c.ctx, protocol.MethodKernelOutput, p)
}

// KernelStatus is kernel.Sink: a kernel/status notification.
func (c *conn) KernelStatus(p protocol.KernelStatusParams) error {
	return c.notify(c.ctx, protocol.MethodKernelStatus, p)
}

func executionCounts(s kernel.Stats) protocol.ExecutionCounts {
	return protocol.ExecutionCounts{Total: s.Total, Ok: s.OK, Error: s.Error, Timeout: s.Timeout, Interrupted: s.Interrupted}
}

// toCodePoints converts a position in enc units of code to code points.
func toCodePoints(code string, pos int, enc protocol.PositionEncoding) (int, error) {
	if pos < 0 {
		return 0, fmt.Errorf("%d is negative", pos)
	}
	switch enc {
	case protocol.PositionEncodingUTF8:
		if pos > len(code) {
			return 0, fmt.Errorf("%d is past the end of code (%d bytes)", pos, len(code))
		}
		for pos > 0 && pos < len(code) && !utf8.RuneStart(code[pos]) {
			pos--
		}
		return utf8.RuneCountInString(code[:pos]), nil
	case protocol.PositionEncodingUTF16:
		units, points := 0, 0
		for _, r := range code {
			if units >= pos {
				break
			}
			units += utf16.RuneLen(r)
			points++
		}
		if units < pos {
			return 0, fmt.Errorf("%d is past the end of code (%d UTF-16 units)", pos, units)
		}
		return points, nil
	default:
		if n := utf8.RuneCountInString(code); pos > n {
			return 0, fmt.Errorf("%d is past the end of code (%d code points)", pos, n)
		}
		return pos, nil
	}
}

// fromCodePoints converts a position in code points of code to enc units.
func fromCodePoints(code string, pos int, enc protocol.PositionEncoding) int {
	if enc != protocol.PositionEncodingUTF8 && enc != protocol.PositionEncodingUTF16 {
		return pos
	}
	units, points := 0, 0
	for _, r := range code {
		if points >= pos {
			break
		}
		if enc == protocol.PositionEncodingUTF8 {
			units += utf8.RuneLen(r)
		} else {
			units += utf16.RuneLen(r)
		}
		points++
	}
	return units
}
