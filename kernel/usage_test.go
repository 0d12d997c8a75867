package kernel

import (
	"context"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// TestKernelListUsage: a kernel/list entry carries the CPU time and the
// resident memory of the kernel's processes, measured when asked: the CPU
// time of a kernel busy in a loop grows, its memory is that of a running
// interpreter, and a kernel that was shut down has neither.
func TestKernelListUsage(t *testing.T) {
	m := newRealManager(t)
	k, s := startKernel(t, m, protocol.KernelStartParams{Language: "python"})
	first := k.Info()
	if first.CPUMs == nil {
		t.Fatalf("kernel/list entry of a running kernel without cpuMs: %+v", first)
	}
	if first.MemoryBytes < 1<<20 {
		t.Fatalf("memoryBytes = %d, want the resident memory of a Python interpreter (> 1 MiB)", first.MemoryBytes)
	}

	done := make(chan *protocol.ExecuteResult, 1)
	go func() {
		res, _ := k.Execute(context.Background(), ExecRequest{Params: protocol.KernelExecuteParams{KernelID: k.ID(),
			Code: "import time\nt = time.time()\nwhile time.time() - t < 120:\n    pass"}, Sink: s})
		done <- res
	}()
	// Half a second of CPU beyond the first figure: the loop runs.
	deadline := time.Now().Add(60 * time.Second)
	var now protocol.KernelInfo
	for {
		now = k.Info()
		if now.CPUMs != nil && *now.CPUMs-*first.CPUMs >= 500 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cpuMs of a busy kernel did not grow by 500 ms in 60 s: first %d, now %+v", *first.CPUMs, now)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if now.MemoryBytes < 1<<20 || now.MemoryBytes > 4<<30 {
		t.Fatalf("memoryBytes of the busy kernel = %d, want between 1 MiB and 4 GiB", now.MemoryBytes)
	}
	if err := k.Interrupt(); err != nil {
		t.Fatalf("interrupt: %v", err)
	}
	if res := <-done; res == nil || res.Status != protocol.ExecutionStatusInterrupted {
		t.Fatalf("the loop after an interrupt: %+v", res)
	}

	list := m.List()
	if len(list) != 1 || list[0].CPUMs == nil || *list[0].CPUMs < *now.CPUMs {
		t.Fatalf("Manager.List = %+v, want the kernel with cpuMs >= %d", list, *now.CPUMs)
	}
	m.Shutdown(context.Background(), k.ID())
	if after := k.Info(); after.CPUMs != nil || after.MemoryBytes != 0 {
		t.Fatalf("a kernel shut down still reports usage: %+v", after)
	}
}
