package jupyterbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/cellbox-dev/cellbox/kernel/jupyter"
)

// quietEnd ends an execution whose idle never came, once iopub has been
// quiet for quietAfterReply (an output being written to a slow manager
// counts as activity until it is written), or whose reply never came after
// its idle.
func (b *bridge) quietEnd(e *execution) {
	b.w.mu.Lock()
	defer b.w.mu.Unlock()
	b.mu.Lock()
	if b.cur != e {
		b.mu.Unlock()
		return
	}
	if quiet := time.Since(b.lastIOPub); e.replied && quiet < quietAfterReply {
		e.quiet.Reset(quietAfterReply - quiet)
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	b.finishLocked(e)
}

// iopubLoop takes the kernel's output. An output of the running execution
// is checked and written under the output lock, so that it precedes the
// execution's done; stream text of any parent is written (a thread the
// code started may print after its cell ended, as in Jupyter).
func (b *bridge) iopubLoop(ctx context.Context) {
	sock := b.sock.IOPub
	for {
		m, err := sock.Recv()
		if err != nil {
			if jupyter.TooLarge(err) {
				if sock = b.redialIOPub(ctx, sock); sock == nil {
					return
				}
				continue
			}
			if jupyter.Closed(err) {
				return
			}
			continue
		}
		b.iopubOnce.Do(func() { close(b.iopubUp) })
		b.iopub(m)
	}
}

func (b *bridge) iopub(m *jupyter.Message) {
	parent := m.ParentHeader().MsgID
	b.w.mu.Lock()
	defer b.w.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.lastIOPub = time.Now()
		b.mu.Unlock()
	}()
	if m.Header.MsgType == "stream" {
		var c struct {
			Name string `json:"name"`
			Text string `json:"text"`
		}
		if json.Unmarshal(m.Content, &c) == nil && (c.Name == "stdout" || c.Name == "stderr") {
			b.w.streamLocked(c.Name, []byte(c.Text))
		}
		return
	}
	b.mu.Lock()
	e := b.cur
	if e == nil || e.msgID != parent {
		b.mu.Unlock()
		return
	}
	switch m.Header.MsgType {
	case "status":
		var c struct {
			State string `json:"execution_state"`
		}
		_ = json.Unmarshal(m.Content, &c)
		switch c.State {
		case "busy":
			if e.silent {
				b.startedLocked(e) // unlocks
				return
			}
			b.mu.Unlock()
		case "idle":
			e.idle = true
			end := e.replied
			if !end && e.quiet == nil {
				e.quiet = time.AfterFunc(replyAfterIdle, func() { b.quietEnd(e) })
			}
			b.mu.Unlock()
			if end {
				b.finishLocked(e)
			}
		default:
			b.mu.Unlock()
		}
		return
	}
	if m.Header.MsgType == "execute_input" {
		b.startedLocked(e) // unlocks
		return
	}
	b.mu.Unlock()
	switch m.Header.MsgType {
	case "display_data", "update_display_data", "execute_result":
		var c struct {
			Data      json.RawMessage `json:"data"`
			Metadata  json.RawMessage `json:"metadata"`
			Transient struct {
				DisplayID any `json:"display_id"`
			} `json:"transient"`
		}
		if json.Unmarshal(m.Content, &c) != nil {
			return
		}
		data, ok := cleanBundle(c.Data)
		if !ok {
			return
		}
		c.Data = data
		if !isObject(c.Metadata) {
			c.Metadata = json.RawMessage("{}")
		}
		ev := &event{Ev: "display", ID: e.id, Data: c.Data, Metadata: c.Metadata}
		switch m.Header.MsgType {
		case "execute_result":
			ev.Ev = "result"
		case "update_display_data":
			ev.Update = true
			if ev.DisplayID = str2(c.Transient.DisplayID); ev.DisplayID == "" {
				return // an update of no display
			}
		default:
			ev.DisplayID = str2(c.Transient.DisplayID)
		}
		b.w.eventLocked(ev)
	case "clear_output":
		var c struct {
			Wait bool `json:"wait"`
		}
		_ = json.Unmarshal(m.Content, &c)
		b.w.eventLocked(&event{Ev: "clear", ID: e.id, Wait: c.Wait})
	case "error":
		if e.err != nil {
			return // one error output an execution
		}
		ee := parseError(m.Content)
		b.mu.Lock()
		e.err = ee
		b.mu.Unlock()
		b.w.eventLocked(&event{Ev: "error", ID: e.id, Ename: ee.Ename, Evalue: ee.Evalue, Traceback: ee.Traceback})
	}
}

