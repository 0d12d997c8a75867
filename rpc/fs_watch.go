package rpc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
)

// §3 fs/watch, fs/unwatch and the fs/didChange notification. A watch
// belongs to the connection that made it: it ends with fs/unwatch or when
// the connection ends, and only that connection can unwatch it.

// maxWatchesPerConn bounds the watches of one connection (-32012 over it).
// Watches of one workspace share its inotify watches; each has its own
// queue (workspace.DefaultWatchQueue paths at most).
const maxWatchesPerConn = 64

// watchSet is the daemon's watches, by id.
type watchSet struct {
	mu   sync.Mutex // guards byID
	byID map[string]*watchEntry
}

type watchEntry struct {
	c *conn
	w *workspace.Watch
}

func (s *watchSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}

func (s *watchSet) countConn(c *conn) int {
	n := 0
	for _, e := range s.byID {
		if e.c == c {
			n++
		}
	}
	return n
}

// closeConn ends every watch of c.
func (s *watchSet) closeConn(c *conn) {
	s.mu.Lock()
	var mine []*workspace.Watch
	for id, e := range s.byID {
		if e.c == c && e.w != nil { // nil: still starting; FsWatch ends it
			mine = append(mine, e.w)
			delete(s.byID, id)
		}
	}
	s.mu.Unlock()
	for _, w := range mine {
		w.Close()
	}
}

// FsWatch is §3 fs/watch. fs/didChange notifications of the new watch may
// reach the client before this answer does.
func (c *conn) FsWatch(_ context.Context, p *protocol.FsWatchParams) (*protocol.FsWatchResult, error) {
	w, err := c.fsWorkspace(protocol.MethodFsWatch, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	id, wsID := newWatchID(), w.ID()
	s := &c.d.watches
	s.mu.Lock()
	if s.countConn(c) >= maxWatchesPerConn {
		s.mu.Unlock()
		return nil, protocol.Errorf(protocol.CodeLimitExceeded, "too many watches on this connection (limit %d); fs/unwatch some first", maxWatchesPerConn)
	}
	if s.byID == nil {
		s.byID = make(map[string]*watchEntry)
	}
	e := &watchEntry{c: c} // holds the place while the watch starts
	s.byID[id] = e
	s.mu.Unlock()
	watch, err := w.Watch(workspace.WatchOptions{Globs: p.Globs}, func(b workspace.WatchBatch) {
		params := protocol.FsDidChangeParams{WatchID: id, WorkspaceID: wsID, Changes: b.Changes, Overflow: b.Overflow}
		if err := c.notify(c.ctx, protocol.MethodFsDidChange, params); err != nil {
			c.log.Debug("fs/didChange not sent", "watch", id, "err", err)
		}
	})
	s.mu.Lock()
	if err != nil {
		delete(s.byID, id)
	} else {
		e.w = watch
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	c.onClose("fs/watch", func() { s.closeConn(c) })
	return &protocol.FsWatchResult{WatchID: id}, nil
}

// FsUnwatch is §3 fs/unwatch: no fs/didChange of the watch follows its
// answer.
func (c *conn) FsUnwatch(_ context.Context, p *protocol.FsUnwatchParams) (*protocol.Empty, error) {
	if p.WatchID == "" {
		return nil, missingField(protocol.MethodFsUnwatch, "watchId")
	}
	s := &c.d.watches
	s.mu.Lock()
	e := s.byID[p.WatchID]
	ok := e != nil && e.c == c && e.w != nil
	if ok {
		delete(s.byID, p.WatchID)
	}
	s.mu.Unlock()
	if !ok {
		return nil, protocol.Errorf(protocol.CodeNotFound, "no watch %q on this connection", p.WatchID)
	}
	e.w.Close()
	return &protocol.Empty{}, nil
}

func newWatchID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "watch-" + hex.EncodeToString(b)
}
