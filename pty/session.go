package pty

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	creackpty "github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
)

// Sink receives a terminal's notifications; an rpc connection is one.
// Sinks are compared with ==, so use a pointer.
//
// PtyOutput and PtyExit are called one at a time per terminal, in seq
// order, from the terminal's reader goroutine (or from Attach, for a
// replay). A call that blocks (a client that stops reading its socket)
// stalls this terminal's output, so its program blocks on write: memory
// stays bounded. A Sink whose PtyOutput fails is detached.
type Sink interface {
	PtyOutput(protocol.PtyOutputParams) error
	PtyExit(protocol.PtyExitParams) error
}

// Session is one terminal: a program on a pty in a workspace's sandbox.
type Session struct {
	m      *Manager
	id     string
	ws     *workspace.Workspace
	ownWS  bool // a scratch workspace of its own, discarded when the program ends
	proc   *workspace.Proc
	opener Sink
	enc    protocol.Encoding
	// ttl forgets the ended session after ExitedTTL (guarded by m.mu);
	// stopped when it is forgotten sooner, so that it does not hold the
	// session and its scrollback until then.
	ttl *time.Timer

	// ctl is the master as the sandbox handed it over (a blocking file),
	// kept for creack/pty's ioctls: they call Fd(), which would switch a
	// pollable file to blocking mode. master is a pollable duplicate of
	// it, for reads and writes with deadlines that Close interrupts.
	ctl    *os.File
	master *os.File
	rc     syscall.RawConn

	done chan struct{} // closed once pty/exit went out, the master is closed and the manager knows

	// sendMu serializes delivery to sinks, so each sink sees chunks in seq
	// order, a replay before the live output after it, and pty/exit last.
	// Lock order: sendMu, then mu.
	sendMu sync.Mutex

	mu      sync.Mutex // guards the fields below; cond is on it
	cond    *sync.Cond // flow control and the end of the program
	subs    map[Sink]*sub
	sinks   []Sink // the keys of subs, replaced (never changed) on attach and detach
	seq     int64  // of the last chunk
	cum     int64  // the flow-control cost of chunks 1..seq
	offBase int64  // offs[i] is cum after chunk offBase+1+i,
	offs    []int64
	ring    *ring
	paused  bool // the reader waits for acks
	ended   bool // the program ended: the reader drains, then stops
	closing bool // Close was called: likewise
	exit    *protocol.PtyExitParams
	size    [2]int // cols, rows

	// active is when the terminal last had output, input or a client (unix
	// nanoseconds), for culling.
	active atomic.Int64

	inMu    sync.Mutex // guards inq, inBytes
	inq     [][]byte
	inBytes int
	inKick  chan struct{}
}

// sub is one attached sink's flow-control state: what it acknowledged.
type sub struct {
	ackedSeq int64
	ackedCum int64
}

// Drain after the program ends: read what it left in the terminal until
// the master reports the terminal hung up (every holder of the slave is
// gone), nothing comes for drainIdle (a background process still holds
// the terminal), or drainMax or drainBytes is reached (one that keeps
// writing). Flow control no longer applies: what is left is bounded by
// these and by the kernel's terminal buffers.
const (
	drainIdle  = 100 * time.Millisecond
	drainMax   = 2 * time.Second
	drainBytes = 4 << 20
)

// closeWait bounds how long Close waits for pty/exit to go out.
const closeWait = 5 * time.Second

// ID is the terminal's ptyId.
func (s *Session) ID() string { return s.id }

// Workspace is the workspace the terminal runs in.
func (s *Session) Workspace() *workspace.Workspace { return s.ws }

// Done is closed once the program ended, its last output and pty/exit
// went out.
func (s *Session) Done() <-chan struct{} { return s.done }

