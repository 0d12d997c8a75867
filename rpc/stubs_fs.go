package rpc

import (
	"context"

	"github.com/cellbox-dev/cellbox/protocol"
)

func (c *conn) FsRead(context.Context, *protocol.FsReadParams) (*protocol.FsReadResult, error) {
	return nil, notAvailable(protocol.MethodFsRead)
}

func (c *conn) FsWrite(context.Context, *protocol.FsWriteParams) (*protocol.FsWriteResult, error) {
	return nil, notAvailable(protocol.MethodFsWrite)
}

func (c *conn) FsList(context.Context, *protocol.FsListParams) (*protocol.FsListResult, error) {
	return nil, notAvailable(protocol.MethodFsList)
}

func (c *conn) FsStat(context.Context, *protocol.FsStatParams) (*protocol.FileEntry, error) {
	return nil, notAvailable(protocol.MethodFsStat)
}

func (c *conn) FsDelete(context.Context, *protocol.FsDeleteParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodFsDelete)
}

func (c *conn) FsRename(context.Context, *protocol.FsRenameParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodFsRename)
}

func (c *conn) FsMkdir(context.Context, *protocol.FsMkdirParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodFsMkdir)
}

func (c *conn) FsWatch(context.Context, *protocol.FsWatchParams) (*protocol.FsWatchResult, error) {
	return nil, notAvailable(protocol.MethodFsWatch)
}

func (c *conn) FsUnwatch(context.Context, *protocol.FsUnwatchParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodFsUnwatch)
}
