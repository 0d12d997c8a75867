package kernel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
)

// Sink receives a kernel's notifications: a connection that started it,
// attached to it, or is running an execution on it.
type Sink interface {
	KernelOutput(protocol.KernelOutputParams) error
	KernelStatus(protocol.KernelStatusParams) error
}

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

// Kernel is a persistent interpreter in a workspace's sandbox.
type Kernel struct {
	m        *Manager
	id       string
	lang     string
	langInfo Language
	ws       *workspace.Workspace
	ownWS    bool // a scratch workspace of its own, removed at shutdown
	limits   protocol.Limits
	env      []string
	dir      string
	network  protocol.NetworkMode
	opener   Sink

	// outMu orders output: reading fds 1 and 2, draining them before an
	// event, numbering and sending kernel/output.
	outMu    sync.Mutex
	seq      int64
	replay   []kept
	replayN  int // bytes held by replay
	drainBuf []byte

	mu           sync.Mutex // guards the fields below
	drv          *driver
	state        protocol.KernelState
	deadReason   string
	sinks        map[Sink]struct{}
	queue        []*execution
	current      *execution
	last         string // the id of the last execution, for stray output
	count        int
	history      []protocol.HistoryEntry
	startedAt    time.Time
	lastActivity time.Time
	restarting   bool
	restarted    chan struct{} // closed when the restart under way ends
	shut         bool
	nextReq      int

	wake   chan struct{} // the queue changed
	closed chan struct{} // shut down
}

// execution is one kernel/execute, queued or running.
type execution struct {
	req       ExecRequest
	id        string
	ctx       context.Context
	count     int
	result    chan execOutcome
	started   time.Time
	bytes     int64
	truncated bool
	limit     int64
	// asking: an input request of this execution waits for the client
	// (guarded by Kernel.mu); a driver may have one at a time.
	asking bool
}

type execOutcome struct {
	res *protocol.ExecuteResult
	err error
}

// ID is the kernel's id.
func (k *Kernel) ID() string { return k.id }

// Workspace is the workspace the kernel runs in.
func (k *Kernel) Workspace() *workspace.Workspace { return k.ws }

// StartResult is kernel/start's result.
func (k *Kernel) StartResult() protocol.KernelStartResult {
	k.mu.Lock()
	v := k.drv.version
	k.mu.Unlock()
	if v == "" {
		v = k.langInfo.Version
	}
	spec := drivers[k.lang]
	var sb protocol.SandboxInfo
	if s := k.ws.Sandbox(); s != nil {
		l := s.Layers()
		sb = protocol.SandboxInfo{
			UserNamespaces: l.UserNamespaces, Overlay: l.Overlay, PidNamespace: l.PidNamespace,
			NetworkNamespace: l.NetworkNamespace, Seccomp: l.Seccomp, Landlock: l.Landlock, Cgroups: l.Cgroups,
			Network: protocol.NetworkMode(l.Network), Reason: l.Reason,
		}
	}
	return protocol.KernelStartResult{
		KernelID: k.id, Language: k.lang,
		LanguageInfo: protocol.LanguageInfo{Name: k.lang, Version: v, FileExtension: spec.extension, Mimetype: spec.mimetype},
		Sandbox:      sb,
	}
}

// Info is the kernel's kernel/list entry.
func (k *Kernel) Info() protocol.KernelInfo {
	k.mu.Lock()
	defer k.mu.Unlock()
	return protocol.KernelInfo{
		KernelID: k.id, Language: k.lang, WorkspaceID: k.ws.ID(), State: k.state,
		ExecutionCount: k.count, StartedAt: k.startedAt, LastActivity: k.lastActivity,
	}
}

