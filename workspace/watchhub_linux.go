package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// The hub of a workspace's watches: one inotify instance (fsnotify) with a
// watch per directory of the trees that make what code sees at /workspace,
// and one goroutine that reads its events as changes of the view and hands
// them to every Watch (watch_linux.go). README.md, "Watching", has the
// design.

// layerKind is what a watched tree is to the workspace.
type layerKind int

const (
	layerPlain layerKind = iota // scratch or direct: the directory code sees
	layerUpper                  // an overlay's upper layer: what code wrote
	layerLower                  // the project under an overlay: outside edits
)

// watchLayer is one watched tree.
type watchLayer struct {
	kind layerKind
	root string              // its host path (for messages)
	fd   int                 // its root directory (O_PATH), held while watched
	dirs map[string]*watched // watched directories, by workspace-relative path
}

// watched is a directory under an inotify watch.
type watched struct {
	layer *watchLayer
	rel   string
	name  string // the watch's path for fsnotify (see addDir)
	dev   uint64 // the directory's device and inode
	ino   uint64
}

// watchHub watches one workspace's trees for all its Watches.
type watchHub struct {
	w     *Workspace
	fsw   *fsnotify.Watcher
	links string // a private directory of one-use symlinks (see addDir)
	lfd   int    // links, opened
	next  uint64 // the next symlink's number

	// The fields below belong to the hub's goroutine (and to newWatchHub
	// before it starts).
	layers    []*watchLayer
	byPath    map[string]*watched // by the watch's path
	upper     *watchLayer         // overlay only
	lower     *watchLayer         // overlay only
	whiteouts map[string]struct{} // paths whited out in the upper layer
	// upperFiles are the upper layer's other entries that are not
	// directories (files, symlinks), by directory: what trackers ask the
	// view had (inView).
	upperFiles map[string]map[string]struct{}
	pre        preState            // the view's entry before the event handled (trackers)
	opaque     map[string]struct{} // opaque directories of the upper layer
	limitHit   bool                // a watch could not be added (logged once)

	mu   sync.Mutex // guards subs, recs and syncs
	subs map[*Watch]struct{}
	// recs are the trackers recording (track_linux.go); they see the
	// changes code makes, not the edits made to the project from outside.
	recs  map[*Tracker]struct{}
	syncs map[string]func() // barrier files of the links directory, by name
	// released: lfd is closed; no barrier may be made.
	released bool
	// tracked keeps the hub while it has no watch: the workspace's
	// executions are tracked (guarded by Manager.hubsMu).
	tracked bool

	done chan struct{} // closed when the goroutine has ended
}

func newWatchHub(w *Workspace) (_ *watchHub, err error) {
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		if errors.Is(err, unix.EMFILE) {
			return nil, fmt.Errorf("watch workspace %s: %w: the inotify instance limit is reached (fs.inotify.max_user_instances = %s); raise it with sysctl", w.id, ErrLimit, sysctl("fs/inotify/max_user_instances"))
		}
		return nil, fmt.Errorf("watch workspace %s: %w", w.id, err)
	}
	h := &watchHub{
		w: w, fsw: fsw, lfd: -1,
		byPath:     make(map[string]*watched),
		whiteouts:  make(map[string]struct{}),
		upperFiles: make(map[string]map[string]struct{}),
		opaque:     make(map[string]struct{}),
		subs:       make(map[*Watch]struct{}),
		recs:       make(map[*Tracker]struct{}),
		syncs:      make(map[string]func()),
		done:       make(chan struct{}),
	}
	defer func() {
		if err != nil {
			h.release()
		}
	}()
	parent := linksParent()
	removeStaleLinks(parent)
	if h.links, err = os.MkdirTemp(parent, fmt.Sprintf("cellbox-watch-%d-", os.Getpid())); err != nil {
		return nil, fmt.Errorf("watch workspace %s: %w", w.id, err)
	}
	if h.lfd, err = unix.Open(h.links, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("watch workspace %s: %w", w.id, err)
	}
	// The links directory is watched too, for the barriers of trackers
	// (sync): its events come through the same queue as the workspace's.
	if err = fsw.Add(h.links); err != nil {
		return nil, fmt.Errorf("watch workspace %s: %w", w.id, err)
	}
	switch w.mode {
	case protocol.WorkspaceModeOverlay:
		h.upper = &watchLayer{kind: layerUpper, root: w.UpperDir(), fd: -1}
		h.lower = &watchLayer{kind: layerLower, root: w.root, fd: -1}
		h.layers = []*watchLayer{h.upper, h.lower}
	default:
		h.layers = []*watchLayer{{kind: layerPlain, root: w.root, fd: -1}}
	}
	for _, l := range h.layers {
		l.dirs = make(map[string]*watched)
		fd, err := unix.Open(l.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("watch workspace %s: open %s: %w", w.id, l.root, err)
		}
		if l.fd, err = unix.Open(l.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("watch workspace %s: open %s: %w", w.id, l.root, err)
		}
		// The scan reports nothing: what is there now is not a change.
		if err := h.addDir(l, ".", fd, false); err != nil {
			return nil, fmt.Errorf("watch workspace %s: %w", w.id, err)
		}
	}
	go h.run()
	return h, nil
}

