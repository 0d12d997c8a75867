package workspace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// Forks (PROTOCOL.md §10); automatic checkpoints are in checkpoint_auto_linux.go.

// Fork is PROTOCOL.md §10 workspace/fork: a new overlay workspace over the
// same project, named name (""; "<source's name, or the project's base
// name>-fork-N", the first N free), that starts with a copy of the source's
// changes: its upper layer (copyUpper), its baselines (so commit sees the
// same conflicts) and its network policy; not its checkpoints, packages
// (/env) or sandbox. The cost follows the changes, not the project. The
// source's file-operation lock is held while it is copied, as for a
// checkpoint; code running in it may still write, and the copy then has
// each file as it was when copied. The fork is built in
// workspaces/.fork-<id> and renamed into place, so a crash leaves no
// half workspace (the next fork removes what it left).
func (m *Manager) Fork(ctx context.Context, id, name string) (*Workspace, error) {
	src, err := m.Get(id)
	if err != nil {
		return nil, err
	}
	if src.mode != protocol.WorkspaceModeOverlay {
		return nil, fmt.Errorf("%w: workspace %s is in mode %s: only an overlay workspace, whose changes are apart from the project, can be forked", ErrInvalid, id, src.mode)
	}
	start := time.Now()
	st, unlock, err := src.lockFiles(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	fid, fname, release, err := m.reserveFork(src, name)
	if err != nil {
		return nil, err
	}
	defer release()
	m.removeGoneForks()
	tmp := filepath.Join(m.dir, ".fork-"+fid)
	built := false
	defer func() {
		if !built {
			_ = removeAll(tmp)
		}
	}()
	md := forkMeta(src, fid, fname)
	if err := makeOverlayDirs(tmp); err != nil {
		return nil, fmt.Errorf("fork workspace %s: %w", id, err)
	}
	var found []touched
	copied, err := copyUpper(ctx, src.UpperDir(), filepath.Join(tmp, "upper"), func(p string, btime int64) {
		if _, ok := st.base[p]; !ok {
			found = append(found, touched{p, btime})
		}
	})
	if err != nil {
		return nil, fmt.Errorf("fork workspace %s: copy its changes: %w", id, err)
	}
	// Paths the source touched too recently for a quota tick to have
	// noted: their baselines as the source's scan would record them (by
	// the source's birth times, which the copies do not have).
	if len(found) > 0 {
		proj, err := src.openProject()
		if err != nil {
			return nil, err
		}
		dirty := noteBaselines(st.base, proj, found)
		unix.Close(proj)
		if dirty {
			if err := src.saveBaselines(st.base); err != nil {
				return nil, err
			}
		}
	}
	// The fork as it will be, but in tmp: its baselines go there.
	if err := m.fromMeta(md, tmp).saveBaselines(maps.Clone(st.base)); err != nil {
		return nil, fmt.Errorf("fork workspace %s: %w", id, err)
	}
	if err := writeMeta(tmp, md); err != nil {
		return nil, fmt.Errorf("fork workspace %s: %w", id, err)
	}
	// Durable before it is in place: a crash leaves the whole fork or none.
	if err := syncFS(tmp); err != nil {
		return nil, fmt.Errorf("fork workspace %s: %w", id, err)
	}
	dir := filepath.Join(m.dir, fid)
	if err := os.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("fork workspace %s: %w", id, err)
	}
	built = true
	if err := syncDir(m.dir); err != nil {
		m.log.Warn("fork in place, but its directory entry may not be durable", "workspace", fid, "err", err)
	}
	fork := m.fromMeta(md, dir)
	m.mu.Lock()
	m.open[fid] = fork // Open refuses fid while it is reserved (forking)
	m.mu.Unlock()
	m.log.Info("workspace forked", "workspace", fid, "from", id, "name", fname, "bytes", copied,
		"duration_ms", time.Since(start).Milliseconds())
	return fork, nil
}

// reserveFork picks the fork's name and id (name, else the first free
// "<base>-fork-N") and reserves the id until release. What a fork that
// did not finish left (a .fork-<id> of no fork under way) is renamed to
// .forkgone-*, for removeGoneForks.
func (m *Manager) reserveFork(src *Workspace, name string) (id, chosen string, release func(), err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.forking == nil {
		m.forking = make(map[string]bool)
	}
	entries, _ := os.ReadDir(m.dir)
	for _, e := range entries {
		if fid, ok := strings.CutPrefix(e.Name(), ".fork-"); ok && !m.forking[fid] {
			_ = os.Rename(filepath.Join(m.dir, e.Name()), filepath.Join(m.dir, ".forkgone-"+randomHex(8)))
		}
	}
	taken := func(id string) bool {
		if _, ok := m.open[id]; ok || m.forking[id] {
			return true
		}
		_, err := os.Lstat(filepath.Join(m.dir, id))
		return !errors.Is(err, os.ErrNotExist)
	}
	if name != "" {
		id = workspaceID(protocol.WorkspaceModeOverlay, src.root, name)
		if taken(id) {
			return "", "", nil, fmt.Errorf("%w: a workspace named %q over %s exists already; give the fork another name", ErrInvalid, name, src.root)
		}
		chosen = name
	} else {
		base := src.name
		if base == "" {
			base = filepath.Base(src.root)
		}
		for n := 1; ; n++ {
			chosen = fmt.Sprintf("%s-fork-%d", base, n)
			if id = workspaceID(protocol.WorkspaceModeOverlay, src.root, chosen); !taken(id) {
				break
			}
		}
	}
	m.forking[id] = true
	return id, chosen, func() {
		m.mu.Lock()
		delete(m.forking, id)
		m.mu.Unlock()
	}, nil
}

// removeGoneForks removes what forks that did not finish left.
func (m *Manager) removeGoneForks() {
	entries, _ := os.ReadDir(m.dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".forkgone-") {
			_ = removeAll(filepath.Join(m.dir, e.Name()))
		}
	}
}

// forkMeta is the fork's meta.json: the source's, with its network
// policy, and the fork's id, name and time.
func forkMeta(src *Workspace, id, name string) meta {
	src.mu.Lock()
	defer src.mu.Unlock()
	md := meta{ID: id, Root: src.root, Mode: src.mode, Name: name, CreatedAt: time.Now().UTC().Truncate(time.Millisecond), Network: string(src.net.mode)}
	for _, r := range src.net.rules {
		md.Allow = append(md.Allow, r.String())
	}
	return md
}

// makeOverlayDirs makes an overlay workspace's directory dir with its
// upper and work directories, as create does.
func makeOverlayDirs(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	// The sandbox's root must be able to enter it (see create).
	if err := os.Chmod(dir, 0o711); err != nil {
		return fmt.Errorf("chmod %s: %w", dir, err)
	}
	uid, gid := sandbox.SandboxRootHostIDs()
	for _, d := range []string{"upper", "work"} {
		p := filepath.Join(dir, d)
		if err := os.Mkdir(p, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", p, err)
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return fmt.Errorf("chown %s to the sandbox's root (%d:%d): %w", p, uid, gid, err)
		}
	}
	return nil
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
