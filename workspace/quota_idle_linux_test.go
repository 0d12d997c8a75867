package workspace

import (
	"context"
	"fmt"
	"math"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// TestQuotaTickIdlesWithItsSandbox: a sandbox whose programs sleep costs
// the daemon no quota or memory walks (the tick sees no activity), and a
// daemon-side write or Wake makes it measure again.
func TestQuotaTickIdlesWithItsSandbox(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "idle")
	p, err := w.Spawn(context.Background(), ProcSpec{Argv: []string{"sleep", "600"}, Limits: limits(t, protocol.Limits{})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	// Idle: within a few ticks the count stops moving.
	settled := waitFor(t, 20*time.Second, func() bool {
		before := w.measures.Load()
		time.Sleep(3 * time.Second)
		return w.measures.Load() == before
	})
	if !settled {
		t.Fatalf("the quota tick kept measuring an idle sandbox (%d measures)", w.measures.Load())
	}
	// A file written by the daemon through the view is measured.
	before := w.measures.Load()
	if _, err := w.FsWrite(protocol.FsWriteParams{Path: "from-the-daemon.txt", Content: "x"}); err != nil {
		t.Fatal(err)
	}
	if !waitFor(t, 10*time.Second, func() bool { return w.measures.Load() > before }) {
		t.Fatal("no measure after the daemon wrote a file")
	}
	// Wake (an execution, terminal input) measures at once.
	waitFor(t, 20*time.Second, func() bool {
		b := w.measures.Load()
		time.Sleep(3 * time.Second)
		return w.measures.Load() == b
	})
	before = w.measures.Load()
	w.Wake()
	if !waitFor(t, 3*quotaInterval+time.Second, func() bool { return w.measures.Load() > before }) {
		t.Fatal("no measure soon after Wake")
	}
}

// TestAttackDiskQuotaAfterIdling: a program that idles until the quota tick
// has slowed down, then fills the disk (at TestAttackDiskQuota's pace), is
// still stopped near its quota: the idle pace is what its headroom allows
// (idlePace).
func TestAttackDiskQuotaAfterIdling(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "quota-idle")
	const quota = 64 << 20
	script := fmt.Sprintf(`
import time
time.sleep(%d)
for i in range(3000):
    with open("/workspace/fill%%d" %% i, "wb") as f:
        f.write(b"x" * (1 << 20))
    time.sleep(0.002)
print("survived", flush=True)
time.sleep(60)`, int(2*maxIdleInterval/time.Second))
	r := runIn(t, w, protocol.Limits{DiskBytes: quota, TimeoutMs: 60000}, "python3", "-c", script)
	used := diskUsage(w.UpperDir(), 1<<40)
	t.Logf("%s after %v; %d MiB charged (quota %d MiB)", outcome(r), r.Duration.Round(time.Millisecond), used>>20, quota>>20)
	if r.Status.Reason != "killed: disk quota exceeded" || r.Status.Signal != syscall.SIGKILL {
		t.Fatalf("%s; want killed: disk quota exceeded", outcome(r))
	}
	if strings.Contains(string(r.Stdout), "survived") || used > 8*quota {
		t.Fatalf("stopped at %d MiB, far past the %d MiB quota", used>>20, quota>>20)
	}
}

// TestIdlePace: the idle tick comes before the headroom could be filled
// at fillRate, within its bounds.
func TestIdlePace(t *testing.T) {
	for _, c := range []struct {
		headroom int64
		want     time.Duration
	}{
		{0, quotaInterval},
		{64 << 20, quotaInterval},
		{1 << 30, 500 * time.Millisecond},
		{10 << 30, maxIdleInterval},
		{math.MaxInt64, maxIdleInterval},
	} {
		if got := idlePace(c.headroom); got != c.want {
			t.Errorf("idlePace(%d) = %v, want %v", c.headroom, got, c.want)
		}
	}
}

// waitFor polls cond every 20 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, cond func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
