package workspace

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Per-execution attribution (PROTOCOL.md §10 filesChanged): a Tracker
// subscribes to the workspace's watch hub (watchhub_linux.go) for the
// time of one execution and keeps, per path, what the view had before its
// first change and after its last. It sees what code in the sandbox
// changes, by any program (a shell command, an install into /workspace, a
// subprocess), and not the edits made to the project from outside.
//
// The hub reads inotify events from one queue, in the order they
// happened. A Tracker starts and ends with a barrier: a file made in the
// hub's private links directory, which the hub sees in that same queue.
// The tracker begins recording when the hub reaches its first barrier (so
// nothing an earlier execution did is counted) and End waits for the hub
// to reach the second (so everything the execution did before it ended
// is). Attribution is by time: a program of the same workspace that writes
// while the execution runs (a terminal, another kernel) is counted too.

const (
	// maxTracked bounds the paths an execution's result lists; the rest
	// are counted (filesChangedMore).
	maxTracked = 1000
	// maxTrackedKept bounds the paths a tracker keeps in memory.
	maxTrackedKept = 50000
	// syncWait bounds how long End waits for the hub to reach its
	// barrier (a hub that far behind has lost events anyway).
	syncWait = 5 * time.Second
)

// trackState is a workspace's per-execution attribution.
type trackState struct {
	// Guarded by Manager.hubsMu.
	next   uint64 // the next barrier's number
	warned bool   // that the workspace cannot be tracked was logged
}

// maxTrackedHubs bounds the hubs kept for attribution alone: each is an
// inotify instance (fs.inotify.max_user_instances is 128 by default), and
// fs/watch needs some. A workspace whose hub was let go gets a new one on
// its next execution.
const maxTrackedHubs = 32

// keepTracked keeps h, w's hub, while it has no watch, letting the least
// recently used tracked hub go past maxTrackedHubs (m.hubsMu held).
func (m *Manager) keepTracked(w *Workspace, h *watchHub) {
	h.tracked = true
	if i := slices.Index(m.tracked, w); i >= 0 {
		m.tracked = append(m.tracked[:i], m.tracked[i+1:]...)
	}
	m.tracked = append(m.tracked, w)
	if len(m.tracked) <= maxTrackedHubs {
		return
	}
	old := m.tracked[0]
	m.tracked = m.tracked[1:]
	oh := m.hubs[old]
	if oh == nil {
		return
	}
	oh.mu.Lock()
	idle := len(oh.subs) == 0 && len(oh.recs) == 0 && len(oh.syncs) == 0
	oh.mu.Unlock()
	oh.tracked = false
	if idle {
		delete(m.hubs, old)
		go oh.close() // its goroutine may wait for hubsMu
	}
}

// untrack forgets w (closing).
func (m *Manager) untrack(w *Workspace) {
	if i := slices.Index(m.tracked, w); i >= 0 {
		m.tracked = append(m.tracked[:i], m.tracked[i+1:]...)
	}
}

// Tracker records the paths of a workspace that change from Track to End.
type Tracker struct {
	w     *Workspace
	h     *watchHub
	start string // its first barrier

	// The fields below belong to the hub's goroutine (add, under h.mu)
	// until End has removed the tracker from the hub.
	paths   map[string]*tracked
	dropped int  // paths not kept past maxTrackedKept
	lost    bool // the hub lost events while the tracker recorded
}

// tracked is what a tracker knows of one path.
type tracked struct {
	before bool // the view had the path before its first change
	after  bool // the view has the path after its last change
}

// Track starts recording the changes made to the workspace view. It
// returns nil (and End then reports nothing) when the workspace cannot be
// watched: attribution is never a reason for an execution to fail.
func (w *Workspace) Track() *Tracker {
	w.m.hubsMu.Lock()
	// Checked under hubsMu: a workspace that closes drops its hub
	// (CloseWatches) after it is marked closed.
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed {
		w.m.hubsMu.Unlock()
		return nil
	}
	h := w.m.hubs[w]
	if h == nil {
		var err error
		if h, err = newWatchHub(w); err != nil {
			warned := w.track.warned
			w.track.warned = true
			w.m.hubsMu.Unlock()
			if !warned {
				w.m.log.Warn("the files this workspace's executions change are not tracked", "workspace", w.id, "err", err)
			}
			return nil
		}
		w.m.hubs[w] = h
	}
	w.m.keepTracked(w, h)
	w.track.next++
	start := "sync-" + strconv.FormatUint(w.track.next, 10)
	w.m.hubsMu.Unlock()

	t := &Tracker{w: w, h: h, start: start, paths: make(map[string]*tracked)}
	h.mu.Lock()
	h.syncs[start] = func() { h.recs[t] = struct{}{} } // the hub's goroutine, under h.mu
	h.mu.Unlock()
	if err := h.barrier(start); err != nil {
		h.mu.Lock()
		delete(h.syncs, start)
		h.mu.Unlock()
		w.m.log.Warn("the files an execution changes are not tracked", "workspace", w.id, "err", err)
		return nil
	}
	return t
}

// add records a change of rel (the hub's goroutine, under h.mu); pre is
// what the hub knew of rel in the view before the change.
func (t *Tracker) add(rel string, typ protocol.FileChangeType, pre preState) {
	p := t.paths[rel]
	if p == nil {
		if len(t.paths) >= maxTrackedKept {
			t.dropped++
			return
		}
		before := pre == prePresent
		if pre == preUnknown {
			before = typ != protocol.FileChangeCreated // created: it was not there
		}
		p = &tracked{before: before}
		t.paths[rel] = p
	}
	p.after = typ != protocol.FileChangeDeleted
}

