package jupyterbridge

import (
	"encoding/json"
	"io"
	"testing"

	"github.com/cellbox-dev/cellbox/kernel/jupyter"
)

// junk are message contents a kernel's code could send: every field of
// the wrong type, missing, null, or nested.
var junk = []string{
	`{}`, `{"name": 1, "text": ["a"]}`, `{"data": [], "metadata": 3}`, `{"data": null}`, `{"data": "x"}`,
	`{"data": {"text/plain": {"deep": [1, {"x": null}]}}, "transient": {"display_id": 7}}`,
	`{"transient": null, "data": {}}`, `{"execution_state": 5}`, `{"execution_state": "idle"}`,
	`{"ename": null, "evalue": [], "traceback": [1, null, "\u001b[31mred\u001b[0m\nline"]}`,
	`{"traceback": "not a list"}`, `{"wait": "yes"}`, `{"status": "ok", "matches": "x", "cursor_start": "0"}`,
	`{"status": "ok", "found": true, "data": {"text/plain": 5}}`, `{"status": "error"}`, `{"status": 3}`,
	`{"language_info": "python"}`, `{"language_info": {"name": 1, "version": ["3"]}}`,
	`{"prompt": {}, "password": "yes"}`,
}

// TestBridgeJunk feeds the bridge's handlers messages of every type with
// junk contents: nothing panics, and an execution still ends once.
func TestBridgeJunk(t *testing.T) {
	w := &wire{ev: io.Discard, out: io.Discard, err: io.Discard}
	b := &bridge{cfg: Config{Name: "junk"}, w: w, pending: map[string]pendingRequest{}, iopubUp: make(chan struct{}), fatal: make(chan error, 1),
		kernel: &kernelProc{pid: -1, exited: make(chan struct{})}}
	types := []string{"stream", "display_data", "update_display_data", "execute_result", "error", "clear_output", "status", "execute_input", "comm_msg", "unknown"}
	for _, content := range junk {
		for _, parent := range []string{`{}`, `{"msg_id": "m1"}`, `{"msg_id": 5}`, `[]`} {
			e := &execution{id: "x1", msgID: "m1", cpu: -1}
			b.cur = e
			for _, typ := range types {
				m := &jupyter.Message{Header: jupyter.Header{MsgType: typ}, Parent: json.RawMessage(parent), Content: json.RawMessage(content)}
				b.iopub(m)
			}
			b.executeReply(&jupyter.Message{Header: jupyter.Header{MsgType: "execute_reply"}, Parent: json.RawMessage(parent), Content: json.RawMessage(content)}, "m1")
			if e.quiet != nil {
				e.quiet.Stop()
			}
			for _, op := range []string{"complete", "inspect", "isComplete"} {
				for _, typ := range []string{"complete_reply", "inspect_reply", "is_complete_reply", "other"} {
					_, _ = replyResult(op, &jupyter.Message{Header: jupyter.Header{MsgType: typ}, Content: json.RawMessage(content)})
				}
			}
			parseError([]byte(content))
			parseKernelInfo(&jupyter.Message{Content: json.RawMessage(content)})
		}
	}
	e := &execution{id: "x2", msgID: "m2", cpu: -1, replied: true, reply: &jupyter.Message{Content: json.RawMessage(`{"status": "error"}`)}}
	b.cur = e
	b.iopub(&jupyter.Message{Header: jupyter.Header{MsgType: "status"}, Parent: json.RawMessage(`{"msg_id": "m2"}`), Content: json.RawMessage(`{"execution_state": "idle"}`)})
	if b.cur != nil || e.err == nil || e.err.Ename != "Error" {
		t.Fatalf("the execution did not end with an error: cur %v, err %+v", b.cur, e.err)
	}
}

func TestCleanBundle(t *testing.T) {
	for in, want := range map[string]string{
		`{"text/plain": "x", "image/png": "iVBO"}`:                                 `{"text/plain": "x", "image/png": "iVBO"}`,
		`{"text/plain": ["a\n", "b"], "text/html": 5}`:                             `{"text/plain":"a\nb"}`,
		`{"application/json": {"a": [1]}, "application/vnd.x+json": 3, "x": null}`: `{"application/json":{"a":[1]},"application/vnd.x+json":3}`,
		`[]`:   ``,
		`"x"`:  ``,
		`null`: ``,
	} {
		got, ok := cleanBundle(json.RawMessage(in))
		if string(got) != want || ok != (want != "") {
			t.Errorf("cleanBundle(%s) = %s, %v; want %s", in, got, ok, want)
		}
	}
}
