package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCgroupFiles checks what a sandbox cgroup writes and reads, on a
// stand-in directory with the files of a cgroup v2 (cgroupfs itself needs
// delegated controllers, which a test host may lack; TestOpenCgroupsAgrees
// and workspace.TestAttackMemoryTogether use the real one where it is).
func TestCgroupFiles(t *testing.T) {
	cs := &Cgroups{dir: t.TempDir()}
	cg, err := cs.New("ws1-42")
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"cgroup.procs": "", "memory.max": "max\n",
		"memory.events": "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n",
	} {
		if err := os.WriteFile(filepath.Join(cg.Dir(), name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := cg.Add(4242); err != nil {
		t.Fatal(err)
	}
	if err := cg.SetMemoryMax(256 << 20); err != nil {
		t.Fatalf("SetMemoryMax without memory.swap.max (no swap accounting): %v", err)
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(cg.Dir(), name))
		return string(b)
	}
	if got := read("cgroup.procs"); got != "4242" {
		t.Errorf("cgroup.procs = %q", got)
	}
	if got := read("memory.max"); got != "268435456" {
		t.Errorf("memory.max = %q", got)
	}
	if n := cg.LimitOOMs(); n != 1 {
		t.Errorf("LimitOOMs = %d, want 1 (the oom line, not oom_kill)", n)
	}
	if err := cg.SetMemoryMax(0); err != nil || read("memory.max") != "max" {
		t.Errorf("no limit: memory.max = %q, %v", read("memory.max"), err)
	}
}

// TestOpenCgroupsAgrees: the daemon uses cgroups exactly where doctor
// reports them available, and says why not elsewhere.
func TestOpenCgroupsAgrees(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := Probe(ctx, ProbeOptions{StateDir: t.TempDir()})
	cs, err := OpenCgroups()
	l, _ := r.Layer(LayerCgroups)
	t.Logf("probe: %+v; OpenCgroups: %v", l, err)
	if r.Available(LayerCgroups) != (err == nil) {
		t.Fatalf("doctor says cgroups available=%v, OpenCgroups: %v", r.Available(LayerCgroups), err)
	}
	if err != nil {
		return
	}
	cg, err := cs.New("test-" + filepath.Base(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if err := cg.SetMemoryMax(64 << 20); err != nil {
		t.Fatal(err)
	}
	if err := cg.Remove(); err != nil {
		t.Fatal(err)
	}
}
