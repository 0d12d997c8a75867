package jupyterbridge

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/cellbox-dev/cellbox/kernel/jupyter"
)

// An execution, as Jupyter's clients run one: execute_request on shell;
// its output on iopub, each message naming it as parent; input_request on
// stdin; it has ended when both its execute_reply (shell) and its `status:
// idle` (iopub) have come.

// quietAfterReply is how long after the execute_reply the bridge waits for
// the iopub idle while iopub is quiet: a PUB socket drops what its
// subscriber does not take in time, the idle too.
const quietAfterReply = 10 * time.Second

// replyAfterIdle is how long after the iopub idle the bridge waits for the
// execute_reply: a kernel sends it just before, on shell, which drops
// nothing, but ipykernel sends none when a KeyboardInterrupt lands in its
// own code, before the cell's (an interrupt as the execution begins).
const replyAfterIdle = 5 * time.Second

// execution is the one execution running.
type execution struct {
	id    string // the manager's
	msgID string // of the execute_request
	stdin string // what is left of the request's stdin, fed first
	allow bool   // the manager may be asked for input
	// cpu is the kernel's CPU time when the execution began (-1: unknown).
	cpu time.Duration

	silent bool
	// started: the kernel runs the code (it published execute_input, or
	// busy for a silent execution, which has no execute_input), since
	// startedAt.
	started, idle, replied bool
	startedAt              time.Time
	reply                  *jupyter.Message
	err                    *execError // the error output sent, if any
	interrupted            bool       // an interrupt came while it ran
	pendingInterrupt       bool       // one came before the kernel took the request
	asking                 *jupyter.Message
	quiet                  *time.Timer
}

// serve answers the manager's requests until its pipe closes.
func (b *bridge) serve(r *bufio.Reader) error {
	var at int64 // where the next request begins in the pipe
	for {
		req, n, err := readRequest(r)
		start := at
		at += n
		if err != nil {
			if req != nil && req.ID == "" {
				continue // a line that is not a request: nothing to answer
			}
			return err
		}
		b.request(req, start)
	}
}

// request handles one request, which began at offset start of the pipe.
func (b *bridge) request(req *request, start int64) {
	switch req.Op {
	case "execute":
		b.execute(req, start)
	case "input":
		b.input(req)
	case "complete":
		b.call(req, "complete_request", map[string]any{"code": req.Code, "cursor_pos": req.CursorPos})
	case "inspect":
		b.call(req, "inspect_request", map[string]any{"code": req.Code, "cursor_pos": req.CursorPos, "detail_level": req.DetailLevel})
	case "isComplete":
		b.call(req, "is_complete_request", map[string]any{"code": req.Code})
	case "variables":
		b.w.send(&event{Ev: "reply", ID: req.ID, Error: "kernel/variables is not supported by Jupyter kernels (jupyter:" + b.cfg.Name + ")"})
	case "interrupt":
		// javascript's; interrupts come as SIGINT
	default:
		if req.ID != "" {
			b.w.send(&event{Ev: "reply", ID: req.ID, Error: fmt.Sprintf("unknown request %q", req.Op)})
		}
	}
}

// execute sends an execute_request for req, which began at offset start
// of the pipe: a SIGINT that came while nothing ran, after the manager
// wrote it, is its (interruptBefore).
func (b *bridge) execute(req *request, start int64) {
	m, err := b.sess.New("execute_request", nil, map[string]any{
		"code": req.Code, "silent": req.Silent, "store_history": req.StoreHistory,
		"user_expressions": map[string]any{}, "allow_stdin": req.AllowStdin || req.Stdin != "",
		// The manager stops its queue on an error (stopOnError); the
		// kernel has nothing of ours queued to abort.
		"stop_on_error": false,
	})
	if err != nil {
		b.endWith(req.ID, "error", &execError{Ename: "BridgeError", Evalue: err.Error()})
		return
	}
	e := &execution{
		id: req.ID, msgID: m.Header.MsgID, silent: req.Silent, stdin: req.Stdin, allow: req.AllowStdin,
		cpu: kernelCPU(b.kernel.pid),
	}
	b.w.mu.Lock()
	b.mu.Lock()
	busy := b.cur != nil
	if !busy {
		b.cur = e
		if start < b.interruptBefore {
			e.interrupted, e.pendingInterrupt = true, true
		}
	}
	b.mu.Unlock()
	b.w.mu.Unlock()
	if busy {
		// The manager sends one execute at a time; this one cannot run.
		b.endWith(req.ID, "error", &execError{Ename: "BridgeError", Evalue: "an execution is already running"})
		return
	}
	if err := b.sock.Shell.Send(m); err != nil {
		b.w.mu.Lock()
		b.mu.Lock()
		if b.cur == e {
			b.cur = nil
		}
		b.mu.Unlock()
		b.w.mu.Unlock()
		b.endWith(req.ID, "error", &execError{Ename: "BridgeError", Evalue: "send execute_request: " + err.Error()})
	}
}

