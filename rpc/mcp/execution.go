package mcp

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Bounds of what the server keeps of an execution and shows of it.
const (
	// streamKeepBytes of stdout and of stderr are kept whole (the
	// resource); streamTailBytes more of their end.
	streamKeepBytes = 8 << 20
	streamTailBytes = 64 << 10
	// streamShowBytes of each stream go into a tool result: the head and
	// the tail of what is new, half each.
	streamShowBytes = 8 << 10
	// richKeepBytes bounds the display and result outputs kept of one
	// execution, richKeepCount their number.
	richKeepBytes = 32 << 20
	richKeepCount = 200
	// resultShowBytes bounds a result's or a display's text/plain shown,
	// displaysShowBytes all displays' together.
	resultShowBytes   = 8 << 10
	displayShowBytes  = 4 << 10
	displaysShowBytes = 16 << 10
	// inlineJSONBytes: application/json up to this size is shown inline;
	// bigger, it is a resource link.
	inlineJSONBytes = 4 << 10
	// imagesShown bounds the images of one tool result; the others are
	// resource links only.
	imagesShown = 8
	// tracebackShowBytes bounds an error's traceback.
	tracebackShowBytes = 8 << 10
	// keptExecutions is how many executions the server keeps (newest),
	// keptBytes their total output in memory.
	keptExecutions = 50
	keptBytes      = 128 << 20
	// lastLineBytes bounds a progress message.
	lastLineBytes = 200
)

// execution is one run's code in a kernel as this server keeps it: its
// output as it arrives, its result once it ends, and how much of it run
// and poll have shown.
type execution struct {
	id       string
	kernelID string
	language string
	started  time.Time
	// note is said once, in the first result shown (a new kernel, say).
	note string

	done chan struct{} // closed when res or err is set

	mu     sync.Mutex // guards the fields below
	stdout capture
	stderr capture
	rich   []*richOutput
	// richBytes is the size of rich's data; richDropped counts outputs
	// not kept past the bounds.
	richBytes   int
	richDropped int
	nextRich    int    // numbers rich outputs in resource names
	last        string // the last line printed, for progress
	res         *protocol.ExecuteResult
	err         error
	// shown* is how far run and poll have returned the output.
	shownOut, shownErr int64
	shownRich          int
	noteShown          bool
}

// richOutput is a display or result output of an execution.
type richOutput struct {
	n         int // its number in resource names, from 1
	kind      protocol.OutputKind
	displayID string
	data      protocol.MimeBundle
	size      int
	dirty     bool // updated since it was shown
	cleared   bool // a clear_output came after it
	// image is the decoded full-size image (the resource), once shown.
	image     []byte
	imageMime string
}

func newExecutionID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "mcp-" + hex.EncodeToString(b)
}

func newExecution(id, kernelID, language string) *execution {
	return &execution{
		id: id, kernelID: kernelID, language: language, started: time.Now(),
		done:   make(chan struct{}),
		stdout: newCapture(streamKeepBytes, streamTailBytes),
		stderr: newCapture(streamKeepBytes, streamTailBytes),
	}
}

// add takes one kernel/output of the execution (on the connection's read
// goroutine: it only appends).
func (e *execution) add(p *protocol.KernelOutputParams) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch p.Kind {
	case protocol.OutputKindStream:
		if p.Name == protocol.StreamStderr {
			e.stderr.write(p.Text)
		} else {
			e.stdout.write(p.Text)
		}
		if l := lastLine(p.Text, lastLineBytes); l != "" {
			e.last = l
		}
	case protocol.OutputKindDisplay, protocol.OutputKindResult:
		size := bundleSize(p.Data)
		if p.Update && p.DisplayID != "" {
			for _, r := range e.rich {
				if r.displayID == p.DisplayID {
					e.richBytes += size - r.size
					r.data, r.size, r.dirty, r.image = p.Data, size, true, nil
					return
				}
			}
		}
		if len(e.rich) >= richKeepCount || e.richBytes+size > richKeepBytes {
			e.richDropped++
			return
		}
		e.nextRich++
		e.rich = append(e.rich, &richOutput{n: e.nextRich, kind: p.Kind, displayID: p.DisplayID, data: p.Data, size: size})
		e.richBytes += size
	case protocol.OutputKindClear:
		// The outputs not shown yet go; what a result already showed stays
		// said. Streams are kept: they are the record.
		for _, r := range e.rich[e.shownRich:] {
			r.cleared = true
		}
	}
}

// finish records the execution's end.
func (e *execution) finish(res *protocol.ExecuteResult, err error) {
	e.mu.Lock()
	e.res, e.err = res, err
	e.mu.Unlock()
	close(e.done)
}

func (e *execution) running() bool {
	select {
	case <-e.done:
		return false
	default:
		return true
	}
}

// lastLine is the last line the execution printed, for progress.
func (e *execution) lastLine() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last
}

// size is what the execution holds in memory.
func (e *execution) size() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stdout.size() + e.stderr.size() + e.richBytes
}

func bundleSize(b protocol.MimeBundle) int {
	n := 0
	for k, v := range b {
		n += len(k)
		if s, ok := v.(string); ok {
			n += len(s)
		} else if raw, err := json.Marshal(v); err == nil {
			n += len(raw)
		}
	}
	return n
}

// bundleText is a MIME type's content as text: a string as it is, other
// JSON values (application/json) marshalled.
func bundleText(b protocol.MimeBundle, mime string) (string, bool) {
	v, ok := b[mime]
	if !ok {
		return "", false
	}
	switch v := v.(type) {
	case string:
		return v, true
	case []any: // Jupyter allows text as a list of lines
		var sb strings.Builder
		for _, l := range v {
			if s, ok := l.(string); ok {
				sb.WriteString(s)
			}
		}
		return sb.String(), true
	}
	raw, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return "", false
	}
	return string(raw), true
}

// imageOf is the first PNG, JPEG or GIF of a bundle, decoded.
func imageOf(b protocol.MimeBundle) (data []byte, mime string, ok bool) {
	for _, m := range []string{"image/png", "image/jpeg", "image/gif"} {
		s, isText := bundleText(b, m)
		if !isText {
			continue
		}
		d, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
		if err != nil {
			// Some kernels wrap base64 at 76 columns.
			d, err = base64.StdEncoding.DecodeString(strings.Join(strings.Fields(s), ""))
		}
		if err == nil {
			return d, m, true
		}
	}
	return nil, "", false
}

// linkedMime is the MIME type of a rich output that is shown as a resource
// link rather than inline, and its file extension.
func linkedMime(b protocol.MimeBundle) (mime, ext string) {
	for _, c := range []struct{ mime, ext string }{
		{"text/html", "html"}, {"image/svg+xml", "svg"}, {"application/json", "json"}, {"text/markdown", "md"}, {"text/latex", "tex"},
	} {
		if _, ok := b[c.mime]; ok {
			if c.mime == "application/json" {
				if t, _ := bundleText(b, c.mime); len(t) <= inlineJSONBytes {
					continue // shown inline
				}
			}
			return c.mime, c.ext
		}
	}
	return "", ""
}

// executionURI names a resource of an execution.
func executionURI(id, rest string) string {
	return fmt.Sprintf("cellbox://executions/%s/%s", id, rest)
}
