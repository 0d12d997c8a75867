package mcp

import (
	"context"
	"fmt"
	"path/filepath"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cellbox-dev/cellbox/protocol"
)

// The opt-in apps toolset (ToolsetApps): PROTOCOL.md §11 for agents.

// ExposePortInput is the input of expose_port.
type ExposePortInput struct {
	Port int `json:"port" jsonschema:"the TCP port a server listens on in the sandbox (1 to 65535)"`
}

// ExposePortOutput is the output of expose_port.
type ExposePortOutput struct {
	URL        string `json:"url" jsonschema:"the preview at its loopback address, with its token: what programs on this machine open (curl, python, node)"`
	BrowserURL string `json:"browserUrl,omitempty" jsonschema:"where the human opens it in a browser: the same server at a name of its own under .localhost (a site of its own), with its own token"`
	PreviewID  string `json:"previewId"`
	Port       int    `json:"port"`
}

// ExportAppInput is the input of export_app.
type ExportAppInput struct {
	Name    string   `json:"name" jsonschema:"the bundle's name (letters, digits, '.', '_', '-'): it is written to the human's exports directory"`
	Format  string   `json:"format,omitempty" jsonschema:"dir (default) or oci (adds an OCI image layout, on a base image found locally)"`
	Command []string `json:"command,omitempty" jsonschema:"the command that runs the app; default: detected (Flask, FastAPI, Streamlit, npm start, a main script)"`
	Port    int      `json:"port,omitempty" jsonschema:"the port the app serves on; default: detected"`
}

// ExportAppOutput is the output of export_app.
type ExportAppOutput struct {
	Path    string   `json:"path"`
	Files   int      `json:"files"`
	Bytes   int64    `json:"bytes"`
	Command []string `json:"command,omitempty"`
	App     string   `json:"app,omitempty"`
	Image   string   `json:"imageDigest,omitempty"`
}

func (s *Server) addAppTools(srv *sdk.Server) {
	no := false
	sdk.AddTool(srv, &sdk.Tool{Name: "expose_port", Title: "Preview a server",
		Description: "Make a server listening on a port in the sandbox reachable from the host: url for programs (a loopback origin of its own, with its token), browserUrl for the human's browser. Exposing a port again returns the same preview; nothing needs to listen yet.",
		Annotations: &sdk.ToolAnnotations{Title: "Preview a server", DestructiveHint: &no, IdempotentHint: true, OpenWorldHint: &no}},
		withSession(s, (*session).exposePort))
	sdk.AddTool(srv, &sdk.Tool{Name: "export_app", Title: "Export the app",
		Description: "Write the workspace (with its changes) as a runnable bundle in the human's exports directory: the app, requirements.txt or package.json from its installed packages, a Dockerfile, compose.yaml and a README; format oci adds an OCI image layout.",
		Annotations: &sdk.ToolAnnotations{Title: "Export the app", DestructiveHint: &no, OpenWorldHint: &no}},
		withSession(s, (*session).exportApp))
}

func (s *session) exposePort(ctx context.Context, _ *sdk.CallToolRequest, in ExposePortInput) (*sdk.CallToolResult, ExposePortOutput, error) {
	if in.Port < 1 || in.Port > 65535 {
		return nil, ExposePortOutput{}, inputErrorf("port %d is not a TCP port (1 to 65535)", in.Port)
	}
	c, ws, err := s.connect(ctx)
	if err != nil {
		return nil, ExposePortOutput{}, err
	}
	var pv protocol.Preview
	if err := c.Call(ctx, protocol.MethodWorkspaceExposePort, protocol.WorkspaceExposePortParams{WorkspaceID: ws.WorkspaceID, Port: in.Port}, &pv); err != nil {
		return nil, ExposePortOutput{}, fmt.Errorf("expose port %d: %w", in.Port, err)
	}
	out := ExposePortOutput{URL: pv.URL, BrowserURL: pv.BrowserURL, PreviewID: pv.PreviewID, Port: pv.Port}
	res, err := textResult(out)
	return res, out, err
}

func (s *session) exportApp(ctx context.Context, req *sdk.CallToolRequest, in ExportAppInput) (*sdk.CallToolResult, ExportAppOutput, error) {
	if !validBundleName(in.Name) {
		return nil, ExportAppOutput{}, inputErrorf("name %q: a bundle's name is 1 to 100 letters, digits, '.', '_' or '-', not starting with '.'", in.Name)
	}
	dest := filepath.Join(s.srv.opts.ExportDir, in.Name)
	format := protocol.ExportFormat(in.Format)
	if format == "" {
		format = protocol.ExportDir
	}
	c, ws, err := s.connect(ctx)
	if err != nil {
		return nil, ExportAppOutput{}, err
	}
	p := protocol.WorkspaceExportParams{WorkspaceID: ws.WorkspaceID, Dest: dest, Format: format, Command: in.Command, Port: in.Port}
	if token := req.Params.GetProgressToken(); token != nil && req.Session != nil {
		relay := newProgressRelay(ctx, req.Session, token)
		tok, done := s.progressToken(relay.report)
		defer func() { done(); relay.close() }()
		p.WorkDoneToken = tok
	}
	var r protocol.WorkspaceExportResult
	if err := c.Call(ctx, protocol.MethodWorkspaceExport, p, &r); err != nil {
		return nil, ExportAppOutput{}, fmt.Errorf("export to %s: %w", dest, err)
	}
	out := ExportAppOutput{Path: r.Path, Files: r.Files, Bytes: r.Bytes, Command: r.Command, App: r.App}
	if r.Image != nil {
		out.Image = r.Image.Digest
	}
	res, err := textResult(out)
	return res, out, err
}

// validBundleName: one path element an agent may name a bundle with.
func validBundleName(name string) bool {
	if name == "" || len(name) > 100 || name[0] == '.' {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
