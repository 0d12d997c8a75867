package kernel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
)

// Asker asks the client for a line of standard input (kernel/inputRequest).
type Asker func(ctx context.Context, p protocol.KernelInputRequestParams) (string, error)

// ExecRequest is one kernel/execute.
type ExecRequest struct {
	Params protocol.KernelExecuteParams
	// Sink gets this execution's output even when it is not attached.
	Sink Sink
	// Ask is nil when the client did not declare capabilities.inputRequest.
	Ask Asker
	// Conn names the connection in the audit log.
	Conn string
	// Queued, if set, is called once the execution is in the kernel's
	// queue, which runs in order: a caller that must keep its requests in
	// wire order lets the next one go then.
	Queued func()
}

// execution is one kernel/execute, queued or running.
type execution struct {
	req     ExecRequest
	id      string
	ctx     context.Context
	count   int
	result  chan execOutcome
	started time.Time
	// asking: an input request of this execution waits for the client
	// (guarded by Kernel.mu); a driver may have one at a time.
	asking bool
	// sent is closed once the execute request is written to the driver
	// (or could not be): an interrupt waits for it, since a driver places
	// a SIGINT among the requests it has, and one that comes before the
	// request would be for no execution.
	sent chan struct{}
	// interruptAsk withdraws the question being asked (nil when none),
	// answering it as interrupted (driverSpec.interruptInput; Kernel.mu).
	interruptAsk func()
}

type execOutcome struct {
	res *protocol.ExecuteResult
	err error
}

// Execute is kernel/execute: it queues the code and returns when it has
// run, after every kernel/output of it was sent.
func (k *Kernel) Execute(ctx context.Context, req ExecRequest) (*protocol.ExecuteResult, error) {
	p := &req.Params
	if len(p.Code) > k.m.opts.MaxCodeBytes {
		return nil, fmt.Errorf("%w: code is %d bytes, over the %d-byte maximum (maxCodeBytes)", ErrLimit, len(p.Code), k.m.opts.MaxCodeBytes)
	}
	if p.TimeoutMs < 0 || p.TimeoutMs > workspace.MaxLimits.TimeoutMs {
		return nil, fmt.Errorf("%w: timeoutMs is %d; it must be between 0 and %d", ErrLimit, p.TimeoutMs, workspace.MaxLimits.TimeoutMs)
	}
	if p.Source != nil && p.Source.Line < 0 {
		return nil, fmt.Errorf("%w: invalid params for kernel/execute: field \"source.line\" must be 1 or more", ErrInvalid)
	}
	e := &execution{req: req, id: p.ExecutionID, ctx: ctx, result: make(chan execOutcome, 1)}
	k.mu.Lock()
	if k.shut {
		k.mu.Unlock()
		return nil, k.shutErr()
	}
	if k.state == protocol.KernelStateDead {
		reason := k.deadReason
		k.mu.Unlock()
		return nil, k.deadErr(reason)
	}
	if e.id == "" {
		k.nextReq++
		e.id = k.id + "-x" + strconv.Itoa(k.nextReq)
	}
	k.queue = append(k.queue, e)
	k.mu.Unlock()
	if req.Queued != nil {
		req.Queued()
	}
	k.kick()
	select {
	case o := <-e.result:
		return o.res, o.err
	case <-ctx.Done():
	}
	// Cancelled: a queued execution leaves the queue; a running one is
	// interrupted by the loop, whose outcome we still wait for so that its
	// output precedes the answer.
	k.mu.Lock()
	for i, q := range k.queue {
		if q == e {
			k.queue = append(k.queue[:i], k.queue[i+1:]...)
			k.mu.Unlock()
			return nil, ctx.Err()
		}
	}
	k.mu.Unlock()
	o := <-e.result
	if o.err != nil {
		return nil, o.err
	}
	return o.res, ctx.Err()
}

func (k *Kernel) kick() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// loop runs the queued executions in order, until shutdown.
func (k *Kernel) loop() {
	for {
		k.mu.Lock()
		for len(k.queue) == 0 && !k.shut {
			k.mu.Unlock()
			select {
			case <-k.wake:
			case <-k.closed:
			}
			k.mu.Lock()
		}
		if k.shut {
			q := k.queue
			k.queue = nil
			k.mu.Unlock()
			for _, e := range q {
				e.result <- execOutcome{err: k.shutErr()}
			}
			return
		}
		e := k.queue[0]
		k.queue = k.queue[1:]
		k.mu.Unlock()
		k.run(e)
	}
}

