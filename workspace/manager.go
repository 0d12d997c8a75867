package workspace

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/network"
	"github.com/cellbox-dev/cellbox/workspace/packages"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// Options configure a Manager.
type Options struct {
	// StateDir holds every workspace: StateDir/workspaces/ID/{meta.json,
	// upper, work, scratch}. It must not be on overlayfs.
	StateDir string
	// DefaultRoot is the project of a workspace/open without a root (the
	// directory the daemon was started in).
	DefaultRoot string
	// Hidden are host directories no sandbox may see, whatever its project
	// (the runtime directory with the token); the state dir always is.
	Hidden []string
	// AllowSystemRoots lets "/" and system directories (/etc, /usr, ...)
	// be project roots; without it they are refused (see systemDir).
	AllowSystemRoots bool
	// ReadOnly are extra host paths every sandbox binds read-only (for
	// interpreters installed outside /usr).
	ReadOnly []string
	// ProjectReadOnly, if set, names the read-only binds a sandbox of a
	// workspace on the project root gets when it starts (the prefixes of
	// the project's interpreters, kernel.ProjectBinds), so that its
	// terminals run them too and a kernel needing them finds them. hidden
	// is Manager.Hidden.
	ProjectReadOnly func(root string, hidden []string) []string
	// NoPool: do not keep a sandbox launched ahead of time (one-shot uses
	// such as `cellbox exec`, where it would only cost).
	NoPool bool
	// StartTimeout bounds building one sandbox (0: 10 s).
	StartTimeout time.Duration
	// MaxCheckpoints bounds the checkpoints kept per workspace; the oldest
	// go first (0: DefaultMaxCheckpoints).
	MaxCheckpoints int
	// MaxAutoCheckpoints bounds the automatic checkpoints kept per
	// workspace, a ring apart from MaxCheckpoints (0:
	// DefaultMaxAutoCheckpoints).
	MaxAutoCheckpoints int
	// OnBlocked is told of every connection a workspace's proxies refused
	// (network/blocked); it must not block.
	OnBlocked func(workspaceID string, b network.Blocked)
	// OnPorts is told the TCP ports servers listen on in a workspace's
	// sandbox whenever that set changes (workspace/ports); it must not
	// block.
	OnPorts func(workspaceID string, ports []int)
	// Packages is the package cache the sandboxes' package index serves
	// (nil: the index answers 503).
	Packages *packages.Cache
	// UpstreamProxy is the HTTP proxy the workspaces' proxies go through
	// (--upstream-proxy); nil: direct. Never read from the environment.
	UpstreamProxy *url.URL
	Logger        *slog.Logger
}

// DefaultMaxCheckpoints is the number of checkpoints kept per workspace
// unless Options.MaxCheckpoints (--max-checkpoints) says otherwise.
const DefaultMaxCheckpoints = 50

// DefaultMaxAutoCheckpoints is the number of automatic checkpoints
// (workspace/checkpoint with auto, kernel/execute with checkpoint) kept
// per workspace unless Options.MaxAutoCheckpoints says otherwise.
const DefaultMaxAutoCheckpoints = 100

// Manager owns the daemon's workspaces.
type Manager struct {
	opts Options
	log  *slog.Logger
	dir  string // StateDir/workspaces

	pool *sandbox.Pool // a sandbox launched ahead of time
	// hidden are the state dir and Options.Hidden, symlinks resolved.
	hidden []string

	mu   sync.Mutex // guards open and forking
	open map[string]*Workspace
	// forking holds the ids of the forks being built (fork_linux.go).
	forking map[string]bool

	// fileStates holds each workspace's file-operation lock and baselines,
	// by its directory, so that they outlive a close and a reopen (see
	// fileState).
	fileStates sync.Map // workspace dir -> *fileState

	hubsMu sync.Mutex // guards hubs; held while a hub is made or dropped
	// hubs holds each workspace's watch hub while it has watches.
	hubs map[*Workspace]*watchHub
	// tracked are the workspaces whose hub is kept for attribution
	// (track_linux.go), least recently used first; at most maxTrackedHubs,
	// as each hub is an inotify instance of the user's few.
	tracked []*Workspace
}

