package rpc

import (
	"context"

	"github.com/cellbox-dev/cellbox/protocol"
)

func (c *conn) PtyOpen(context.Context, *protocol.PtyOpenParams) (*protocol.PtyOpenResult, error) {
	return nil, notAvailable(protocol.MethodPtyOpen)
}

func (c *conn) PtyWrite(context.Context, *protocol.PtyWriteParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodPtyWrite)
}

func (c *conn) PtyResize(context.Context, *protocol.PtyResizeParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodPtyResize)
}

func (c *conn) PtyAttach(context.Context, *protocol.PtyAttachParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodPtyAttach)
}

func (c *conn) PtyAck(context.Context, *protocol.PtyAckParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodPtyAck)
}

func (c *conn) PtyClose(context.Context, *protocol.PtyIDParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodPtyClose)
}
