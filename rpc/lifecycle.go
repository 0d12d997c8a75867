package rpc

import (
	"context"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Initialize is §2 initialize: it checks the protocol version and the
// client's position encoding, and reports what this host really provides.
func (c *conn) Initialize(ctx context.Context, p *protocol.InitializeParams) (*protocol.InitializeResult, error) {
	switch p.ProtocolVersion {
	case protocol.Version:
	case 0:
		return nil, missingField(protocol.MethodInitialize, "protocolVersion")
	default:
		return nil, protocol.Errorf(protocol.CodeInvalidParams,
			"invalid params for initialize: field \"protocolVersion\" is %d, but this server speaks protocol version %d",
			p.ProtocolVersion, protocol.Version)
	}
	var caps protocol.ClientCapabilities
	if p.Capabilities != nil {
		caps = *p.Capabilities
	}
	switch caps.PositionEncoding {
	case "":
		caps.PositionEncoding = protocol.PositionEncodingUTF32
	case protocol.PositionEncodingUTF32, protocol.PositionEncodingUTF16, protocol.PositionEncodingUTF8:
	default:
		return nil, protocol.Errorf(protocol.CodeInvalidParams,
			"invalid params for initialize: field \"capabilities.positionEncoding\" must be \"utf-32\", \"utf-16\" or \"utf-8\", got %q",
			caps.PositionEncoding)
	}
	serverCaps := c.d.opts.Capabilities(ctx)
	serverCaps.PositionEncoding = caps.PositionEncoding

	c.mu.Lock()
	if c.state != stateNew { // a concurrent initialize got there first
		c.mu.Unlock()
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, "initialize was already called on this connection")
	}
	c.state = stateInitialized
	c.caps = caps
	c.mu.Unlock()

	client := "unknown"
	if p.ClientInfo != nil {
		client = p.ClientInfo.Name + " " + p.ClientInfo.Version
	}
	c.log.Info("client initialized", "client", client, "position_encoding", caps.PositionEncoding)
	return &protocol.InitializeResult{
		ProtocolVersion: protocol.Version,
		ServerInfo:      protocol.ServerInfo{Name: "cellbox", Version: c.d.opts.Version},
		Capabilities:    serverCaps,
	}, nil
}

// Initialized is the §2 initialized notification; nothing waits for it.
func (c *conn) Initialized(context.Context, *protocol.InitializedParams) error { return nil }

// Shutdown is §2 shutdown: this connection's kernels, ptys and watches stop;
// workspaces stay on disk. Afterwards only exit is accepted. Requests still
// in flight get 200 ms to finish, then are cancelled (-32800); all are
// answered before shutdown is.
func (c *conn) Shutdown(ctx context.Context) error {
	c.mu.Lock()
	c.state = stateShutdown
	for _, fl := range c.inflight {
		if fl.cancel != nil && ctx.Value(inflightKey{}) == fl {
			fl.self = true
		}
	}
	c.mu.Unlock()
	c.drain(200*time.Millisecond, 5*time.Second)
	c.d.opts.Ptys.CloseOpenedBy(ctx, c)
	c.d.watches.closeConn(c)
	c.d.opts.Kernels.ShutdownOpenedBy(ctx, c)
	c.log.Info("client requested shutdown")
	return nil
}

// Exit is the §2 exit notification: under stdio the process exits, 0 after
// shutdown and 1 otherwise; a websocket connection is closed with the same
// outcome in its close reason.
func (c *conn) Exit(context.Context) error {
	c.mu.Lock()
	code := 1
	if c.state == stateShutdown {
		code = 0
	}
	already := c.exited
	c.exited = true
	c.mu.Unlock()
	if !already && c.onExit != nil {
		// Answers still being written go out before the process exits.
		c.waitAnswered(0, time.After(5*time.Second))
		c.onExit(code)
	}
	return nil
}

// DaemonStats is §6 daemon/stats.
func (c *conn) DaemonStats(context.Context, *protocol.DaemonStatsParams) (*protocol.DaemonStats, error) {
	s := c.d.Stats()
	return &s, nil
}