// run runs one execution.
func (k *Kernel) run(e *execution) {
	p := &e.req.Params
	if e.ctx.Err() != nil {
		e.result <- execOutcome{err: e.ctx.Err()}
		return
	}
	// The automatic checkpoint (§10: restoring it undoes what this
	// execution writes) is taken before the execution is the kernel's
	// current one, so an interrupt meanwhile does not wait for it.
	var checkpoint string
	if p.Checkpoint {
		k.mu.Lock()
		n := k.count + 1 // the count run gives it below (runs are one at a time)
		k.mu.Unlock()
		cp, err := k.ws.AutoCheckpoint(e.ctx, fmt.Sprintf("before execution %d", n))
		if err != nil {
			k.m.log.Warn("automatic checkpoint before an execution", "kernel", k.id, "execution", e.id, "err", err)
		} else {
			checkpoint = cp.CheckpointID
		}
	}
	storeHistory := !p.Silent
	if p.StoreHistory != nil {
		storeHistory = *p.StoreHistory && !p.Silent
	}
	k.mu.Lock()
	// An execution queued while the kernel restarts runs on the new one.
	for k.restarting {
		ch := k.restarted
		k.mu.Unlock()
		<-ch
		k.mu.Lock()
	}
	d := k.drv
	if k.state == protocol.KernelStateDead || d == nil {
		reason := k.deadReason
		k.mu.Unlock()
		e.result <- execOutcome{err: k.deadErr(reason)}
		return
	}
	if !p.Silent {
		k.count++
		e.count = k.count
	}
	if storeHistory {
		k.history = append(k.history, protocol.HistoryEntry{ExecutionCount: e.count, Code: p.Code})
		if over := len(k.history) - k.m.opts.HistoryEntries; over > 0 {
			k.history = append(k.history[:0], k.history[over:]...)
		}
	}
	e.started = time.Now()
	k.lastActivity = e.started
	e.sent = make(chan struct{})
	k.current = e
	k.mu.Unlock()
	k.out.begin(e.id, e.req.Sink, k.limits.OutputBytes)
	k.setState(protocol.KernelStateBusy, "")

	res := &protocol.ExecuteResult{ExecutionID: e.id, ExecutionCount: e.count}
	var outErr error
	timeoutMs := p.TimeoutMs
	if timeoutMs == 0 {
		timeoutMs = k.limits.TimeoutMs
	}
	r := &request{
		Op: "execute", ID: e.id, Code: p.Code, Count: e.count, Silent: p.Silent, StoreHistory: storeHistory,
		Stdin: p.Stdin, AllowStdin: p.AllowStdin && e.req.Ask != nil, Source: p.Source,
	}
	if t := drivers[k.lang].transform; t != nil {
		t(k.m, r)
	}
	res.Checkpoint = checkpoint
	track := k.ws.Track()
	k.ws.Wake()
	err := d.send(r)
	close(e.sent)
	if err != nil {
		outErr = k.driverErr(err)
	} else {
		outErr = k.await(d, e, res, timeoutMs)
	}

	res.OutputTruncated = k.out.end()
	res.FilesChanged, res.FilesChangedMore = track.End()
	k.ws.RecordExecution(protocol.ExecutionRecord{
		ExecutionID: e.id, KernelID: k.id, Language: k.lang, ExecutionCount: e.count, FinishedAt: time.Now().UTC(),
		FilesChanged: res.FilesChanged, More: res.FilesChangedMore, Checkpoint: res.Checkpoint,
	})
	k.mu.Lock()
	k.current = nil
	k.lastActivity = time.Now()
	k.mu.Unlock()
	res.DurationMs = time.Since(e.started).Milliseconds()

	if outErr == nil {
		failed := res.Status != protocol.ExecutionStatusOK
		stop := p.StopOnError == nil || *p.StopOnError
		if failed && stop {
			k.abortQueued("an earlier execution failed (stopOnError)")
		}
		k.m.count(res.Status)
	}
	k.auditExec(e, res, outErr)
	e.result <- execOutcome{res: res, err: outErr}
	k.mu.Lock()
	state := k.state
	k.mu.Unlock()
	if state == protocol.KernelStateBusy {
		k.setState(protocol.KernelStateIdle, "")
	}
}

