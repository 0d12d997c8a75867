package kernel

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// reporter is what a driver's read loop reports into, one call at a time
// and in the order the driver made them: what the code wrote to fds 1 and
// 2, and its output events. output implements it; nothing flows back.
type reporter interface {
	// running says whether execID is the execution running now: a
	// driver's events for any other (or between executions) are forged or
	// stale.
	running(execID string) bool
	// stream is text the code wrote to fd 1 or 2.
	stream(name protocol.StreamName, text string)
	// emit is a display, result, error or clear of the running execution.
	emit(o protocol.KernelOutputParams)
	// note is a line from the daemon on the running execution's stderr;
	// between executions there is no one to tell.
	note(text string)
}

var _ reporter = (*output)(nil)

// output is a kernel's notifications on their way to its sinks: it numbers
// each kernel/output (seq counts across executions and restarts), keeps the
// newest for kernel/attach replay from fromSeq, holds the running execution
// to its output limit (limits.outputBytes), and sends kernel/output and
// kernel/status to the attached sinks and the running execution's.
type output struct {
	kernelID  string
	replayMax int // Options.ReplayBytes

	// mu guards the fields below and orders delivery: each sink gets the
	// notifications one at a time, in seq order, and a replay before the
	// live output after it. It is taken with no other lock held, and held
	// while sinks are called, so a slow sink holds it: nothing but
	// delivery may wait for it (kernel/list, detach and culling use subMu).
	mu      sync.Mutex
	seq     int64
	replay  []kept
	replayN int                         // the cost of replay
	status  protocol.KernelStatusParams // the last sent, for a sink that attaches
	cur     *execOutput                 // the running execution; nil between executions
	last    string                      // the id of the last execution, for stray output

	// subMu guards who is attached. It is taken alone or under mu, never
	// held while a sink is called.
	subMu  sync.Mutex
	sinks  map[Sink]struct{}
	snap   []Sink // the sinks, rebuilt when they change (delivery reads it)
	opener Sink   // the connection that started the kernel, until it detaches
	active time.Time
}

// execOutput is the running execution, as its output sees it.
type execOutput struct {
	id        string
	sink      Sink  // gets the execution's output even when it is not attached
	limit     int64 // limits.outputBytes; 0: none
	bytes     int64
	truncated bool
}

// kept is an output held for kernel/attach replay, with its cost.
type kept struct {
	o    protocol.KernelOutputParams
	cost int
}

// truncatedMarker ends the kept head of an execution's output.
const truncatedMarker = "\n[cellbox: output truncated: this execution printed more than %d bytes (limits.outputBytes); the rest was dropped]\n"

// newOutput returns a kernel's output with opener (if not nil) attached.
func newOutput(kernelID string, replayMax int, opener Sink) *output {
	o := &output{
		kernelID: kernelID, replayMax: replayMax, sinks: map[Sink]struct{}{}, opener: opener,
		status: protocol.KernelStatusParams{KernelID: kernelID, State: protocol.KernelStateStarting},
	}
	if opener != nil {
		o.sinks[opener] = struct{}{}
		o.snap = []Sink{opener}
	}
	return o
}

// begin makes execution id the running one: output from now on is its,
// within limit, and goes to sink too.
func (o *output) begin(id string, sink Sink, limit int64) {
	o.mu.Lock()
	o.cur = &execOutput{id: id, sink: sink, limit: limit}
	o.last = id
	o.mu.Unlock()
}

// end says the running execution ended, and whether its output was
// truncated.
func (o *output) end() (truncated bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cur != nil {
		truncated = o.cur.truncated
	}
	o.cur = nil
	return truncated
}

func (o *output) running(execID string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cur != nil && o.cur.id == execID
}

func (o *output) stream(name protocol.StreamName, text string) {
	o.emit(protocol.KernelOutputParams{Kind: protocol.OutputKindStream, Name: name, Text: text})
}

func (o *output) note(text string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cur != nil {
		o.emitLocked(protocol.KernelOutputParams{Kind: protocol.OutputKindStream, Name: protocol.StreamStderr, Text: text})
	}
}

// emit numbers p, keeps it for replay and sends it to the sinks; the
// running execution's output past its limit is dropped, after its head and
// a marker (errors are always sent).
func (o *output) emit(p protocol.KernelOutputParams) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.emitLocked(p)
}

func (o *output) emitLocked(p protocol.KernelOutputParams) {
	e := o.cur
	if e != nil {
		p.ExecutionID = e.id
	} else {
		p.ExecutionID = o.last
	}
	o.subMu.Lock()
	o.active = time.Now()
	o.subMu.Unlock()
	p.KernelID = o.kernelID
	size := outputSize(&p)
	if e != nil && p.Kind != protocol.OutputKindError {
		if e.truncated {
			return
		}
		if e.limit > 0 && e.bytes+size > e.limit {
			e.truncated = true
			if p.Kind == protocol.OutputKindStream {
				// Keep the head up to the limit, then the marker.
				room := max(e.limit-e.bytes, 0)
				head := p.Text[:cutUTF8(p.Text, int(room))]
				if head != "" {
					p.Text = head
					o.sendLocked(p, int64(len(head)))
				}
			}
			marker := fmt.Sprintf(truncatedMarker, e.limit)
			o.sendLocked(protocol.KernelOutputParams{
				KernelID: o.kernelID, ExecutionID: e.id, Kind: protocol.OutputKindStream, Name: protocol.StreamStderr,
				Text: marker,
			}, int64(len(marker)))
			return
		}
		e.bytes += size
	}
	o.sendLocked(p, size)
}

