package rpc

import (
	"context"
	"fmt"
	"sync"

	"github.com/cellbox-dev/cellbox/protocol"
)

// WorkspaceExposePort is §11 workspace/exposePort.
func (c *conn) WorkspaceExposePort(_ context.Context, p *protocol.WorkspaceExposePortParams) (*protocol.Preview, error) {
	if p.WorkspaceID == "" {
		return nil, missingField(protocol.MethodWorkspaceExposePort, "workspaceId")
	}
	if p.Protocol != "" && p.Protocol != protocol.PreviewHTTP {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for workspace/exposePort: protocol %q: only \"http\" (websockets included) is served", p.Protocol)
	}
	w, err := c.d.opts.Workspaces.Get(p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	c.seeWorkspace(w.ID())
	pv, err := w.ExposePort(p.Port)
	if err != nil {
		return nil, fmt.Errorf("workspace/exposePort: %w", err)
	}
	return &pv, nil
}

// WorkspaceUnexposePort is §11 workspace/unexposePort.
func (c *conn) WorkspaceUnexposePort(_ context.Context, p *protocol.PreviewIDParams) (*protocol.Empty, error) {
	if p.PreviewID == "" {
		return nil, missingField(protocol.MethodWorkspaceUnexposePort, "previewId")
	}
	if err := c.d.opts.Workspaces.Unexpose(p.PreviewID); err != nil {
		return nil, err
	}
	return &protocol.Empty{}, nil
}

// WorkspacePreviews is §11 workspace/previews.
func (c *conn) WorkspacePreviews(_ context.Context, p *protocol.WorkspacePreviewsParams) (*protocol.WorkspacePreviewsResult, error) {
	if p.WorkspaceID == "" {
		return nil, missingField(protocol.MethodWorkspacePreviews, "workspaceId")
	}
	w, err := c.d.opts.Workspaces.Get(p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	return &protocol.WorkspacePreviewsResult{Previews: w.Previews()}, nil
}

// WorkspacePorts sends workspace/ports to every connection that works in
// the workspace (as network/blocked). workspace.Options.OnPorts calls it;
// it does not block. Each notification is the whole set, so only the
// latest matters: they go out in order, one workspace's at a time, and a
// set that a newer one replaced before it was sent is not sent.
func (d *Daemon) WorkspacePorts(workspaceID string, ports []int) {
	if ports == nil {
		ports = []int{}
	}
	q := &d.ports
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.pending == nil {
		q.pending = make(map[string][]int)
		q.sending = make(map[string]bool)
	}
	q.pending[workspaceID] = ports
	if q.sending[workspaceID] {
		return
	}
	q.sending[workspaceID] = true
	go d.sendPorts(workspaceID)
}

// portsQueue holds the workspace/ports not sent yet, by workspace.
type portsQueue struct {
	mu      sync.Mutex
	pending map[string][]int
	sending map[string]bool // a sendPorts runs for the workspace
}

func (d *Daemon) sendPorts(workspaceID string) {
	q := &d.ports
	for {
		q.mu.Lock()
		ports, ok := q.pending[workspaceID]
		delete(q.pending, workspaceID)
		if !ok {
			delete(q.sending, workspaceID)
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		p := protocol.WorkspacePortsParams{WorkspaceID: workspaceID, Ports: ports}
		for _, c := range d.seers(workspaceID) {
			ctx, cancel := context.WithTimeout(c.ctx, blockedSendTimeout)
			if err := c.notify(ctx, protocol.MethodWorkspacePorts, p); err != nil {
				c.log.Debug("workspace/ports not sent", "err", err)
			}
			cancel()
		}
	}
}
