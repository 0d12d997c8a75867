package workspace

import (
	"io/fs"
	"path/filepath"
	"time"

	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// quotaInterval is how often a running workspace's upper layer is measured.
const quotaInterval = 250 * time.Millisecond

// minFileCharge is what each file counts at least toward diskBytes, so a
// flood of empty files meets the quota too.
const minFileCharge = 4096

// watchQuota measures the workspace's writable layer while its sandbox
// runs (a program's background children may write after it ends) and,
// over the quota, kills every program of the sandbox.
func (w *Workspace) watchQuota(sb *sandbox.Sandbox) {
	dir := w.UpperDir()
	if dir == "" {
		dir = w.root // scratch
	}
	t := time.NewTicker(quotaInterval)
	defer t.Stop()
	for {
		select {
		case <-sb.Done():
			return
		case <-t.C:
		}
		w.mu.Lock()
		quota := w.quota
		w.mu.Unlock()
		if used := diskUsage(dir, quota); used > quota {
			w.m.log.Warn("disk quota exceeded; killing the workspace's programs", "workspace", w.id, "used_bytes", used, "quota_bytes", quota)
			w.mu.Lock()
			for p := range w.procs {
				p.setReason("killed: disk quota exceeded")
			}
			w.mu.Unlock()
			_ = sb.KillAll()
		}
	}
}

// diskUsage is the space the files under dir take (allocated blocks, each
// file at least minFileCharge); it stops counting past limit.
func diskUsage(dir string, limit int64) int64 {
	var used int64
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		used += minFileCharge
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				used += max(blocks(fi)-minFileCharge, 0)
			}
		}
		if used > limit {
			return filepath.SkipAll
		}
		return nil
	})
	return used
}
