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
	"syscall"
	"time"

	"golang.org/x/sys/unix"

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
	CursorPos    int                      `json:"cursorPos,omitempty"`
	DetailLevel  int                      `json:"detailLevel,omitempty"`
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
	bashFraming  bool
	ws           *workspace.Workspace
	argv         []string
	env          []string
	dir          string
	limits       protocol.Limits
	network      protocol.NetworkMode
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
	mu      sync.Mutex
	status  workspace.ProcStatus
	pending map[string]chan reply
	tail    []byte // the end of the driver's stderr
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
		select {
		case d.ready <- ev.Version:
		default:
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

// startDriver runs a kernel's driver in its workspace and waits until it
// is ready.
func startDriver(ctx context.Context, cfg driverConfig) (*driver, error) {
	var toClose []*os.File
	defer func() {
		for _, f := range toClose {
			f.Close()
		}
	}()
	var ends [5][2]*os.File // requests, events, fd 1, fd 2, wake: read and write ends
	for i := range ends {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("start %s kernel: %w", cfg.lang, err)
		}
		ends[i] = [2]*os.File{r, w}
		toClose = append(toClose, r, w)
	}
	reqR, reqW := ends[0][0], ends[0][1]
	evR, evW := ends[1][0], ends[1][1]
	outR, outW := ends[2][0], ends[2][1]
	errR, errW := ends[3][0], ends[3][1]
	// Pipes this large let a flood of output move in big reads.
	for _, f := range []*os.File{outW, errW} {
		_, _ = unix.FcntlInt(f.Fd(), unix.F_SETPIPE_SZ, 1<<20)
	}
	proc, err := cfg.ws.Spawn(ctx, workspace.ProcSpec{
		Argv:       cfg.argv,
		Env:        cfg.env,
		Dir:        cfg.dir,
		Stdout:     outW,
		Stderr:     errW,
		ExtraFiles: []*os.File{reqR, evW},
		Limits:     cfg.limits,
		Network:    cfg.network,
	})
	if err != nil {
		return nil, fmt.Errorf("start %s kernel: %w", cfg.lang, err)
	}
	toClose = []*os.File{reqR, evW, outW, errW} // the driver's ends; ours are closed when it is gone
	d := &driver{
		cfg: cfg, proc: proc, reqW: reqW, evR: evR,
		out:      &pipe{f: outR, fd: -1, name: protocol.StreamStdout},
		err:      &pipe{f: errR, fd: -1, name: protocol.StreamStderr},
		wakeR:    ends[4][0],
		wakeW:    ends[4][1],
		buf:      make([]byte, readChunk),
		ready:    make(chan string, 1),
		readDone: make(chan struct{}),
		exited:   make(chan struct{}),
		pending:  make(map[string]chan reply),
		dones:    make(chan done, 1),
	}
	d.wg.Add(2)
	go func() {
		defer d.wg.Done()
		defer close(d.readDone)
		d.readLoop()
	}()
	go func() {
		defer d.wg.Done()
		d.wait()
	}()

	timer := time.NewTimer(cfg.startTimeout)
	defer timer.Stop()
	select {
	case v := <-d.ready:
		d.version = v
		return d, nil
	case <-d.exited:
		d.wg.Wait()
		return nil, fmt.Errorf("%w: the %s kernel %s before it was ready%s", ErrDead, cfg.lang, d.deathReason(), d.tailText())
	case <-timer.C:
		d.kill()
		return nil, fmt.Errorf("start %s kernel: not ready within %v%s", cfg.lang, cfg.startTimeout, d.tailText())
	case <-ctx.Done():
		d.kill()
		return nil, ctx.Err()
	case <-cfg.stop:
		d.kill()
		return nil, fmt.Errorf("%w: kernel %s was shut down while it started", ErrNotFound, cfg.kernelID)
	}
}

// wait waits for the driver's process to end, then for the read loop to
// report what it wrote, and closes the daemon's ends of its pipes.
func (d *driver) wait() {
	st, werr := d.proc.Wait()
	if werr != nil && st.Reason == "" {
		st.Reason = werr.Error()
	}
	// Output the driver wrote before it died is delivered first; a
	// grandchild that holds the pipes open must not hold us up.
	t := time.NewTimer(time.Second)
	select {
	case <-d.readDone:
	case <-t.C:
		d.wakeW.Write([]byte{0})
		<-d.readDone
	}
	t.Stop()
	d.mu.Lock()
	d.status = st
	d.mu.Unlock()
	close(d.exited)
	for _, f := range []*os.File{d.reqW, d.evR, d.out.f, d.err.f, d.wakeR, d.wakeW} {
		f.Close()
	}
}

// kill ends the driver and everything it started, and waits for its
// goroutines.
func (d *driver) kill() {
	_ = d.proc.Kill()
	d.wg.Wait()
}

// interrupt sends SIGINT to the driver's process group, as ^C does.
func (d *driver) interrupt() error {
	return d.proc.SignalGroup(syscall.SIGINT)
}

