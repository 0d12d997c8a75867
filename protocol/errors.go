package protocol

import "fmt"

// ErrorCode is a JSON-RPC error code of PROTOCOL.md §7.
type ErrorCode int32

// Error codes of PROTOCOL.md §7.
const (
	CodeParseError           ErrorCode = -32700
	CodeInvalidRequest       ErrorCode = -32600
	CodeMethodNotFound       ErrorCode = -32601
	CodeInvalidParams        ErrorCode = -32602
	CodeInternalError        ErrorCode = -32603
	CodeServerNotInitialized ErrorCode = -32002
	CodeRequestCancelled     ErrorCode = -32800
	CodeNotFound             ErrorCode = -32001
	CodeSandboxUnavailable   ErrorCode = -32010
	CodePathOutsideWorkspace ErrorCode = -32011
	CodeLimitExceeded        ErrorCode = -32012
	CodeKernelDead           ErrorCode = -32013
	CodeLanguageUnavailable  ErrorCode = -32014
	CodeConflict             ErrorCode = -32015
)

// ErrorName is the snake_case name carried in ErrorData.ErrorCode.
func (c ErrorCode) ErrorName() string {
	switch c {
	case CodeParseError:
		return "parse_error"
	case CodeInvalidRequest:
		return "invalid_request"
	case CodeMethodNotFound:
		return "method_not_found"
	case CodeInvalidParams:
		return "invalid_params"
	case CodeInternalError:
		return "internal_error"
	case CodeServerNotInitialized:
		return "server_not_initialized"
	case CodeRequestCancelled:
		return "request_cancelled"
	case CodeNotFound:
		return "not_found"
	case CodeSandboxUnavailable:
		return "sandbox_unavailable"
	case CodePathOutsideWorkspace:
		return "path_outside_workspace"
	case CodeLimitExceeded:
		return "limit_exceeded"
	case CodeKernelDead:
		return "kernel_dead"
	case CodeLanguageUnavailable:
		return "language_unavailable"
	case CodeConflict:
		return "conflict"
	}
	return fmt.Sprintf("error_%d", int32(c))
}

// ErrorCodes lists every code of §7, in the order PROTOCOL.md gives them.
var ErrorCodes = []ErrorCode{
	CodeParseError, CodeInvalidRequest, CodeMethodNotFound, CodeInvalidParams, CodeInternalError,
	CodeServerNotInitialized, CodeRequestCancelled, CodeNotFound, CodeSandboxUnavailable,
	CodePathOutsideWorkspace, CodeLimitExceeded, CodeKernelDead, CodeLanguageUnavailable, CodeConflict,
}

// ErrorData is the `data` member of every cellbox JSON-RPC error.
type ErrorData struct {
	ErrorCode    string `json:"errorCode"`
	Detail       string `json:"detail"`
	RetryAfterMs int64  `json:"retryAfterMs,omitempty"`
}

// Error is a protocol error: a §7 code, a message a person can act on, and
// the detail for data.detail. Services return it (or wrap it) and rpc
// writes it to the wire as is.
type Error struct {
	Code         ErrorCode
	Message      string
	Detail       string
	RetryAfterMs int64
}

func (e *Error) Error() string { return e.Message }

// Errorf builds an *Error with a formatted message; Detail defaults to the message.
func Errorf(code ErrorCode, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	return &Error{Code: code, Message: msg, Detail: msg}
}
