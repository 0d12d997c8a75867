package sqldriver

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/cellbox-dev/cellbox/kernel/drivers/driverio"
	"github.com/cellbox-dev/cellbox/protocol"
)

// request is a request of the kernel manager (drivers/README.md).
type request struct {
	Op          string                   `json:"op"`
	ID          string                   `json:"id"`
	Code        string                   `json:"code"`
	Silent      bool                     `json:"silent"`
	Source      *protocol.SourceLocation `json:"source"`
	CursorPos   int                      `json:"cursorPos"`
	DetailLevel int                      `json:"detailLevel"`

	// end is the request's end in the pipe: how many bytes the manager
	// had written with it.
	end int64
}

// readRequest reads the next request line and says how many bytes it
// took; io.EOF when the manager closed the pipe. A line that is not a
// request is an error with an empty request.
func readRequest(r *bufio.Reader) (*request, int64, error) {
	line, err := driverio.ReadLine(r)
	if err != nil {
		return nil, int64(len(line)), err
	}
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return &request{}, int64(len(line)), fmt.Errorf("sql driver: bad request: %w", err)
	}
	return &req, int64(len(line)), nil
}

// execError is an error as the driver contract carries it.
type execError struct {
	Ename     string   `json:"ename"`
	Evalue    string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// event is an event to the manager.
type event struct {
	Ev              string              `json:"ev"`
	ID              string              `json:"id,omitempty"`
	Version         string              `json:"version,omitempty"`
	Pid             int                 `json:"pid,omitempty"`
	Data            protocol.MimeBundle `json:"data,omitempty"`
	Metadata        map[string]any      `json:"metadata,omitempty"`
	Ename           string              `json:"ename,omitempty"`
	Evalue          string              `json:"evalue,omitempty"`
	Traceback       []string            `json:"traceback,omitempty"`
	Status          string              `json:"status,omitempty"`
	Error           any                 `json:"error,omitempty"`
	Result          any                 `json:"result,omitempty"`
	CPUMs           *float64            `json:"cpuMs,omitempty"`
	PeakMemoryBytes int64               `json:"peakMemoryBytes,omitempty"`
	StdoutBytes     int64               `json:"stdoutBytes"`
	StderrBytes     int64               `json:"stderrBytes"`
}

// wire writes to the manager: events on fd 4, text on fd 1, counted, so
// that the manager keeps them in order (drivers/README.md, "Ordering").
// Replies to completion come from another goroutine than an execution's
// events, hence the lock.
type wire struct {
	mu   sync.Mutex
	ev   io.Writer
	out  io.Writer
	outN int64
	// broken: a write failed; the manager is gone.
	broken error
}

// print writes text to fd 1.
func (w *wire) print(text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken != nil || text == "" {
		return
	}
	n, err := io.WriteString(w.out, text)
	w.outN += int64(n)
	if err != nil {
		w.broken = err
	}
}

// send writes one event with the stream counts as of now.
func (w *wire) send(ev *event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken != nil {
		return
	}
	ev.StdoutBytes = w.outN
	b, err := json.Marshal(ev)
	if err != nil {
		b, _ = json.Marshal(&event{Ev: "reply", ID: ev.ID, Error: "sql driver: encode " + ev.Ev + ": " + err.Error()})
	}
	if _, err := w.ev.Write(append(b, '\n')); err != nil {
		w.broken = err
	}
}

// reply answers a request with a result or an error message.
func (w *wire) reply(id string, result any, err error) {
	if err != nil {
		w.send(&event{Ev: "reply", ID: id, Error: err.Error()})
		return
	}
	w.send(&event{Ev: "reply", ID: id, Result: result})
}
