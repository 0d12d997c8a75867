package mcp

import (
	"context"
	"strconv"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The whole output of the newest executions, as resources a tool result
// links to:
//
//	cellbox://executions/ID/stdout, .../stderr     the streams (first 8 MiB each)
//	cellbox://executions/ID/images/N.png           an image, full size
//	cellbox://executions/ID/outputs/N.html         a rich output (html, svg, json, md)

const executionPrefix = "cellbox://executions/"

func (s *Server) addResources(srv *sdk.Server) {
	for _, t := range []*sdk.ResourceTemplate{
		{URITemplate: executionPrefix + "{id}/{stream}", Name: "execution-stream", Title: "An execution's stdout or stderr",
			Description: "The whole stdout or stderr of a run (its first 8 MiB), of the newest executions.", MIMEType: "text/plain"},
		{URITemplate: executionPrefix + "{id}/images/{file}", Name: "execution-image", Title: "An image a run displayed",
			Description: "A run's image at full size."},
		{URITemplate: executionPrefix + "{id}/outputs/{file}", Name: "execution-output", Title: "A rich output of a run",
			Description: "A run's HTML, SVG, JSON or Markdown output."},
	} {
		srv.AddResourceTemplate(t, s.readResource)
	}
}

// readResource serves the execution resources of the request's session.
func (s *Server) readResource(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	var h map[string][]string
	if req.Extra != nil {
		h = req.Extra.Header
	}
	sess, err := s.sessionFor(req.Session, h)
	if err != nil {
		return nil, err
	}
	rest, ok := strings.CutPrefix(uri, executionPrefix)
	if !ok {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	id, what, _ := strings.Cut(rest, "/")
	e, ok := sess.execution(id)
	if !ok {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	text := func(mime, t string) *sdk.ReadResourceResult {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: mime, Text: t}}}
	}
	switch what {
	case "stdout":
		return text("text/plain", e.stdout.whole()), nil
	case "stderr":
		return text("text/plain", e.stderr.whole()), nil
	}
	kind, file, _ := strings.Cut(what, "/")
	if i := strings.LastIndexByte(file, '.'); i > 0 {
		file = file[:i]
	}
	n, err := strconv.Atoi(file)
	if err != nil {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	for _, r := range e.rich {
		if r.n != n {
			continue
		}
		switch kind {
		case "images":
			data, mime := r.image, r.imageMime
			if data == nil {
				data, mime, _ = imageOf(r.data)
			}
			if data == nil {
				break
			}
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: mime, Blob: data}}}, nil
		case "outputs":
			if mime, _ := linkedMime(r.data); mime != "" {
				t, _ := bundleText(r.data, mime)
				return text(mime, t), nil
			}
		}
	}
	return nil, sdk.ResourceNotFoundError(uri)
}
