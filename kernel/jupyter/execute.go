package jupyter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// execution is the execute_request being carried out.
type execution struct {
	req        *Message
	id         string // the executionId given to kernel/execute
	allowStdin bool
	errorSent  bool
	// started is closed when the daemon has begun running it (its busy
	// status, or its first output): execute_input is published then, and
	// an interrupt waits for it, so it cannot reach the daemon before the
	// execution does and be lost.
	started   chan struct{}
	isStarted bool
	// ended is closed when kernel/execute has returned: an input request
	// of the execution that still waits for its client gives up then (the
	// daemon does not cancel it), so it cannot take the next one's reply.
	ended   chan struct{}
	code    string
	count   int              // execute_input's execution_count; 0: silent
	payload []map[string]any // pager payloads

	name  protocol.StreamName // buffered stream text and its stream
	text  strings.Builder
	timer *time.Timer
	sent  time.Time // when stream text was last sent
}

type executeRequest struct {
	Code         string `json:"code"`
	Silent       bool   `json:"silent"`
	StoreHistory *bool  `json:"store_history"`
	AllowStdin   *bool  `json:"allow_stdin"`
	StopOnError  *bool  `json:"stop_on_error"`
}

func (s *Server) execute(ctx context.Context, m *Message) (abort int) {
	var c executeRequest
	if err := json.Unmarshal(m.Content, &c); err != nil {
		s.reply(m, "execute_reply", errorContent("BadRequest", "execute_request content: "+err.Error()))
		return 0
	}
	store := !c.Silent
	if c.StoreHistory != nil {
		store = *c.StoreHistory && !c.Silent
	}
	kid, err := s.kernel(ctx)
	if err != nil {
		ee := protocol.ExecuteError{Ename: "CellboxError", Evalue: err.Error(), Traceback: []string{"CellboxError: " + err.Error()}}
		s.publish(m, "error", map[string]any{"ename": ee.Ename, "evalue": ee.Evalue, "traceback": ee.Traceback})
		if c.StopOnError == nil || *c.StopOnError {
			abort = len(s.shell) // before the reply: what the client sends after it runs
		}
		s.reply(m, "execute_reply", map[string]any{"status": "error", "execution_count": s.count, "ename": ee.Ename, "evalue": ee.Evalue, "traceback": ee.Traceback, "user_expressions": map[string]any{}, "payload": []any{}})
		return abort
	}
	e := &execution{req: m, id: NewID(), allowStdin: c.AllowStdin == nil || *c.AllowStdin, started: make(chan struct{}), ended: make(chan struct{}), code: c.Code}
	s.mu.Lock()
	if !c.Silent {
		e.count = s.count + 1
	}
	s.cur = e
	s.mu.Unlock()
	noStop := false
	var res protocol.ExecuteResult
	err = s.o.Caller.Call(ctx, protocol.MethodKernelExecute, protocol.KernelExecuteParams{
		KernelID: kid, Code: c.Code, ExecutionID: e.id, Silent: c.Silent,
		StoreHistory: &store, AllowStdin: e.allowStdin, StopOnError: &noStop,
	}, &res)

	close(e.ended)
	s.mu.Lock()
	s.startLocked(e) // if it never started (the kernel was dead)
	s.flushLocked(e)
	s.cur = nil
	if err == nil && !c.Silent && res.ExecutionCount > 0 {
		s.count = res.ExecutionCount
	}
	count, errorSent, payload := s.count, e.errorSent, e.payload
	s.mu.Unlock()

	if payload == nil {
		payload = []map[string]any{}
	}
	content := map[string]any{"status": "ok", "execution_count": count, "user_expressions": map[string]any{}, "payload": payload}
	var ee *protocol.ExecuteError
	switch {
	case err != nil:
		ee = &protocol.ExecuteError{Ename: "CellboxError", Evalue: err.Error()}
		var pe *protocol.Error
		if errors.As(err, &pe) {
			ee.Ename = camel(pe.Code.ErrorName())
			ee.Evalue = pe.Message
		}
	case res.Status == protocol.ExecutionStatusAborted:
		content["status"] = "aborted"
	case res.Status != protocol.ExecutionStatusOK:
		ee = res.Error
		if ee == nil {
			ee = &protocol.ExecuteError{Ename: string(res.Status), Evalue: "the execution ended " + string(res.Status)}
		}
	}
	if ee != nil {
		tb := ee.Traceback
		if tb == nil {
			tb = []string{ee.Ename + ": " + ee.Evalue}
		}
		if !errorSent { // exactly one error message a failing cell
			s.publish(m, "error", map[string]any{"ename": ee.Ename, "evalue": ee.Evalue, "traceback": tb})
		}
		content["status"], content["ename"], content["evalue"], content["traceback"] = "error", ee.Ename, ee.Evalue, tb
	}
	if ee != nil && (c.StopOnError == nil || *c.StopOnError) {
		abort = len(s.shell) // before the reply: what the client sends after it runs
	}
	s.reply(m, "execute_reply", content)
	return abort
}