// readLoop reads the driver's events and its fds 1 and 2 in one loop, so
// that output and events keep the order the driver made them in
// (drivers/README.md "Ordering"):
//   - events are handled first; an event that says how many bytes the
//     driver had written to fd 1 or 2 before it (stdoutBytes) has exactly
//     those read and sent before it, and no more;
//   - output is read only up to what the pipe held when no event was
//     waiting, so bytes written after an event cannot overtake it.
func (d *driver) readLoop() {
	fds := [3]int{-1, -1, -1}
	for i, f := range []*os.File{d.evR, d.out.f, d.err.f, d.wakeR} {
		rc, err := f.SyscallConn()
		if err != nil {
			return
		}
		_ = rc.Control(func(fd uintptr) {
			if i < 3 {
				fds[i] = int(fd)
			} else {
				d.wakeFd = int(fd)
			}
		})
	}
	d.out.fd, d.err.fd = fds[1], fds[2]
	pfds := []unix.PollFd{{Fd: int32(fds[0])}, {Fd: int32(fds[1])}, {Fd: int32(fds[2])}, {Fd: int32(d.wakeFd), Events: unix.POLLIN}}
	open := [3]bool{true, true, true}
	var line []byte
	skipping := false // dropping the rest of an oversized event line
	limit := d.eventLimit()
	evBuf := make([]byte, 64<<10)
	buf := d.buf
	for open[0] || open[1] || open[2] {
		for i := range 3 {
			pfds[i].Events, pfds[i].Revents = 0, 0
			if open[i] {
				pfds[i].Events = unix.POLLIN
			} else {
				pfds[i].Fd = -1
			}
		}
		pfds[3].Revents = 0
		if _, err := unix.Poll(pfds, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			return
		}
		if pfds[3].Revents != 0 {
			return // the driver is gone and something holds its pipes
		}
		if open[0] && pfds[0].Revents != 0 {
			n, err := unix.Read(fds[0], evBuf)
			if n <= 0 && err != unix.EAGAIN && err != unix.EINTR {
				open[0] = false
			}
			for b := evBuf[:max(n, 0)]; len(b) > 0; {
				i := bytes.IndexByte(b, '\n')
				if i < 0 {
					if !skipping {
						line = append(line, b...)
					}
					break
				}
				if skipping {
					skipping = false
				} else {
					line = append(line, b[:i+1]...)
					d.event(line)
				}
				b = b[i+1:]
				line = line[:0]
				if cap(line) > 1<<20 {
					line = nil // a big event's buffer is not kept
				}
			}
			if len(line) > limit {
				// Never held whole: the rest of the line is skipped.
				d.oversized(len(line), limit)
				line, skipping = nil, true
			}
			continue // events first: look again before reading output
		}
		for i, p := range []*pipe{d.out, d.err} {
			if !open[i+1] || pfds[i+1].Revents == 0 {
				continue
			}
			avail, err := unix.IoctlGetInt(p.fd, unix.TIOCINQ) // FIONREAD
			if err != nil || avail <= 0 {
				avail = len(buf) // HUP or unknown: read what is there
			}
			if eventWaiting(fds[0], open[0]) {
				break
			}
			n, rerr := unix.Read(p.fd, buf[:min(avail, len(buf))])
			if n > 0 {
				p.read += int64(n)
				d.stream(p, buf[:n])
			} else if rerr != unix.EAGAIN && rerr != unix.EINTR {
				open[i+1] = false
				d.flushText(p)
			}
		}
	}
}

// eventWaiting says whether the event pipe has something to read now.
func eventWaiting(fd int, open bool) bool {
	if !open {
		return false
	}
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(p, 0)
	return err == nil && n > 0
}

// drain reports what fds 1 and 2 hold before an event. When the event says
// how many bytes the driver had written to a stream (ev.StdoutBytes), it
// reads up to there (plus the bytes the driver did not count, as of the
// last done) and no further; otherwise, and for done, it reads all the pipe
// holds now. It runs on the read loop, whose buffer it uses.
func (d *driver) drain(ev *event) {
	buf := d.buf
	for _, ps := range []struct {
		p     *pipe
		count *int64
	}{{d.out, ev.StdoutBytes}, {d.err, ev.StderrBytes}} {
		p := ps.p
		var upTo int64 = -1 // all
		if ps.count != nil && ev.Ev != "done" {
			upTo = *ps.count + p.skew
			if upTo <= p.read {
				continue
			}
		}
		for {
			b := buf
			if upTo >= 0 {
				b = buf[:min(int64(len(buf)), upTo-p.read)]
			}
			n, err := unix.Read(p.fd, b)
			if n > 0 {
				p.read += int64(n)
				d.stream(p, b[:n])
			}
			// EAGAIN: empty for now; 0: closed.
			if err != nil || n <= 0 || (upTo >= 0 && p.read >= upTo) {
				break
			}
		}
		if ev.Ev == "done" && ps.count != nil {
			p.skew = max(p.read-*ps.count, 0)
		}
	}
}
