package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
)

const (
	// maxEventBytes bounds one event line of a driver (a display of a
	// large image is a few MiB of base64).
	maxEventBytes = 64 << 20
	// readChunk is the most output read from fd 1 or 2 at once.
	readChunk = 64 << 10
	// stderrTailBytes of a driver's stderr are kept to explain its death.
	stderrTailBytes = 4 << 10
)

// request is a request to a driver (drivers/README.md).
type request struct {
	Op           string                   `json:"op"`
	ID           string                   `json:"id"`
	Code         string                   `json:"code,omitempty"`
	Count        int                      `json:"count,omitempty"`
	Silent       bool                     `json:"silent,omitempty"`
	StoreHistory bool                     `json:"storeHistory,omitempty"`
	Stdin        string                   `json:"stdin,omitempty"`
	AllowStdin   bool                     `json:"allowStdin,omitempty"`
	Source       *protocol.SourceLocation `json:"source,omitempty"`
	Value        string                   `json:"value,omitempty"`
	EOF          bool                     `json:"eof,omitempty"`
	// Interrupted: an input answer (with EOF) sent because kernel/interrupt
	// came while the client was asked (driverSpec.interruptInput).
	Interrupted bool `json:"interrupted,omitempty"`
	CursorPos   int  `json:"cursorPos,omitempty"`
	DetailLevel int  `json:"detailLevel,omitempty"`
	// SourceMap and SyntaxError come from a driverSpec.transform.
	SourceMap   [][]int          `json:"sourceMap,omitempty"`
	SyntaxError *cellSyntaxError `json:"syntaxError,omitempty"`
}

// encode frames r for the driver: a JSON line, or NUL-terminated fields
// for bash.
func (r *request) encode(bash bool) ([]byte, error) {
	if !bash {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		return append(b, '\n'), nil
	}
	fields := []string{r.Op, r.ID}
	switch r.Op {
	case "execute":
		flags := ""
		if r.Silent {
			flags += "s"
		}
		if r.AllowStdin {
			flags += "i"
		}
		path, line := "", 0
		if r.Source != nil {
			path, line = r.Source.Path, r.Source.Line
		}
		fields = append(fields, r.Code, r.Stdin, flags, strconv.Itoa(r.Count), path, strconv.Itoa(line))
	case "input":
		eof := "0"
		if r.EOF {
			eof = "1"
		}
		fields = append(fields, r.Value, eof)
	case "complete":
		fields = append(fields, r.Code, strconv.Itoa(r.CursorPos))
	case "inspect":
		fields = append(fields, r.Code, strconv.Itoa(r.CursorPos), strconv.Itoa(r.DetailLevel))
	case "isComplete":
		fields = append(fields, r.Code)
	}
	var b bytes.Buffer
	for _, f := range fields {
		// Bash strings cannot hold NUL; code with one cannot run there.
		if strings.IndexByte(f, 0) >= 0 {
			return nil, fmt.Errorf("%w: bash cannot take a NUL byte in %s", ErrInvalid, r.Op)
		}
		b.WriteString(f)
		b.WriteByte(0)
	}
	return b.Bytes(), nil
}

// event is an event from a driver (drivers/README.md).
type event struct {
	Ev              string              `json:"ev"`
	ID              string              `json:"id"`
	Version         string              `json:"version"`
	Data            protocol.MimeBundle `json:"data"`
	Metadata        map[string]any      `json:"metadata"`
	DisplayID       string              `json:"displayId"`
	Update          bool                `json:"update"`
	Ename           string              `json:"ename"`
	Evalue          string              `json:"evalue"`
	Traceback       []string            `json:"traceback"`
	Wait            bool                `json:"wait"`
	Prompt          string              `json:"prompt"`
	Password        bool                `json:"password"`
	Status          string              `json:"status"`
	Error           json.RawMessage     `json:"error"`
	CPUMs           *float64            `json:"cpuMs"`
	PeakMemoryBytes int64               `json:"peakMemoryBytes"`
	Result          json.RawMessage     `json:"result"`
	// LanguageInfo, with ready: the kernel's language_info (the Jupyter
	// bridge's), for kernel/start's result.
	LanguageInfo *protocol.LanguageInfo `json:"languageInfo"`
	// StdoutBytes and StderrBytes, when given, are how many bytes the
	// driver had written to fds 1 and 2 before this event.
	StdoutBytes *int64 `json:"stdoutBytes"`
	StderrBytes *int64 `json:"stderrBytes"`
}

