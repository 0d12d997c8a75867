//go:build linux

package workspace

import (
	"time"

	"github.com/cellbox-dev/cellbox/protocol"

	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// quotaInterval is how often a running workspace's upper layer is measured.
const quotaInterval = 250 * time.Millisecond

// minFileCharge is what each file counts at least toward diskBytes, so a
// flood of empty files meets the quota too.
const minFileCharge = 4096

// quotaRetries: a walk that saw the tree change is tried again at once,
// this many times; quotaFailures ticks in a row whose walks all failed
// kill the sandbox's programs (a tree that cannot be measured is not
// trusted to be under its quota).
const (
	quotaRetries  = 3
	quotaFailures = 20
)

// watchQuota measures the workspace's writable layer while its sandbox
// runs (a program's background children may write after it ends) and,
// over the quota, kills every program of the sandbox. What is measured:
// the files under the upper layer (walked by descriptors, see walkUsage)
// and the files its programs hold open or mapped after unlinking them
// (heldDeleted), which no walk can find. A direct workspace has no
// quota. The same tick checks the memory the sandbox's programs hold
// together (checkMemory), and records the baselines of the paths the
// workspace touched since the last tick (noteTouched).
func (w *Workspace) watchQuota(sb *sandbox.Sandbox, cg *sandbox.Cgroup) {
	dir := w.UpperDir()
	if dir == "" {
		dir = w.root // scratch
	}
	direct := w.mode == protocol.WorkspaceModeDirect
	t := time.NewTicker(quotaInterval)
	defer t.Stop()
	failed := 0
	var touched int64 // see noteTouched
	mem := memoryState{max: -1}
	for {
		select {
		case <-sb.Done():
			if !direct {
				w.noteTouched(touched)
			}
			if cg != nil {
				if err := cg.Remove(); err != nil {
					w.m.log.Warn("sandbox cgroup left behind", "workspace", w.id, "err", err)
				}
			}
			return
		case <-t.C:
		}
		w.checkMemory(sb, cg, &mem)
		if direct {
			continue
		}
		w.checkQuota(sb, dir, &failed)
		// Baselines after the quota: a flood of new files must not delay
		// the check that stops it.
		touched = w.noteTouched(touched)
	}
}

// checkQuota is one quota tick: measure, and kill past the quota in force.
func (w *Workspace) checkQuota(sb *sandbox.Sandbox, dir string, failed *int) {
	quota := w.quotaInForce()
	used, err := measure(dir, quota)
	if err == nil {
		used += heldDeleted(sb.InitPID())
		*failed = 0
	} else if *failed++; *failed < quotaFailures {
		return
	}
	if err == nil && used <= quota {
		return
	}
	// The programs may have changed while the tree was measured (the
	// one over its quota ended, another began): the kill is for the
	// quota in force now.
	if now := w.quotaInForce(); err == nil && used <= now {
		return
	}
	reason := "killed: disk quota exceeded"
	if err != nil {
		reason = "killed: the workspace's disk use could not be measured (" + err.Error() + ")"
		*failed = 0
	}
	w.m.log.Warn("disk quota: killing the workspace's programs", "workspace", w.id, "used_bytes", used, "quota_bytes", quota, "reason", reason)
	w.mu.Lock()
	for p := range w.procs {
		p.setReason(reason)
	}
	w.mu.Unlock()
	_ = sb.KillAll()
}

// quotaInForce is the smallest diskBytes of the programs running now (one
// that has ended but is not yet forgotten does not count), else the last
// quota in force: what programs' background children write is held to it.
func (w *Workspace) quotaInForce() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var q int64
	for d := range w.starting {
		if *d > 0 && (q == 0 || *d < q) {
			q = *d
		}
	}
	for p := range w.procs {
		select {
		case <-p.Exited():
			continue
		default:
		}
		if p.disk > 0 && (q == 0 || p.disk < q) {
			q = p.disk
		}
	}
	if q > 0 {
		w.quota = q
	}
	return w.quota
}

// checkMemory kills the sandbox's programs when together they hold more
// memory than the memoryBytes of the programs it started add up to (none
// of them unlimited). With a cgroup of its own the kernel counts (see
// cgroupMemory), and enforces the same budget between ticks.
func (w *Workspace) checkMemory(sb *sandbox.Sandbox, cg *sandbox.Cgroup, st *memoryState) {
	w.mu.Lock()
	var limit int64
	for p := range w.procs {
		if p.memory <= 0 {
			limit = 0
			break
		}
		limit += p.memory
	}
	w.mu.Unlock()
	var used int64
	if cg != nil {
		var oom bool
		used, oom = cgroupMemory(cg, limit, st)
		if oom {
			used = max(used, limit+1) // the kernel killed for the budget
		}
	}
	if limit <= 0 {
		return
	}
	if cg == nil || used < 0 {
		used = memoryUsage(sb.InitPID())
	}
	if used <= limit {
		return
	}
	// The reason kernels and clients know (a kernel/status dead reason);
	// the figures go to the log.
	const reason = "killed: memory limit"
	w.m.log.Warn("memory limit: the sandbox's programs together (memfd and /dev/shm included) hold more than their memoryBytes add up to; killing them",
		"workspace", w.id, "used_mib", used>>20, "limit_mib", limit>>20)
	w.mu.Lock()
	for p := range w.procs {
		p.setReason(reason)
	}
	w.mu.Unlock()
	_ = sb.KillAll()
}

// measure is walkUsage, tried again when the tree changed under it.
func measure(dir string, limit int64) (int64, error) {
	var used int64
	var err error
	for range quotaRetries {
		if used, err = walkUsage(dir, limit); err == nil || used > limit {
			return used, nil
		}
	}
	return used, err
}

// diskUsage is the space the files under dir take (see walkUsage); it
// stops counting past limit.
func diskUsage(dir string, limit int64) int64 {
	used, _ := measure(dir, limit)
	return used
}
