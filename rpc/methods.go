package rpc

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/cellbox-dev/cellbox/protocol"
)

// handlerFunc decodes a request's params and calls one method of conn.
// release lets the read loop go on to the next message; it is called once
// the request's ordered part is done (by default right after decoding).
type handlerFunc func(c *conn, ctx context.Context, params []byte, release func()) (any, error)

// methodTable maps each client-to-server request of PROTOCOL.md to its
// protocol.Server method. Notifications (initialized, exit,
// $/cancelRequest) are handled in conn.handleNotification.
var methodTable = map[string]handlerFunc{}

// ordered marks methods that must finish, or reach a point where they call
// release themselves, before the next message is read: initialize and
// shutdown change what every later request may do, so they run inline in
// wire order (a client that pipelines daemon/stats behind initialize gets
// its answer, and exit after shutdown sees the shutdown). Every other
// method is released at once, after taking its turn on the resources it
// touches (order.go), so requests on one kernel or workspace keep wire
// order without holding up the read loop.
var ordered = map[string]bool{
	protocol.MethodInitialize: true,
	protocol.MethodShutdown:   true,
}

func add[P, R any](method string, f func(*conn, context.Context, *P) (R, error)) {
	methodTable[method] = func(c *conn, ctx context.Context, raw []byte, release func()) (any, error) {
		p := new(P)
		if err := decodeParams(raw, p); err != nil {
			return nil, invalidParams(method, err)
		}
		if ordered[method] {
			return f(c, ctx, p)
		}
		t := c.order.take(c.claimsOf(method, raw))
		release()
		defer t.done()
		if len(t.wait) > 0 {
			// A request waiting for its turn keeps it when the connection
			// drops, as running code does (§2); only $/cancelRequest or
			// shutdown takes it out of line.
			wctx, cancel := explicitCancel(ctx)
			err := t.await(wctx)
			cancel()
			if err != nil {
				return nil, err
			}
		}
		return f(c, context.WithValue(ctx, turnKey{}, t), p)
	}
}

// addNoParams registers a method that takes no params (shutdown).
func addNoParams(method string, f func(*conn, context.Context) error) {
	methodTable[method] = func(c *conn, ctx context.Context, _ []byte, release func()) (any, error) {
		if !ordered[method] {
			release()
		}
		return nil, f(c, ctx)
	}
}

func init() {
	add(protocol.MethodInitialize, (*conn).Initialize)
	addNoParams(protocol.MethodShutdown, (*conn).Shutdown)

	add(protocol.MethodWorkspaceOpen, (*conn).WorkspaceOpen)
	add(protocol.MethodWorkspaceList, (*conn).WorkspaceList)
	add(protocol.MethodWorkspaceChanges, (*conn).WorkspaceChanges)
	add(protocol.MethodWorkspaceDiff, (*conn).WorkspaceDiff)
	add(protocol.MethodWorkspaceCommit, (*conn).WorkspaceCommit)
	add(protocol.MethodWorkspaceDiscard, (*conn).WorkspaceDiscard)
	add(protocol.MethodWorkspaceCheckpoint, (*conn).WorkspaceCheckpoint)
	add(protocol.MethodWorkspaceCheckpoints, (*conn).WorkspaceCheckpoints)
	add(protocol.MethodWorkspaceRestore, (*conn).WorkspaceRestore)
	add(protocol.MethodWorkspaceDeleteCheckpoint, (*conn).WorkspaceDeleteCheckpoint)
	add(protocol.MethodWorkspaceClose, (*conn).WorkspaceClose)
	add(protocol.MethodWorkspaceExportGit, (*conn).WorkspaceExportGit)
	add(protocol.MethodWorkspaceExportPatch, (*conn).WorkspaceExportPatch)
	add(protocol.MethodWorkspaceFork, (*conn).WorkspaceFork)
	add(protocol.MethodWorkspaceExecutions, (*conn).WorkspaceExecutions)

	add(protocol.MethodFsRead, (*conn).FsRead)
	add(protocol.MethodFsWrite, (*conn).FsWrite)
	add(protocol.MethodFsList, (*conn).FsList)
	add(protocol.MethodFsStat, (*conn).FsStat)
	add(protocol.MethodFsDelete, (*conn).FsDelete)
	add(protocol.MethodFsRename, (*conn).FsRename)
	add(protocol.MethodFsMkdir, (*conn).FsMkdir)
	add(protocol.MethodFsWatch, (*conn).FsWatch)
	add(protocol.MethodFsUnwatch, (*conn).FsUnwatch)

	add(protocol.MethodKernelStart, (*conn).KernelStart)
	add(protocol.MethodKernelExecute, (*conn).KernelExecute)
	add(protocol.MethodKernelInterrupt, (*conn).KernelInterrupt)
	add(protocol.MethodKernelRestart, (*conn).KernelRestart)
	add(protocol.MethodKernelShutdown, (*conn).KernelShutdown)
	add(protocol.MethodKernelAttach, (*conn).KernelAttach)
	add(protocol.MethodKernelDetach, (*conn).KernelDetach)
	add(protocol.MethodKernelHistory, (*conn).KernelHistory)
	add(protocol.MethodKernelList, (*conn).KernelList)
	add(protocol.MethodKernelComplete, (*conn).KernelComplete)
	add(protocol.MethodKernelInspect, (*conn).KernelInspect)
	add(protocol.MethodKernelIsComplete, (*conn).KernelIsComplete)
	add(protocol.MethodKernelVariables, (*conn).KernelVariables)

	add(protocol.MethodPtyOpen, (*conn).PtyOpen)
	add(protocol.MethodPtyWrite, (*conn).PtyWrite)
	add(protocol.MethodPtyResize, (*conn).PtyResize)
	add(protocol.MethodPtyAttach, (*conn).PtyAttach)
	add(protocol.MethodPtyAck, (*conn).PtyAck)
	add(protocol.MethodPtyClose, (*conn).PtyClose)

	add(protocol.MethodDaemonStats, (*conn).DaemonStats)

	add(protocol.MethodWorkspaceSetNetwork, (*conn).WorkspaceSetNetwork)
	add(protocol.MethodWorkspaceInstall, (*conn).WorkspaceInstall)

	add(protocol.MethodWorkspaceExposePort, (*conn).WorkspaceExposePort)
	add(protocol.MethodWorkspaceUnexposePort, (*conn).WorkspaceUnexposePort)
	add(protocol.MethodWorkspacePreviews, (*conn).WorkspacePreviews)
	add(protocol.MethodWorkspaceExport, (*conn).WorkspaceExport)
}

// decodeParams decodes params into p. Absent or null params decode as {};
// params must otherwise be an object (by-name), not an array.
func decodeParams(raw []byte, p any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	if raw[0] != '{' {
		return errParamsNotObject
	}
	return json.Unmarshal(raw, p)
}

var errParamsNotObject = protocol.Errorf(protocol.CodeInvalidParams, "params must be a JSON object (by-name params)")