// done is how a driver ended an execution.
type done struct {
	status protocol.ExecutionStatus
	err    *protocol.ExecuteError
	cpuMs  *int64
	peak   int64
}

// reply is a driver's answer to a request other than execute.
type reply struct {
	result json.RawMessage
	err    string
}

// prompter is how a driver's input requests reach the client; Kernel
// implements it.
type prompter interface {
	// startAsking marks an input request of execID as waiting for the
	// client, and says whether it may be asked.
	startAsking(execID string) bool
	// ask asks the client on a goroutine of its own and sends the answer
	// (or end of file) to d.
	ask(d *driver, execID, prompt string, password bool)
}

var _ prompter = (*Kernel)(nil)

// driverConfig is what a driver is started with.
type driverConfig struct {
	kernelID, lang string // for messages and the log
	// bashFraming: requests are NUL-terminated fields (drivers/README.md).
	bashFraming bool
	// interruptRequest, reopenPipes, gatherOutput: see driverSpec.
	interruptRequest bool
	reopenPipes      bool
	gatherOutput     time.Duration
	ws               *workspace.Workspace
	argv             []string
	env              []string
	dir              string
	limits           protocol.Limits
	network          protocol.NetworkMode
	// readOnly are host directories the sandbox binds read-only for the
	// interpreter (ProcSpec.ReadOnly).
	readOnly     []string
	startTimeout time.Duration
	log          *slog.Logger
	// out gets fds 1 and 2 and the output events; prompt the input events.
	out    reporter
	prompt prompter
	// stop, when closed, ends a start under way (the kernel shuts down).
	stop <-chan struct{}
}

// driver is one run of a kernel's interpreter with its driver. Its read
// loop reports what the driver writes into cfg.out and cfg.prompt; the
// kernel sends it requests.
type driver struct {
	cfg  driverConfig
	proc *workspace.Proc
	wg   sync.WaitGroup // the read loop and the waiter; kill waits for them

	// wmu makes one request written at a time; it is taken with no other
	// lock held.
	wmu  sync.Mutex
	reqW *os.File

	evR      *os.File
	out, err *pipe
	// wakeR/wakeW end readLoop when the driver died but something it left
	// holds its pipes open.
	wakeR, wakeW *os.File
	wakeFd       int
	buf          []byte // fds 1 and 2 are read into it, by the read loop alone

	ready    chan string   // the interpreter's version
	readDone chan struct{} // closed when the read loop ends
	exited   chan struct{} // closed once the driver is gone and its output read
	version  string
	dones    chan done

	// mu guards the fields below; it is taken with no other lock held.
	mu       sync.Mutex
	readied  bool                   // a ready came
	langInfo *protocol.LanguageInfo // what the ready said of its language, if it did
	status   workspace.ProcStatus
	pending  map[string]chan reply
	tail     []byte // the end of the driver's stderr
	// rejected counts events dropped as forged, stale or oversized (code
	// in the sandbox can write to the event pipe).
	rejected int64
}

// pipe is the daemon's end of fd 1 or 2 of a driver.
type pipe struct {
	f    *os.File
	fd   int
	name protocol.StreamName
	text protocol.UTF8Chunker // the bytes as text, never splitting a sequence
	read int64                // bytes read so far
	// skew is how many bytes read were not counted by the driver (written
	// to the fd directly, by C code or a child), as of the last done.
	skew int64
	// size is the pipe's size once growPipe has asked (0 before); grown:
	// it was found half full once and made floodPipeBytes large
	// (driver_linux.go).
	size  int
	grown bool
}

