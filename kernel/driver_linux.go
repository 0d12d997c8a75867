//go:build linux

package kernel

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
)

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
	if cfg.reopenPipes {
		// The driver opens its pipes again by path: they belong to the
		// sandbox's user, mode 0600, so that only it (and no other host
		// user) can (a root daemon's pipes are host root's, whom the
		// sandbox does not map).
		uid, gid := workspace.SandboxOwner()
		for _, f := range []*os.File{reqR, evW, outW, errW} {
			if err := unix.Fchown(int(f.Fd()), uid, gid); err != nil {
				return nil, fmt.Errorf("start %s kernel: its pipes: %w", cfg.lang, err)
			}
		}
	}
	// Ports the kernel opens for itself while it starts (ipykernel listens
	// on one) are not servers to offer previews of.
	releasePorts := cfg.ws.HoldPorts()
	defer func() { releasePorts(false) }() // unless ready below, first
	proc, err := cfg.ws.Spawn(ctx, workspace.ProcSpec{
		Argv:       cfg.argv,
		Env:        cfg.env,
		Dir:        cfg.dir,
		Stdout:     outW,
		Stderr:     errW,
		ExtraFiles: []*os.File{reqR, evW},
		Limits:     cfg.limits,
		Network:    cfg.network,
		ReadOnly:   cfg.readOnly,
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
		releasePorts(true)
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

// interrupt sends SIGINT to the driver's process group, as ^C does, and
// to a driver that takes one (driverSpec.interruptRequest) an interrupt
// request naming the execution, so that it cannot end the next one. The
// request goes from a goroutine of its own: a driver stuck in busy code
// does not read, and its full request pipe must not hold up the interrupt,
// the timeout's restart or the client. The write ends when the driver
// reads it or is gone (its end of the pipe closes; the waiter closes ours).
//
// A driver that takes the request (javascript) gets it first and the
// SIGINT only if the execution still runs signalDelay later (running says):
// the request ends a cell that awaits, and node dies of a SIGINT that lands
// between vm's breakOnSigint watchdog stopping and its listeners coming
// back, which is just when a cell's synchronous part has ended. Code that is
// busy, which only the signal stops, gets it then.
func (d *driver) interrupt(execID string, running func() bool) error {
	if !d.cfg.interruptRequest {
		return d.proc.SignalGroup(syscall.SIGINT)
	}
	go func() { _ = d.send(&request{Op: "interrupt", ID: execID}) }()
	time.AfterFunc(signalDelay, func() {
		if running() {
			_ = d.proc.SignalGroup(syscall.SIGINT)
		}
	})
	return nil
}

// signalDelay is how long a driver that takes interrupt requests has to end
// the execution before it gets the SIGINT.
const signalDelay = 100 * time.Millisecond

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
		gotOutput := false
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
			growPipe(p, avail)
			n, rerr := unix.Read(p.fd, buf[:min(avail, len(buf))])
			if n > 0 {
				p.read += int64(n)
				d.stream(p, buf[:n])
				gotOutput = true
			} else if rerr != unix.EAGAIN && rerr != unix.EINTR {
				open[i+1] = false
				d.flushText(p)
			}
		}
		if gotOutput && d.cfg.gatherOutput > 0 && open[0] {
			// Let output gather, but not an event wait (drivers.go).
			gather := []unix.PollFd{{Fd: int32(fds[0]), Events: unix.POLLIN}, {Fd: int32(d.wakeFd), Events: unix.POLLIN}}
			_, _ = unix.Poll(gather, int(d.cfg.gatherOutput.Milliseconds()))
		}
	}
}

// floodPipeBytes is what a driver's output pipe grows to once a flood has
// half filled it: the flood then moves in big reads, without the driver
// waiting on a full pipe. Pipes start at the kernel's default, since every
// pipe a user holds counts toward the user's pipe budget
// (fs.pipe-user-pages-soft, 64 MiB), past which every new pipe of that
// user gets 8 KiB: 200 idle kernels with 1 MiB pipes from the start would
// use it up for the user's whole session.
const floodPipeBytes = 1 << 20

// growPipe makes p's pipe floodPipeBytes large the first time it is found
// at least half full (avail bytes waiting): output is coming faster than it
// is read. A refusal (the user's budget is spent) leaves it as it is.
func growPipe(p *pipe, avail int) {
	if p.grown {
		return
	}
	if p.size == 0 { // asked once: not a system call on every read
		size, err := unix.FcntlInt(uintptr(p.fd), unix.F_GETPIPE_SZ, 0)
		if err != nil {
			p.grown = true // cannot tell: leave it
			return
		}
		p.size = size
	}
	if 2*avail < p.size {
		return
	}
	p.grown = true
	_, _ = unix.FcntlInt(uintptr(p.fd), unix.F_SETPIPE_SZ, floodPipeBytes)
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