// start makes the master pollable and starts the reader and the writer.
// The opener is attached before the first read, so it misses nothing.
func (s *Session) start() error {
	s.ctl = s.proc.PTY
	if s.ctl == nil {
		return errors.New("the sandbox gave no terminal master")
	}
	fd, err := unix.FcntlInt(s.ctl.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("duplicate the terminal's master: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return fmt.Errorf("make the terminal's master non-blocking: %w", err)
	}
	s.master = os.NewFile(uintptr(fd), "pty-master")
	if s.rc, err = s.master.SyscallConn(); err != nil {
		s.master.Close()
		return fmt.Errorf("terminal master: %w", err)
	}
	if s.opener != nil {
		s.mu.Lock()
		s.attachLocked(s.opener)
		s.mu.Unlock()
	}
	s.m.wg.Add(3)
	go func() { defer s.m.wg.Done(); s.read() }()
	go func() { defer s.m.wg.Done(); s.writeLoop() }()
	go func() {
		defer s.m.wg.Done()
		<-s.proc.Exited()
		s.mu.Lock()
		s.ended = true
		s.cond.Broadcast()
		s.mu.Unlock()
		// Wake a reader blocked on an empty terminal; it then drains.
		_ = s.master.SetReadDeadline(time.Now().Add(drainIdle))
	}()
	return nil
}

// read is the reader goroutine: it reads the master into chunks until the
// program has ended and its output is drained, then reports the exit.
func (s *Session) read() {
	buf := make([]byte, ChunkBytes)
	e := encoder{base64: s.enc == protocol.EncodingBase64}
	var drainStart time.Time
	var drained int
	for {
		if s.waitWindow() {
			if drainStart.IsZero() {
				drainStart = time.Now()
			}
			if time.Since(drainStart) > drainMax || drained > drainBytes {
				break
			}
			_ = s.master.SetReadDeadline(time.Now().Add(drainIdle))
		}
		n, err := s.fill(buf)
		if n > 0 {
			if !drainStart.IsZero() {
				drained += n
			}
			if data := e.encode(buf[:n]); data != "" {
				s.emit(data)
			}
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				s.mu.Lock()
				draining := s.ended || s.closing
				s.mu.Unlock()
				if draining && !drainStart.IsZero() {
					break // nothing more came for drainIdle
				}
				continue // woken to start draining
			}
			break // EIO: every holder of the terminal is gone; or closed
		}
	}
	if data := e.flush(); data != "" {
		s.emit(data)
	}
	st, err := s.proc.Wait()
	if err != nil {
		s.m.log.Debug("terminal program wait", "pty", s.id, "err", err)
	}
	// Closing the master hangs up the terminal for any background process
	// that still holds it.
	s.master.Close()
	s.mu.Lock()
	s.ended = true // Resize checks it before using ctl
	s.ctl.Close()
	s.mu.Unlock()
	s.finish(exitParams(s.id, st))
}

// fill reads what the master has, up to len(b): it waits for the first
// bytes, then takes whatever more is already there without waiting, so a
// busy terminal gives big chunks and a keystroke's echo goes out at once.
func (s *Session) fill(b []byte) (n int, err error) {
	rerr := s.rc.Read(func(fd uintptr) bool {
		for n < len(b) {
			k, e := unix.Read(int(fd), b[n:])
			switch {
			case e == unix.EINTR:
				continue
			case e == unix.EAGAIN:
				return n > 0 // nothing yet: wait until readable
			case e != nil:
				err = e
				return true
			case k == 0:
				err = io.EOF
				return true
			}
			n += k
		}
		return true
	})
	if err == nil {
		err = rerr
	}
	return n, err
}

// waitWindow blocks while the attached sinks have more unacknowledged
// output than the high-water mark allows (until acks bring it under the
// low-water mark), and reports whether the program ended or Close was
// called (the reader then drains without flow control).
func (s *Session) waitWindow() (draining bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.ended && !s.closing {
		un := s.unackedLocked()
		switch {
		case s.paused && un <= int64(s.m.opts.LowWater):
			s.paused = false
			return false
		case !s.paused && un < int64(s.m.opts.HighWater):
			return false
		}
		s.paused = true
		s.cond.Wait()
	}
	return true
}

// unackedLocked is the most output any attached sink has not acknowledged.
func (s *Session) unackedLocked() int64 {
	var most int64
	for _, sb := range s.subs {
		most = max(most, s.cum-sb.ackedCum)
	}
	return most
}

// emit makes data the next chunk: into the scrollback, and to every sink.
func (s *Session) emit(data string) {
	s.touch()
	s.sendMu.Lock()
	s.mu.Lock()
	s.seq++
	seq := s.seq
	s.cum += int64(cost(data))
	s.ring.push(chunk{seq: seq, data: data})
	if len(s.subs) > 0 {
		s.offs = append(s.offs, s.cum)
	} else {
		s.offBase, s.offs = seq, s.offs[:0]
	}
	sinks := s.sinks
	s.mu.Unlock()
	p := protocol.PtyOutputParams{PtyID: s.id, Seq: seq, Data: data}
	var failed []Sink
	for _, k := range sinks {
		if err := k.PtyOutput(p); err != nil {
			failed = append(failed, k)
		}
	}
	s.sendMu.Unlock()
	for _, k := range failed {
		s.m.log.Debug("terminal sink failed; detached", "pty", s.id)
		s.Detach(k)
	}
}