// close stops the hub: its goroutine ends and every watch goes.
func (h *watchHub) close() {
	_ = h.fsw.Close() // ends the events channel, so run returns
	<-h.done
	h.release()
}

func (h *watchHub) release() {
	_ = h.fsw.Close()
	for _, l := range h.layers {
		if l.fd >= 0 {
			unix.Close(l.fd)
		}
	}
	h.mu.Lock() // a tracker's barrier makes its file under h.mu (barrier)
	h.released = true
	if h.lfd >= 0 {
		unix.Close(h.lfd)
		h.lfd = -1
	}
	h.mu.Unlock()
	if h.links != "" {
		_ = os.Remove(h.links)
	}
}

func (h *watchHub) run() {
	defer close(h.done)
	for {
		select {
		case ev, ok := <-h.fsw.Events:
			if !ok {
				return
			}
			h.handle(ev)
		case err, ok := <-h.fsw.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				h.w.m.log.Warn("inotify queue overflow: watches of this workspace are told to rescan", "workspace", h.w.id,
					"max_queued_events", sysctl("fs/inotify/max_queued_events"))
				h.lost()
			} else {
				h.w.m.log.Debug("inotify error", "workspace", h.w.id, "err", err)
			}
		}
	}
}

// emit hands a change made in the sandbox to every watch and tracker.
func (h *watchHub) emit(rel string, t protocol.FileChangeType) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for wt := range h.subs {
		wt.add(rel, t)
	}
	for tr := range h.recs {
		tr.add(rel, t, h.pre)
	}
}

// emitOutside hands an edit made to the project from outside to every
// watch: no execution made it.
func (h *watchHub) emitOutside(rel string, t protocol.FileChangeType) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for wt := range h.subs {
		wt.add(rel, t)
	}
}

// lost tells every watch and tracker that changes were lost.
func (h *watchHub) lost() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for wt := range h.subs {
		wt.lost()
	}
	for tr := range h.recs {
		tr.lost = true
	}
}

// addDir watches the directory fd (opened without following symlinks)
// at rel, then scans it: each entry is handled as if just created, so a
// tree made before its watch was in place is reported whole (report) or
// watched whole (the first scan). It closes fd.
//
// inotify_add_watch takes a path and follows symlinks, and the upper
// layer (or a scratch or direct workspace) is the sandbox's to change: a
// directory swapped for a symlink to a host directory would put the watch
// there. So the watch is added through a one-use symlink, in a private
// directory, to /proc/self/fd/FD: it lands on exactly the directory
// opened, its path is unique for fsnotify (which keys watches by path),
// and no descriptor stays open per watched directory. The project under
// an overlay is watched by its path.
func (h *watchHub) addDir(l *watchLayer, rel string, fd int, report bool) error {
	dir := os.NewFile(uintptr(fd), rel)
	defer dir.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil
	}
	if old := l.dirs[rel]; old != nil {
		if old.dev == st.Dev && old.ino == st.Ino {
			return nil // watched and scanned already (an event and a scan)
		}
		h.forgetDir(old)
	}
	d := &watched{layer: l, rel: rel, dev: st.Dev, ino: st.Ino}
	var err error
	if l.kind == layerLower {
		// The project under an overlay is not the sandbox's to change.
		d.name = filepath.Join(l.root, rel)
		err = h.fsw.Add(d.name)
	} else {
		h.next++
		link := "d" + strconv.FormatUint(h.next, 10)
		if err := unix.Symlinkat("/proc/self/fd/"+strconv.Itoa(fd), h.lfd, link); err != nil {
			return fmt.Errorf("watch %s: %w", rel, err)
		}
		d.name = h.links + "/" + link
		err = h.fsw.Add(d.name)
		_ = unix.Unlinkat(h.lfd, link, 0)
	}
	if err != nil {
		if errors.Is(err, unix.ENOSPC) {
			return fmt.Errorf("watch %s: %w: the inotify watch limit is reached (fs.inotify.max_user_watches = %s); raise it with sysctl", rel, ErrLimit, sysctl("fs/inotify/max_user_watches"))
		}
		// A directory the daemon may not read (EACCES) goes unwatched,
		// as it goes unlisted.
		h.w.m.log.Debug("directory not watched", "workspace", h.w.id, "dir", rel, "err", err)
		return nil
	}
	l.dirs[rel] = d
	h.byPath[d.name] = d
	if l.kind == layerUpper && isOpaque(fd) {
		h.opaque[rel] = struct{}{}
	}
	entries, err := dir.ReadDir(-1)
	if err != nil {
		return nil // gone meanwhile: its removal is reported by its parent
	}
	for _, e := range entries {
		if !report {
			if err := h.scanQuiet(l, fd, rel, e); err != nil {
				return err
			}
			continue
		}
		h.entry(l, fd, rel, e.Name(), fsnotify.Create, true)
	}
	return nil
}

