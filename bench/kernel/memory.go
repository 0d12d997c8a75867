//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cellbox-dev/cellbox/bench/internal/benchutil"
	"github.com/cellbox-dev/cellbox/protocol"
)

// memResults are the memory figures, in KiB.
type memResults struct {
	idlePy      benchutil.Mem // the first of the idle kernels: its python
	idleHelpers benchutil.Mem // and the helpers of its sandbox
	idleOthers  []string
	jIdle       benchutil.Mem // an idle ipykernel (and any children)
	scratch     *hundred
	shared      *hundred
}

// hundred is K idle kernels started and measured at once, in a daemon of
// their own.
type hundred struct {
	where                   string
	k, sandboxes            int
	start, shutdown         time.Duration
	baseDaemon, baseHelpers benchutil.Mem // before: the daemon with no kernel, and its pooled sandbox's helpers
	daemon, pythons, helper benchutil.Mem
	others                  benchutil.Mem
	otherNames              []string
}

// memory measures an idle kernel of each side, then K idle cellbox
// kernels, each in its own scratch workspace (the default) and, with
// -shared, all in one workspace. Each K runs in a new daemon, so that what
// the earlier steps left in the daemon's heap does not blur its growth.
func (b *bench) memory() error {
	if err := b.d.c.shutdownKernel(b.mainID); err != nil {
		return err
	}
	if err := b.j.Do(map[string]any{"op": "shutdown", "k": "main"}, nil); err != nil {
		return err
	}

	// Jupyter: a fresh kernel that ran `1+1`, left idle for a second.
	var ja struct{ Pid int }
	if err := b.j.Do(map[string]any{"op": "start", "k": "idle"}, &ja); err != nil {
		return err
	}
	time.Sleep(time.Second)
	ps := benchutil.Scan()
	b.mm.jIdle = benchutil.MemOf(ja.Pid)
	b.mm.jIdle.Add(benchutil.MemOfAll(ps.Under(ja.Pid)))
	if err := b.j.Do(map[string]any{"op": "shutdown", "k": "idle"}, nil); err != nil {
		return err
	}

	var err error
	if b.mm.scratch, err = b.freshHundred("", true); err != nil {
		return err
	}
	if b.o.shared {
		b.mm.shared, err = b.freshHundred("shared", false)
	}
	return err
}

// freshHundred replaces the daemon with a new one, takes its baseline (no
// kernel, no workspace, its pool filled), and runs hundred; wsName names a
// workspace all the kernels share ("": each its own scratch workspace).
func (b *bench) freshHundred(wsName string, first bool) (*hundred, error) {
	b.d.close()
	b.daemons++
	d, err := startDaemon(b.o.cellbox, filepath.Join(b.base, fmt.Sprintf("daemon%d", b.daemons)))
	if err != nil {
		return nil, err
	}
	b.d = d
	time.Sleep(2 * time.Second)
	baseDaemon := benchutil.MemOf(d.pid())
	baseHelpers := benchutil.MemOfAll(benchutil.Filter(benchutil.Scan().Under(d.pid()), (*benchutil.Proc).IsHelper))
	ws := ""
	if wsName != "" {
		var info protocol.WorkspaceInfo
		if err := d.c.call(protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: b.project, Name: wsName}, &info); err != nil {
			return nil, err
		}
		ws = info.WorkspaceID
	}
	h, err := b.hundred(ws, first)
	if err != nil {
		return nil, err
	}
	h.baseDaemon, h.baseHelpers = baseDaemon, baseHelpers
	if ws != "" {
		err = d.c.call(protocol.MethodWorkspaceClose, protocol.WorkspaceCloseParams{WorkspaceID: ws}, nil)
	}
	return h, err
}

