package mcp

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cellbox-dev/cellbox/protocol"
)

const (
	defaultWait = 30 * time.Second
	maxWait     = 300 * time.Second
	// progressEvery is how often a waiting run or poll sends MCP progress
	// (PROTOCOL.md §10: at least every 2 s).
	progressEvery = time.Second
	// stopWait is how long stop waits for an interrupted execution to end.
	stopWait = 5 * time.Second
)

// waitFor is waitS as a duration: the default when absent, at most maxWait.
func waitFor(waitS float64) time.Duration {
	if waitS <= 0 || math.IsNaN(waitS) {
		return defaultWait
	}
	return min(time.Duration(waitS*float64(time.Second)), maxWait)
}

// run is the run tool: files written, then kernel/execute with an
// automatic checkpoint, waited for up to waitS.
func (s *session) run(ctx context.Context, req *sdk.CallToolRequest, in RunInput) (*sdk.CallToolResult, RunOutput, error) {
	lang := in.Language
	if lang == "" {
		lang = s.srv.opts.Language
	}
	if in.TimeoutS < 0 || math.IsNaN(in.TimeoutS) {
		return nil, RunOutput{}, inputErrorf("timeoutS %v: give a number of seconds above 0", in.TimeoutS)
	}
	if len(in.Files) > 0 {
		c, ws, err := s.connect(ctx)
		if err != nil {
			return nil, RunOutput{}, err
		}
		s.autoCheckpoint(ctx, c, ws, "run")
		paths := make([]string, 0, len(in.Files))
		for p := range in.Files {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		for _, p := range paths {
			w := protocol.FsWriteParams{WorkspaceID: ws.WorkspaceID, Path: p, Content: in.Files[p], CreateParents: true}
			if err := c.Call(ctx, protocol.MethodFsWrite, w, nil); err != nil {
				return nil, RunOutput{}, fmt.Errorf("write %s: %w", p, err)
			}
		}
	}
	c, kernelID, note, err := s.kernel(ctx, lang)
	if err != nil {
		return nil, RunOutput{}, err
	}
	e := newExecution(newExecutionID(), kernelID, lang)
	e.note = note
	p := protocol.KernelExecuteParams{KernelID: kernelID, Code: in.Code, ExecutionID: e.id, Stdin: in.Stdin,
		TimeoutMs: int64(math.Ceil(in.TimeoutS * 1000)), Checkpoint: true}
	if err := s.addExecution(e); err != nil {
		return nil, RunOutput{}, err
	}
	go func() {
		defer s.wg.Done()
		// Not the tool call's context: the code runs on after run answers
		// "running", until it ends or stop interrupts it.
		var res protocol.ExecuteResult
		err := c.Call(context.Background(), protocol.MethodKernelExecute, p, &res)
		if err != nil {
			e.finish(nil, err)
			if pe, ok := asProtocolError(err); ok && (pe.Code == protocol.CodeKernelDead || pe.Code == protocol.CodeNotFound) {
				s.forgetKernel(kernelID, "kernel "+kernelID+": "+pe.Message)
			}
			return
		}
		e.finish(&res, nil)
	}()
	s.wait(ctx, req, e, waitFor(in.WaitS))
	return s.result(e)
}

// poll is the poll tool.
func (s *session) poll(ctx context.Context, req *sdk.CallToolRequest, in PollInput) (*sdk.CallToolResult, RunOutput, error) {
	e, ok := s.execution(in.ExecutionID)
	if !ok {
		return nil, RunOutput{}, inputErrorf("unknown executionId %q: this server keeps its newest %d executions (ids come from run)", in.ExecutionID, keptExecutions)
	}
	s.wait(ctx, req, e, waitFor(in.WaitS))
	return s.result(e)
}

// wait waits up to d for e to end, sending MCP progress every
// progressEvery when the request carries a progress token: the last line
// the code printed is the message. It returns early when ctx ends (the
// code runs on).
func (s *session) wait(ctx context.Context, req *sdk.CallToolRequest, e *execution, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	var token any
	if req.Params != nil {
		token = req.Params.GetProgressToken()
	}
	n := 0
	for {
		select {
		case <-e.done:
			return
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
			if token == nil || req.Session == nil {
				continue
			}
			n++
			msg := e.lastLine()
			if msg == "" {
				msg = fmt.Sprintf("running for %d s", int(time.Since(e.started).Seconds()))
			}
			if err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token, Progress: float64(n), Message: msg}); err != nil {
				s.log.Debug("send progress", "err", err)
			}
		}
	}
}