// meta is a workspace's metadata on disk (meta.json), so that the same
// root+name finds the same workspace and its changes after a restart.
type meta struct {
	ID        string                 `json:"id"`
	Root      string                 `json:"root"`
	Mode      protocol.WorkspaceMode `json:"mode"`
	Name      string                 `json:"name,omitempty"`
	CreatedAt time.Time              `json:"createdAt"`
	// Network and Allow are the workspace's policy (§9): "allowlist" with
	// its rules, else none.
	Network string   `json:"network,omitempty"`
	Allow   []string `json:"allow,omitempty"`
}

// NewManager prepares the state dir and cleans what a crashed daemon left.
func NewManager(opts Options) (*Manager, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.StateDir == "" {
		return nil, errors.New("workspace: no state dir")
	}
	dir := filepath.Join(opts.StateDir, "workspaces")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the workspaces directory %s: %w", dir, err)
	}
	if fs, err := sandbox.FilesystemType(dir); err == nil && fs == "overlay" {
		return nil, fmt.Errorf("%w: the state dir %s is on overlayfs, which cannot hold an overlay's upper layer; use --state-dir on another filesystem", ErrSandboxUnavailable, opts.StateDir)
	}
	m := &Manager{opts: opts, log: opts.Logger, dir: dir, open: make(map[string]*Workspace), hubs: make(map[*Workspace]*watchHub)}
	for _, h := range append([]string{opts.StateDir}, opts.Hidden...) {
		if real, err := filepath.EvalSymlinks(h); err == nil {
			m.hidden = append(m.hidden, real)
		} else if filepath.IsAbs(h) {
			m.hidden = append(m.hidden, filepath.Clean(h))
		}
	}
	m.cleanup()
	// Before the pool's sandbox starts: its processes would share the
	// daemon's cgroup, where controllers cannot be enabled for children.
	m.openCgroups()
	if !opts.NoPool {
		m.pool = sandbox.NewPool(opts.ReadOnly...)
	}
	return m, nil
}

