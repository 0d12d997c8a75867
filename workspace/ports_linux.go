package workspace

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// maxPortsReported bounds workspace/ports: a program can open thousands of
// listeners; the editor offers the first ones.
const maxPortsReported = 64

// maxTableBytes bounds what is read of /proc/PID/net/tcp and tcp6 at a tick
// (about 10,000 sockets).
const maxTableBytes = 1 << 20

// notePorts reads the ports servers listen on in sb's network namespace
// and reports them (Options.OnPorts) when they changed since the last
// report. The quota tick calls it when the sandbox's programs ran: a
// server that starts or stops listening runs. A sandbox with the host's
// network reports none. While a kernel starts (HoldPorts) nothing is
// reported, and the ports its start opened are its own, never reported.
// It says whether it read them: not while a kernel starts, nor when the
// table could not be read (the caller tries again).
func (w *Workspace) notePorts(sb *sandbox.Sandbox) bool {
	var ports []int
	if sb != nil && sb.Listener(sandbox.ListenerHTTPProxy) != nil {
		var err error
		if ports, err = listeningPorts(sb.InitPID()); err != nil {
			w.m.log.Debug("listening ports not read", "workspace", w.id, "err", err)
			return false
		}
	}
	w.pmu.Lock()
	if w.portHolds > 0 && sb != nil { // a sandbox that ended has no ports, held or not
		w.pmu.Unlock()
		return false
	}
	for p := range w.ownPorts {
		if !slices.Contains(ports, p) {
			delete(w.ownPorts, p) // closed: the port is anyone's again
		}
	}
	ports = slices.DeleteFunc(ports, func(p int) bool { return w.ownPorts[p] })
	if slices.Equal(ports, w.ports) {
		w.pmu.Unlock()
		return true
	}
	w.ports = ports
	w.pmu.Unlock()
	if f := w.m.opts.OnPorts; f != nil {
		f(w.id, slices.Clone(ports))
	}
	return true
}

// HoldPorts is called before a kernel starts: until release, no listening
// ports are reported; release(true), once the kernel is ready, marks the
// ports that began listening meanwhile as the kernel's own (ipykernel
// listens on a TCP port of its own), never reported while they listen.
// release(false): the start failed. What listened when the hold began
// (read at once, while the kernel's interpreter loads) is not the
// kernel's, reported or not yet.
func (w *Workspace) HoldPorts() (release func(own bool)) {
	w.pmu.Lock()
	w.portHolds++
	w.pmu.Unlock()
	before := make(chan map[int]bool, 1)
	go func() {
		set := map[int]bool{}
		if sb := w.Sandbox(); sb != nil && sb.Listener(sandbox.ListenerHTTPProxy) != nil {
			ports, _ := listeningPorts(sb.InitPID())
			for _, p := range ports {
				set[p] = true
			}
		}
		before <- set
	}()
	var once sync.Once
	return func(own bool) {
		once.Do(func() {
			// The reads (about 2 ms) are not the kernel start's to wait
			// for: the hold lasts until they are done.
			go func() {
				base := <-before
				var now []int
				if sb := w.Sandbox(); own && sb != nil && sb.Listener(sandbox.ListenerHTTPProxy) != nil {
					now, _ = listeningPorts(sb.InitPID())
				}
				w.pmu.Lock()
				defer w.pmu.Unlock()
				w.portHolds--
				for _, p := range now {
					if !base[p] && !slices.Contains(w.ports, p) {
						if w.ownPorts == nil {
							w.ownPorts = make(map[int]bool)
						}
						w.ownPorts[p] = true
					}
				}
			}()
		})
	}
}

// Ports are the listening ports last reported (workspace/ports).
func (w *Workspace) Ports() []int {
	w.pmu.Lock()
	defer w.pmu.Unlock()
	return slices.Clone(w.ports)
}

// listeningPorts lists the TCP ports in LISTEN state in the network
// namespace of pid, IPv4 and IPv6, ascending, without the daemon's own
// listeners (sandbox.Listeners).
func listeningPorts(pid int) ([]int, error) {
	seen := map[int]bool{}
	for _, name := range []string{"tcp", "tcp6"} {
		path := fmt.Sprintf("/proc/%d/net/%s", pid, name)
		f, err := os.Open(path)
		if err != nil {
			if name == "tcp6" && os.IsNotExist(err) {
				continue // no IPv6 in this kernel
			}
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		// The sandbox's programs decide how many sockets there are: a
		// table past maxTableBytes is read that far only (a partial
		// last line is not a listener), which is enough to offer
		// previews.
		b, err := io.ReadAll(io.LimitReader(f, maxTableBytes))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		for _, p := range parseListening(b) {
			seen[p] = true
		}
	}
	for _, l := range sandbox.Listeners {
		delete(seen, int(l.Port))
	}
	ports := make([]int, 0, len(seen))
	for p := range seen {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	if len(ports) > maxPortsReported {
		ports = ports[:maxPortsReported]
	}
	return ports, nil
}

// parseListening returns the local ports of the LISTEN (0A) sockets of a
// /proc/net/tcp or tcp6 table.
func parseListening(table []byte) []int {
	var out []int
	sc := bufio.NewScanner(bytes.NewReader(table))
	sc.Buffer(make([]byte, 0, 512), 4096)
	first := true
	for sc.Scan() {
		if first { // the header
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[3] != "0A" {
			continue
		}
		_, port, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(port, 16, 16)
		if err != nil || n == 0 {
			continue
		}
		out = append(out, int(n))
	}
	return out
}
