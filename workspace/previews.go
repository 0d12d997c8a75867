package workspace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/preview"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// MaxPreviews bounds the previews of one workspace.
const MaxPreviews = 16

// previewEntry is one exposed port of a workspace (workspace/exposePort).
type previewEntry struct {
	id   string
	port int
	srv  *preview.Server
}

func (p *previewEntry) info(workspaceID string) protocol.Preview {
	return protocol.Preview{PreviewID: p.id, Port: p.port, URL: p.srv.URL(), WorkspaceID: workspaceID, BrowserURL: p.srv.BrowserURL()}
}

// ExposePort makes a server listening on port in the workspace's sandbox
// reachable from the host, on a loopback origin of its own
// (workspace/preview). A port that already has a preview answers it.
// Nothing needs to listen yet, nor the sandbox to run: each connection
// dials the sandbox that runs when it comes, so a preview outlives its
// server's restarts and the sandbox's.
func (w *Workspace) ExposePort(port int) (protocol.Preview, error) {
	if port < 1 || port > 65535 {
		return protocol.Preview{}, fmt.Errorf("%w: port %d is not a TCP port (1 to 65535)", ErrInvalid, port)
	}
	for _, l := range sandbox.Listeners {
		if int(l.Port) == port {
			return protocol.Preview{}, fmt.Errorf("%w: port %d is the daemon's %s listener in the sandbox, not a server of the workspace's", ErrInvalid, port, l.Name)
		}
	}
	w.pmu.Lock()
	defer w.pmu.Unlock()
	if w.previewsClosed {
		return protocol.Preview{}, ErrClosed
	}
	for _, p := range w.previews {
		if p.port == port {
			return p.info(w.id), nil
		}
	}
	if len(w.previews) >= MaxPreviews {
		return protocol.Preview{}, fmt.Errorf("%w: workspace %s has %d previews, the most it may have; close one (workspace/unexposePort)", ErrLimit, w.id, MaxPreviews)
	}
	var raw [6]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return protocol.Preview{}, fmt.Errorf("preview id: %w", err)
	}
	id := "pv-" + hex.EncodeToString(raw[:])
	srv, err := preview.Start(preview.Options{
		Dial:   func(ctx context.Context) (net.Conn, error) { return w.dialPort(ctx, port) },
		Port:   port,
		Name:   id + ".localhost",
		Logger: w.m.log.With("workspace", w.id, "port", port),
	})
	if err != nil {
		return protocol.Preview{}, fmt.Errorf("expose port %d of workspace %s: %w", port, w.id, err)
	}
	p := &previewEntry{id: id, port: port, srv: srv}
	w.previews = append(w.previews, p)
	w.m.log.Info("port exposed", "workspace", w.id, "port", port, "preview", p.id, "addr", srv.Addr().String())
	return p.info(w.id), nil
}

// dialPort opens one connection to port in the sandbox that runs now.
func (w *Workspace) dialPort(ctx context.Context, port int) (net.Conn, error) {
	sb := w.Sandbox()
	if sb == nil {
		return nil, fmt.Errorf("workspace %s has no sandbox running (start a kernel or a terminal in it): %w", w.id, preview.ErrNotListening)
	}
	c, err := sb.DialPort(ctx, port)
	if errors.Is(err, sandbox.ErrNotListening) {
		return nil, fmt.Errorf("%w: %w", preview.ErrNotListening, err)
	}
	return c, err
}

// Previews lists the workspace's previews, oldest first.
func (w *Workspace) Previews() []protocol.Preview {
	w.pmu.Lock()
	defer w.pmu.Unlock()
	out := make([]protocol.Preview, 0, len(w.previews))
	for _, p := range w.previews {
		out = append(out, p.info(w.id))
	}
	return out
}

// unexpose closes the preview id; false when the workspace has none.
func (w *Workspace) unexpose(id string) bool {
	w.pmu.Lock()
	i := slices.IndexFunc(w.previews, func(p *previewEntry) bool { return p.id == id })
	var p *previewEntry
	if i >= 0 {
		p = w.previews[i]
		w.previews = slices.Delete(w.previews, i, i+1)
	}
	w.pmu.Unlock()
	if p == nil {
		return false
	}
	_ = p.srv.Close()
	w.m.log.Info("port unexposed", "workspace", w.id, "port", p.port, "preview", id)
	return true
}

// closePreviews closes every preview; none can be made afterwards.
func (w *Workspace) closePreviews() {
	w.pmu.Lock()
	ps := w.previews
	w.previews, w.previewsClosed = nil, true
	w.pmu.Unlock()
	for _, p := range ps {
		_ = p.srv.Close()
	}
}

// Unexpose closes the preview id, of whichever open workspace has it.
func (m *Manager) Unexpose(id string) error {
	m.mu.Lock()
	ws := make([]*Workspace, 0, len(m.open))
	for _, w := range m.open {
		ws = append(ws, w)
	}
	m.mu.Unlock()
	for _, w := range ws {
		if w.unexpose(id) {
			return nil
		}
	}
	return fmt.Errorf("%w: preview %q (workspace/previews lists a workspace's)", ErrNotFound, id)
}