// finishLocked ends e (wire.mu held): an error output when the kernel
// failed without one, then done.
func (b *bridge) finishLocked(e *execution) {
	b.mu.Lock()
	if b.cur != e {
		b.mu.Unlock()
		return
	}
	b.cur = nil
	if e.quiet != nil {
		e.quiet.Stop()
	}
	if e.asking != nil {
		ask := e.asking
		e.asking = nil
		defer b.inputReply(ask, "")
	}
	b.mu.Unlock()

	var c struct {
		Status string `json:"status"`
	}
	var replyErr *execError
	if e.reply != nil {
		_ = json.Unmarshal(e.reply.Content, &c)
		replyErr = parseError(e.reply.Content)
	}
	status := "ok"
	switch c.Status {
	case "ok":
	case "error":
		status = "error"
		if e.interrupted || replyErr.Ename == "KeyboardInterrupt" || e.err != nil && e.err.Ename == "KeyboardInterrupt" {
			status = "interrupted"
		}
	default: // aborted (IRkernel says abort when interrupted), or anything else
		status = "error"
		if e.interrupted {
			status = "interrupted"
		}
	}
	if e.reply == nil { // the idle came, the reply did not
		status, replyErr = "error", &execError{Ename: "BridgeError", Evalue: "the kernel sent no execute_reply"}
		if e.interrupted {
			status, replyErr = "interrupted", &execError{}
		}
	}
	done := &event{Ev: "done", ID: e.id, Status: status}
	if cpu := kernelCPU(b.kernel.pid); cpu >= 0 && e.cpu >= 0 {
		ms := float64(cpu-e.cpu) / float64(time.Millisecond)
		done.CPUMs = &ms
	}
	done.PeakMemoryBytes = kernelPeakRSS(b.kernel.pid)
	if status != "ok" {
		if e.err == nil {
			ee := replyErr
			switch {
			case status == "interrupted" && ee.Ename == "":
				ee = &execError{Ename: "KeyboardInterrupt", Evalue: "the execution was interrupted", Traceback: []string{}}
			case ee.Ename == "":
				ee = &execError{Ename: "Error", Evalue: fmt.Sprintf("the kernel ended the execution with status %q", boundText(c.Status, 100)), Traceback: []string{}}
			}
			e.err = ee
			b.w.eventLocked(&event{Ev: "error", ID: e.id, Ename: ee.Ename, Evalue: ee.Evalue, Traceback: ee.Traceback})
		}
		done.Error = e.err
	}
	b.w.eventLocked(done)
}

// parseError reads ename, evalue and traceback of an error message or an
// execute_reply, as plain text: ANSI colours stripped, one line an entry.
func parseError(content []byte) *execError {
	var c struct {
		Ename     any   `json:"ename"`
		Evalue    any   `json:"evalue"`
		Traceback []any `json:"traceback"`
	}
	_ = json.Unmarshal(content, &c)
	e := &execError{Ename: plain(str2(c.Ename)), Evalue: plain(str2(c.Evalue)), Traceback: []string{}}
	for _, t := range c.Traceback {
		s, ok := t.(string)
		if !ok {
			continue
		}
		e.Traceback = append(e.Traceback, strings.Split(strings.TrimRight(plain(s), "\n"), "\n")...)
	}
	return e
}

// ansi matches the terminal escapes Jupyter kernels colour tracebacks with:
// CSI sequences and OSC strings.
var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]`)

func plain(s string) string {
	if strings.IndexByte(s, 0x1b) < 0 {
		return s
	}
	return ansi.ReplaceAllString(s, "")
}

// str2 is v if it is a string, else "".
func str2(v any) string {
	s, _ := v.(string)
	return s
}

// boundText cuts s to at most n bytes, on a UTF-8 boundary.
func boundText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

// cleanBundle is a MimeBundle as the driver contract carries it: a JSON
// object whose values are strings, but for JSON types (application/json,
// */*+json), whose values are any JSON. A list of strings (nbformat's
// multi-line form) is joined; other values are dropped. ok is false when raw
// is not an object.
func cleanBundle(raw json.RawMessage) (json.RawMessage, bool) {
	if !isObject(raw) {
		return nil, false
	}
	var in map[string]json.RawMessage
	if json.Unmarshal(raw, &in) != nil {
		return nil, false
	}
	clean := true
	for k, v := range in {
		if isJSONType(k) || len(v) > 0 && v[0] == '"' {
			continue
		}
		clean = false
		var lines []string
		if len(v) > 0 && v[0] == '[' && json.Unmarshal(v, &lines) == nil {
			in[k], _ = json.Marshal(strings.Join(lines, ""))
		} else {
			delete(in, k)
		}
	}
	if clean {
		return raw, true
	}
	out, err := json.Marshal(in)
	return out, err == nil
}

func isJSONType(mime string) bool {
	return mime == "application/json" || strings.HasSuffix(mime, "+json")
}

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c == '{'
	}
	return false
}
