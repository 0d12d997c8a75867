package rpc

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// TestKernelListUsage: over the wire, kernel/list's entries carry cpuMs and
// memoryBytes (PROTOCOL.md §4, an extension): the CPU time of a kernel
// busy in a loop grows between two lists, and its memory is that of a
// running interpreter.
func TestKernelListUsage(t *testing.T) {
	state := daemonEnv(t)
	c := dialTest(t, state, ClientOptions{})
	caps := c.Capabilities()
	if i := slices.IndexFunc(caps.Languages, func(l protocol.LanguageCapability) bool { return l.ID == "python" }); i < 0 || !caps.Languages[i].Available {
		t.Fatalf("no python kernel on this host: %+v", caps.Languages)
	}
	var k protocol.KernelStartResult
	callTest(t, c, protocol.MethodKernelStart, protocol.KernelStartParams{Language: "python"}, &k)
	t.Cleanup(func() {
		_ = c.Call(context.Background(), protocol.MethodKernelShutdown, map[string]string{"kernelId": k.KernelID}, nil)
	})
	entry := func() map[string]json.RawMessage {
		t.Helper()
		var raw struct {
			Kernels []map[string]json.RawMessage `json:"kernels"`
		}
		callTest(t, c, protocol.MethodKernelList, struct{}{}, &raw)
		for _, e := range raw.Kernels {
			var id string
			_ = json.Unmarshal(e["kernelId"], &id)
			if id == k.KernelID {
				return e
			}
		}
		t.Fatalf("kernel/list has no %s: %v", k.KernelID, raw.Kernels)
		return nil
	}
	num := func(e map[string]json.RawMessage, field string) int64 {
		t.Helper()
		var n int64
		if err := json.Unmarshal(e[field], &n); err != nil {
			t.Fatalf("kernel/list entry's %s = %s, want a number: %v", field, e[field], err)
		}
		return n
	}
	cpu0 := num(entry(), "cpuMs")

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		_ = c.Call(ctx, protocol.MethodKernelExecute, protocol.KernelExecuteParams{KernelID: k.KernelID,
			Code: "import time\nt = time.time()\nwhile time.time() - t < 120:\n    pass"}, nil)
	}()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		e := entry()
		cpu, mem := num(e, "cpuMs"), num(e, "memoryBytes")
		if cpu-cpu0 >= 500 {
			if mem < 1<<20 || mem > 4<<30 {
				t.Fatalf("memoryBytes of a busy Python kernel = %d, want between 1 MiB and 4 GiB", mem)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cpuMs of a busy kernel did not grow by 500 ms in 60 s: %d then %d", cpu0, cpu)
		}
	}
	cancel() // $/cancelRequest interrupts the loop
}
