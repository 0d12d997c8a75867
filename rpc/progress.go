package rpc

import (
	"sync"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// progressDelay is how long work runs before $/progress begins (§2: work
// over ~200 ms); quick work sends nothing.
const progressDelay = 200 * time.Millisecond

// progress reports long work to the client as $/progress notifications when
// the request carried a workDoneToken. A nil *progress is valid and silent,
// so handlers need no checks.
type progress struct {
	c     *conn
	token protocol.ProgressToken
	title string

	mu      sync.Mutex // guards the fields below
	timer   *time.Timer
	begun   bool
	ended   bool
	message string
	pct     *int
}

// startProgress starts reporting under token; nil token means no reports.
func (c *conn) startProgress(token protocol.ProgressToken, title string) *progress {
	if token == nil {
		return nil
	}
	p := &progress{c: c, token: token, title: title}
	p.timer = time.AfterFunc(progressDelay, p.begin)
	return p
}

func (p *progress) begin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended || p.begun {
		return
	}
	p.begun = true
	p.send(protocol.ProgressValue{Kind: protocol.ProgressBegin, Title: p.title, Message: p.message, Percentage: p.pct})
}

// Report updates the message and percentage (pct < 0: none).
func (p *progress) Report(message string, pct int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	p.message, p.pct = message, nil
	if pct >= 0 {
		p.pct = &pct
	}
	if p.begun {
		p.send(protocol.ProgressValue{Kind: protocol.ProgressReport, Message: p.message, Percentage: p.pct})
	}
}

// End finishes the report; it sends "end" only if "begin" went out.
func (p *progress) End(message string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	p.ended = true
	p.timer.Stop()
	if p.begun {
		p.send(protocol.ProgressValue{Kind: protocol.ProgressEnd, Message: message})
	}
}

// send is called with mu held, so reports stay in order.
func (p *progress) send(v protocol.ProgressValue) {
	if err := p.c.notify(p.c.ctx, protocol.MethodProgress, protocol.ProgressParams{Token: p.token, Value: v}); err != nil {
		p.c.log.Debug("progress not sent", "err", err)
	}
}