// await waits for the driver to finish e, interrupting it on cancellation
// or timeout and restarting the kernel when an interrupt does not stop it
// within the grace period.
func (k *Kernel) await(d *driver, e *execution, res *protocol.ExecuteResult, timeoutMs int64) error {
	var timeout, grace <-chan time.Time
	if timeoutMs > 0 {
		t := time.NewTimer(time.Duration(timeoutMs) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	cancelled := e.ctx.Done()
	timedOut := false
	var graceTimer *time.Timer
	defer func() {
		if graceTimer != nil {
			graceTimer.Stop()
		}
	}()
	startGrace := func() {
		if graceTimer == nil {
			graceTimer = time.NewTimer(k.m.opts.Grace)
			grace = graceTimer.C
		}
	}
	for {
		select {
		case dn := <-d.dones:
			res.Status, res.Error, res.CPUMs, res.PeakMemoryBytes = dn.status, dn.err, dn.cpuMs, dn.peak
			switch res.Status {
			case protocol.ExecutionStatusOK, protocol.ExecutionStatusError, protocol.ExecutionStatusInterrupted:
			default:
				res.Status = protocol.ExecutionStatusError
			}
			if timedOut {
				res.Status = protocol.ExecutionStatusTimeout
				res.Error = &protocol.ExecuteError{
					Ename:     "Timeout",
					Evalue:    fmt.Sprintf("the execution ran past its timeout of %d ms and was interrupted", timeoutMs),
					Traceback: []string{},
				}
			}
			return nil
		case <-cancelled:
			cancelled = nil
			_ = d.interrupt(e.id, k.runs(e.id))
			startGrace()
		case <-timeout:
			timeout = nil
			timedOut = true
			_ = d.interrupt(e.id, k.runs(e.id))
			startGrace()
		case <-grace:
			// The code ignored the interrupt: restart the kernel.
			k.m.log.Info("execution did not stop after an interrupt; restarting the kernel", "kernel", k.id, "execution", e.id)
			if err := k.restart(context.Background(), d); err != nil {
				return err
			}
			res.Status = protocol.ExecutionStatusInterrupted
			if timedOut {
				res.Status = protocol.ExecutionStatusTimeout
			}
			res.Error = &protocol.ExecuteError{
				Ename:     "KernelRestarted",
				Evalue:    fmt.Sprintf("the code did not stop within %v of an interrupt, so the kernel was restarted; its state is gone", k.m.opts.Grace),
				Traceback: []string{},
			}
			return nil
		case <-d.exited:
			k.mu.Lock()
			restarting := k.restarting
			k.mu.Unlock()
			if restarting {
				res.Status = protocol.ExecutionStatusAborted
				res.Error = &protocol.ExecuteError{Ename: "KernelRestarted", Evalue: "the kernel was restarted while this ran", Traceback: []string{}}
				return nil
			}
			return k.deadErr(d.deathReason())
		}
	}
}

// abortQueued ends every queued execution with status aborted.
func (k *Kernel) abortQueued(why string) {
	k.mu.Lock()
	q := k.queue
	k.queue = nil
	k.mu.Unlock()
	for _, e := range q {
		res := &protocol.ExecuteResult{ExecutionID: e.id, Status: protocol.ExecutionStatusAborted,
			Error: &protocol.ExecuteError{Ename: "Aborted", Evalue: why, Traceback: []string{}}}
		k.m.count(protocol.ExecutionStatusAborted)
		k.auditExec(e, res, nil)
		e.result <- execOutcome{res: res}
	}
}

// Interrupt is kernel/interrupt: SIGINT to the running code, as ^C.
func (k *Kernel) Interrupt() error {
	k.mu.Lock()
	d, st, reason := k.drv, k.state, k.deadReason
	var running string
	var interruptAsk func()
	var sent chan struct{}
	if k.current != nil {
		running, interruptAsk, sent = k.current.id, k.current.interruptAsk, k.current.sent
	}
	k.mu.Unlock()
	if st == protocol.KernelStateDead || d == nil {
		return k.deadErr(reason)
	}
	if running == "" {
		return nil // nothing runs; a stray SIGINT would only race the next execution
	}
	if sent != nil {
		select { // the request first (typescript's is transpiled before it goes)
		case <-sent:
		case <-time.After(tsWorkerTimeout + 5*time.Second):
		}
	}
	if err := d.interrupt(running, k.runs(running)); err != nil {
		return fmt.Errorf("interrupt kernel %s: %w", k.id, err)
	}
	if interruptAsk != nil {
		interruptAsk()
	}
	return nil
}

// runs reports, when called, whether execID is still the running execution.
func (k *Kernel) runs(execID string) func() bool {
	return func() bool {
		k.mu.Lock()
		defer k.mu.Unlock()
		return k.current != nil && k.current.id == execID
	}
}

// startAsking marks an input request of execID as waiting for the client,
// and says whether it may be asked: one at a time, for the running
// execution only.
func (k *Kernel) startAsking(execID string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.current
	if e == nil || e.id != execID || e.asking {
		return false
	}
	e.asking = true
	return true
}

// ask answers a driver's input request on a goroutine of the kernel's: the
// client is asked if it may be, else the read sees end of file.
func (k *Kernel) ask(d *driver, execID, prompt string, password bool) {
	k.spawn(func() { k.answerInput(d, execID, prompt, password) })
}

func (k *Kernel) answerInput(d *driver, execID, prompt string, password bool) {
	k.mu.Lock()
	e := k.current
	k.mu.Unlock()
	r := &request{Op: "input", ID: execID, EOF: true}
	// The question is over before its answer goes out: the driver may ask
	// the next one (a second input() of the same cell) as soon as it reads
	// the answer, and that one must not find this one still pending.
	defer func() {
		k.mu.Lock()
		if e != nil {
			e.asking = false
		}
		k.mu.Unlock()
		_ = d.send(r)
	}()
	if e != nil && e.id == execID && e.req.Ask != nil && e.req.Params.AllowStdin {
		// The question is withdrawn when the execution is cancelled or the
		// driver dies.
		ctx, cancel := context.WithCancel(e.ctx)
		var interrupted atomic.Bool
		if drivers[k.lang].interruptInput {
			k.mu.Lock()
			e.interruptAsk = func() {
				interrupted.Store(true)
				cancel()
			}
			k.mu.Unlock()
			defer func() {
				k.mu.Lock()
				e.interruptAsk = nil
				k.mu.Unlock()
			}()
		}
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			select {
			case <-d.exited:
			case <-ctx.Done():
			}
			cancel()
		}()
		v, err := e.req.Ask(ctx, protocol.KernelInputRequestParams{KernelID: k.id, ExecutionID: execID, Prompt: prompt, Password: password})
		cancel()
		<-watched
		switch {
		case err == nil:
			r.Value, r.EOF = v, false
		case interrupted.Load():
			r.Interrupted = true
		default:
			k.m.log.Debug("input request not answered; the read sees end of file", "kernel", k.id, "err", err)
		}
	}
}

func (m *Manager) count(s protocol.ExecutionStatus) {
	m.total.Add(1)
	switch s {
	case protocol.ExecutionStatusOK:
		m.ok.Add(1)
	case protocol.ExecutionStatusError:
		m.failed.Add(1)
	case protocol.ExecutionStatusTimeout:
		m.timedOut.Add(1)
	case protocol.ExecutionStatusInterrupted:
		m.interrupted.Add(1)
	}
}

func (k *Kernel) auditExec(e *execution, res *protocol.ExecuteResult, err error) {
	if k.m.audit == nil {
		return
	}
	sum := sha256.Sum256([]byte(e.req.Params.Code))
	rec := auditRecord{
		Time: time.Now().UTC(), Connection: e.req.Conn, Kernel: k.id, Language: k.lang, Workspace: k.ws.ID(),
		ExecutionID: e.id, ExecutionCount: e.count, CodeBytes: len(e.req.Params.Code), CodeSHA256: hex.EncodeToString(sum[:]),
	}
	if err != nil {
		rec.Status = "failed"
		rec.Error = err.Error()
	} else {
		rec.Status = string(res.Status)
		rec.DurationMs = res.DurationMs
	}
	k.m.audit.write(&rec)
}