// finish reports the exit to the sinks and tells the manager.
func (s *Session) finish(p protocol.PtyExitParams) {
	s.sendMu.Lock()
	s.mu.Lock()
	s.exit = &p
	sinks := s.sinks
	s.subs, s.sinks, s.offs = map[Sink]*sub{}, nil, nil
	s.cond.Broadcast()
	s.mu.Unlock()
	// The places go back before pty/exit goes out: a client that opens a
	// terminal on the exit of one, at the limit, is not refused.
	s.m.releasePlaces(s)
	for _, k := range sinks {
		_ = k.PtyExit(p)
	}
	s.sendMu.Unlock()
	s.m.ended(s) // before done: Close returns with its own workspace closed
	close(s.done)
}

// exitParams is pty/exit for a status: a signal's death is 128+N with its
// name, as a shell reports it.
func exitParams(id string, st workspace.ProcStatus) protocol.PtyExitParams {
	p := protocol.PtyExitParams{PtyID: id, ExitCode: st.Code}
	if st.Signal != 0 {
		p.ExitCode = 128 + int(st.Signal)
		p.Signal = unix.SignalName(st.Signal)
		if p.Signal == "" {
			p.Signal = fmt.Sprintf("signal %d", int(st.Signal))
		}
	}
	return p
}

// Attach makes k receive the terminal's output: first what the scrollback
// still holds from fromSeq on (nil: all of it), then everything after,
// without a gap or a repeat. Attaching an attached sink replays again. On a
// terminal that has exited, k gets the replay and pty/exit.
func (s *Session) Attach(k Sink, fromSeq *int64) (protocol.PtyAttachResult, error) {
	s.touch()
	from := int64(1)
	if fromSeq != nil {
		if *fromSeq < 0 {
			return protocol.PtyAttachResult{}, fmt.Errorf("%w: field \"fromSeq\" must be 0 or more, got %d", ErrInvalid, *fromSeq)
		}
		from = max(from, *fromSeq)
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	s.mu.Lock()
	replay := s.ring.since(from)
	oldest := s.ring.oldest()
	res := protocol.PtyAttachResult{
		Dropped:  from < oldest && from <= s.seq,
		FirstSeq: min(max(from, oldest), s.seq+1),
	}
	exit := s.exit
	if exit == nil {
		s.attachLocked(k)
	}
	s.mu.Unlock()
	for _, c := range replay {
		if err := k.PtyOutput(protocol.PtyOutputParams{PtyID: s.id, Seq: c.seq, Data: c.data}); err != nil {
			s.mu.Lock()
			s.detachLocked(k)
			s.mu.Unlock()
			return res, fmt.Errorf("replay terminal %s: %w", s.id, err)
		}
	}
	if exit != nil {
		_ = k.PtyExit(*exit)
	}
	return res, nil
}

// attachLocked adds k as a sink whose flow control starts now (a replay
// is not counted against it).
func (s *Session) attachLocked(k Sink) {
	if _, ok := s.subs[k]; ok {
		return
	}
	if len(s.subs) == 0 {
		s.offBase, s.offs = s.seq, s.offs[:0]
	}
	s.subs[k] = &sub{ackedSeq: s.seq, ackedCum: s.cum}
	s.sinks = append(append([]Sink(nil), s.sinks...), k)
}

// Detach stops k receiving the terminal's output; the terminal runs on. A
// sink that was not attached is ignored.
func (s *Session) Detach(k Sink) {
	s.mu.Lock()
	s.detachLocked(k)
	s.mu.Unlock()
}

func (s *Session) detachLocked(k Sink) {
	if _, ok := s.subs[k]; !ok {
		return
	}
	delete(s.subs, k)
	sinks := make([]Sink, 0, len(s.sinks))
	for _, x := range s.sinks {
		if x != k {
			sinks = append(sinks, x)
		}
	}
	s.sinks = sinks
	s.trimLocked()
	s.cond.Broadcast()
}

// Ack records that k has handled every chunk up to and including seq.
func (s *Session) Ack(k Sink, seq int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exit != nil {
		return nil // no more output: nothing to let through
	}
	sb := s.subs[k]
	if sb == nil {
		return fmt.Errorf("%w: this connection is not attached to terminal %s (pty/attach first)", ErrInvalid, s.id)
	}
	if seq > s.seq {
		return fmt.Errorf("%w: field \"seq\" is %d, but terminal %s has sent only up to seq %d", ErrInvalid, seq, s.id, s.seq)
	}
	if seq <= sb.ackedSeq {
		return nil // old news, or output from before this sink attached
	}
	sb.ackedSeq, sb.ackedCum = seq, s.offs[seq-s.offBase-1]
	s.trimLocked()
	s.cond.Broadcast()
	return nil
}

// trimLocked drops the offsets that every sink has acknowledged.
func (s *Session) trimLocked() {
	low := s.seq
	for _, sb := range s.subs {
		low = min(low, sb.ackedSeq)
	}
	if drop := low - s.offBase; drop > 0 {
		s.offs = s.offs[drop:]
		s.offBase = low
	}
	if len(s.subs) == 0 {
		s.offs = nil
	}
}

// Write queues input for the program, in the terminal's encoding. It does
// not wait for the program to read it; input the program leaves unread
// beyond MaxInputBytes is refused.
func (s *Session) Write(data string) error {
	s.touch()
	b, err := decodeInput(s.enc, data)
	if err != nil {
		return err
	}
	if err := s.running(); err != nil {
		return err
	}
	if len(b) == 0 {
		return nil
	}
	s.ws.Wake()
	s.inMu.Lock()
	if s.inBytes+len(b) > MaxInputBytes {
		pending := s.inBytes
		s.inMu.Unlock()
		return fmt.Errorf("%w: terminal %s has %d bytes of input its program has not read (at most %d are kept)", ErrLimit, s.id, pending, MaxInputBytes)
	}
	s.inq = append(s.inq, b)
	s.inBytes += len(b)
	s.inMu.Unlock()
	select {
	case s.inKick <- struct{}{}:
	default:
	}
	return nil
}

// writeLoop is the writer goroutine: it hands queued input to the master
// in order, blocking while the terminal's input buffer is full.
func (s *Session) writeLoop() {
	for {
		select {
		case <-s.inKick:
		case <-s.done:
			return
		}
		for {
			s.inMu.Lock()
			if len(s.inq) == 0 {
				s.inMu.Unlock()
				break
			}
			b := s.inq[0]
			s.inq[0] = nil
			s.inq = s.inq[1:]
			s.inMu.Unlock()
			_, err := s.master.Write(b)
			s.inMu.Lock()
			s.inBytes -= len(b)
			s.inMu.Unlock()
			if err != nil {
				return // the master is closed: the terminal ended
			}
		}
	}
}

// Resize sets the terminal's size; the kernel sends the program SIGWINCH.
func (s *Session) Resize(cols, rows int) error {
	if err := checkSize(cols, rows); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock() // the reader closes ctl under mu, after setting ended
	if s.exit != nil || s.ended {
		return s.exitedErrLocked()
	}
	if err := creackpty.Setsize(s.ctl, &creackpty.Winsize{Cols: uint16(cols), Rows: uint16(rows)}); err != nil {
		return fmt.Errorf("resize terminal %s: %w", s.id, err)
	}
	s.size = [2]int{cols, rows}
	return nil
}

// Size is the terminal's size as last set.
func (s *Session) Size() (cols, rows int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size[0], s.size[1]
}

// running is nil while the program runs, else ErrExited.
func (s *Session) running() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exit != nil || s.ended || s.closing {
		return s.exitedErrLocked()
	}
	return nil
}

