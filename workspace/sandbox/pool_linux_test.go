package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestPoolRefillsWhenStartsAreQuiet: the pool serves its sandbox, launches
// nothing while starts keep coming (a burst), and refills once they have
// been quiet for refillDelay; the refilled sandbox then serves a start.
func TestPoolRefillsWhenStartsAreQuiet(t *testing.T) {
	p := NewPool()
	t.Cleanup(p.Close)
	pooled := func() (next *launched, filling bool) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.next, p.filling
	}
	waitPooled := func() *launched {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if l, _ := pooled(); l != nil {
				return l
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatal("the pool was not filled within 30 s")
		return nil
	}
	first := waitPooled()

	base := t.TempDir()
	project := filepath.Join(base, "project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	uid, gid := SandboxRootHostIDs()
	cfg := func(i int) Config {
		dir := filepath.Join(base, strconv.Itoa(i))
		for _, d := range []string{"upper", "work"} {
			if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(filepath.Join(dir, d), uid, gid); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() { _ = os.Chmod(filepath.Join(dir, "work", "work"), 0o700) })
		return Config{ID: "pool-" + strconv.Itoa(i), Mode: ModeOverlay, Project: project,
			Upper: filepath.Join(dir, "upper"), Work: filepath.Join(dir, "work")}
	}
	// A burst: each start comes well within refillDelay of the last.
	for i := range 5 {
		s, err := p.Start(context.Background(), cfg(i))
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		if i == 0 && s.init != first.cmd {
			t.Fatal("the first start did not take the pooled sandbox")
		}
		t.Cleanup(func() { s.Close() })
		if next, filling := pooled(); next != nil || filling {
			t.Fatalf("the pool launched during the burst (after start %d)", i)
		}
	}
	// Quiet: it refills, and the next start takes that sandbox.
	refilled := waitPooled()
	s, err := p.Start(context.Background(), cfg(9))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if s.init != refilled.cmd {
		t.Fatal("the start after the burst did not take the refilled sandbox")
	}
}
