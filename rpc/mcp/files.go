package mcp

import (
	"context"
	"encoding/base64"
	"fmt"
	"path"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cellbox-dev/cellbox/protocol"
)

// readShowBytes bounds the text read_file returns; a bigger file (or
// range) comes with its head and a note saying how to read on.
const readShowBytes = 64 << 10

// imageTypes are the file extensions read_file returns as images.
var imageTypes = map[string]string{".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif"}

// readFile is the read_file tool.
func (s *session) readFile(ctx context.Context, _ *sdk.CallToolRequest, in ReadFileInput) (*sdk.CallToolResult, ReadFileOutput, error) {
	if in.StartLine < 0 || in.EndLine < 0 || in.EndLine > 0 && in.EndLine < in.StartLine {
		return nil, ReadFileOutput{}, inputErrorf("lines %d to %d: give 1 <= startLine <= endLine", in.StartLine, in.EndLine)
	}
	c, ws, err := s.connect(ctx)
	if err != nil {
		return nil, ReadFileOutput{}, err
	}
	mime := imageTypes[strings.ToLower(path.Ext(in.Path))]
	p := protocol.FsReadParams{WorkspaceID: ws.WorkspaceID, Path: in.Path}
	if mime != "" {
		p.Encoding = protocol.EncodingBase64
	}
	var r protocol.FsReadResult
	if err := c.Call(ctx, protocol.MethodFsRead, p, &r); err != nil {
		return nil, ReadFileOutput{}, fmt.Errorf("read %s: %w", in.Path, err)
	}
	out := ReadFileOutput{Path: in.Path, Size: r.Size}
	if r.Encoding == protocol.EncodingBase64 {
		data, err := base64.StdEncoding.DecodeString(r.Content)
		if err != nil {
			return nil, out, fmt.Errorf("read %s: the daemon's base64: %w", in.Path, err)
		}
		if mime == "" {
			out.Note = fmt.Sprintf("%s is binary (%d bytes, not UTF-8 text); run code to inspect it.", in.Path, r.Size)
			res, err := textResult(out)
			return res, out, err
		}
		f, err := fitImage(data, imageMaxSide, imageMaxBytes)
		if err != nil {
			return nil, out, inputErrorf("read %s: %v", in.Path, err)
		}
		out.MimeType = mime
		if f.width != f.origW {
			out.Note = fmt.Sprintf("Scaled from %dx%d to %dx%d.", f.origW, f.origH, f.width, f.height)
		}
		res, err := textResult(out, &sdk.ImageContent{Data: f.data, MIMEType: f.mime})
		return res, out, err
	}
	out.Content, out.StartLine, out.EndLine, out.TotalLines, out.Note = lineRange(r.Content, in.StartLine, in.EndLine, readShowBytes)
	text := out.Content
	if out.Note != "" {
		text += "\n[" + out.Note + "]"
	}
	// The text itself, raw, is what the model reads.
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, out, nil
}

// lineRange is lines start to end (1-based, inclusive; 0: the first or
// last) of text, bounded to max bytes on a line boundary, with a note
// saying how to read on when it was cut.
func lineRange(text string, start, end, max int) (out string, first, last, total int, note string) {
	lines := strings.SplitAfter(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	total = len(lines)
	if start <= 0 {
		start = 1
	}
	if end <= 0 || end > total {
		end = total
	}
	if start > total {
		return "", start, start - 1, total, fmt.Sprintf("the file has %d lines", total)
	}
	var b strings.Builder
	last = start - 1
	for i := start - 1; i < end; i++ {
		if b.Len()+len(lines[i]) > max {
			if b.Len() == 0 { // one huge line: its head
				b.WriteString(cutUTF8(lines[i][:max]))
				last = i + 1
				note = fmt.Sprintf("line %d is %d bytes; only its first %d are shown", i+1, len(lines[i]), b.Len())
				break
			}
			note = fmt.Sprintf("shown lines %d-%d of %d (the %d KiB bound); read on with startLine: %d", start, last, total, max>>10, last+1)
			break
		}
		b.WriteString(lines[i])
		last = i + 1
	}
	return b.String(), start, last, total, note
}

// writeFile is the write_file tool.
func (s *session) writeFile(ctx context.Context, _ *sdk.CallToolRequest, in WriteFileInput) (*sdk.CallToolResult, WriteFileOutput, error) {
	if (in.Content == nil) == (len(in.Edits) == 0) {
		return nil, WriteFileOutput{}, inputErrorf("give either content (the whole file) or edits (search/replace pairs), not both or neither")
	}
	c, ws, err := s.connect(ctx)
	if err != nil {
		return nil, WriteFileOutput{}, err
	}
	var content string
	if in.Content != nil {
		content = *in.Content
	} else {
		var r protocol.FsReadResult
		p := protocol.FsReadParams{WorkspaceID: ws.WorkspaceID, Path: in.Path, Encoding: protocol.EncodingUTF8}
		if err := c.Call(ctx, protocol.MethodFsRead, p, &r); err != nil {
			return nil, WriteFileOutput{}, fmt.Errorf("read %s to edit it: %w", in.Path, err)
		}
		if content, err = applyEdits(r.Content, in.Edits); err != nil {
			return nil, WriteFileOutput{}, inputErrorf("%s: %v; the file is unchanged", in.Path, err)
		}
	}
	s.autoCheckpoint(ctx, c, ws, "write_file")
	var w protocol.FsWriteResult
	p := protocol.FsWriteParams{WorkspaceID: ws.WorkspaceID, Path: in.Path, Content: content, CreateParents: true}
	if err := c.Call(ctx, protocol.MethodFsWrite, p, &w); err != nil {
		return nil, WriteFileOutput{}, fmt.Errorf("write %s: %w", in.Path, err)
	}
	out := WriteFileOutput{Path: in.Path, Size: w.Size}
	res, err := textResult(out)
	return res, out, err
}

// applyEdits applies exact search/replace edits in order; each search
// must occur exactly once in the text as the edits before left it.
func applyEdits(text string, edits []Edit) (string, error) {
	for i, e := range edits {
		if e.Search == "" {
			return "", fmt.Errorf("edit %d: search is empty", i+1)
		}
		switch n := strings.Count(text, e.Search); n {
		case 1:
			text = strings.Replace(text, e.Search, e.Replace, 1)
		case 0:
			return "", fmt.Errorf("edit %d: search text not found (%s); read the file and copy the text exactly, whitespace included", i+1, quote(e.Search))
		default:
			return "", fmt.Errorf("edit %d: search text occurs %d times (%s); include more of the surrounding text so it occurs once", i+1, n, quote(e.Search))
		}
	}
	return text, nil
}

// quote is s for an error message: quoted, its head when long.
func quote(s string) string {
	if len(s) > 80 {
		s = cutUTF8(s[:80]) + "…"
	}
	return fmt.Sprintf("%q", s)
}
