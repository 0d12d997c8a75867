package protocol

// InitializeParams are the params of `initialize`.
type InitializeParams struct {
	ProtocolVersion int                 `json:"protocolVersion"`
	ClientInfo      *ClientInfo         `json:"clientInfo,omitempty"`
	Capabilities    *ClientCapabilities `json:"capabilities,omitempty"`
}

// ClientInfo names the client.
type ClientInfo struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// ClientCapabilities are what the client can do.
type ClientCapabilities struct {
	// InputRequest: the client answers the server-to-client request kernel/inputRequest.
	InputRequest bool `json:"inputRequest,omitempty"`
	// PositionEncoding is how the client counts cursorPos: "utf-32" (code
	// points, the default), "utf-16" or "utf-8".
	PositionEncoding PositionEncoding `json:"positionEncoding,omitempty"`
}

// PositionEncoding is the unit of cursorPos, cursorStart and cursorEnd.
type PositionEncoding string

// Position encodings (LSP 3.17 names).
const (
	PositionEncodingUTF32 PositionEncoding = "utf-32"
	PositionEncodingUTF16 PositionEncoding = "utf-16"
	PositionEncodingUTF8  PositionEncoding = "utf-8"
)

// InitializeResult is the result of `initialize`.
type InitializeResult struct {
	ProtocolVersion int                `json:"protocolVersion"`
	ServerInfo      ServerInfo         `json:"serverInfo"`
	Capabilities    ServerCapabilities `json:"capabilities"`
}

// ServerInfo names the server.
type ServerInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// ServerCapabilities are what this daemon, on this host, can provide.
type ServerCapabilities struct {
	Languages []LanguageCapability `json:"languages"`
	Sandbox   SandboxCapabilities  `json:"sandbox"`
	Limits    LimitCapabilities    `json:"limits"`
	// Extension: the position encoding the server will use for this
	// connection, echoing the client's choice (LSP 3.17).
	PositionEncoding PositionEncoding `json:"positionEncoding,omitempty"`
	// Interpreters are the interpreters found on the host: the system's,
	// and the versions installed by pyenv, uv, nvm, asdf and fnm (whose
	// versions are their directories' names). kernel/start's result says
	// which one a kernel runs. Extension.
	Interpreters []InterpreterInfo `json:"interpreters,omitempty"`
}

// LanguageCapability describes one kernel language.
type LanguageCapability struct {
	ID             string   `json:"id"`
	DisplayName    string   `json:"displayName"`
	Version        string   `json:"version"`
	FileExtensions []string `json:"fileExtensions"`
	Available      bool     `json:"available"`
	Reason         string   `json:"reason,omitempty"`
	// Unsupported are the methods of §4 the language cannot answer
	// (§8), e.g. "kernel/variables" for a Jupyter kernel (jupyter:NAME).
	Unsupported []string `json:"unsupported,omitempty"`
}

// SandboxCapabilities says which isolation layers this host provides.
type SandboxCapabilities struct {
	UserNamespaces   bool   `json:"userNamespaces"`
	Overlay          bool   `json:"overlay"`
	PidNamespace     bool   `json:"pidNamespace"`
	NetworkNamespace bool   `json:"networkNamespace"`
	Seccomp          bool   `json:"seccomp"`
	Landlock         bool   `json:"landlock"`
	Cgroups          bool   `json:"cgroups"`
	Reason           string `json:"reason,omitempty"`
}

// LimitCapabilities are the daemon-wide limits.
type LimitCapabilities struct {
	MaxCodeBytes               int64 `json:"maxCodeBytes"`
	MaxOutputBytesPerExecution int64 `json:"maxOutputBytesPerExecution"`
	MaxKernels                 int   `json:"maxKernels"`
	MaxPtys                    int   `json:"maxPtys"`
}

// InitializedParams are the params of `initialized` (always {}).
type InitializedParams struct{}

// CancelParams are the params of `$/cancelRequest`. ID is the JSON-RPC id
// (number or string) of the request to cancel.
type CancelParams struct {
	ID any `json:"id"`
}

// ProgressToken is a client-chosen `workDoneToken` (number or string).
type ProgressToken any

// ProgressParams are the params of `$/progress`.
type ProgressParams struct {
	Token ProgressToken `json:"token"`
	Value ProgressValue `json:"value"`
}

// ProgressKind is the phase of a progress report.
type ProgressKind string

// Progress kinds.
const (
	ProgressBegin  ProgressKind = "begin"
	ProgressReport ProgressKind = "report"
	ProgressEnd    ProgressKind = "end"
)

// ProgressValue is the value of a `$/progress` notification.
type ProgressValue struct {
	Kind       ProgressKind `json:"kind"`
	Title      string       `json:"title,omitempty"`
	Message    string       `json:"message,omitempty"`
	Percentage *int         `json:"percentage,omitempty"`
}

// Empty is the `{}` params or result of methods that carry nothing.
type Empty struct{}
