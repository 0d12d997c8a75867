package rpc

import (
	"context"
	"strconv"
	"sync"

	"go.lsp.dev/jsonrpc2"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/pty"
)

// §5 terminals: each method hands off to the pty.Manager; a connection is
// a pty.Sink of the terminals it opened or attached to.

func init() {
	// Keystrokes and resizes must reach the terminal in the order the
	// client sent them, so these run in wire order on the read goroutine.
	// Both return at once (input is queued, a resize is one ioctl), so
	// the read loop is never held up.
	ordered[protocol.MethodPtyWrite] = true
	ordered[protocol.MethodPtyResize] = true
}

var _ pty.Sink = (*conn)(nil)

// PtyOpen is §5 pty/open. The terminal's output may reach the client
// before this answer does.
func (c *conn) PtyOpen(ctx context.Context, p *protocol.PtyOpenParams) (*protocol.PtyOpenResult, error) {
	if p.KernelID != "" {
		// A terminal of a kernel runs in the kernel's workspace (pty cannot
		// import kernel; ARCHITECTURE.md).
		k, err := c.kernel(protocol.MethodPtyOpen, p.KernelID)
		if err != nil {
			return nil, err
		}
		if p.WorkspaceID != "" && p.WorkspaceID != k.Workspace().ID() {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for pty/open: kernel %s runs in workspace %s, not %s", p.KernelID, k.Workspace().ID(), p.WorkspaceID)
		}
		p.WorkspaceID = k.Workspace().ID()
		p.KernelID = ""
	}
	s, err := c.d.opts.Ptys.Open(ctx, *p, c)
	if err != nil {
		return nil, err
	}
	c.detachPtysOnClose()
	if p.WorkspaceID != "" {
		c.seeWorkspace(p.WorkspaceID)
	}
	return &protocol.PtyOpenResult{PtyID: s.ID()}, nil
}

// PtyWrite is §5 pty/write: the data is queued for the program, in order.
func (c *conn) PtyWrite(_ context.Context, p *protocol.PtyWriteParams) (*protocol.Empty, error) {
	s, err := c.pty(protocol.MethodPtyWrite, p.PtyID)
	if err != nil {
		return nil, err
	}
	if err := s.Write(p.Data); err != nil {
		return nil, err
	}
	return &protocol.Empty{}, nil
}

// PtyResize is §5 pty/resize.
func (c *conn) PtyResize(_ context.Context, p *protocol.PtyResizeParams) (*protocol.Empty, error) {
	s, err := c.pty(protocol.MethodPtyResize, p.PtyID)
	if err != nil {
		return nil, err
	}
	if err := s.Resize(p.Cols, p.Rows); err != nil {
		return nil, err
	}
	return &protocol.Empty{}, nil
}

// PtyAttach is §5 pty/attach: the kept scrollback from fromSeq is replayed
// (before this answer), then this connection gets the terminal's output.
func (c *conn) PtyAttach(_ context.Context, p *protocol.PtyAttachParams) (*protocol.PtyAttachResult, error) {
	s, err := c.pty(protocol.MethodPtyAttach, p.PtyID)
	if err != nil {
		return nil, err
	}
	res, err := s.Attach(c, p.FromSeq)
	if err != nil {
		return nil, err
	}
	c.detachPtysOnClose()
	return &res, nil
}

// PtyAck is §5 pty/ack, flow control.
func (c *conn) PtyAck(_ context.Context, p *protocol.PtyAckParams) (*protocol.Empty, error) {
	s, err := c.pty(protocol.MethodPtyAck, p.PtyID)
	if err != nil {
		return nil, err
	}
	if err := s.Ack(c, p.Seq); err != nil {
		return nil, err
	}
	return &protocol.Empty{}, nil
}

// PtyClose is §5 pty/close: the program's whole tree is killed; pty/exit
// goes out before this answer.
func (c *conn) PtyClose(ctx context.Context, p *protocol.PtyIDParams) (*protocol.Empty, error) {
	if p.PtyID == "" {
		return nil, missingField(protocol.MethodPtyClose, "ptyId")
	}
	if err := c.d.opts.Ptys.CloseSession(ctx, p.PtyID); err != nil {
		return nil, err
	}
	return &protocol.Empty{}, nil
}

func (c *conn) pty(method, id string) (*pty.Session, error) {
	if id == "" {
		return nil, missingField(method, "ptyId")
	}
	return c.d.opts.Ptys.Get(id)
}

// detachPtysOnClose makes the end of this connection detach it from every
// terminal; they run on (PROTOCOL.md §2 ownership).
func (c *conn) detachPtysOnClose() {
	c.onClose("pty", func() { c.d.opts.Ptys.DetachAll(c) })
}

// PtyOutput is pty.Sink: a pty/output notification. It is encoded here rather
// than by encoding/json: it is the hot path of terminal output, and its
// data is already valid UTF-8 (or base64).
func (c *conn) PtyOutput(p protocol.PtyOutputParams) error {
	bp := outputBufs.Get().(*[]byte)
	b := appendPtyOutput((*bp)[:0], &p)
	err := c.rpc.Notify(c.ctx, protocol.MethodPtyOutput, jsonrpc2.RawMessage(b))
	if cap(b) <= 512<<10 {
		*bp = b
		outputBufs.Put(bp)
	}
	return err
}

// PtyExit is pty.Sink: a pty/exit notification.
func (c *conn) PtyExit(p protocol.PtyExitParams) error {
	return c.notify(c.ctx, protocol.MethodPtyExit, p)
}

var outputBufs = sync.Pool{New: func() any { return new([]byte) }}

// appendPtyOutput appends p as JSON, as encoding/json would write it.
func appendPtyOutput(b []byte, p *protocol.PtyOutputParams) []byte {
	b = append(b, `{"ptyId":`...)
	b = appendJSONString(b, p.PtyID)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, p.Seq, 10)
	b = append(b, `,"data":`...)
	b = appendJSONString(b, p.Data)
	return append(b, '}')
}

// appendJSONString appends s, which must be valid UTF-8, as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch >= 0x20 && ch != '"' && ch != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch ch {
		case '"', '\\':
			b = append(b, '\\', ch)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[ch>>4], hex[ch&0xF])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