// hundred starts K kernels in workspace ws ("": each its own scratch
// workspace), runs `1+1` in each, lets them idle 2 s and measures; with
// first, the first kernel's own processes are the idle-kernel figure.
func (b *bench) hundred(ws string, first bool) (*hundred, error) {
	c := b.d.c
	h := &hundred{where: "each in its own scratch workspace (the default)", k: b.o.kernels}
	if ws != "" {
		h.where = "all in one workspace"
	}
	daemon := b.d.pid()
	before := map[int]bool{}
	for _, p := range benchutil.Scan().Under(daemon) {
		before[p.PID] = true
	}
	var ids []string
	defer func() {
		for _, id := range ids { // on an error: leave nothing running
			_ = c.shutdownKernel(id)
		}
	}()
	firstPy := 0
	t0 := time.Now()
	for i := range h.k {
		res, err := c.startKernel(ws)
		if err != nil {
			return nil, fmt.Errorf("kernel %d of %d: %w", i+1, h.k, err)
		}
		ids = append(ids, res.KernelID)
		if err := c.onePlusOne(res.KernelID); err != nil {
			return nil, fmt.Errorf("kernel %d of %d: %w", i+1, h.k, err)
		}
		if i == 0 && first {
			for _, p := range benchutil.Scan().Under(daemon) {
				if p.IsPython() && !before[p.PID] {
					if firstPy != 0 {
						return nil, fmt.Errorf("two new python processes after one kernel/start (%d, %d)", firstPy, p.PID)
					}
					firstPy = p.PID
				}
			}
			if firstPy == 0 {
				return nil, fmt.Errorf("no python process under the daemon (pid %d) after kernel/start", daemon)
			}
		}
		if i%25 == 24 {
			fmt.Fprintf(os.Stderr, "kernel-bench:   %d kernels %s\n", i+1, h.where)
		}
	}
	h.start = time.Since(t0)
	time.Sleep(2 * time.Second)

	ps := benchutil.Scan()
	under := ps.Under(daemon)
	h.daemon = benchutil.MemOf(daemon)
	h.pythons = benchutil.MemOfAll(benchutil.Filter(under, (*benchutil.Proc).IsPython))
	h.helper = benchutil.MemOfAll(benchutil.Filter(under, (*benchutil.Proc).IsHelper))
	others := benchutil.Filter(under, func(p *benchutil.Proc) bool { return !p.IsPython() && !p.IsHelper() })
	h.others = benchutil.MemOfAll(others)
	names := map[string]int{}
	for _, p := range others {
		names[p.Name()]++
	}
	for n, k := range names {
		h.otherNames = append(h.otherNames, fmt.Sprintf("%d× %s", k, n))
	}
	sort.Strings(h.otherNames)
	inits := map[int]bool{}
	for _, p := range benchutil.Filter(under, (*benchutil.Proc).IsPython) {
		inits[sandboxInit(ps, p, daemon)] = true
	}
	h.sandboxes = len(inits)
	if n := h.pythons.N; n != h.k {
		return nil, fmt.Errorf("%d python processes under the daemon with %d kernels", n, h.k)
	}

	if first {
		p := ps[firstPy]
		if p == nil {
			return nil, fmt.Errorf("the first kernel's python (pid %d) is gone", firstPy)
		}
		b.mm.idlePy = benchutil.MemOf(firstPy)
		init := sandboxInit(ps, p, daemon)
		sb := append([]*benchutil.Proc{ps[init]}, ps.Under(init)...)
		b.mm.idleHelpers = benchutil.MemOfAll(benchutil.Filter(sb, (*benchutil.Proc).IsHelper))
		for _, q := range sb {
			if !q.IsHelper() && !q.IsPython() {
				b.mm.idleOthers = append(b.mm.idleOthers, q.Name())
			}
		}
	}

	t1 := time.Now()
	for _, id := range ids {
		if err := c.shutdownKernel(id); err != nil {
			ids = nil
			return nil, err
		}
	}
	ids = nil
	h.shutdown = time.Since(t1)
	return h, nil
}

// sandboxInit is the helper at the top of p's sandbox: the ancestor of p
// whose parent is the daemon (0 when there is none).
func sandboxInit(ps benchutil.Procs, p *benchutil.Proc, daemon int) int {
	for q := p; q != nil; q = ps[q.PPID] {
		if q.PPID == daemon {
			return q.PID
		}
	}
	return 0
}

// idleFigure is an idle cellbox kernel's memory: its python, its share of
// its sandbox's helpers, and its share of the daemon (the daemon's growth
// from no kernel to K, over K).
func (b *bench) idleFigure(helpersPer int) (total, daemonShare benchutil.Mem) {
	h := b.mm.scratch
	daemonShare = memDiv(memSub(h.daemon, h.baseDaemon), h.k)
	total = b.mm.idlePy
	total.Add(memDiv(b.mm.idleHelpers, helpersPer))
	total.Add(daemonShare)
	return total, daemonShare
}

// marginal is what K kernels added, over K: every process under the
// daemon and the daemon, less the baseline (daemon and pool).
func (b *bench) marginal(h *hundred) benchutil.Mem {
	var all benchutil.Mem
	all.Add(h.daemon)
	all.Add(h.pythons)
	all.Add(h.helper)
	all.Add(h.others)
	var base benchutil.Mem
	base.Add(h.baseDaemon)
	base.Add(h.baseHelpers)
	m := memDiv(memSub(all, base), h.k)
	m.PSSMissing = h.daemon.PSSMissing + h.pythons.PSSMissing + h.helper.PSSMissing + h.others.PSSMissing
	return m
}

// memDiv is m's sizes over k (k <= 0: m); the counts stay.
func memDiv(m benchutil.Mem, k int) benchutil.Mem {
	if k <= 0 {
		return m
	}
	d := int64(k)
	return benchutil.Mem{N: m.N, RSS: m.RSS / d, Anon: m.Anon / d, File: m.File / d, Shmem: m.Shmem / d, PSS: m.PSS / d, PSSMissing: m.PSSMissing}
}

// memSub is m less o. Its PSSMissing is left 0: marginal sets it from
// the parts, and idleFigure's is the daemon's, whose smaps_rollup the
// benchmark's own user can read.
func memSub(m, o benchutil.Mem) benchutil.Mem {
	return benchutil.Mem{N: m.N - o.N, RSS: m.RSS - o.RSS, Anon: m.Anon - o.Anon, File: m.File - o.File, Shmem: m.Shmem - o.Shmem, PSS: m.PSS - o.PSS}
}

// pssText is the PSS, or why it is missing.
func pssText(m benchutil.Mem) string {
	if m.PSSMissing > 0 {
		return fmt.Sprintf("PSS n/a (%d unreadable)", m.PSSMissing)
	}
	return "PSS " + benchutil.MiB(m.PSS)
}

// memText is m as the report's memory lines show it.
func memText(m benchutil.Mem) string {
	return fmt.Sprintf("RSS %s (anon %s, file %s, shmem %s), %s", benchutil.MiB(m.RSS), benchutil.MiB(m.Anon),
		benchutil.MiB(m.File), benchutil.MiB(m.Shmem), pssText(m))
}

func joinOr(s []string, none string) string {
	if len(s) == 0 {
		return none
	}
	return strings.Join(s, ", ")
}
