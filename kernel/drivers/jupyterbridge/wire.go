package jupyterbridge

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/cellbox-dev/cellbox/kernel/drivers/driverio"
)

// The bridge's side of the driver contract (kernel/drivers/README.md):
// requests are JSON lines on fd 3, events JSON lines on fd 4, and the
// kernel's streams are written to fds 1 and 2, counted, so that the manager
// keeps them in order with the events.

// request is a request of the kernel manager.
type request struct {
	Op           string `json:"op"`
	ID           string `json:"id"`
	Code         string `json:"code"`
	Silent       bool   `json:"silent"`
	StoreHistory bool   `json:"storeHistory"`
	Stdin        string `json:"stdin"`
	AllowStdin   bool   `json:"allowStdin"`
	Value        string `json:"value"`
	EOF          bool   `json:"eof"`
	CursorPos    int    `json:"cursorPos"`
	DetailLevel  int    `json:"detailLevel"`
}

// readRequest reads the next request line and says how many bytes it
// took; io.EOF when the manager closed the pipe.
func readRequest(r *bufio.Reader) (*request, int64, error) {
	req, line, err := readLine(r)
	return req, int64(line), err
}

func readLine(r *bufio.Reader) (*request, int, error) {
	line, err := driverio.ReadLine(r)
	if err != nil {
		return nil, len(line), err
	}
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return &request{}, len(line), fmt.Errorf("jupyter bridge: bad request: %w", err)
	}
	return &req, len(line), nil
}

// execError is an error as the driver contract carries it.
type execError struct {
	Ename     string   `json:"ename"`
	Evalue    string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// languageInfo is the kernel's language_info, as kernel/start reports it.
type languageInfo struct {
	Name          string `json:"name"`
	Version       string `json:"version"`
	FileExtension string `json:"fileExtension"`
	Mimetype      string `json:"mimetype"`
}

// event is an event to the manager.
type event struct {
	Ev           string          `json:"ev"`
	ID           string          `json:"id,omitempty"`
	Version      string          `json:"version,omitempty"`
	Pid          int             `json:"pid,omitempty"`
	LanguageInfo *languageInfo   `json:"languageInfo,omitempty"`
	Data         json.RawMessage `json:"data,omitempty"`
	Metadata     json.RawMessage `json:"metadata,omitempty"`
	DisplayID    string          `json:"displayId,omitempty"`
	Update       bool            `json:"update,omitempty"`
	Ename        string          `json:"ename,omitempty"`
	Evalue       string          `json:"evalue,omitempty"`
	Traceback    []string        `json:"traceback,omitempty"`
	Wait         bool            `json:"wait,omitempty"`
	Prompt       string          `json:"prompt,omitempty"`
	Password     bool            `json:"password,omitempty"`
	Status       string          `json:"status,omitempty"`
	// Error is a done's *execError, or a reply's message (a string).
	Error           any      `json:"error,omitempty"`
	Result          any      `json:"result,omitempty"`
	CPUMs           *float64 `json:"cpuMs,omitempty"`
	PeakMemoryBytes int64    `json:"peakMemoryBytes,omitempty"`
	StdoutBytes     int64    `json:"stdoutBytes"`
	StderrBytes     int64    `json:"stderrBytes"`
}

// wire writes to the manager: events on fd 4, streams on fds 1 and 2.
//
// Its mutex is the bridge's output lock: whoever writes holds it across
// deciding what to write and writing it (an iopub message is checked
// against the running execution and written under it, and an execution
// ends under it), so that the execution's done follows all of its output.
// Lock order: wire.mu before bridge.mu.
type wire struct {
	mu       sync.Mutex
	ev       io.Writer
	out, err io.Writer
	// outN and errN count the bytes written to fds 1 and 2.
	outN, errN int64
	// broken: a write to the manager failed; it is gone.
	broken error
}

// streamLocked writes text to fd 1 (stdout) or 2 (stderr), counted.
func (w *wire) streamLocked(name string, text []byte) {
	if w.broken != nil || len(text) == 0 {
		return
	}
	dst, n := w.out, &w.outN
	if name == "stderr" {
		dst, n = w.err, &w.errN
	}
	m, err := dst.Write(text)
	*n += int64(m)
	if err != nil {
		w.broken = err
	}
}

// eventLocked writes one event with the stream counts as of now.
func (w *wire) eventLocked(ev *event) {
	if w.broken != nil {
		return
	}
	ev.StdoutBytes, ev.StderrBytes = w.outN, w.errN
	b, err := json.Marshal(ev)
	if err != nil {
		// Only invalid UTF-8 is replaced by Marshal; nothing here fails to
		// marshal. Say so rather than send nothing.
		b, _ = json.Marshal(&event{Ev: "reply", ID: ev.ID, Error: "jupyter bridge: encode " + ev.Ev + ": " + err.Error()})
	}
	if _, err := w.ev.Write(append(b, '\n')); err != nil {
		w.broken = err
	}
}

// send writes one event under the lock.
func (w *wire) send(ev *event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.eventLocked(ev)
}

// stream writes text under the lock.
func (w *wire) stream(name string, text []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.streamLocked(name, text)
}