// scanQuiet records what the first scan finds: directories to watch,
// and in the upper layer its whiteouts.
func (h *watchHub) scanQuiet(l *watchLayer, pfd int, prel string, e os.DirEntry) error {
	rel := joinRel(prel, e.Name())
	switch {
	case e.IsDir():
		if fd, err := openDirAt(pfd, e.Name()); err == nil {
			return h.addDir(l, rel, fd, false)
		}
	case l.kind == layerUpper && e.Type()&os.ModeCharDevice != 0:
		var st unix.Stat_t
		if unix.Fstatat(pfd, e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW) == nil && isWhiteout(&st) {
			h.whiteouts[rel] = struct{}{}
		}
	case l.kind == layerUpper:
		h.noteUpperFile(rel, true)
	}
	return nil
}

// addRuntime reports a watch that could not be added after the start:
// logged once, and the watches are told to rescan.
func (h *watchHub) addRuntime(err error) {
	if err == nil {
		return
	}
	if !h.limitHit {
		h.limitHit = true
		h.w.m.log.Warn("a directory of the workspace is not watched", "workspace", h.w.id, "err", err)
	}
	h.lost()
}

// forgetDir drops the watches of d and of the directories below it, and
// what the hub knew of them.
func (h *watchHub) forgetDir(d *watched) {
	l := d.layer
	prefix := d.rel + "/"
	for rel, sub := range l.dirs {
		if rel == d.rel || strings.HasPrefix(rel, prefix) || d.rel == "." {
			_ = h.fsw.Remove(sub.name)
			delete(l.dirs, rel)
			delete(h.byPath, sub.name)
			if l.kind == layerUpper {
				delete(h.upperFiles, rel)
			}
		}
	}
	if l.kind == layerUpper {
		for _, set := range []map[string]struct{}{h.whiteouts, h.opaque} {
			for rel := range set {
				if rel == d.rel || strings.HasPrefix(rel, prefix) {
					delete(set, rel)
				}
			}
		}
	}
}

// forget drops what the hub knew of rel in l: a watched tree, a whiteout.
func (h *watchHub) forget(l *watchLayer, rel string) {
	if d := l.dirs[rel]; d != nil {
		h.forgetDir(d)
	}
	if l.kind == layerUpper {
		delete(h.whiteouts, rel)
		delete(h.opaque, rel)
	}
}

// handle takes one fsnotify event: a change to the entry name of a
// watched directory (events of a directory itself are left to its
// parent's).
func (h *watchHub) handle(ev fsnotify.Event) {
	i := strings.LastIndexByte(ev.Name, '/')
	if i < 0 {
		return
	}
	if ev.Name[:i] == h.links {
		if ev.Op.Has(fsnotify.Create) {
			h.synced(ev.Name[i+1:])
		}
		return
	}
	d := h.byPath[ev.Name[:i]]
	if d == nil {
		return // a watch already dropped, or a directory's own event
	}
	h.entry(d.layer, -1, d.rel, ev.Name[i+1:], ev.Op, true)
}

// entry handles a change to name in the directory prel of layer l. pfd
// is that directory, open, or -1 (then it is opened if needed).
func (h *watchHub) entry(l *watchLayer, pfd int, prel, name string, op fsnotify.Op, report bool) {
	rel := joinRel(prel, name)
	if report && l.kind != layerLower {
		h.pre = h.inView(l, rel)
	}
	switch l.kind {
	case layerPlain:
		h.plainEntry(l, pfd, prel, name, rel, op, report)
	case layerUpper:
		h.upperEntry(pfd, prel, name, rel, op, report)
	case layerLower:
		h.lowerEntry(pfd, prel, name, rel, op, report)
	}
}

