package sandbox

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Pool keeps one sandbox launched ahead of time: an init in its new
// namespaces, with its spawner started, waiting for a config. Starting a
// workspace's sandbox from the pool skips creating both processes and
// starting their runtimes, most of a cold start. Only sandboxes with
// network none are pooled (the network namespace is chosen when the init
// is created). Safe for concurrent use.
type Pool struct {
	mu      sync.Mutex // guards the fields below
	next    *launched  // ready to configure, or nil
	filling bool
	closed  bool
	// starting counts Starts under way; lastStart is when the last one
	// returned; timer is the pending refill, if any.
	starting  int
	lastStart time.Time
	timer     *time.Timer
	wg        sync.WaitGroup
	// readOnly are the extra read-only paths (Config.ReadOnly) of the
	// sandboxes it prepares.
	readOnly []string
}

// NewPool returns a pool and starts filling it, with sandboxes that bind
// readOnly (Config.ReadOnly).
func NewPool(readOnly ...string) *Pool {
	p := &Pool{readOnly: slices.Clone(readOnly)}
	p.refill()
	return p
}

// Start is Start with a pooled init when one is ready; then it launches the
// next in the background.
func (p *Pool) Start(ctx context.Context, cfg Config) (*Sandbox, error) {
	if cfg.Network == NetworkHost || !slices.Equal(cfg.ReadOnly, p.readOnly) || cfg.TmpBytes != 0 {
		return Start(ctx, cfg) // not what the pool prepares
	}
	p.mu.Lock()
	l := p.next
	p.next = nil
	p.starting++
	p.mu.Unlock()
	// The next one launches once starts have been quiet for refillDelay:
	// two processes and their runtimes starting now would take the CPU
	// this sandbox and its first program need, and in a burst of starts
	// every one of them.
	defer func() {
		p.mu.Lock()
		p.starting--
		p.lastStart = time.Now()
		p.scheduleRefill()
		p.mu.Unlock()
	}()
	if l != nil {
		s, err := l.configure(ctx, cfg)
		if err == nil || ctx.Err() != nil {
			return s, err
		}
		// The pooled init died or failed: one more try, cold, which also
		// reports a config error as it is.
	}
	return Start(ctx, cfg)
}

// refillDelay is how long starts must have been quiet (none under way, the
// last returned this long ago: its first program has started meanwhile)
// before the pool launches the next sandbox.
const refillDelay = 250 * time.Millisecond

// scheduleRefill arms the refill timer if none is pending. Called with mu
// held.
func (p *Pool) scheduleRefill() {
	if p.timer != nil || p.closed || p.next != nil {
		return
	}
	p.timer = time.AfterFunc(refillDelay, p.quietRefill)
}

// quietRefill refills if starts have been quiet long enough, else waits
// for them to be.
func (p *Pool) quietRefill() {
	p.mu.Lock()
	p.timer = nil
	quiet := time.Since(p.lastStart)
	switch {
	case p.starting > 0:
		// The last Start to return schedules again.
		p.mu.Unlock()
		return
	case quiet < refillDelay:
		p.timer = time.AfterFunc(refillDelay-quiet, p.quietRefill)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.refill()
}

// refill launches the next init if none is waiting.
func (p *Pool) refill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.next != nil || p.filling {
		return
	}
	p.filling = true
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		l, err := launch(NetworkNone, p.readOnly, 0)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.filling = false
		if err != nil {
			return // Start will launch cold and report the error
		}
		if p.closed {
			go l.kill()
			return
		}
		p.next = l
	}()
}

// Close ends the waiting init.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	l := p.next
	p.next = nil
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.mu.Unlock()
	p.wg.Wait()
	if l != nil {
		l.kill()
	}
}
