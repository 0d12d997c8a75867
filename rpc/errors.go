package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"

	"go.lsp.dev/jsonrpc2"

	"github.com/cellbox-dev/cellbox/kernel"
	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/pty"
	"github.com/cellbox-dev/cellbox/workspace"
)

// Sentinel errors of this package.
var (
	errNotInitialized = protocol.Errorf(protocol.CodeServerNotInitialized, "server not initialized: send initialize first")
	errShuttingDown   = protocol.Errorf(protocol.CodeInvalidRequest, "server is shutting down: after shutdown only exit is accepted")
	errCancelled      = protocol.Errorf(protocol.CodeRequestCancelled, "request cancelled")
)

// wireError is the JSON form of a JSON-RPC error object with cellbox's data.
type wireError struct {
	Code    int32              `json:"code"`
	Message string             `json:"message"`
	Data    protocol.ErrorData `json:"data"`
}

func newWireError(code protocol.ErrorCode, msg, detail string, retryAfterMs int64) *wireError {
	return &wireError{Code: int32(code), Message: msg, Data: protocol.ErrorData{
		ErrorCode: code.ErrorName(), Detail: detail, RetryAfterMs: retryAfterMs,
	}}
}

// toProtocolError classifies any error a handler returns. Only rpc maps
// errors to JSON-RPC codes (STYLE.md 4).
func toProtocolError(err error) *protocol.Error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		if pe.Message != err.Error() {
			// Wrapped with context: keep the code, show the whole message.
			cp := *pe
			cp.Message = err.Error()
			return &cp
		}
		return pe
	}
	if errors.Is(err, context.Canceled) {
		return errCancelled
	}
	for _, m := range []struct {
		err  error
		code protocol.ErrorCode
	}{
		{workspace.ErrNotFound, protocol.CodeNotFound},
		{workspace.ErrInvalid, protocol.CodeInvalidParams},
		{workspace.ErrLimit, protocol.CodeLimitExceeded},
		{workspace.ErrSandboxUnavailable, protocol.CodeSandboxUnavailable},
		{workspace.ErrClosed, protocol.CodeNotFound},
		{workspace.ErrPathOutside, protocol.CodePathOutsideWorkspace},
		{workspace.ErrConflict, protocol.CodeConflict},
		{workspace.ErrInstallFailed, protocol.CodeInvalidParams},
		{kernel.ErrNotFound, protocol.CodeNotFound},
		{kernel.ErrDead, protocol.CodeKernelDead},
		{kernel.ErrLanguage, protocol.CodeLanguageUnavailable},
		{kernel.ErrLimit, protocol.CodeLimitExceeded},
		{kernel.ErrInvalid, protocol.CodeInvalidParams},
		{kernel.ErrClosed, protocol.CodeInvalidRequest},
		{pty.ErrNotFound, protocol.CodeNotFound},
		{pty.ErrExited, protocol.CodeNotFound},
		{pty.ErrClosed, protocol.CodeNotFound},
		{pty.ErrInvalid, protocol.CodeInvalidParams},
		{pty.ErrStart, protocol.CodeInvalidParams},
		{pty.ErrLimit, protocol.CodeLimitExceeded},
	} {
		if errors.Is(err, m.err) {
			return &protocol.Error{Code: m.code, Message: err.Error(), Detail: err.Error()}
		}
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		// The state dir's (or the project's) filesystem is full: a limit
		// of the host, which freeing space lifts, not a fault of cellbox.
		return &protocol.Error{Code: protocol.CodeLimitExceeded, Message: err.Error(), Detail: err.Error()}
	}
	return &protocol.Error{Code: protocol.CodeInternalError, Message: "internal error: " + err.Error(), Detail: err.Error()}
}

// toJSONRPC converts err to the library's wire error, with data filled.
func toJSONRPC(err error) *jsonrpc2.Error {
	pe := toProtocolError(err)
	detail := pe.Detail
	if detail == "" {
		detail = pe.Message
	}
	data, merr := marshal(protocol.ErrorData{ErrorCode: pe.Code.ErrorName(), Detail: detail, RetryAfterMs: pe.RetryAfterMs})
	if merr != nil {
		data = nil
	}
	return &jsonrpc2.Error{Code: jsonrpc2.Code(pe.Code), Message: pe.Message, Data: jsonrpc2.RawMessage(data)}
}

// invalidParams turns a params decoding error into -32602 naming the field.
func invalidParams(method string, err error) *protocol.Error {
	var (
		te *json.UnmarshalTypeError
		se *json.SyntaxError
	)
	var msg string
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			msg = fmt.Sprintf("invalid params for %s: expected an object, got %s", method, te.Value)
		} else {
			msg = fmt.Sprintf("invalid params for %s: field %q must be %s, got %s", method, field, jsonKind(te.Type.Kind().String()), te.Value)
		}
	case errors.As(err, &se):
		msg = fmt.Sprintf("invalid params for %s: %v", method, se)
	default:
		msg = fmt.Sprintf("invalid params for %s: %v", method, err)
	}
	return protocol.Errorf(protocol.CodeInvalidParams, "%s", msg)
}

// missingField is the -32602 for a required field that is absent or empty.
func missingField(method, field string) *protocol.Error {
	return protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: field %q is required", method, field)
}

func jsonKind(goKind string) string {
	switch {
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"):
		return "an integer"
	case strings.HasPrefix(goKind, "float"):
		return "a number"
	case goKind == "string":
		return "a string"
	case goKind == "bool":
		return "a boolean"
	case goKind == "slice", goKind == "array":
		return "an array"
	case goKind == "map", goKind == "struct", goKind == "ptr":
		return "an object"
	}
	return "of type " + goKind
}

var encPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// marshal encodes v as compact JSON without HTML escaping and returns an
// owned copy.
func marshal(v any) (json.RawMessage, error) {
	buf := encPool.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 64<<10 {
			buf.Reset()
			encPool.Put(buf)
		}
	}()
	buf.Reset()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	return append(json.RawMessage(nil), b...), nil
}
