package workspace

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Watching a workspace's files (PROTOCOL.md §3 fs/watch, fs/didChange);
// README.md, "Watching", has the design.
//
// One hub per workspace (watchhub_linux.go) owns the inotify instance
// (fsnotify) and every watch on its directories; each Watch is a
// subscriber with its own globs, its own bounded queue of coalesced
// changes and its own sender goroutine, so a slow client holds up only its
// own watch. WatchOptions and WatchBatch are in watch.go.

const (
	// watchSettle is how long a change waits for the ones that usually
	// follow it (a create, then its writes) before it is sent.
	watchSettle = 10 * time.Millisecond
	// watchInterval is the least time between two batches of a watch.
	watchInterval = 50 * time.Millisecond
)

// Watch reports a workspace's file changes to one subscriber.
type Watch struct {
	hub     *watchHub
	globs   []string
	deliver func(WatchBatch)
	queue   int

	mu       sync.Mutex            // guards the fields below
	index    map[string]int        // path -> its position in changes
	changes  []protocol.FileChange // Type "" once coalesced away
	overflow bool
	first    time.Time // when the oldest change waiting arrived

	wake      chan struct{} // capacity 1
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// Watch starts reporting the workspace's file changes: writes by code in
// the sandbox and, for overlay and direct workspaces, edits made to the
// project from outside. deliver is called with each batch from the
// watch's own goroutine, one call at a time; while it blocks, changes
// coalesce in the watch's queue, and past its bound they are dropped and
// the next batch says Overflow. Close stops it.
func (w *Workspace) Watch(opts WatchOptions, deliver func(WatchBatch)) (*Watch, error) {
	globs := make([]string, 0, len(opts.Globs))
	for _, g := range opts.Globs {
		g = strings.TrimPrefix(g, "./")
		if g == "" || strings.HasPrefix(g, "/") || !doublestar.ValidatePattern(g) {
			return nil, fmt.Errorf("%w: glob %q: globs are patterns of workspace-relative paths (`*`, `?`, `[a-z]`, `{a,b}`, `**` for any number of directories)", ErrInvalid, g)
		}
		globs = append(globs, g)
	}
	queue := opts.Queue
	if queue <= 0 {
		queue = DefaultWatchQueue
	}
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("workspace %s: %w", w.id, ErrClosed)
	}
	wt := &Watch{
		globs: globs, deliver: deliver, queue: queue,
		index: make(map[string]int),
		wake:  make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	w.m.hubsMu.Lock()
	defer w.m.hubsMu.Unlock()
	h := w.m.hubs[w]
	if h == nil {
		var err error
		if h, err = newWatchHub(w); err != nil {
			return nil, err
		}
		w.m.hubs[w] = h
	}
	wt.hub = h
	h.mu.Lock()
	h.subs[wt] = struct{}{}
	h.mu.Unlock()
	go wt.run()
	return wt, nil
}

// Close stops the watch: no batch is delivered once it returns.
func (wt *Watch) Close() {
	wt.closeOnce.Do(func() {
		h := wt.hub
		m := h.w.m
		m.hubsMu.Lock()
		h.mu.Lock()
		delete(h.subs, wt)
		last := len(h.subs) == 0 && !h.tracked && m.hubs[h.w] == h
		h.mu.Unlock()
		if last {
			delete(m.hubs, h.w)
		}
		m.hubsMu.Unlock()
		if last {
			h.close()
		}
		wt.end()
	})
}

// end stops the sender (the watch is no longer fed).
func (wt *Watch) end() {
	close(wt.stop)
	<-wt.done
}

// CloseWatches ends every watch of the workspace (it is closing): none
// delivers a batch once it returns, and their Close does nothing more.
func (w *Workspace) CloseWatches() {
	w.m.hubsMu.Lock()
	h := w.m.hubs[w]
	delete(w.m.hubs, w)
	w.m.untrack(w)
	w.m.hubsMu.Unlock()
	if h == nil {
		return
	}
	h.close()
	h.mu.Lock()
	subs := slices.Collect(maps.Keys(h.subs))
	clear(h.subs)
	h.mu.Unlock()
	for _, wt := range subs {
		wt.closeOnce.Do(wt.end)
	}
}

// run sends the batches: the first change of a batch waits watchSettle
// for those that follow it, and batches go at least watchInterval apart.
func (wt *Watch) run() {
	defer close(wt.done)
	var last time.Time
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-wt.stop:
			return
		case <-wt.wake:
		}
		for {
			wt.mu.Lock()
			if len(wt.changes) == 0 && !wt.overflow {
				wt.mu.Unlock()
				break
			}
			due := wt.first.Add(watchSettle)
			if next := last.Add(watchInterval); next.After(due) {
				due = next
			}
			wt.mu.Unlock()
			if d := time.Until(due); d > 0 {
				timer.Reset(d)
				select {
				case <-wt.stop:
					timer.Stop()
					return
				case <-timer.C:
				}
			}
			b := wt.take()
			last = time.Now()
			if len(b.Changes) > 0 || b.Overflow {
				select {
				case <-wt.stop:
					return
				default:
				}
				wt.deliver(b)
			}
		}
	}
}

// take empties the queue into a batch.
func (wt *Watch) take() WatchBatch {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	b := WatchBatch{Overflow: wt.overflow, Changes: make([]protocol.FileChange, 0, len(wt.changes))}
	for _, c := range wt.changes {
		if c.Type != "" {
			b.Changes = append(b.Changes, c)
		}
	}
	wt.changes = wt.changes[:0]
	if len(wt.index) > 0 {
		wt.index = make(map[string]int)
	}
	wt.overflow = false
	return b
}

// add queues a change, coalescing it with the one waiting for its path.
func (wt *Watch) add(p string, t protocol.FileChangeType) {
	if !wt.match(p) {
		return
	}
	wt.mu.Lock()
	if len(wt.changes) == 0 && !wt.overflow {
		wt.first = time.Now()
	}
	if i, ok := wt.index[p]; ok {
		wt.changes[i].Type = coalesce(wt.changes[i].Type, t)
	} else if len(wt.index) >= wt.queue {
		wt.overflow = true
	} else {
		wt.index[p] = len(wt.changes)
		wt.changes = append(wt.changes, protocol.FileChange{Path: wireName(p), Type: t})
	}
	wt.mu.Unlock()
	wt.signal()
}

func (wt *Watch) lost() {
	wt.mu.Lock()
	if len(wt.changes) == 0 && !wt.overflow {
		wt.first = time.Now()
	}
	wt.overflow = true
	wt.mu.Unlock()
	wt.signal()
}

func (wt *Watch) signal() {
	select {
	case wt.wake <- struct{}{}:
	default:
	}
}

func (wt *Watch) match(p string) bool {
	if len(wt.globs) == 0 {
		return true
	}
	for _, g := range wt.globs {
		if doublestar.MatchUnvalidated(g, p) {
			return true
		}
	}
	return false
}

// coalesce merges two changes of one path within a batch: what the client
// must do, given the state it knew before the batch.
func coalesce(prev, next protocol.FileChangeType) protocol.FileChangeType {
	switch {
	case prev == "":
		return next
	case prev == protocol.FileChangeCreated && next == protocol.FileChangeDeleted:
		return "" // came and went: nothing to tell
	case prev == protocol.FileChangeCreated:
		return protocol.FileChangeCreated
	case prev == protocol.FileChangeDeleted && next != protocol.FileChangeDeleted:
		return protocol.FileChangeChanged // deleted and made again
	case next == protocol.FileChangeDeleted:
		return protocol.FileChangeDeleted
	}
	return protocol.FileChangeChanged
}