// endWith ends execution id at once: an error output, then done.
func (b *bridge) endWith(id, status string, e *execError) {
	b.w.mu.Lock()
	defer b.w.mu.Unlock()
	if e.Traceback == nil {
		e.Traceback = []string{}
	}
	b.w.eventLocked(&event{Ev: "error", ID: id, Ename: e.Ename, Evalue: e.Evalue, Traceback: e.Traceback})
	b.w.eventLocked(&event{Ev: "done", ID: id, Status: status, Error: e})
}

// interrupt is a SIGINT from the manager (to the bridge's process group,
// which the kernel is not in). A kernel whose interrupt_mode is "signal"
// gets SIGINT to its own process group, one whose mode is "message" an
// interrupt_request, as Jupyter's clients interrupt; a kernel that has not
// begun running the code yet gets it once it has: ipykernel ignores SIGINT
// until it has published busy and set its handler, which it has when it
// publishes execute_input. So the bridge, which knows where the kernel is,
// decides when the kernel gets it.
func (b *bridge) interrupt() {
	b.mu.Lock()
	e := b.cur
	if e == nil {
		// Nothing runs: the signal is for an execute the manager wrote
		// before it and the bridge has not read yet, if any.
		b.interruptBefore = b.reqs.Mark()
		b.mu.Unlock()
		return
	}
	e.interrupted = true
	if !e.started {
		e.pendingInterrupt = true
		b.mu.Unlock()
		return
	}
	wait := settle - time.Since(e.startedAt)
	b.mu.Unlock()
	b.deliverInterruptAfter(e, wait)
}

// settle is how long after a kernel began an execution an interrupt waits
// before it is delivered: a KeyboardInterrupt that lands in ipykernel's
// own code as it sets the cell up (not in the cell) can leave the kernel
// without an answer to the request (seen with ipykernel 6.17: one
// interrupt in tens sent at the start of a cell hung it).
const settle = 100 * time.Millisecond

// startedLocked marks e started (b.mu held; it unlocks it) and delivers an
// interrupt that came before.
func (b *bridge) startedLocked(e *execution) {
	deliver := !e.started && e.pendingInterrupt
	if !e.started {
		e.started, e.startedAt = true, time.Now()
	}
	e.pendingInterrupt = false
	b.mu.Unlock()
	if deliver {
		b.deliverInterruptAfter(e, settle)
	}
}

// deliverInterruptAfter interrupts the kernel after wait, if e still runs
// then.
func (b *bridge) deliverInterruptAfter(e *execution, wait time.Duration) {
	if wait <= 0 {
		b.deliverInterrupt()
		return
	}
	time.AfterFunc(wait, func() {
		b.mu.Lock()
		still := b.cur == e
		b.mu.Unlock()
		if still {
			b.deliverInterrupt()
		}
	})
}

// deliverInterrupt interrupts the kernel, by its interrupt_mode.
func (b *bridge) deliverInterrupt() {
	if b.cfg.InterruptMode == "message" {
		b.sendInterrupt()
		return
	}
	b.kernel.interrupt()
}

func (b *bridge) sendInterrupt() {
	m, err := b.sess.New("interrupt_request", nil, map[string]any{})
	if err == nil {
		_ = b.sock.Control.Send(m)
	}
}

// input is the manager's answer to an input event.
func (b *bridge) input(req *request) {
	b.mu.Lock()
	e := b.cur
	var ask *jupyter.Message
	if e != nil && e.id == req.ID && e.asking != nil {
		ask, e.asking = e.asking, nil
	}
	b.mu.Unlock()
	if ask == nil {
		return // the execution ended meanwhile (interrupted)
	}
	b.inputReply(ask, req.Value) // end of file: Jupyter has none; an empty line
}

