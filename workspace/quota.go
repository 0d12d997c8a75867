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

// watchQuota measures the workspace's writable layer while programs run
// and kills them all when it holds more than the quota.
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
		quota, n := w.quota, len(w.procs)
		w.mu.Unlock()
		if n == 0 || quota <= 0 {
			continue
		}
		if used := diskUsage(dir, quota); used > quota {
			w.m.log.Warn("disk quota exceeded; killing the workspace's programs", "workspace", w.id, "used_bytes", used, "quota_bytes", quota)
			w.mu.Lock()
			procs := make([]*Proc, 0, len(w.procs))
			for p := range w.procs {
				procs = append(procs, p)
			}
			w.mu.Unlock()
			for _, p := range procs {
				p.kill("killed: disk quota exceeded")
			}
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
