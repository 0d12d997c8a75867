package protocol

// §11 Apps: previews of servers that run in a workspace's sandbox, and a
// workspace exported as a runnable bundle and image.

// Extension notification of §11: not in PROTOCOL.md, listed in the
// README's protocol section.
const (
	// MethodWorkspacePorts says which TCP ports servers of a workspace's
	// sandbox listen on, whenever that set changes, so that a client can
	// offer a preview of a server that has just started. Extension;
	// notification, server to client.
	MethodWorkspacePorts = "workspace/ports"
)

// PreviewProtocol is what a preview serves: "http" (websockets included).
type PreviewProtocol string

// Preview protocols.
const (
	PreviewHTTP PreviewProtocol = "http"
)

// WorkspaceExposePortParams are the params of `workspace/exposePort`.
type WorkspaceExposePortParams struct {
	WorkspaceID string `json:"workspaceId"`
	// Port is the TCP port a server listens on inside the sandbox
	// (1 to 65535). Nothing need listen yet: the preview answers 502 until
	// a server does.
	Port int `json:"port"`
	// Protocol is "http", the default and only one.
	Protocol PreviewProtocol `json:"protocol,omitempty"`
}

// Preview is a server of a workspace's sandbox reachable from the host:
// the result of `workspace/exposePort` and an entry of
// `workspace/previews`. Exposing a port that already has a preview
// answers that preview.
type Preview struct {
	PreviewID string `json:"previewId"`
	// Port is the port inside the sandbox.
	Port int `json:"port"`
	// URL is where it is reached from the host: a loopback origin of its
	// own (never the IDE's), with the preview's token in the query; the
	// first request with it sets a cookie for that origin only.
	URL string `json:"url"`
	// WorkspaceID is the workspace the server runs in. Extension.
	WorkspaceID string `json:"workspaceId,omitempty"`
	// BrowserURL is where a browser opens it: the same server at a name
	// of its own under .localhost (http://pv-ID.localhost:PORT/), which
	// browsers resolve to the loopback themselves, with a token of its
	// own. A site of its own: its cookies are shared with no other preview
	// and nothing else served on the loopback. Programs, whose resolvers
	// do not know such names, use URL. Extension.
	BrowserURL string `json:"browserUrl,omitempty"`
}

// PreviewIDParams name one preview (`workspace/unexposePort`).
type PreviewIDParams struct {
	PreviewID string `json:"previewId"`
}

// WorkspacePreviewsParams are the params of `workspace/previews`.
type WorkspacePreviewsParams struct {
	WorkspaceID string `json:"workspaceId"`
}

// WorkspacePreviewsResult is the result of `workspace/previews`.
type WorkspacePreviewsResult struct {
	Previews []Preview `json:"previews"`
}

// WorkspacePortsParams are the params of the `workspace/ports`
// notification (extension): the TCP ports servers listen on in the
// workspace's sandbox (on any address of its own network namespace),
// ascending, sent when the set changes. A sandbox with the host's network
// sends none.
type WorkspacePortsParams struct {
	WorkspaceID string `json:"workspaceId"`
	Ports       []int  `json:"ports"`
}

// ExportFormat is what `workspace/export` writes.
type ExportFormat string

// Export formats.
const (
	// ExportDir is a directory: the app, its requirements, a Dockerfile,
	// a compose.yaml and a README.
	ExportDir ExportFormat = "dir"
	// ExportOCI is the directory plus an OCI image layout of it (under
	// image/ in the destination).
	ExportOCI ExportFormat = "oci"
)

// WorkspaceExportParams are the params of `workspace/export`.
type WorkspaceExportParams struct {
	WorkspaceID string `json:"workspaceId"`
	// Dest is an absolute host path: a directory that does not exist or
	// is empty.
	Dest   string       `json:"dest"`
	Format ExportFormat `json:"format"`
	// Command is the command that runs the app; absent: detected (Flask,
	// FastAPI/uvicorn, Streamlit, `npm start`, a main script).
	Command []string `json:"command,omitempty"`
	// Base is an OCI image layout directory to build the image on
	// (`format: "oci"`), optionally with ":tag"; absent: one found
	// locally. Extension.
	Base string `json:"base,omitempty"`
	// Port is the port the app serves on, for the Dockerfile's EXPOSE and
	// compose.yaml; absent: detected or the framework's default.
	// Extension.
	Port          int           `json:"port,omitempty"`
	WorkDoneToken ProgressToken `json:"workDoneToken,omitempty"`
}

// WorkspaceExportResult is the result of `workspace/export`.
type WorkspaceExportResult struct {
	// Path is the bundle's directory.
	Path string `json:"path"`
	// Files and Bytes count what was written.
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// Image is the OCI image, with format "oci".
	Image *ExportImage `json:"image,omitempty"`
	// Command is the command the bundle runs, and App what it was found
	// to be ("flask", "fastapi", "streamlit", "npm", "python", "node", or
	// "custom" when given). Extension.
	Command []string `json:"command,omitempty"`
	App     string   `json:"app,omitempty"`
}

// ExportImage is the OCI image an export wrote.
type ExportImage struct {
	// Digest is the image manifest's digest ("sha256:...").
	Digest string `json:"digest"`
	// Layout is the OCI image layout's directory. Extension.
	Layout string `json:"layout,omitempty"`
	// Base names the base image it was built on. Extension.
	Base string `json:"base,omitempty"`
}
