package workspace

import "github.com/cellbox-dev/cellbox/protocol"

// MaxExecutionRecords is how many executions that changed files a
// workspace keeps the record of (workspace/executions).
const MaxExecutionRecords = 200

// RecordExecution keeps what an execution changed; an execution that
// changed no file is not kept (there is nothing of it to undo).
func (w *Workspace) RecordExecution(r protocol.ExecutionRecord) {
	if len(r.FilesChanged) == 0 && r.More == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.execs = append(w.execs, r)
	if over := len(w.execs) - MaxExecutionRecords; over > 0 {
		w.execs = append(w.execs[:0], w.execs[over:]...)
	}
}

// Executions returns the kept records, oldest first: all of them, or the
// one of executionID.
func (w *Workspace) Executions(executionID string) []protocol.ExecutionRecord {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := []protocol.ExecutionRecord{}
	for _, r := range w.execs {
		if executionID == "" || r.ExecutionID == executionID {
			out = append(out, r)
		}
	}
	return out
}