// preState is whether the view had a path before the event the hub
// handles: known for an overlay (the hub keeps the upper layer's entries
// and looks at the project), unknown for a plain directory (the event
// says: created is new).
type preState int

const (
	preUnknown preState = iota
	preAbsent
	prePresent
)

// inView is what the view has at rel before the hub handles an event of
// it (the hub's goroutine).
func (h *watchHub) inView(l *watchLayer, rel string) preState {
	if l.kind != layerUpper {
		return preUnknown
	}
	dir, name := splitRel(rel)
	if _, ok := h.upperFiles[dir][name]; ok || l.dirs[rel] != nil {
		return prePresent
	}
	if _, ok := h.whiteouts[rel]; ok || h.hiddenAbove(rel) {
		return preAbsent
	}
	if existsBeneath(h.lower.fd, rel) {
		return prePresent
	}
	return preAbsent
}

// noteUpperFile records that the upper layer has (or no longer has) a
// file or symlink at rel.
func (h *watchHub) noteUpperFile(rel string, present bool) {
	dir, name := splitRel(rel)
	names := h.upperFiles[dir]
	if !present {
		delete(names, name)
		if len(names) == 0 {
			delete(h.upperFiles, dir)
		}
		return
	}
	if names == nil {
		names = make(map[string]struct{})
		h.upperFiles[dir] = names
	}
	names[name] = struct{}{}
}

// splitRel splits a workspace-relative path into its directory ("." at
// the top) and name.
func splitRel(rel string) (dir, name string) {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		return ".", rel
	}
	return rel[:i], rel[i+1:]
}

// End stops recording and returns the paths that changed (sorted), at
// most maxTracked, and how many more did. Directories that were made are
// left out (the files in them are listed); deleted ones are listed, as
// the deletion of a project directory is one entry.
func (t *Tracker) End() ([]protocol.PathChange, int) {
	if t == nil {
		return nil, 0
	}
	h := t.h
	t.w.m.hubsMu.Lock()
	t.w.track.next++
	end := "sync-" + strconv.FormatUint(t.w.track.next, 10)
	t.w.m.hubsMu.Unlock()
	reached := make(chan struct{})
	h.mu.Lock()
	h.syncs[end] = func() { close(reached) }
	h.mu.Unlock()
	err := h.barrier(end)
	if err == nil {
		select {
		case <-reached:
		case <-h.done:
			err = errors.New("the workspace's watch ended")
		case <-time.After(syncWait):
			err = fmt.Errorf("the watch did not catch up within %s", syncWait)
		}
	}
	h.mu.Lock()
	// The first barrier too: a hub far behind (or that lost it in an
	// overflow) must not start recording for a tracker that has ended.
	delete(h.syncs, t.start)
	delete(h.syncs, end)
	delete(h.recs, t)
	h.mu.Unlock()
	if err != nil || t.lost {
		t.w.m.log.Warn("the files an execution changed may be incomplete", "workspace", t.w.id, "err", err, "lost", t.lost)
	}

	root := t.w.root
	if t.w.mode == protocol.WorkspaceModeOverlay {
		root = t.w.UpperDir()
	}
	out := make([]protocol.PathChange, 0, len(t.paths))
	for rel, p := range t.paths {
		var kind protocol.ChangeKind
		switch {
		case !p.before && p.after:
			kind = protocol.ChangeKindAdded
		case p.before && p.after:
			kind = protocol.ChangeKindModified
		case p.before && !p.after:
			kind = protocol.ChangeKindDeleted
		default:
			continue // made and removed within the execution
		}
		if kind != protocol.ChangeKindDeleted && isDirBeneath(root, rel) {
			continue
		}
		out = append(out, protocol.PathChange{Path: wireName(rel), Kind: kind})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	more := t.dropped
	if len(out) > maxTracked {
		more += len(out) - maxTracked
		out = out[:maxTracked]
	}
	return out, more
}

// barrier makes the file name in the hub's links directory; the hub calls
// (and drops) syncs[name] when its event comes through the queue. The file
// is removed at once: its creation is the event.
func (h *watchHub) barrier(name string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return fmt.Errorf("watch barrier %s: %w: the workspace's watch ended", name, ErrClosed)
	}
	fd, err := unix.Openat(h.lfd, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("watch barrier %s: %w", name, err)
	}
	unix.Close(fd)
	_ = unix.Unlinkat(h.lfd, name, 0)
	return nil
}

// synced runs the barrier callback of name (the hub's goroutine).
func (h *watchHub) synced(name string) {
	if !strings.HasPrefix(name, "sync-") {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if f := h.syncs[name]; f != nil {
		delete(h.syncs, name)
		f()
	}
}

// existsBeneath: dir has rel (not following symlinks).
func existsBeneath(dir int, rel string) bool {
	fd, err := openBeneath(dir, rel, unix.O_PATH)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// isDirBeneath: rel is a directory (not a symlink to one) under root.
func isDirBeneath(root, rel string) bool {
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	dfd, err := openBeneath(fd, rel, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return false
	}
	unix.Close(dfd)
	return true
}