func (s *Session) exitedErrLocked() error {
	if s.exit != nil {
		return fmt.Errorf("%w: terminal %s (exit code %d)", ErrExited, s.id, s.exit.ExitCode)
	}
	return fmt.Errorf("%w: terminal %s", ErrExited, s.id)
}

// Exit is pty/exit once the terminal has ended, else nil.
func (s *Session) Exit() *protocol.PtyExitParams {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exit == nil {
		return nil
	}
	p := *s.exit
	return &p
}

// kill ends the program and everything it started (its session, its
// process group and every descendant); the reader then drains and sends
// pty/exit.
func (s *Session) kill() {
	s.mu.Lock()
	ended := s.ended || s.exit != nil
	s.closing = true
	s.cond.Broadcast()
	s.mu.Unlock()
	if !ended {
		_ = s.proc.SignalTree(syscall.SIGKILL)
	}
}

// close kills the program and waits, at most closeWait, for pty/exit to
// go out.
func (s *Session) close(ctx context.Context) {
	s.kill()
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C:
		s.m.log.Warn("terminal did not end after SIGKILL", "pty", s.id)
	case <-ctx.Done():
	}
}

func (s *Session) touch() { s.active.Store(time.Now().UnixNano()) }

// idleFor is how long the terminal has been idle with no client attached
// and its program running; 0 otherwise.
func (s *Session) idleFor() time.Duration {
	s.mu.Lock()
	busy := len(s.subs) > 0 || s.ended || s.closing
	s.mu.Unlock()
	if busy {
		return 0
	}
	return time.Since(time.Unix(0, s.active.Load()))
}