// stat looks at name in prel of l without following any symlink: st is
// nil when it is not there. For a directory it also returns it opened
// (the caller closes it).
func (h *watchHub) stat(l *watchLayer, pfd int, prel, name string) (st *unix.Stat_t, dirfd int) {
	if pfd < 0 {
		fd, err := openBeneath(l.fd, prel, unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			return nil, -1
		}
		defer unix.Close(fd)
		pfd = fd
	}
	var s unix.Stat_t
	if unix.Fstatat(pfd, name, &s, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return nil, -1
	}
	if s.Mode&unix.S_IFMT != unix.S_IFDIR {
		return &s, -1
	}
	fd, err := openDirAt(pfd, name)
	if err != nil {
		return &s, -1
	}
	return &s, fd
}

// plainEntry: in a scratch or direct workspace, what happens in the
// directory is what code sees.
func (h *watchHub) plainEntry(l *watchLayer, pfd int, prel, name, rel string, op fsnotify.Op, report bool) {
	switch {
	case op.Has(fsnotify.Remove) || op.Has(fsnotify.Rename):
		h.forget(l, rel)
		if report {
			h.emit(rel, protocol.FileChangeDeleted)
		}
	case op.Has(fsnotify.Create):
		st, dfd := h.stat(l, pfd, prel, name)
		if st == nil {
			return // gone already: its removal follows
		}
		if report {
			h.emit(rel, protocol.FileChangeCreated)
		}
		if dfd >= 0 {
			h.addRuntime(h.addDir(l, rel, dfd, report))
		}
	case op.Has(fsnotify.Write):
		if report {
			h.emit(rel, protocol.FileChangeChanged)
		}
	case op.Has(fsnotify.Chmod):
		st, dfd := h.stat(l, pfd, prel, name)
		if dfd >= 0 {
			unix.Close(dfd)
		}
		if st != nil && dfd < 0 && st.Mode&unix.S_IFMT != unix.S_IFDIR && report {
			h.emit(rel, protocol.FileChangeChanged)
		}
	}
}

// upperEntry: in an overlay's upper layer, an entry is a file code wrote
// (created, or a project file copied up and changed), a whiteout (a
// deletion), or a directory: made by code, opaque (replacing a project
// directory code deleted), or copied up to hold changed files, which is
// no change of its own.
func (h *watchHub) upperEntry(pfd int, prel, name, rel string, op fsnotify.Op, report bool) {
	l := h.upper
	emit := func(t protocol.FileChangeType) {
		if report {
			h.emit(rel, t)
		}
	}
	if op == fsnotify.Write {
		emit(protocol.FileChangeChanged) // a write lands in a real file
		return
	}
	st, dfd := h.stat(l, pfd, prel, name)
	if st == nil {
		if op.Has(fsnotify.Create) && !op.Has(fsnotify.Remove) && !op.Has(fsnotify.Rename) {
			return // gone already: its removal follows
		}
		h.forget(l, rel)
		h.noteUpperFile(rel, false)
		if h.lowerVisible(rel, false) {
			emit(protocol.FileChangeChanged) // the project's file shows again
		} else {
			emit(protocol.FileChangeDeleted)
		}
		return
	}
	_, wasWhiteout := h.whiteouts[rel]
	switch {
	case isWhiteout(st):
		if l.dirs[rel] != nil {
			h.forget(l, rel)
		}
		h.noteUpperFile(rel, false)
		h.whiteouts[rel] = struct{}{}
		emit(protocol.FileChangeDeleted)
	case dfd >= 0:
		if op == fsnotify.Chmod {
			unix.Close(dfd)
			return
		}
		delete(h.whiteouts, rel)
		h.noteUpperFile(rel, false)
		// A directory copied up to hold changed files is no change of
		// its own.
		if copiedUp := !wasWhiteout && !isOpaque(dfd) && h.lowerVisible(rel, true); !copiedUp {
			emit(protocol.FileChangeCreated)
		}
		h.addRuntime(h.addDir(l, rel, dfd, report))
	default:
		if l.dirs[rel] != nil {
			h.forget(l, rel) // a directory replaced by a file
		}
		h.noteUpperFile(rel, true)
		switch {
		case wasWhiteout:
			delete(h.whiteouts, rel)
			emit(protocol.FileChangeCreated)
		case op.Has(fsnotify.Create) && !h.lowerVisible(rel, false):
			emit(protocol.FileChangeCreated)
		default:
			emit(protocol.FileChangeChanged)
		}
	}
}

