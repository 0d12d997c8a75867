package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

// driver is one run of a kernel's interpreter with its driver.
type driver struct {
	k    *Kernel
	proc *workspace.Proc
	spec driverSpec

	wmu  sync.Mutex // one request written at a time
	reqW *os.File

	evR      *os.File
	out, err *pipe
	// wakeR/wakeW end readLoop when the driver died but something it left
	// holds its pipes open.
	wakeR, wakeW *os.File
	wakeFd       int

	ready   chan string // the interpreter's version
	exited  chan struct{}
	status  workspace.ProcStatus
	version string

	mu      sync.Mutex // guards the fields below
	pending map[string]chan reply
	dones   chan done
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

// startDriver runs the kernel's driver in its workspace and waits until it
// is ready.
func (k *Kernel) startDriver(ctx context.Context) (*driver, error) {
	spec := drivers[k.lang]
	var toClose []*os.File
	defer func() {
		for _, f := range toClose {
			f.Close()
		}
	}()
	pipes := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			toClose = append(toClose, r, w)
		}
		return r, w, err
	}
	reqR, reqW, err := pipes()
	if err != nil {
		return nil, fmt.Errorf("start %s kernel: %w", k.lang, err)
	}
	evR, evW, err := pipes()
	if err != nil {
		return nil, fmt.Errorf("start %s kernel: %w", k.lang, err)
	}
	outR, outW, err := pipes()
	if err != nil {
		return nil, fmt.Errorf("start %s kernel: %w", k.lang, err)
	}
	errR, errW, err := pipes()
	if err != nil {
		return nil, fmt.Errorf("start %s kernel: %w", k.lang, err)
	}
	// Pipes this large let a flood of output move in big reads.
	for _, f := range []*os.File{outW, errW} {
		_, _ = unix.FcntlInt(f.Fd(), unix.F_SETPIPE_SZ, 1<<20)
	}
	argv := spec.argv
	if k.langInfo.Path != "" {
		// The interpreter initialize reported (found in a directory the
		// sandbox has).
		argv = append([]string{k.langInfo.Path}, argv[1:]...)
	}
	proc, err := k.ws.Spawn(ctx, workspace.ProcSpec{
		Argv:       argv,
		Env:        k.env,
		Dir:        k.dir,
		Stdout:     outW,
		Stderr:     errW,
		ExtraFiles: []*os.File{reqR, evW},
		Limits:     k.limits,
		Network:    k.network,
	})
	if err != nil {
		return nil, fmt.Errorf("start %s kernel: %w", k.lang, err)
	}
	toClose = []*os.File{reqR, evW, outW, errW}
	d := &driver{
		k: k, proc: proc, spec: spec, reqW: reqW, evR: evR,
		ready:   make(chan string, 1),
		exited:  make(chan struct{}),
		pending: make(map[string]chan reply),
		dones:   make(chan done, 1),
	}
	d.out, err = newPipe(outR, protocol.StreamStdout)
	if err == nil {
		d.err, err = newPipe(errR, protocol.StreamStderr)
	}
	if err != nil {
		_ = proc.Kill()
		return nil, fmt.Errorf("start %s kernel: %w", k.lang, err)
	}
	d.wakeR, d.wakeW, err = os.Pipe()
	if err != nil {
		_ = proc.Kill()
		return nil, fmt.Errorf("start %s kernel: %w", k.lang, err)
	}
	var readers sync.WaitGroup
	readers.Add(1)
	go func() { defer readers.Done(); d.readLoop() }()
	go func() {
		st, werr := proc.Wait()
		if werr != nil && st.Reason == "" {
			st.Reason = werr.Error()
		}
		// Output the driver wrote before it died is delivered first; a
		// grandchild that holds the pipes open must not hold us up.
		if !waitTimeout(&readers, time.Second) {
			d.wakeW.Write([]byte{0})
			readers.Wait()
		}
		d.mu.Lock()
		d.status = st
		d.mu.Unlock()
		close(d.exited)
		for _, f := range []*os.File{reqW, evR, outR, errR, d.wakeR, d.wakeW} {
			f.Close()
		}
	}()

	timer := time.NewTimer(k.m.opts.StartTimeout)
	defer timer.Stop()
	select {
	case v := <-d.ready:
		d.version = v
		return d, nil
	case <-d.exited:
		return nil, fmt.Errorf("%w: the %s kernel %s before it was ready%s", ErrDead, k.lang, d.deathReason(), d.tailText())
	case <-timer.C:
		_ = proc.Kill()
		<-d.exited
		return nil, fmt.Errorf("start %s kernel: not ready within %v%s", k.lang, k.m.opts.StartTimeout, d.tailText())
	case <-ctx.Done():
		_ = proc.Kill()
		<-d.exited
		return nil, ctx.Err()
	}
}

func newPipe(f *os.File, name protocol.StreamName) (*pipe, error) {
	return &pipe{f: f, fd: -1, name: name}, nil
}

// waitTimeout waits for wg at most d and says whether it is done.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	c := make(chan struct{})
	go func() { wg.Wait(); close(c) }()
	select {
	case <-c:
		return true
	case <-time.After(d):
		return false
	}
}