// Open opens (or reopens) a workspace, PROTOCOL.md §3 workspace/open.
func (m *Manager) Open(ctx context.Context, p protocol.WorkspaceOpenParams) (*Workspace, error) {
	mode := p.Mode
	if mode == "" {
		mode = protocol.WorkspaceModeOverlay
	}
	var id, root string
	switch mode {
	case protocol.WorkspaceModeOverlay, protocol.WorkspaceModeDirect:
		if mode == protocol.WorkspaceModeDirect && !p.AllowDirect {
			return nil, fmt.Errorf("%w: mode direct lets code write the project itself; pass allowDirect: true to ask for it", ErrInvalid)
		}
		r, err := m.projectRoot(p.Root)
		if err != nil {
			return nil, err
		}
		root = r
		id = workspaceID(mode, root, p.Name)
	case protocol.WorkspaceModeScratch:
		if p.Name != "" {
			sum := sha256.Sum256([]byte("scratch\x00" + p.Name))
			id = "ws-" + hex.EncodeToString(sum[:6])
		} else {
			b := make([]byte, 6)
			_, _ = rand.Read(b)
			id = "ws-" + hex.EncodeToString(b)
		}
	default:
		return nil, fmt.Errorf("%w: mode %q is not overlay, scratch or direct", ErrInvalid, mode)
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if w, ok := m.open[id]; ok {
		return w, nil
	}
	if m.forking[id] {
		// Its directory is being built: loading it now would give a second
		// Workspace of it, or a new empty one the fork then replaces.
		return nil, fmt.Errorf("%w: workspace %s is being made by workspace/fork; open it once the fork has answered", ErrConflict, id)
	}
	w, err := m.load(id)
	if err != nil {
		w, err = m.create(id, root, mode, p.Name)
		if err != nil {
			return nil, err
		}
	}
	m.open[id] = w
	m.log.Info("workspace opened", "workspace", id, "root", w.root, "mode", mode)
	if mode != protocol.WorkspaceModeScratch {
		go m.warnUnmapped(w)
	}
	return w, nil
}

// workspaceID is the id of the overlay or direct workspace over root named
// name: the same root and name find the same workspace.
func workspaceID(mode protocol.WorkspaceMode, root, name string) string {
	sum := sha256.Sum256([]byte(string(mode) + "\x00" + root + "\x00" + name))
	return "ws-" + hex.EncodeToString(sum[:6])
}

// warnUnmapped logs project files the sandbox will not be able to write.
func (m *Manager) warnUnmapped(w *Workspace) {
	found, n, err := UnmappedOwners(w.root, 20000, 5)
	if err != nil || n == 0 {
		return
	}
	examples := make([]string, len(found))
	for i, p := range found {
		examples[i] = p.String()
	}
	m.log.Warn("project files whose owner the sandbox cannot map: writing them in the sandbox fails with EOVERFLOW (chown them to the user running cellbox)",
		"workspace", w.id, "files", n, "examples", strings.Join(examples, ", "))
}

// projectRoot checks and canonicalizes a project directory.
func (m *Manager) projectRoot(root string) (string, error) {
	if root == "" {
		root = m.opts.DefaultRoot
	}
	if root == "" || !filepath.IsAbs(root) {
		return "", fmt.Errorf("%w: root %q must be an absolute path to the project directory", ErrInvalid, root)
	}
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("%w: root %s: %v", ErrInvalid, root, err)
	}
	fi, err := os.Stat(real)
	if err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%w: root %s is not a directory", ErrInvalid, root)
	}
	for _, h := range m.hidden {
		if real == h || strings.HasPrefix(real, h+"/") {
			return "", fmt.Errorf("%w: root %s is inside cellbox's state or runtime directory %s", ErrInvalid, root, h)
		}
	}
	if why := systemDir(real); why != "" && !m.opts.AllowSystemRoots {
		return "", fmt.Errorf("%w: root %s is %s: code in the workspace would read it and a commit would write into it; open a project directory, or start cellbox with --allow-system-root", ErrInvalid, root, why)
	}
	return real, nil
}

// hideIn lists where the hidden directories appear in a sandbox whose
// /workspace is root and which binds the readOnly paths at their own place.
func (m *Manager) hideIn(root string, readOnly []string) []string {
	var out []string
	under := func(dir, h string) (string, bool) {
		if dir == "/" {
			return strings.TrimPrefix(h, "/"), true
		}
		rel, ok := strings.CutPrefix(h, dir+"/")
		return rel, ok
	}
	for _, h := range m.hidden {
		if rel, ok := under(root, h); ok {
			out = append(out, "workspace/"+rel)
		}
		for _, ro := range readOnly {
			if real, err := filepath.EvalSymlinks(ro); err == nil {
				if rel, ok := under(real, h); ok {
					out = append(out, strings.TrimPrefix(ro, "/")+"/"+rel)
				}
			}
		}
	}
	return out
}

// systemDir says why real (a path with symlinks resolved) is no project:
// the root of the filesystem, a directory that holds every user's or the
// system's files, or anything below the system's own trees. "" if it may
// be one.
func systemDir(real string) string {
	switch real {
	case "/":
		return "the root of the filesystem"
	case "/home", "/var", "/tmp", "/var/tmp", "/mnt", "/media", "/srv", "/opt":
		return "a system directory that holds other users' or programs' files"
	}
	for _, d := range []string{"/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
		"/boot", "/dev", "/proc", "/sys", "/run", "/var/lib", "/var/log", "/var/spool", "/var/cache",
		"/var/mail", "/var/run", "/var/backups"} {
		if real == d || strings.HasPrefix(real, d+"/") {
			return "a system directory (" + d + ")"
		}
	}
	return ""
}