func (b *bridge) inputReply(ask *jupyter.Message, value string) {
	m, err := b.sess.New("input_reply", ask, map[string]any{"value": value})
	if err == nil {
		_ = b.sock.Stdin.Send(m)
	}
}

// stdinLoop answers the kernel's input requests: from the request's
// stdin first, then by asking the manager when the client may be asked;
// otherwise with an empty line (Jupyter has no end of file).
func (b *bridge) stdinLoop() {
	for {
		m, err := b.sock.Stdin.Recv()
		if err != nil {
			if !b.recvFailed("stdin", err) {
				return
			}
			continue
		}
		if m.Header.MsgType != "input_request" {
			continue
		}
		var c struct {
			Prompt   any `json:"prompt"`
			Password any `json:"password"`
		}
		_ = json.Unmarshal(m.Content, &c)
		parent := m.ParentHeader().MsgID
		b.w.mu.Lock()
		b.mu.Lock()
		e := b.cur
		switch {
		case e == nil || e.msgID != parent || e.asking != nil:
			b.mu.Unlock()
			b.w.mu.Unlock()
			b.inputReply(m, "")
		case e.stdin != "":
			line, rest, _ := strings.Cut(e.stdin, "\n")
			e.stdin = rest
			b.mu.Unlock()
			b.w.mu.Unlock()
			b.inputReply(m, line)
		case e.allow:
			e.asking = m
			b.mu.Unlock()
			password, _ := c.Password.(bool)
			b.w.eventLocked(&event{Ev: "input", ID: e.id, Prompt: boundText(str2(c.Prompt), 64<<10), Password: password})
			b.w.mu.Unlock()
		default:
			b.mu.Unlock()
			b.w.mu.Unlock()
			b.inputReply(m, "")
		}
	}
}

// call sends a request whose reply the manager waits for.
func (b *bridge) call(req *request, msgType string, content map[string]any) {
	m, err := b.sess.New(msgType, nil, content)
	if err != nil {
		b.w.send(&event{Ev: "reply", ID: req.ID, Error: err.Error()})
		return
	}
	b.mu.Lock()
	if len(b.pending) >= maxPending {
		b.mu.Unlock()
		b.w.send(&event{Ev: "reply", ID: req.ID, Error: fmt.Sprintf("%d requests already wait for the kernel", maxPending)})
		return
	}
	msgID, wait := m.Header.MsgID, pendingTimeout
	b.pending[msgID] = pendingRequest{op: req.Op, id: req.ID, timer: time.AfterFunc(wait, func() { b.expire(msgID, wait) })}
	b.mu.Unlock()
	if err := b.sock.Shell.Send(m); err != nil {
		if _, ok := b.takePending(msgID); !ok {
			return // expired meanwhile: the manager has its reply
		}
		b.w.send(&event{Ev: "reply", ID: req.ID, Error: "send " + msgType + ": " + err.Error()})
	}
}

// takePending removes the pending request of the message msgID, stopping
// its timer, and says whether it was there.
func (b *bridge) takePending(msgID string) (pendingRequest, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.pending[msgID]
	if ok {
		delete(b.pending, msgID)
		if p.timer != nil {
			p.timer.Stop()
		}
	}
	return p, ok
}

// expire answers the manager's request sent as message msgID with an
// error when the kernel has not replied within wait, and forgets it: a
// reply that comes later is dropped.
func (b *bridge) expire(msgID string, wait time.Duration) {
	b.mu.Lock()
	p, ok := b.pending[msgID]
	if ok {
		delete(b.pending, msgID)
	}
	closed := b.closed
	b.mu.Unlock()
	if !ok || closed {
		return
	}
	b.w.send(&event{Ev: "reply", ID: p.id, Error: "the kernel did not answer within " + seconds(wait)})
}

// seconds says d as "30 s", or as Go does when it is not whole seconds.
func seconds(d time.Duration) string {
	if d >= time.Second && d%time.Second == 0 {
		return fmt.Sprintf("%d s", d/time.Second)
	}
	return d.String()
}

