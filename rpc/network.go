package rpc

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
	"github.com/cellbox-dev/cellbox/workspace/network"
)

// WorkspaceSetNetwork is §9 workspace/setNetwork.
func (c *conn) WorkspaceSetNetwork(_ context.Context, p *protocol.WorkspaceSetNetworkParams) (*protocol.Empty, error) {
	if p.WorkspaceID == "" {
		return nil, missingField(protocol.MethodWorkspaceSetNetwork, "workspaceId")
	}
	if p.Network == "" {
		return nil, missingField(protocol.MethodWorkspaceSetNetwork, "network")
	}
	w, err := c.d.opts.Workspaces.Get(p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	mode, rules, err := workspace.ParseNetwork(p.Network, p.Allow)
	if err != nil {
		return nil, fmt.Errorf("invalid params for workspace/setNetwork: %w", err)
	}
	if err := w.SetNetwork(mode, rules); err != nil {
		return nil, err
	}
	c.seeWorkspace(w.ID())
	c.log.Info("workspace network set", "workspace", w.ID(), "network", mode, "rules", len(rules))
	return &protocol.Empty{}, nil
}

// WorkspaceInstall is §9 workspace/install.
func (c *conn) WorkspaceInstall(ctx context.Context, p *protocol.WorkspaceInstallParams) (*protocol.WorkspaceInstallResult, error) {
	if p.WorkspaceID == "" {
		return nil, missingField(protocol.MethodWorkspaceInstall, "workspaceId")
	}
	if err := workspace.CheckInstall(p.Manager, p.Packages); err != nil {
		return nil, fmt.Errorf("invalid params for workspace/install: %w", err)
	}
	w, err := c.d.opts.Workspaces.Get(p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	c.seeWorkspace(w.ID())
	prog := c.startProgress(p.WorkDoneToken, fmt.Sprintf("Installing with %s", p.Manager))
	res, err := w.Install(ctx, p.Manager, p.Packages, func(files int, bytes int64, name string) {
		prog.Report(fmt.Sprintf("%d files, %s downloaded: %s", files, byteSize(bytes), name), -1)
	})
	if err != nil {
		prog.End("failed")
		return nil, err
	}
	prog.End(fmt.Sprintf("installed %d packages (%d files from the cache, %s downloaded)", len(res.Installed), res.CacheHits, byteSize(res.DownloadedBytes)))
	return res, nil
}

// blockedSendTimeout bounds sending one network/blocked.
const blockedSendTimeout = 5 * time.Second

// byteSize says n bytes for a person.
func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// seeWorkspace marks the workspace as one this connection works in: it
// gets the workspace's network/blocked and workspace/ports.
//
// The first time, the workspace's listening ports are sent (to every
// connection that works in it, so that they stay in order with the
// changes): a client that joins learns of the servers already running.
func (c *conn) seeWorkspace(id string) {
	c.mu.Lock()
	if c.seen == nil {
		c.seen = make(map[string]struct{})
	}
	_, had := c.seen[id]
	c.seen[id] = struct{}{}
	c.mu.Unlock()
	if had {
		return
	}
	if w, err := c.d.opts.Workspaces.Get(id); err == nil {
		if ports := w.Ports(); len(ports) > 0 {
			c.d.WorkspacePorts(id, ports)
		}
	}
}

func (c *conn) sees(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.seen[id]
	return ok
}

// NetworkBlocked sends network/blocked to every connection that works in
// the workspace (opened it, started or attached to a kernel or terminal
// of it), with the execution that asked when one kernel of the workspace
// runs one. workspace.Options.OnBlocked calls it; it does not block.
func (d *Daemon) NetworkBlocked(workspaceID string, b network.Blocked) {
	p := protocol.NetworkBlockedParams{WorkspaceID: workspaceID, Host: b.Host, Port: b.Port, Reason: b.Reason}
	if rule := net.JoinHostPort(b.Host, strconv.Itoa(b.Port)); b.Port > 0 {
		if _, err := network.ParseRule(rule); err == nil {
			p.Rule = rule // only a rule workspace/setNetwork takes
		}
	}
	if kid, eid, ok := d.opts.Kernels.RunningIn(workspaceID); ok {
		p.KernelID, p.ExecutionID = kid, eid
	}
	d.notifySeers(workspaceID, protocol.MethodNetworkBlocked, p)
}

// seers are the connections that work in the workspace.
func (d *Daemon) seers(workspaceID string) []*conn {
	d.mu.Lock()
	defer d.mu.Unlock()
	var to []*conn
	for c := range d.conns {
		if c.sees(workspaceID) {
			to = append(to, c)
		}
	}
	return to
}

// notifySeers sends a notification about a workspace to every connection
// that works in it. Not on the caller's goroutine, and bounded: a client
// that stops reading loses these notifications, not the daemon's memory
// (a sandbox's network/blocked are 20 a second at most).
func (d *Daemon) notifySeers(workspaceID, method string, params any) {
	for _, c := range d.seers(workspaceID) {
		go func() {
			ctx, cancel := context.WithTimeout(c.ctx, blockedSendTimeout)
			defer cancel()
			if err := c.notify(ctx, method, params); err != nil {
				c.log.Debug("notification not sent", "method", method, "err", err)
			}
		}()
	}
}
