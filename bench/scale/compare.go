//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cellbox-dev/cellbox/bench/internal/benchutil"
	"github.com/cellbox-dev/cellbox/protocol"
)

// side is one daemon of -compare-self with its idle kernels.
type side struct {
	name, env               string
	helperExe               string
	below, pythons, helpers benchutil.Mem
	others                  benchutil.Mem
}

// compare measures idle kernels, each in its own scratch workspace, under
// a fresh daemon whose sandboxes run the lean helper, then under one
// whose sandboxes re-execute the daemon's binary; one daemon at a time, so
// that neither's pages are shared with (and their PSS split with) the
// other's. With -jupyter-side, as many ipykernels too.
func (b *bench) compare() error {
	var err error
	if b.lean, err = b.compareSide("lean", ""); err != nil {
		return err
	}
	if b.self, err = b.compareSide("self", "CELLBOX_SANDBOX_HELPER=self"); err != nil {
		return err
	}
	if b.o.jupyterSide != "" {
		return b.ipykernels()
	}
	return nil
}

func (b *bench) compareSide(name, env string) (s *side, err error) {
	s = &side{name: name, env: env}
	o := benchutil.Options{Bin: b.o.cellbox, Dir: filepath.Join(b.base, "compare-"+name), Args: serveArgs}
	if env != "" {
		o.Env = []string{env}
	}
	d, err := benchutil.Start(o)
	if err != nil {
		return nil, fmt.Errorf("start cellbox (%s): %w", name, err)
	}
	defer func() {
		if err != nil {
			d.Kill()
			err = fmt.Errorf("%s: %w%s", name, err, d.Stderr.Show())
		}
	}()
	c, err := d.Dial("cellbox-scale-bench", b.note)
	if err != nil {
		return nil, err
	}
	var ids []string
	for i := range b.o.compareKernels {
		// The pool launches its next sandbox once starts are quiet; the
		// kernels' memory is the same either way, so no pause.
		res, err := startKernel(c, "")
		if err != nil {
			return nil, fmt.Errorf("kernel %d: %w", i+1, err)
		}
		ids = append(ids, res.KernelID)
		if err := b.onePlusOne(c, res.KernelID); err != nil {
			return nil, err
		}
	}
	// As long as a kernel of the curve idles before its point is read, and
	// long enough for the pool to have its sandbox again.
	time.Sleep(max(b.o.idle, 2*time.Second))
	pid := d.PID()
	for _, q := range benchutil.Scan().Under(pid) {
		m := benchutil.MemOf(q.PID)
		s.below.Add(m)
		switch kind(q) {
		case "python":
			s.pythons.Add(m)
		case "helper":
			s.helpers.Add(m)
			if s.helperExe == "" {
				s.helperExe, _ = os.Readlink(filepath.Join("/proc", strconv.Itoa(q.PID), "exe"))
			}
		default:
			s.others.Add(m)
		}
	}
	if s.pythons.N != len(ids) {
		return nil, fmt.Errorf("%d python processes below the daemon with %d kernels", s.pythons.N, len(ids))
	}
	var errs []error
	for _, id := range ids {
		errs = append(errs, c.Call(protocol.MethodKernelShutdown, protocol.KernelIDParams{KernelID: id}, nil))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	c.Close()
	return s, d.Stop()
}

// ipykernels starts as many ipykernels through jupyter_client (each ran
// `1+1`), lets them idle as long, and sums each kernel process and its
// children.
func (b *bench) ipykernels() error {
	script, err := os.ReadFile(b.o.jupyterSide)
	if err != nil {
		return fmt.Errorf("-jupyter-side: %w", err)
	}
	j, err := benchutil.StartJupyter(b.o.python, string(script), filepath.Join(b.base, "jupyter"))
	if err != nil {
		return err
	}
	defer j.Close()
	var v struct{ Ipykernel string }
	if err := j.Do(map[string]any{"op": "versions"}, &v); err != nil {
		return err
	}
	var pids []int
	for i := range b.o.compareKernels {
		var a struct{ Pid int }
		if err := j.Do(map[string]any{"op": "start", "k": fmt.Sprintf("idle%d", i)}, &a); err != nil {
			return err
		}
		pids = append(pids, a.Pid)
	}
	time.Sleep(max(b.o.idle, 2*time.Second))
	ps := benchutil.Scan()
	var m benchutil.Mem
	var all []*benchutil.Proc
	for _, pid := range pids {
		if p := ps[pid]; p != nil {
			all = append(all, p)
		}
		all = append(all, ps.Under(pid)...)
	}
	m = benchutil.MemOfAll(all)
	if m.N < len(pids) {
		return fmt.Errorf("%d of %d ipykernels are running", m.N, len(pids))
	}
	b.jup, b.jupVersion = &m, v.Ipykernel
	j.Close() // its quit shuts the kernels down
	return benchutil.WaitGone(all, 30*time.Second)
}
