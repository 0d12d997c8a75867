package rpc

import (
	"context"
	"errors"
	"io/fs"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
)

// §3 files: each method hands off to the workspace's file operations,
// which go through its live mount (workspace/fsops_linux.go).

// FsRead is §3 fs/read.
func (c *conn) FsRead(_ context.Context, p *protocol.FsReadParams) (*protocol.FsReadResult, error) {
	w, err := c.fsWorkspace(protocol.MethodFsRead, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	res, err := w.FsRead(*p)
	return res, fsError(err)
}

// FsWrite is §3 fs/write.
func (c *conn) FsWrite(_ context.Context, p *protocol.FsWriteParams) (*protocol.FsWriteResult, error) {
	w, err := c.fsWorkspace(protocol.MethodFsWrite, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	res, err := w.FsWrite(*p)
	if err != nil {
		return nil, fsError(err)
	}
	return res, nil
}

// FsList is §3 fs/list.
func (c *conn) FsList(_ context.Context, p *protocol.FsListParams) (*protocol.FsListResult, error) {
	w, err := c.fsWorkspace(protocol.MethodFsList, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	res, err := w.FsList(*p)
	return res, fsError(err)
}

// FsStat is §3 fs/stat.
func (c *conn) FsStat(_ context.Context, p *protocol.FsStatParams) (*protocol.FileEntry, error) {
	w, err := c.fsWorkspace(protocol.MethodFsStat, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	res, err := w.FsStat(*p)
	return res, fsError(err)
}

// FsDelete is §3 fs/delete.
func (c *conn) FsDelete(_ context.Context, p *protocol.FsDeleteParams) (*protocol.Empty, error) {
	w, err := c.fsWorkspace(protocol.MethodFsDelete, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	if err := w.FsDelete(*p); err != nil {
		return nil, fsError(err)
	}
	return &protocol.Empty{}, nil
}

// FsRename is §3 fs/rename.
func (c *conn) FsRename(_ context.Context, p *protocol.FsRenameParams) (*protocol.Empty, error) {
	w, err := c.fsWorkspace(protocol.MethodFsRename, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	if err := w.FsRename(*p); err != nil {
		return nil, fsError(err)
	}
	return &protocol.Empty{}, nil
}

// FsMkdir is §3 fs/mkdir.
func (c *conn) FsMkdir(_ context.Context, p *protocol.FsMkdirParams) (*protocol.Empty, error) {
	w, err := c.fsWorkspace(protocol.MethodFsMkdir, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	if err := w.FsMkdir(*p); err != nil {
		return nil, fsError(err)
	}
	return &protocol.Empty{}, nil
}

func (c *conn) fsWorkspace(method, id string) (*workspace.Workspace, error) {
	if id == "" {
		return nil, missingField(method, "workspaceId")
	}
	return c.d.opts.Workspaces.Get(id)
}

// fsError answers a file that does not exist with -32001 NotFound (§7
// lists ids; a path is the file operations' id); the rest is classified
// by toProtocolError.
func fsError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, fs.ErrNotExist) && !errors.Is(err, workspace.ErrNotFound) {
		return &protocol.Error{Code: protocol.CodeNotFound, Message: err.Error(), Detail: err.Error()}
	}
	return err
}