// sendLocked numbers p and sends it; size is its outputSize. A sink that
// fails is detached.
func (o *output) sendLocked(p protocol.KernelOutputParams, size int64) {
	o.seq++
	p.Seq = o.seq
	o.keepLocked(p, size)
	for _, s := range o.recipientsLocked() {
		if err := s.KernelOutput(p); err != nil {
			o.detach(s)
		}
	}
}

// recipientsLocked is who gets a notification now: the attached sinks,
// and the running execution's sink when it is not attached.
func (o *output) recipientsLocked() []Sink {
	o.subMu.Lock()
	defer o.subMu.Unlock()
	if o.cur == nil || o.cur.sink == nil {
		return o.snap
	}
	if _, ok := o.sinks[o.cur.sink]; ok {
		return o.snap
	}
	return append(o.snap[:len(o.snap):len(o.snap)], o.cur.sink)
}

// keepLocked holds p for kernel/attach replay, within replayMax.
func (o *output) keepLocked(p protocol.KernelOutputParams, size int64) {
	c := int(size) + 64
	o.replay = append(o.replay, kept{p, c})
	o.replayN += c
	drop := 0
	for o.replayN > o.replayMax && drop < len(o.replay)-1 {
		o.replayN -= o.replay[drop].cost
		o.replay[drop] = kept{}
		drop++
	}
	if drop > 0 {
		o.replay = append(o.replay[:0], o.replay[drop:]...)
	}
}

// setStatus sends kernel/status to the sinks and keeps it for those that
// attach later.
func (o *output) setStatus(p protocol.KernelStatusParams) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.status = p
	for _, s := range o.recipientsLocked() {
		_ = s.KernelStatus(p)
	}
}

// attach replays to s the output kept from fromSeq (nil: all), then
// attaches it and sends it the kernel's status: s misses nothing and gets
// nothing twice.
func (o *output) attach(s Sink, fromSeq *int64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range o.replay {
		if fromSeq != nil && r.o.Seq < *fromSeq {
			continue
		}
		if err := s.KernelOutput(r.o); err != nil {
			return fmt.Errorf("replay kernel %s output: %w", o.kernelID, err)
		}
	}
	o.subMu.Lock()
	o.sinks[s] = struct{}{}
	o.rebuildLocked()
	o.subMu.Unlock()
	st := o.status
	if st.State != protocol.KernelStateDead {
		st.Reason = ""
	}
	_ = s.KernelStatus(st)
	return nil
}

// detach stops s getting notifications. It does not wait for a delivery
// under way (which holds mu, and may be to a stalled client): one taken
// before it may still reach s.
func (o *output) detach(s Sink) {
	o.subMu.Lock()
	defer o.subMu.Unlock()
	if _, ok := o.sinks[s]; !ok {
		return
	}
	delete(o.sinks, s)
	if o.opener == s {
		o.opener = nil
	}
	o.rebuildLocked()
}

// rebuildLocked makes a new snap from sinks (the old one may be in use by
// a delivery; it is never changed in place). subMu is held.
func (o *output) rebuildLocked() {
	snap := make([]Sink, 0, len(o.sinks))
	for s := range o.sinks {
		snap = append(snap, s)
	}
	o.snap = snap
}

// openedBy says whether s started the kernel and is still attached.
func (o *output) openedBy(s Sink) bool {
	o.subMu.Lock()
	defer o.subMu.Unlock()
	return o.opener == s
}

// activity says whether a sink is attached, and when the last output came.
func (o *output) activity() (attached bool, at time.Time) {
	o.subMu.Lock()
	defer o.subMu.Unlock()
	return len(o.sinks) > 0, o.active
}

// Attach is kernel/attach: output kept from fromSeq is replayed to s, then
// s receives the kernel's notifications.
func (k *Kernel) Attach(s Sink, fromSeq *int64) error {
	return k.out.attach(s, fromSeq)
}

// Detach is kernel/detach.
func (k *Kernel) Detach(s Sink) {
	k.out.detach(s)
}

// outputSize is the bytes an output counts against limits.outputBytes.
func outputSize(o *protocol.KernelOutputParams) int64 {
	n := len(o.Text)
	for mime, v := range o.Data {
		n += len(mime)
		switch v := v.(type) {
		case string:
			n += len(v)
		default:
			b, _ := json.Marshal(v)
			n += len(b)
		}
	}
	return int64(n)
}

// cutUTF8 is the largest n' <= n that does not split a UTF-8 sequence of s.
func cutUTF8(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return n
}