func (k *Kernel) idleFor() time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.sinks) > 0 || k.current != nil || len(k.queue) > 0 || k.shut {
		return 0
	}
	return time.Since(k.lastActivity)
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
	e := &execution{req: req, id: p.ExecutionID, ctx: ctx, result: make(chan execOutcome, 1), limit: k.limits.OutputBytes}
	k.mu.Lock()
	if k.shut {
		k.mu.Unlock()
		return nil, fmt.Errorf("%w: no kernel %q (it was shut down)", ErrNotFound, k.id)
	}
	if k.state == protocol.KernelStateDead {
		reason := k.deadReason
		k.mu.Unlock()
		return nil, fmt.Errorf("%w: kernel %s died (%s); restart it with kernel/restart", ErrDead, k.id, reason)
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

// loop runs the queued executions in order.
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
				e.result <- execOutcome{err: fmt.Errorf("%w: kernel %s was shut down", ErrNotFound, k.id)}
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
		e.result <- execOutcome{err: fmt.Errorf("%w: kernel %s died (%s); restart it with kernel/restart", ErrDead, k.id, reason)}
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
	k.mu.Unlock()

	k.outMu.Lock()
	k.mu.Lock()
	k.current = e
	k.last = e.id
	k.mu.Unlock()
	k.outMu.Unlock()
	k.setState(protocol.KernelStateBusy, "")

	res := &protocol.ExecuteResult{ExecutionID: e.id, ExecutionCount: e.count}
	var outErr error
	timeoutMs := p.TimeoutMs
	if timeoutMs == 0 {
		timeoutMs = k.limits.TimeoutMs
	}
	err := d.send(&request{
		Op: "execute", ID: e.id, Code: p.Code, Count: e.count, Silent: p.Silent, StoreHistory: storeHistory,
		Stdin: p.Stdin, AllowStdin: p.AllowStdin && e.req.Ask != nil, Source: p.Source,
	})
	if err != nil {
		outErr = err
	} else {
		outErr = k.await(d, e, res, timeoutMs)
	}

	k.outMu.Lock()
	k.mu.Lock()
	k.current = nil
	k.lastActivity = time.Now()
	k.mu.Unlock()
	res.OutputTruncated = e.truncated
	k.outMu.Unlock()
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
			_ = d.interrupt()
			startGrace()
		case <-timeout:
			timeout = nil
			timedOut = true
			_ = d.interrupt()
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
			return fmt.Errorf("%w: kernel %s died while running %s: %s", ErrDead, k.id, e.id, d.deathReason())
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

// emitStream sends text read from fd 1 or 2. The caller holds outMu.
func (k *Kernel) emitStream(name protocol.StreamName, text string) {
	k.emit(protocol.KernelOutputParams{Kind: protocol.OutputKindStream, Name: name, Text: text})
}

// truncatedMarker ends the kept head of an execution's output.
const truncatedMarker = "\n[cellbox: output truncated: this execution printed more than %d bytes (limits.outputBytes); the rest was dropped]\n"

// emit numbers o, keeps it for replay and sends it to the sinks. The caller
// holds outMu.
func (k *Kernel) emit(o protocol.KernelOutputParams) {
	k.mu.Lock()
	e := k.current
	if e != nil {
		o.ExecutionID = e.id
	} else {
		o.ExecutionID = k.last
	}
	sinks := make([]Sink, 0, len(k.sinks)+1)
	for s := range k.sinks {
		sinks = append(sinks, s)
	}
	if e != nil && e.req.Sink != nil {
		if _, ok := k.sinks[e.req.Sink]; !ok {
			sinks = append(sinks, e.req.Sink)
		}
	}
	k.lastActivity = time.Now()
	k.mu.Unlock()
	o.KernelID = k.id
	size := outputSize(&o)
	if e != nil && o.Kind != protocol.OutputKindError {
		if e.truncated {
			return
		}
		if e.limit > 0 && e.bytes+size > e.limit {
			e.truncated = true
			if o.Kind == protocol.OutputKindStream {
				// Keep the head up to the limit, then the marker.
				room := max(e.limit-e.bytes, 0)
				head := o.Text[:cutUTF8(o.Text, int(room))]
				if head != "" {
					o.Text = head
					k.send(sinks, o, int64(len(head)))
				}
			}
			marker := fmt.Sprintf(truncatedMarker, e.limit)
			k.send(sinks, protocol.KernelOutputParams{
				KernelID: k.id, ExecutionID: e.id, Kind: protocol.OutputKindStream, Name: protocol.StreamStderr,
				Text: marker,
			}, int64(len(marker)))
			return
		}
		e.bytes += size
	}
	k.send(sinks, o, size)
}

// send numbers o and sends it; size is its outputSize.
func (k *Kernel) send(sinks []Sink, o protocol.KernelOutputParams, size int64) {
	k.seq++
	o.Seq = k.seq
	k.keep(o, size)
	for _, s := range sinks {
		if err := s.KernelOutput(o); err != nil {
			k.Detach(s)
		}
	}
}

// kept is an output held for kernel/attach replay, with its cost.
type kept struct {
	o    protocol.KernelOutputParams
	cost int
}

// keep holds o for kernel/attach replay, within ReplayBytes.
func (k *Kernel) keep(o protocol.KernelOutputParams, size int64) {
	c := int(size) + 64
	k.replay = append(k.replay, kept{o, c})
	k.replayN += c
	drop := 0
	for k.replayN > k.m.opts.ReplayBytes && drop < len(k.replay)-1 {
		k.replayN -= k.replay[drop].cost
		k.replay[drop] = kept{}
		drop++
	}
	if drop > 0 {
		k.replay = append(k.replay[:0], k.replay[drop:]...)
	}
}

// outputSize is the bytes an output counts against limits.outputBytes.
func outputSize(o *protocol.KernelOutputParams) int64 {
	n := len(o.Text)
	for mime, v := range o.Data {
		n += len(mime)
		switch v := v.(type) {
		case string:
			n += len(v)
		default:
			b, _ := json.Marshal(v)
			n += len(b)
		}
	}
	return int64(n)
}

// cutUTF8 is the largest n' <= n that does not split a UTF-8 sequence of s.
func cutUTF8(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return n
}

// setState records and announces the kernel's state.
func (k *Kernel) setState(st protocol.KernelState, reason string) {
	k.mu.Lock()
	k.state = st
	if st == protocol.KernelStateDead {
		k.deadReason = reason
	}
	k.mu.Unlock()
	k.notifyStatus(st, reason)
}

func (k *Kernel) notifyStatus(st protocol.KernelState, reason string) {
	k.mu.Lock()
	sinks := make([]Sink, 0, len(k.sinks)+1)
	for s := range k.sinks {
		sinks = append(sinks, s)
	}
	if e := k.current; e != nil && e.req.Sink != nil {
		if _, ok := k.sinks[e.req.Sink]; !ok {
			sinks = append(sinks, e.req.Sink)
		}
	}
	k.mu.Unlock()
	p := protocol.KernelStatusParams{KernelID: k.id, State: st, Reason: reason}
	for _, s := range sinks {
		_ = s.KernelStatus(p)
	}
}

// Attach is kernel/attach: output kept from fromSeq is replayed to s, then
// s receives the kernel's notifications.
func (k *Kernel) Attach(s Sink, fromSeq *int64) error {
	k.outMu.Lock()
	defer k.outMu.Unlock()
	for _, r := range k.replay {
		if fromSeq != nil && r.o.Seq < *fromSeq {
			continue
		}
		if err := s.KernelOutput(r.o); err != nil {
			return fmt.Errorf("replay kernel %s output: %w", k.id, err)
		}
	}
	k.mu.Lock()
	k.sinks[s] = struct{}{}
	st, reason := k.state, k.deadReason
	k.mu.Unlock()
	if st != protocol.KernelStateDead {
		reason = ""
	}
	_ = s.KernelStatus(protocol.KernelStatusParams{KernelID: k.id, State: st, Reason: reason})
	return nil
}

// Detach is kernel/detach.
func (k *Kernel) Detach(s Sink) {
	k.mu.Lock()
	delete(k.sinks, s)
	if k.opener == s {
		k.opener = nil
	}
	k.mu.Unlock()
}

// Interrupt is kernel/interrupt: SIGINT to the running code, as ^C.
func (k *Kernel) Interrupt() error {
	k.mu.Lock()
	d, st, busy, reason := k.drv, k.state, k.current != nil, k.deadReason
	k.mu.Unlock()
	if st == protocol.KernelStateDead || d == nil {
		return fmt.Errorf("%w: kernel %s died (%s); restart it with kernel/restart", ErrDead, k.id, reason)
	}
	if !busy {
		return nil // nothing runs; a stray SIGINT would only race the next execution
	}
	if err := d.interrupt(); err != nil {
		return fmt.Errorf("interrupt kernel %s: %w", k.id, err)
	}
	return nil
}

// Restart is kernel/restart: a fresh interpreter, state and execution count
// reset. Queued executions end aborted; a running one ends aborted with
// error KernelRestarted.
func (k *Kernel) Restart(ctx context.Context) error {
	k.mu.Lock()
	d := k.drv
	k.mu.Unlock()
	return k.restart(ctx, d)
}

func (k *Kernel) restart(ctx context.Context, old *driver) error {
	k.mu.Lock()
	if k.shut {
		k.mu.Unlock()
		return fmt.Errorf("%w: no kernel %q (it was shut down)", ErrNotFound, k.id)
	}
	if k.restarting {
		// Someone else restarts it: answer when that restart is done.
		ch := k.restarted
		k.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	if k.drv != old {
		k.mu.Unlock()
		return nil // restarted already
	}
	k.restarting = true
	k.restarted = make(chan struct{})
	done := k.restarted
	k.mu.Unlock()
	defer close(done)
	k.setState(protocol.KernelStateRestarting, "")
	k.abortQueued("the kernel was restarted")
	if old != nil {
		old.kill()
	}
	k.setState(protocol.KernelStateStarting, "")
	d, err := k.startDriver(ctx)
	k.mu.Lock()
	k.restarting = false
	if err != nil {
		k.drv = nil
		k.mu.Unlock()
		k.setState(protocol.KernelStateDead, err.Error())
		return err
	}
	k.drv = d
	k.count = 0
	k.history = nil
	busy := k.current != nil
	k.mu.Unlock()
	go k.watch(d)
	if busy {
		k.setState(protocol.KernelStateBusy, "")
	} else {
		k.setState(protocol.KernelStateIdle, "")
	}
	return nil
}

// watch reports the death of a driver that nobody killed on purpose.
func (k *Kernel) watch(d *driver) {
	select {
	case <-d.exited:
	case <-k.closed:
		return
	}
	k.mu.Lock()
	expected := k.shut || k.restarting || k.drv != d
	k.mu.Unlock()
	if expected {
		return
	}
	reason := d.deathReason()
	k.m.log.Info("kernel died", "kernel", k.id, "reason", reason)
	k.setState(protocol.KernelStateDead, reason)
}

// shutdown ends the kernel: every process it started is gone when this
// returns, and a scratch workspace of its own is removed.
func (k *Kernel) shutdown(ctx context.Context) {
	k.mu.Lock()
	if k.shut {
		k.mu.Unlock()
		<-k.closed
		return
	}
	k.shut = true
	d := k.drv
	k.mu.Unlock()
	if d != nil {
		d.kill()
	}
	k.m.forget(k)
	close(k.closed)
	k.setState(protocol.KernelStateDead, "shut down")
	if k.ownWS {
		if err := k.m.opts.Workspaces.Close(context.WithoutCancel(ctx), k.ws.ID(), true); err != nil {
			k.m.log.Warn("cannot remove a kernel's scratch workspace", "kernel", k.id, "workspace", k.ws.ID(), "err", err)
		}
	}
	k.m.log.Info("kernel shut down", "kernel", k.id)
}

// running says whether execID is the execution running now: a driver's
// events for any other (or between executions) are forged or stale.
func (k *Kernel) running(execID string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.current != nil && k.current.id == execID
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

// answerInput handles a driver's input event: the client is asked if it
// may be, else the read sees end of file.
func (k *Kernel) answerInput(d *driver, execID, prompt string, password bool) {
	k.mu.Lock()
	e := k.current
	k.mu.Unlock()
	r := &request{Op: "input", ID: execID, EOF: true}
	defer func() {
		k.mu.Lock()
		if e != nil {
			e.asking = false
		}
		k.mu.Unlock()
	}()
	if e != nil && e.id == execID && e.req.Ask != nil && e.req.Params.AllowStdin {
		ctx, cancel := context.WithCancel(e.ctx)
		go func() {
			select {
			case <-d.exited:
			case <-ctx.Done():
			}
			cancel()
		}()
		v, err := e.req.Ask(ctx, protocol.KernelInputRequestParams{KernelID: k.id, ExecutionID: execID, Prompt: prompt, Password: password})
		cancel()
		if err == nil {
			r.Value, r.EOF = v, false
		} else {
			k.m.log.Debug("input request not answered; the read sees end of file", "kernel", k.id, "err", err)
		}
	}
	_ = d.send(r)
}

// driverCall sends a request other than execute and decodes its result.
func (k *Kernel) driverCall(ctx context.Context, r *request, out any) error {
	k.mu.Lock()
	d, st := k.drv, k.state
	k.nextReq++
	r.ID = "r" + strconv.Itoa(k.nextReq)
	reason := k.deadReason
	k.mu.Unlock()
	if st == protocol.KernelStateDead || d == nil {
		return fmt.Errorf("%w: kernel %s died (%s); restart it with kernel/restart", ErrDead, k.id, reason)
	}
	raw, err := d.call(ctx, r)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s kernel: decode %s reply: %w", k.lang, r.Op, err)
	}
	return nil
}

// Complete is kernel/complete; positions count code points.
func (k *Kernel) Complete(ctx context.Context, code string, cursor int) (*protocol.KernelCompleteResult, error) {
	var res protocol.KernelCompleteResult
	if err := k.driverCall(ctx, &request{Op: "complete", Code: code, CursorPos: cursor}, &res); err != nil {
		return nil, err
	}
	if res.Matches == nil {
		res.Matches = []string{}
	}
	return &res, nil
}

// Inspect is kernel/inspect.
func (k *Kernel) Inspect(ctx context.Context, code string, cursor, detail int) (*protocol.KernelInspectResult, error) {
	var res protocol.KernelInspectResult
	if err := k.driverCall(ctx, &request{Op: "inspect", Code: code, CursorPos: cursor, DetailLevel: detail}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// IsComplete is kernel/isComplete.
func (k *Kernel) IsComplete(ctx context.Context, code string) (*protocol.KernelIsCompleteResult, error) {
	var res protocol.KernelIsCompleteResult
	if err := k.driverCall(ctx, &request{Op: "isComplete", Code: code}, &res); err != nil {
		return nil, err
	}
	switch res.Status {
	case protocol.IsCompleteStatusComplete, protocol.IsCompleteStatusIncomplete, protocol.IsCompleteStatusInvalid:
	default:
		res.Status = protocol.IsCompleteStatusUnknown
	}
	return &res, nil
}

// Variables is kernel/variables.
func (k *Kernel) Variables(ctx context.Context) (*protocol.KernelVariablesResult, error) {
	var res protocol.KernelVariablesResult
	if err := k.driverCall(ctx, &request{Op: "variables"}, &res); err != nil {
		return nil, err
	}
	if res.Variables == nil {
		res.Variables = []protocol.Variable{}
	}
	return &res, nil
}

// History is kernel/history, newest last.
func (k *Kernel) History(p protocol.KernelHistoryParams) (*protocol.KernelHistoryResult, error) {
	if p.N < 0 {
		return nil, fmt.Errorf("%w: invalid params for kernel/history: field \"n\" must not be negative", ErrInvalid)
	}
	if p.Pattern != "" {
		if _, err := path.Match(p.Pattern, ""); err != nil {
			return nil, fmt.Errorf("%w: invalid params for kernel/history: field \"pattern\" %q is not a glob: %v", ErrInvalid, p.Pattern, err)
		}
	}
	k.mu.Lock()
	all := append([]protocol.HistoryEntry(nil), k.history...)
	k.mu.Unlock()
	out := []protocol.HistoryEntry{}
	seen := map[string]bool{}
	for i := len(all) - 1; i >= 0; i-- {
		h := all[i]
		if p.Pattern != "" && !globMatch(p.Pattern, h.Code) {
			continue
		}
		if p.Unique {
			if seen[h.Code] {
				continue
			}
			seen[h.Code] = true
		}
		out = append(out, h)
		if p.N > 0 && len(out) == p.N {
			break
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return &protocol.KernelHistoryResult{Entries: out}, nil
}

// globMatch matches a history glob against code: `*` and `?` also match
// newlines and slashes.
func globMatch(pattern, code string) bool {
	r := strings.NewReplacer("/", "\x01", "\n", "\x02")
	ok, _ := path.Match(r.Replace(pattern), r.Replace(code))
	return ok
}