// create makes a workspace's directories and metadata.
func (m *Manager) create(id, root string, mode protocol.WorkspaceMode, name string) (*Workspace, error) {
	dir := filepath.Join(m.dir, id)
	uid, gid := sandbox.SandboxRootHostIDs()
	subdirs := []string{"upper", "work"}
	if mode == protocol.WorkspaceModeScratch {
		subdirs = []string{"scratch"}
		root = filepath.Join(dir, "scratch")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create workspace directory %s: %w", dir, err)
	}
	// The sandbox's root must be able to enter its directory (a root
	// daemon's sandbox is a range id, not root).
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, fmt.Errorf("chmod %s: %w", dir, err)
	}
	for _, d := range subdirs {
		p := filepath.Join(dir, d)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", p, err)
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return nil, fmt.Errorf("chown %s to the sandbox's root (%d:%d): %w", p, uid, gid, err)
		}
	}
	md := meta{ID: id, Root: root, Mode: mode, Name: name, CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
	if err := writeMeta(dir, md); err != nil {
		return nil, err
	}
	return m.fromMeta(md, dir), nil
}

// writeMeta writes a workspace's meta.json in its directory, atomically.
func writeMeta(dir string, md meta) error {
	b, _ := json.MarshalIndent(md, "", "  ")
	return writeAtomic(filepath.Join(dir, "meta.json"), b, 0o600)
}

func (m *Manager) load(id string) (*Workspace, error) {
	dir := filepath.Join(m.dir, id)
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		return nil, err
	}
	var md meta
	if err := json.Unmarshal(b, &md); err != nil || md.ID != id {
		return nil, fmt.Errorf("workspace %s: bad meta.json: %v", id, err)
	}
	return m.fromMeta(md, dir), nil
}

func (m *Manager) fromMeta(md meta, dir string) *Workspace {
	return &Workspace{m: m, id: md.ID, root: md.Root, mode: md.Mode, name: md.Name, createdAt: md.CreatedAt, dir: dir, wake: make(chan struct{}, 1),
		procs: make(map[*Proc]struct{}), quota: DefaultLimits.DiskBytes, net: m.netStateOf(md), installing: make(chan struct{}, 1)}
}

// Get returns an open workspace.
func (m *Manager) Get(id string) (*Workspace, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if w, ok := m.open[id]; ok {
		return w, nil
	}
	return nil, fmt.Errorf("%w: %q (open it with workspace/open)", ErrNotFound, id)
}

// List returns the open workspaces, oldest first.
func (m *Manager) List() []protocol.WorkspaceInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]protocol.WorkspaceInfo, 0, len(m.open))
	for _, w := range m.open {
		out = append(out, w.Info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out
}

// Len is the number of open workspaces.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.open)
}

// CloseWorkspace stops a workspace's sandbox (every process is gone when it
// returns); its files stay on disk unless discard.
func (m *Manager) CloseWorkspace(ctx context.Context, id string, discard bool) error {
	m.mu.Lock()
	w, ok := m.open[id]
	if ok {
		delete(m.open, id)
	}
	m.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.CloseWatches()
	w.closePreviews()
	w.stop()
	if discard {
		if err := removeAll(w.dir); err != nil {
			return fmt.Errorf("discard workspace %s: %w", id, err)
		}
	}
	m.log.Info("workspace closed", "workspace", id, "discard", discard)
	return nil
}

// Close stops every sandbox: the daemon is ending (as kernel.Manager.Close
// and pty.Manager.Close). The workspaces stay on disk.
func (m *Manager) Close() {
	if m.pool != nil {
		m.pool.Close()
	}
	m.mu.Lock()
	ws := make([]*Workspace, 0, len(m.open))
	for _, w := range m.open {
		ws = append(ws, w)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() { defer wg.Done(); w.CloseWatches(); w.closePreviews(); w.stop() }()
	}
	wg.Wait()
}

// removeAll removes a workspace directory; overlayfs leaves work/work with
// mode 000, which its owner must open up first.
func removeAll(dir string) error {
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(path, 0o700)
		}
		return nil
	})
	_ = os.Chmod(filepath.Join(dir, "work", "work"), 0o700)
	return os.RemoveAll(dir)
}

// writeAtomic writes a file through a temporary one and a rename.
func writeAtomic(path string, b []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
