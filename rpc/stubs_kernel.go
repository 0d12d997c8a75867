package rpc

import (
	"context"

	"github.com/cellbox-dev/cellbox/protocol"
)

func (c *conn) KernelStart(context.Context, *protocol.KernelStartParams) (*protocol.KernelStartResult, error) {
	return nil, notAvailable(protocol.MethodKernelStart)
}

func (c *conn) KernelExecute(context.Context, *protocol.KernelExecuteParams) (*protocol.ExecuteResult, error) {
	return nil, notAvailable(protocol.MethodKernelExecute)
}

func (c *conn) KernelInterrupt(context.Context, *protocol.KernelIDParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodKernelInterrupt)
}

func (c *conn) KernelRestart(context.Context, *protocol.KernelIDParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodKernelRestart)
}

func (c *conn) KernelShutdown(context.Context, *protocol.KernelIDParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodKernelShutdown)
}

func (c *conn) KernelAttach(context.Context, *protocol.KernelAttachParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodKernelAttach)
}

func (c *conn) KernelDetach(context.Context, *protocol.KernelIDParams) (*protocol.Empty, error) {
	return nil, notAvailable(protocol.MethodKernelDetach)
}

func (c *conn) KernelHistory(context.Context, *protocol.KernelHistoryParams) (*protocol.KernelHistoryResult, error) {
	return nil, notAvailable(protocol.MethodKernelHistory)
}

func (c *conn) KernelList(context.Context, *protocol.KernelListParams) (*protocol.KernelListResult, error) {
	return nil, notAvailable(protocol.MethodKernelList)
}

func (c *conn) KernelComplete(context.Context, *protocol.KernelCompleteParams) (*protocol.KernelCompleteResult, error) {
	return nil, notAvailable(protocol.MethodKernelComplete)
}

func (c *conn) KernelInspect(context.Context, *protocol.KernelInspectParams) (*protocol.KernelInspectResult, error) {
	return nil, notAvailable(protocol.MethodKernelInspect)
}

func (c *conn) KernelIsComplete(context.Context, *protocol.KernelIsCompleteParams) (*protocol.KernelIsCompleteResult, error) {
	return nil, notAvailable(protocol.MethodKernelIsComplete)
}

func (c *conn) KernelVariables(context.Context, *protocol.KernelIDParams) (*protocol.KernelVariablesResult, error) {
	return nil, notAvailable(protocol.MethodKernelVariables)
}
