//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// memResults are the memory figures, in KiB.
type memResults struct {
	idlePy      mem // the first of the idle kernels: its python
	idleHelpers mem // and the helpers of its sandbox
	idleOthers  []string
	jIdle       mem // an idle ipykernel (and any children)
	scratch     *hundred
	shared      *hundred
}

// hundred is K idle kernels started and measured at once, in a daemon of
// their own.
type hundred struct {
	where                   string
	k, sandboxes            int
	start, shutdown         time.Duration
	baseDaemon, baseHelpers mem // before: the daemon with no kernel, and its pooled sandbox's helpers
	daemon, pythons, helper mem
	others                  mem
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
	if err := b.j.do(map[string]any{"op": "shutdown", "k": "main"}, nil); err != nil {
		return err
	}

	// Jupyter: a fresh kernel that ran `1+1`, left idle for a second.
	var ja struct{ Pid int }
	if err := b.j.do(map[string]any{"op": "start", "k": "idle"}, &ja); err != nil {
		return err
	}
	time.Sleep(time.Second)
	ps := scanProcs()
	b.mm.jIdle = memOf(ja.Pid)
	b.mm.jIdle.add(memOfAll(ps.under(ja.Pid)))
	if err := b.j.do(map[string]any{"op": "shutdown", "k": "idle"}, nil); err != nil {
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
	baseDaemon := memOf(d.pid())
	baseHelpers := memOfAll(filter(scanProcs().under(d.pid()), (*proc).isHelper))
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
	for _, p := range scanProcs().under(daemon) {
		before[p.pid] = true
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
			for _, p := range scanProcs().under(daemon) {
				if p.isPython() && !before[p.pid] {
					if firstPy != 0 {
						return nil, fmt.Errorf("two new python processes after one kernel/start (%d, %d)", firstPy, p.pid)
					}
					firstPy = p.pid
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

	ps := scanProcs()
	under := ps.under(daemon)
	h.daemon = memOf(daemon)
	h.pythons = memOfAll(filter(under, (*proc).isPython))
	h.helper = memOfAll(filter(under, (*proc).isHelper))
	others := filter(under, func(p *proc) bool { return !p.isPython() && !p.isHelper() })
	h.others = memOfAll(others)
	names := map[string]int{}
	for _, p := range others {
		names[p.name()]++
	}
	for n, k := range names {
		h.otherNames = append(h.otherNames, fmt.Sprintf("%d× %s", k, n))
	}
	sort.Strings(h.otherNames)
	inits := map[int]bool{}
	for _, p := range filter(under, (*proc).isPython) {
		inits[ps.sandboxInit(p, daemon)] = true
	}
	h.sandboxes = len(inits)
	if n := h.pythons.n; n != h.k {
		return nil, fmt.Errorf("%d python processes under the daemon with %d kernels", n, h.k)
	}

	if first {
		p := ps[firstPy]
		if p == nil {
			return nil, fmt.Errorf("the first kernel's python (pid %d) is gone", firstPy)
		}
		b.mm.idlePy = memOf(firstPy)
		init := ps.sandboxInit(p, daemon)
		sb := append([]*proc{ps[init]}, ps.under(init)...)
		b.mm.idleHelpers = memOfAll(filter(sb, (*proc).isHelper))
		for _, q := range sb {
			if !q.isHelper() && !q.isPython() {
				b.mm.idleOthers = append(b.mm.idleOthers, q.name())
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

func filter(ps []*proc, keep func(*proc) bool) []*proc {
	var out []*proc
	for _, p := range ps {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

// idleFigure is an idle cellbox kernel's memory: its python, its share of
// its sandbox's helpers, and its share of the daemon (the daemon's growth
// from no kernel to K, over K).
func (b *bench) idleFigure(helpersPer int) (total, daemonShare mem) {
	h := b.mm.scratch
	daemonShare = h.daemon.sub(h.baseDaemon).div(h.k)
	total = b.mm.idlePy
	total.add(b.mm.idleHelpers.div(helpersPer))
	total.add(daemonShare)
	return total, daemonShare
}

// marginal is what K kernels added, over K: every process under the
// daemon and the daemon, less the baseline (daemon and pool).
func (b *bench) marginal(h *hundred) mem {
	var all mem
	all.add(h.daemon)
	all.add(h.pythons)
	all.add(h.helper)
	all.add(h.others)
	var base mem
	base.add(h.baseDaemon)
	base.add(h.baseHelpers)
	m := all.sub(base).div(h.k)
	m.pssMissing = h.daemon.pssMissing + h.pythons.pssMissing + h.helper.pssMissing + h.others.pssMissing
	return m
}

func joinOr(s []string, none string) string {
	if len(s) == 0 {
		return none
	}
	return strings.Join(s, ", ")
}