// result is e's tool result: what is new since the last run or poll, and
// the end once it has ended. A daemon error of the execution is a tool
// error.
func (s *session) result(e *execution) (*sdk.CallToolResult, RunOutput, error) {
	out, content, err := e.render()
	if err != nil {
		return nil, out, err
	}
	res, err := textResult(out, content...)
	return res, out, err
}

// render builds e's output since the last render and marks it shown.
// Images are fitted after e's lock is released: decoding and scaling a
// big one takes a while, and the daemon connection's reader waits on that
// lock to append output.
func (e *execution) render() (RunOutput, []sdk.Content, error) {
	out, images, links, notes, err := e.take()
	if err != nil {
		return out, nil, err
	}
	var content []sdk.Content
	for _, im := range images {
		if len(out.Images) >= imagesShown {
			content = append(content, resourceLink(im.uri, im.mime, len(im.data), "image"))
			continue
		}
		f, err := fitImage(im.data, imageMaxSide, imageMaxBytes)
		if err != nil {
			notes = append(notes, fmt.Sprintf("image %s: %v", im.uri, err))
			continue
		}
		out.Images = append(out.Images, ImageInfo{URI: im.uri, MimeType: f.mime, Width: f.width, Height: f.height, OriginalWidth: f.origW, OriginalHeight: f.origH})
		content = append(content, &sdk.ImageContent{Data: f.data, MIMEType: f.mime},
			resourceLink(im.uri, im.mime, len(im.data), "full-size image"))
	}
	content = append(content, links...)
	out.Note = strings.Join(notes, " ")
	return out, content, nil
}

// pendingImage is an image of a render, to fit.
type pendingImage struct {
	uri, mime string
	data      []byte
}

// take collects, under e's lock, what is new since the last render (and
// the end, once ended), and marks it shown.
func (e *execution) take() (out RunOutput, images []pendingImage, links []sdk.Content, notes []string, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	out = RunOutput{ExecutionID: e.id, Status: "running", FilesChanged: []FileChange{}, Images: []ImageInfo{}}
	done := !e.running()
	if done && e.err != nil {
		return out, nil, nil, nil, fmt.Errorf("execution %s: %w", e.id, e.err)
	}
	if e.note != "" && !e.noteShown {
		notes = append(notes, e.note)
		e.noteShown = true
	}
	out.Stdout, e.shownOut = showStream(&e.stdout, e.shownOut, executionURI(e.id, "stdout"))
	out.Stderr, e.shownErr = showStream(&e.stderr, e.shownErr, executionURI(e.id, "stderr"))
	displays := 0
	for i, r := range e.rich {
		if r.cleared || i < e.shownRich && !r.dirty {
			continue
		}
		r.dirty = false
		if text, ok := bundleText(r.data, "text/plain"); ok {
			if r.kind == protocol.OutputKindResult {
				out.Result, _ = headTail(stripANSI(text), resultShowBytes, "")
			} else if displays < displaysShowBytes {
				t, _ := headTail(stripANSI(text), displayShowBytes, "")
				out.Displays = append(out.Displays, t)
				displays += len(t)
			}
		} else if _, ok := r.data["application/json"]; ok && r.kind != protocol.OutputKindResult {
			if t, _ := bundleText(r.data, "application/json"); len(t) <= inlineJSONBytes {
				out.Displays = append(out.Displays, t)
				displays += len(t)
			}
		}
		if r.image == nil {
			r.image, r.imageMime, _ = imageOf(r.data)
		}
		if r.image != nil {
			uri := executionURI(e.id, fmt.Sprintf("images/%d.%s", r.n, imageExt(r.imageMime)))
			images = append(images, pendingImage{uri: uri, mime: r.imageMime, data: r.image})
		}
		if mime, ext := linkedMime(r.data); mime != "" {
			t, _ := bundleText(r.data, mime)
			uri := executionURI(e.id, fmt.Sprintf("outputs/%d.%s", r.n, ext))
			out.Links = append(out.Links, LinkInfo{URI: uri, MimeType: mime, Bytes: len(t)})
			links = append(links, resourceLink(uri, mime, len(t), mime+" output"))
		}
	}
	e.shownRich = len(e.rich)
	if e.richDropped > 0 {
		notes = append(notes, fmt.Sprintf("%d rich outputs were not kept (over %d outputs or %d MiB).", e.richDropped, richKeepCount, richKeepBytes>>20))
	}
	if !done {
		out.DurationMs = time.Since(e.started).Milliseconds()
		notes = append(notes, fmt.Sprintf("Still running after %.0f s: poll {executionId: %q} for more, or stop it.", time.Since(e.started).Seconds(), e.id))
		return out, images, links, notes, nil
	}
	r := e.res
	out.Status = string(r.Status)
	out.ExecutionCount = r.ExecutionCount
	out.DurationMs = r.DurationMs
	out.Checkpoint = r.Checkpoint
	out.OutputTruncated = r.OutputTruncated
	out.FilesChangedMore = r.FilesChangedMore
	for _, f := range r.FilesChanged {
		out.FilesChanged = append(out.FilesChanged, FileChange{Path: f.Path, Kind: string(f.Kind)})
	}
	out.Error = cleanError(r.Error, tracebackShowBytes)
	if r.Status == protocol.ExecutionStatusTimeout && r.Error != nil && r.Error.Ename == "KernelRestarted" {
		notes = append(notes, "The kernel was restarted to end it: variables and imports of earlier runs are gone.")
	}
	return out, images, links, notes, nil
}