// send writes a request to the driver.
func (d *driver) send(r *request) error {
	b, err := r.encode(d.cfg.bashFraming)
	if err != nil {
		return err
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if _, err := d.reqW.Write(b); err != nil {
		return &driverGone{fmt.Sprintf("write to the %s kernel: %v", d.cfg.lang, err)}
	}
	return nil
}

// call sends a request and waits for its reply.
func (d *driver) call(ctx context.Context, r *request) (json.RawMessage, error) {
	c := make(chan reply, 1)
	d.mu.Lock()
	d.pending[r.ID] = c
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.pending, r.ID)
		d.mu.Unlock()
	}()
	if err := d.send(r); err != nil {
		return nil, err
	}
	select {
	case rep := <-c:
		if rep.err != "" {
			return nil, fmt.Errorf("%s kernel: %s: %s", d.cfg.lang, r.Op, rep.err)
		}
		return rep.result, nil
	case <-d.exited:
		return nil, &driverGone{d.deathReason()}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// stream reports bytes read from fd 1 or 2 as text.
func (d *driver) stream(p *pipe, b []byte) {
	if p.name == protocol.StreamStderr {
		d.keepTail(b)
	}
	if text := p.text.Chunk(b); text != "" {
		d.cfg.out.stream(p.name, text)
	}
}

// flushText reports what is left of fd 1 or 2 once it is closed: an
// incomplete sequence at its end.
func (d *driver) flushText(p *pipe) {
	if text := p.text.Flush(); text != "" {
		d.cfg.out.stream(p.name, text)
	}
}

func (d *driver) keepTail(b []byte) {
	d.mu.Lock()
	d.tail = append(d.tail, b...)
	if len(d.tail) > stderrTailBytes {
		d.tail = append(d.tail[:0], d.tail[len(d.tail)-stderrTailBytes:]...)
	}
	d.mu.Unlock()
}

// eventLimit bounds one event line: an output larger than the kernel's
// output limit (twice, for JSON's escapes, and some room for the fields)
// could never be sent whole, so it is not read whole either.
func (d *driver) eventLimit() int {
	lim := d.cfg.limits.OutputBytes
	if lim <= 0 || 2*lim+(1<<20) > maxEventBytes {
		return maxEventBytes
	}
	return int(2*lim + 1<<20)
}

// oversized drops an event line over limit, with a note on the running
// execution's stderr.
func (d *driver) oversized(n, limit int) {
	d.reject("oversized event", "bytes", n)
	d.cfg.out.note(fmt.Sprintf("\n[cellbox: an output of more than %d bytes was dropped: over this kernel's output limit (limits.outputBytes)]\n", limit))
}

// reject counts an event the daemon drops and logs the first of each
// thousand, so that a flood of forged events cannot flood the log too.
func (d *driver) reject(why string, args ...any) {
	d.mu.Lock()
	d.rejected++
	n := d.rejected
	d.mu.Unlock()
	if n == 1 || n%1000 == 0 {
		d.cfg.log.Warn("kernel driver event dropped: "+why, append([]any{"kernel", d.cfg.kernelID, "dropped", n}, args...)...)
	}
}

// event decodes and handles one event line.
func (d *driver) event(line []byte) {
	var ev event
	if err := json.Unmarshal(line, &ev); err != nil {
		d.cfg.log.Warn("kernel driver sent a bad event", "kernel", d.cfg.kernelID, "err", err)
		return
	}
	d.handle(&ev)
}

// handle handles one event: output and done count only for the running
// execution, after the bytes the driver wrote before them (drain).
func (d *driver) handle(ev *event) {
	switch ev.Ev {
	case "ready":
		// The first counts; its language is set before the start sees it.
		d.mu.Lock()
		first := !d.readied
		if first {
			d.readied, d.langInfo = true, ev.LanguageInfo
		}
		d.mu.Unlock()
		if first {
			d.ready <- ev.Version // room for one
		}
	case "display", "result", "error", "clear":
		if !d.cfg.out.running(ev.ID) {
			d.reject("output for an execution that is not running", "ev", ev.Ev)
			return
		}
		d.drain(ev)
		o := protocol.KernelOutputParams{Kind: protocol.OutputKind(ev.Ev), Data: ev.Data, Metadata: ev.Metadata}
		switch ev.Ev {
		case "display":
			o.DisplayID, o.Update = ev.DisplayID, ev.Update
		case "clear":
			o.Wait = ev.Wait
		case "error":
			o.Error = &protocol.ExecuteError{Ename: ev.Ename, Evalue: ev.Evalue, Traceback: ev.Traceback}
			if o.Error.Traceback == nil {
				o.Error.Traceback = []string{}
			}
			o.Text = strings.Join(ev.Traceback, "\n")
		}
		d.cfg.out.emit(o)
	case "input":
		if !d.cfg.prompt.startAsking(ev.ID) {
			d.reject("input request while another is pending or no execution runs")
			return
		}
		d.drain(ev)
		d.cfg.prompt.ask(d, ev.ID, ev.Prompt, ev.Password)
	case "done":
		if !d.cfg.out.running(ev.ID) {
			d.reject("done for an execution that is not running")
			return
		}
		d.drain(ev)
		dn := done{status: protocol.ExecutionStatus(ev.Status), peak: ev.PeakMemoryBytes}
		if len(ev.Error) > 0 && string(ev.Error) != "null" {
			var e protocol.ExecuteError
			if json.Unmarshal(ev.Error, &e) == nil {
				if e.Traceback == nil {
					e.Traceback = []string{}
				}
				dn.err = &e
			}
		}
		if ev.CPUMs != nil {
			ms := int64(*ev.CPUMs + 0.5)
			dn.cpuMs = &ms
		}
		select {
		case d.dones <- dn:
		default:
			d.reject("a second done for the execution")
		}
	case "reply":
		rep := reply{result: ev.Result}
		if len(ev.Error) > 0 && string(ev.Error) != "null" {
			if json.Unmarshal(ev.Error, &rep.err) != nil {
				rep.err = string(ev.Error)
			}
		}
		// A reply goes to its request once; one nobody waits for (forged,
		// late or a duplicate) is dropped, never waited on.
		d.mu.Lock()
		c := d.pending[ev.ID]
		delete(d.pending, ev.ID)
		d.mu.Unlock()
		if c == nil {
			d.reject("reply to no pending request")
			return
		}
		select {
		case c <- rep:
		default:
			d.reject("a second reply to a request")
		}
	default:
		d.reject("unknown event", "ev", ev.Ev)
	}
}

// deathReason says how the driver ended, for kernel/status dead:
// "killed: memory limit", "exited with code 3".
func (d *driver) deathReason() string {
	d.mu.Lock()
	st, tail := d.status, string(d.tail)
	d.mu.Unlock()
	if st.Reason != "" {
		return st.Reason
	}
	lim := d.cfg.limits.MemoryBytes
	lower := strings.ToLower(tail)
	oom := strings.Contains(lower, "out of memory") || strings.Contains(lower, "memoryerror") ||
		strings.Contains(lower, "cannot allocate memory") || strings.Contains(lower, "bad_alloc")
	abnormal := st.Signal != 0 || st.Code == 134 || st.Code == 133 || st.Code == 137
	if abnormal && (oom || (lim > 0 && st.MaxRSSBytes >= lim/2)) {
		return "killed: memory limit"
	}
	return st.String()
}

// tailText is the end of the driver's stderr, for an error message.
func (d *driver) tailText() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	t := strings.TrimSpace(string(d.tail))
	if t == "" {
		return ""
	}
	if len(t) > 1000 {
		t = "..." + t[len(t)-1000:]
	}
	return ": " + t
}