// Output turns one of the kernel's kernel/output notifications into iopub
// messages. Output of executions this server did not start is not sent.
func (s *Server) Output(p protocol.KernelOutputParams) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.cur
	if e == nil || p.ExecutionID != e.id {
		s.o.Logger.Debug("output of no execution of this kernel's client", "execution", p.ExecutionID, "kind", p.Kind)
		return
	}
	s.startLocked(e)
	if p.Kind == protocol.OutputKindStream {
		if e.text.Len() > 0 && e.name != p.Name {
			s.flushLocked(e)
		}
		e.name = p.Name
		e.text.WriteString(p.Text)
		wait := s.o.StreamDelay - time.Since(e.sent)
		switch {
		case e.text.Len() >= streamFlushBytes || wait <= 0:
			// The first output after a quiet spell goes at once; what
			// follows within StreamDelay is gathered.
			s.flushLocked(e)
		case e.timer == nil:
			e.timer = time.AfterFunc(wait, func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				if s.cur == e {
					e.timer = nil
					s.flushLocked(e)
				}
			})
		}
		return
	}
	s.flushLocked(e)
	meta := p.Metadata
	if meta == nil {
		meta = map[string]any{}
	}
	data := p.Data
	if data == nil {
		data = protocol.MimeBundle{}
	}
	switch p.Kind {
	case protocol.OutputKindDisplay:
		if page, _ := meta["cellbox.page"].(bool); page {
			e.payload = append(e.payload, map[string]any{"source": "page", "data": data, "start": 0})
			return
		}
		content := map[string]any{"data": data, "metadata": meta, "transient": map[string]any{}}
		kind := "display_data"
		if p.DisplayID != "" {
			content["transient"] = map[string]any{"display_id": p.DisplayID}
			if p.Update {
				kind = "update_display_data"
			}
		}
		s.publish(e.req, kind, content)
	case protocol.OutputKindResult:
		s.publish(e.req, "execute_result", map[string]any{"data": data, "metadata": meta, "execution_count": s.count + 1})
	case protocol.OutputKindError:
		if p.Error != nil && !e.errorSent {
			e.errorSent = true
			tb := p.Error.Traceback
			if tb == nil {
				tb = []string{}
			}
			s.publish(e.req, "error", map[string]any{"ename": p.Error.Ename, "evalue": p.Error.Evalue, "traceback": tb})
		}
	case protocol.OutputKindClear:
		s.publish(e.req, "clear_output", map[string]any{"wait": p.Wait})
	}
}

// Status takes the kernel's kernel/status notifications: busy means the
// daemon has begun the execution this server sent (it sends one at a time).
func (s *Server) Status(p protocol.KernelStatusParams) {
	if p.KernelID != s.kernelNow() || p.State != protocol.KernelStateBusy {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		s.startLocked(s.cur)
	}
}

// startLocked marks e begun and publishes its execute_input (s.mu held),
// before any of its output.
func (s *Server) startLocked(e *execution) {
	if e.isStarted {
		return
	}
	e.isStarted = true
	close(e.started)
	if e.count > 0 {
		s.publish(e.req, "execute_input", map[string]any{"code": e.code, "execution_count": e.count})
	}
}

// flushLocked sends the gathered stream text (s.mu held).
func (s *Server) flushLocked(e *execution) {
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	if e.text.Len() == 0 {
		return
	}
	s.publish(e.req, "stream", map[string]any{"name": string(e.name), "text": e.text.String()})
	e.text.Reset()
	e.sent = time.Now()
}

// Input asks the Jupyter client that sent the running execution for a
// line of input (kernel/inputRequest), on the stdin socket.
func (s *Server) Input(ctx context.Context, p protocol.KernelInputRequestParams) (protocol.KernelInputReply, error) {
	s.mu.Lock()
	e := s.cur
	if e != nil && e.id == p.ExecutionID {
		s.flushLocked(e) // the prompt's preceding output first
	}
	s.mu.Unlock()
	if e == nil || e.id != p.ExecutionID || !e.allowStdin {
		return protocol.KernelInputReply{}, errors.New("the client does not take input for this execution")
	}
	select { // a stale reply to an earlier request is dropped
	case <-s.inputs:
	default:
	}
	req, err := s.session.New("input_request", e.req, map[string]any{"prompt": p.Prompt, "password": p.Password})
	if err != nil {
		return protocol.KernelInputReply{}, err
	}
	req.Identities = e.req.Identities
	if err := s.o.Sockets.Stdin.Send(req); err != nil {
		return protocol.KernelInputReply{}, fmt.Errorf("send input_request: %w", err)
	}
	for {
		select {
		case <-ctx.Done():
			return protocol.KernelInputReply{}, ctx.Err()
		case <-s.done:
			return protocol.KernelInputReply{}, errors.New("the kernel is shutting down")
		case <-e.ended:
			return protocol.KernelInputReply{}, errors.New("the execution ended")
		case m := <-s.inputs:
			// jupyter_client's input() sends its reply without a parent
			// header: the reply is the first one after the request, as in
			// ipykernel.
			if ph := m.ParentHeader().MsgID; ph != "" && ph != req.Header.MsgID {
				continue
			}
			var c struct {
				Value string `json:"value"`
			}
			if err := json.Unmarshal(m.Content, &c); err != nil {
				return protocol.KernelInputReply{}, fmt.Errorf("input_reply content: %w", err)
			}
			return protocol.KernelInputReply{Value: c.Value}, nil
		}
	}
}