// showStream is a stream's text from shown on, for a model: carriage
// returns collapsed, terminal escapes removed, bounded to head and tail.
func showStream(c *capture, shown int64, uri string) (string, int64) {
	text, gap := c.window(shown)
	if gap > 0 {
		// Not kept: the head of the window and the kept tail, and a line
		// between them for the bytes in neither.
		head, tail := text[:len(text)-len(c.tail)], text[len(text)-len(c.tail):]
		text = head + "\n" + omittedNote(0, int(gap), "") + "\n" + tail
	}
	shownText, _ := headTail(stripANSI(collapseCR(text)), streamShowBytes, uri)
	return shownText, c.total
}

func imageExt(mime string) string {
	switch mime {
	case "image/jpeg":
		return "jpg"
	case "image/gif":
		return "gif"
	}
	return "png"
}

func resourceLink(uri, mime string, size int, what string) *sdk.ResourceLink {
	n := int64(size)
	return &sdk.ResourceLink{URI: uri, Name: uri[strings.LastIndexByte(uri, '/')+1:], Description: what, MIMEType: mime, Size: &n}
}

// stop is the stop tool.
func (s *session) stop(ctx context.Context, _ *sdk.CallToolRequest, in StopInput) (*sdk.CallToolResult, StopOutput, error) {
	var e *execution
	if in.ExecutionID != "" {
		var ok bool
		if e, ok = s.execution(in.ExecutionID); !ok {
			return nil, StopOutput{}, inputErrorf("unknown executionId %q: this server keeps its newest %d executions", in.ExecutionID, keptExecutions)
		}
	} else {
		e = s.running()
	}
	c, _, err := s.connect(ctx)
	if err != nil {
		return nil, StopOutput{}, err
	}
	out := StopOutput{Status: "idle"}
	if e != nil {
		out.ExecutionID = e.id
	}
	if in.Restart {
		kernelID := ""
		if e != nil {
			kernelID = e.kernelID
		} else {
			lang := in.Language
			if lang == "" {
				lang = s.srv.opts.Language
			}
			s.mu.Lock()
			kernelID = s.kernels[lang]
			s.mu.Unlock()
			if kernelID == "" {
				out.Note = "No " + lang + " kernel runs in this workspace: there is nothing to restart."
				res, err := textResult(out)
				return res, out, err
			}
		}
		if err := c.Call(ctx, protocol.MethodKernelRestart, protocol.KernelIDParams{KernelID: kernelID}, nil); err != nil {
			return nil, StopOutput{}, fmt.Errorf("restart kernel %s: %w", kernelID, err)
		}
		out.Status = "restarted"
		out.Note = "The kernel was restarted: its in-memory state (variables, imports, definitions) is lost; the workspace's files are kept."
		res, err := textResult(out)
		return res, out, err
	}
	if e == nil || !e.running() {
		if e != nil {
			out.Status, out.Note = finalStatus(e), "It had already ended."
		} else {
			out.Note = "Nothing is running."
		}
		res, err := textResult(out)
		return res, out, err
	}
	if err := c.Call(ctx, protocol.MethodKernelInterrupt, protocol.KernelIDParams{KernelID: e.kernelID}, nil); err != nil {
		return nil, StopOutput{}, fmt.Errorf("interrupt kernel %s: %w", e.kernelID, err)
	}
	select {
	case <-e.done:
		out.Status = finalStatus(e)
		out.Note = "Interrupted; its output since the last look is in poll. The kernel keeps its state."
	case <-time.After(stopWait):
		out.Status = "still-running"
		out.Note = fmt.Sprintf("It did not stop within %v of the interrupt; stop with restart: true ends it (and clears the kernel's memory).", stopWait)
	case <-ctx.Done():
		return nil, StopOutput{}, ctx.Err()
	}
	res, err := textResult(out)
	return res, out, err
}

// finalStatus is an ended execution's status.
func finalStatus(e *execution) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.res != nil {
		return string(e.res.Status)
	}
	return "failed"
}