// lowerVisible: the project has rel (a directory, if dir) and nothing in
// the upper layer above it hides it, so the merged view showed it before
// the upper layer got an entry at rel.
func (h *watchHub) lowerVisible(rel string, dir bool) bool {
	if h.lower == nil || h.hiddenAbove(rel) {
		return false
	}
	flags := unix.O_PATH
	if dir {
		flags |= unix.O_DIRECTORY
	}
	fd, err := openBeneath(h.lower.fd, rel, flags)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// hiddenAbove: a directory above rel is opaque or whited out in the upper
// layer, so the project's entries below it do not show.
func (h *watchHub) hiddenAbove(rel string) bool {
	for i := 0; i < len(rel); i++ {
		if rel[i] != '/' {
			continue
		}
		if _, ok := h.opaque[rel[:i]]; ok {
			return true
		}
		if _, ok := h.whiteouts[rel[:i]]; ok {
			return true
		}
	}
	return false
}

// lowerEntry: an edit to the project from outside, reported when the
// merged view shows it (the upper layer has nothing at rel and hides
// nothing above it).
func (h *watchHub) lowerEntry(pfd int, prel, name, rel string, op fsnotify.Op, report bool) {
	l := h.lower
	removed := op.Has(fsnotify.Remove) || op.Has(fsnotify.Rename)
	if removed {
		h.forget(l, rel)
	}
	var st *unix.Stat_t
	dfd := -1
	if !removed && (op.Has(fsnotify.Create) || op.Has(fsnotify.Chmod)) {
		st, dfd = h.stat(l, pfd, prel, name)
	}
	visible := report && h.visibleFromLower(rel)
	emit := func(t protocol.FileChangeType) {
		if visible {
			h.emitOutside(rel, t)
		}
	}
	switch {
	case removed:
		emit(protocol.FileChangeDeleted)
	case op.Has(fsnotify.Create):
		if st == nil {
			return
		}
		emit(protocol.FileChangeCreated)
		if dfd >= 0 {
			h.addRuntime(h.addDir(l, rel, dfd, report))
		}
	case op.Has(fsnotify.Write):
		emit(protocol.FileChangeChanged)
	case op.Has(fsnotify.Chmod):
		if dfd >= 0 {
			unix.Close(dfd)
			return
		}
		if st != nil {
			emit(protocol.FileChangeChanged)
		}
	}
}

// visibleFromLower: the merged view shows the project's rel, because the
// upper layer has no entry at rel, nor a file, whiteout or opaque
// directory above it.
func (h *watchHub) visibleFromLower(rel string) bool {
	if h.hiddenAbove(rel) {
		return false
	}
	fd, err := openBeneath(h.upper.fd, rel, unix.O_PATH)
	if err == nil {
		unix.Close(fd)
		return false
	}
	return err == unix.ENOENT
}

// isWhiteout: overlayfs marks a deleted entry with a 0:0 character device.
func isWhiteout(st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0
}

// isOpaque: an upper directory that replaces the project's directory of
// the same path (code deleted it and made a new one). The overlay is
// mounted in a user namespace, so it uses the user.overlay.* xattrs.
func isOpaque(dirfd int) bool {
	var buf [4]byte
	n, err := unix.Fgetxattr(dirfd, "user.overlay.opaque", buf[:])
	return err == nil && n == 1 && buf[0] == 'y'
}

// linksParent is where the private directory of symlinks goes: a tmpfs
// if there is one (a symlink per watched directory is made there).
func linksParent() string {
	for _, dir := range []string{os.Getenv("XDG_RUNTIME_DIR"), "/dev/shm"} {
		if fi, err := os.Stat(dir); dir != "" && err == nil && fi.IsDir() && unix.Access(dir, unix.W_OK) == nil {
			if fs, err := sandbox.FilesystemType(dir); err == nil && fs == "tmpfs" {
				return dir
			}
		}
	}
	return os.TempDir()
}

// removeStaleLinks removes the (empty) symlink directories that daemons
// killed before they could (cellbox-watch-PID-*, PID gone) left in parent.
func removeStaleLinks(parent string) {
	dirs, _ := filepath.Glob(filepath.Join(parent, "cellbox-watch-*-*"))
	for _, dir := range dirs {
		pid, _, ok := strings.Cut(strings.TrimPrefix(filepath.Base(dir), "cellbox-watch-"), "-")
		if _, err := strconv.Atoi(pid); !ok || err != nil {
			continue
		}
		if _, err := os.Stat("/proc/" + pid); errors.Is(err, fs.ErrNotExist) {
			_ = os.Remove(dir) // fails, harmlessly, if not empty or not ours
		}
	}
}

// sysctl reads a /proc/sys value for a message.
func sysctl(name string) string {
	b, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}