// send writes a request to the driver.
func (d *driver) send(r *request) error {
	b, err := r.encode(d.spec.bashFraming)
	if err != nil {
		return err
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if _, err := d.reqW.Write(b); err != nil {
		return fmt.Errorf("%w: write to the %s kernel: %v", ErrDead, d.k.lang, err)
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
			return nil, fmt.Errorf("%s kernel: %s: %s", d.k.lang, r.Op, rep.err)
		}
		return rep.result, nil
	case <-d.exited:
		return nil, fmt.Errorf("%w: %s", ErrDead, d.deathReason())
	case <-ctx.Done():
		return nil, ctx.Err()
	}
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
	outBuf := make([]byte, readChunk)
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
				avail = len(outBuf) // HUP or unknown: read what is there
			}
			if eventWaiting(fds[0], open[0]) {
				break
			}
			d.k.outMu.Lock()
			n, rerr := unix.Read(p.fd, outBuf[:min(avail, len(outBuf))])
			if n > 0 {
				p.read += int64(n)
				d.stream(p, outBuf[:n])
			} else if rerr != unix.EAGAIN && rerr != unix.EINTR {
				open[i+1] = false
				d.flushCarry(p)
			}
			d.k.outMu.Unlock()
		}
	}
}

// eventLimit bounds one event line: an output larger than the kernel's
// output limit (twice, for JSON's escapes, and some room for the fields)
// could never be sent whole, so it is not read whole either.
func (d *driver) eventLimit() int {
	lim := d.k.limits.OutputBytes
	if lim <= 0 || 2*lim+(1<<20) > maxEventBytes {
		return maxEventBytes
	}
	return int(2*lim + 1<<20)
}

// oversized drops an event line over limit, with a note on the running
// execution's stderr.
func (d *driver) oversized(n, limit int) {
	d.reject("oversized event", "bytes", n)
	d.k.outMu.Lock()
	defer d.k.outMu.Unlock()
	d.k.mu.Lock()
	running := d.k.current != nil
	d.k.mu.Unlock()
	if running {
		d.k.emitStream(protocol.StreamStderr, fmt.Sprintf("\n[cellbox: an output of more than %d bytes was dropped: over this kernel's output limit (limits.outputBytes)]\n", limit))
	}
}

// reject counts an event the daemon drops and logs the first of each
// thousand, so that a flood of forged events cannot flood the log too.
func (d *driver) reject(why string, args ...any) {
	d.mu.Lock()
	d.rejected++
	n := d.rejected
	d.mu.Unlock()
	if n == 1 || n%1000 == 0 {
		d.k.m.log.Warn("kernel driver event dropped: "+why, append([]any{"kernel", d.k.id, "dropped", n}, args...)...)
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

// drain sends what fds 1 and 2 hold before an event. When the event says
// how many bytes the driver had written to a stream (ev.StdoutBytes), it
// reads up to there (plus the bytes the driver did not count, as of the
// last done) and no further; otherwise, and for done, it reads all the pipe
// holds now. The caller holds outMu.
func (d *driver) drain(ev *event) {
	buf := d.k.drainBuf
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

// stream sends bytes read from fd 1 or 2 as text, never splitting a UTF-8
// sequence across two outputs. The caller holds outMu.
func (d *driver) stream(p *pipe, b []byte) {
	if p.name == protocol.StreamStderr {
		d.keepTail(b)
	}
	if text := p.text.Chunk(b); text != "" {
		d.k.emitStream(p.name, text)
	}
}

func (d *driver) flushCarry(p *pipe) {
	if text := p.text.Flush(); text != "" {
		d.k.emitStream(p.name, text)
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

// event decodes and handles one event line.
func (d *driver) event(line []byte) {
	var ev event
	if err := json.Unmarshal(line, &ev); err != nil {
		d.k.m.log.Warn("kernel driver sent a bad event", "kernel", d.k.id, "err", err)
		return
	}
	d.handle(&ev)
}

func (d *driver) handle(ev *event) {
	switch ev.Ev {
	case "ready":
		select {
		case d.ready <- ev.Version:
		default:
		}
	case "display", "result", "error", "clear":
		if !d.k.running(ev.ID) {
			d.reject("output for an execution that is not running", "ev", ev.Ev)
			return
		}
		d.k.outMu.Lock()
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
		d.k.emit(o)
		d.k.outMu.Unlock()
	case "input":
		if !d.k.startAsking(ev.ID) {
			d.reject("input request while another is pending or no execution runs")
			return
		}
		d.k.outMu.Lock()
		d.drain(ev)
		d.k.outMu.Unlock()
		go d.k.answerInput(d, ev.ID, ev.Prompt, ev.Password)
	case "done":
		if !d.k.running(ev.ID) {
			d.reject("done for an execution that is not running")
			return
		}
		d.k.outMu.Lock()
		d.drain(ev)
		d.k.outMu.Unlock()
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

// kill ends the driver and everything it started, and waits.
func (d *driver) kill() {
	_ = d.proc.Kill()
	<-d.exited
}

// interrupt sends SIGINT to the driver's process group, as ^C does.
func (d *driver) interrupt() error {
	return d.proc.SignalGroup(syscall.SIGINT)
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
	lim := d.k.limits.MemoryBytes
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