// shellLoop takes the kernel's replies.
func (b *bridge) shellLoop() {
	for {
		m, err := b.sock.Shell.Recv()
		if err != nil {
			if !b.recvFailed("shell", err) {
				return
			}
			continue
		}
		parent := m.ParentHeader().MsgID
		if m.Header.MsgType == "execute_reply" {
			b.executeReply(m, parent)
			continue
		}
		p, ok := b.takePending(parent)
		if !ok {
			continue
		}
		if p.reply != nil {
			select {
			case p.reply <- m:
			default:
			}
			continue
		}
		result, err := replyResult(p.op, m)
		ev := &event{Ev: "reply", ID: p.id, Result: result}
		if err != nil {
			ev = &event{Ev: "reply", ID: p.id, Error: err.Error()}
		}
		b.w.send(ev)
	}
}

// replyResult is a kernel's reply to complete, inspect or is_complete as
// PROTOCOL.md §4 gives the result.
func replyResult(op string, m *jupyter.Message) (any, error) {
	var status struct {
		Status string `json:"status"`
		Ename  any    `json:"ename"`
		Evalue any    `json:"evalue"`
	}
	if err := json.Unmarshal(m.Content, &status); err != nil {
		return nil, fmt.Errorf("the kernel's %s: %v", m.Header.MsgType, err)
	}
	want := map[string]string{"complete": "complete_reply", "inspect": "inspect_reply", "isComplete": "is_complete_reply"}[op]
	if m.Header.MsgType != want {
		return nil, fmt.Errorf("the kernel answered %s with %s", op, boundText(m.Header.MsgType, 100))
	}
	if status.Status != "ok" && !(op == "isComplete" && status.Status != "error") {
		return nil, fmt.Errorf("the kernel's %s says %s: %s %s", want, boundText(status.Status, 100), boundText(str2(status.Ename), 1000), boundText(str2(status.Evalue), 1000))
	}
	switch op {
	case "complete":
		var c struct {
			Matches     []string `json:"matches"`
			CursorStart int      `json:"cursor_start"`
			CursorEnd   int      `json:"cursor_end"`
		}
		if err := json.Unmarshal(m.Content, &c); err != nil {
			return nil, fmt.Errorf("the kernel's complete_reply: %v", err)
		}
		if c.Matches == nil {
			c.Matches = []string{}
		}
		return map[string]any{"matches": c.Matches, "cursorStart": c.CursorStart, "cursorEnd": c.CursorEnd}, nil
	case "inspect":
		var c struct {
			Found bool            `json:"found"`
			Data  json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(m.Content, &c); err != nil {
			return nil, fmt.Errorf("the kernel's inspect_reply: %v", err)
		}
		data, ok := cleanBundle(c.Data)
		if !c.Found || !ok {
			return map[string]any{"found": false}, nil
		}
		// IPython colours its text for a terminal; an editor shows it as is.
		var bundle map[string]any
		_ = json.Unmarshal(data, &bundle)
		if s, ok := bundle["text/plain"].(string); ok {
			bundle["text/plain"] = plain(s)
		}
		return map[string]any{"found": true, "data": bundle}, nil
	default: // isComplete
		var c struct {
			Indent any `json:"indent"`
		}
		_ = json.Unmarshal(m.Content, &c)
		res := map[string]any{"status": status.Status}
		switch status.Status {
		case "complete", "incomplete", "invalid", "unknown":
		default:
			res["status"] = "unknown"
		}
		if s, ok := c.Indent.(string); ok && status.Status == "incomplete" {
			res["indent"] = boundText(s, 1000)
		}
		return res, nil
	}
}

// executeReply records the execute_reply of the running execution.
func (b *bridge) executeReply(m *jupyter.Message, parent string) {
	b.w.mu.Lock()
	defer b.w.mu.Unlock()
	b.mu.Lock()
	e := b.cur
	if e == nil || e.msgID != parent || e.replied {
		b.mu.Unlock()
		return
	}
	e.replied, e.reply = true, m
	if !e.idle {
		// Wait for the idle, but not for ever (quietAfterReply).
		if e.quiet != nil {
			e.quiet.Stop()
		}
		e.quiet = time.AfterFunc(quietAfterReply, func() { b.quietEnd(e) })
	}
	end := e.idle
	b.mu.Unlock()
	if end {
		b.finishLocked(e)
	}
}
