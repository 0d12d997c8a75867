package kernel

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
)

// TestOutputPipeGrowsOnAFlood: a kernel's stdout pipe starts at the
// kernel's default size (a daemon of hundreds of idle kernels must not
// spend its user's pipe budget), grows to floodPipeBytes once a flood
// fills it, and the flood arrives whole.
func TestOutputPipeGrowsOnAFlood(t *testing.T) {
	m := newRealManager(t)
	k, s := startKernel(t, m, protocol.KernelStartParams{Language: "python"})
	pipeSize := func() int {
		t.Helper()
		k.mu.Lock()
		d := k.drv
		k.mu.Unlock()
		// Not f.Fd(), which would make the daemon's end blocking.
		rc, err := d.out.f.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if cerr := rc.Control(func(fd uintptr) { n, err = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0) }); cerr != nil || err != nil {
			t.Fatal(cerr, err)
		}
		return n
	}
	if got := run(t, k, s, "print('hi')"); got != "hi\n" {
		t.Fatalf("output %q", got)
	}
	if n := pipeSize(); n >= floodPipeBytes {
		t.Fatalf("an idle kernel's stdout pipe is %d bytes", n)
	}
	out := run(t, k, s, "for i in range(100000): print(i)")
	if lines := strings.Count(out, "\n"); lines != 100000 {
		t.Fatalf("the flood came as %d lines", lines)
	}
	if n := pipeSize(); n != floodPipeBytes {
		t.Fatalf("after a flood the stdout pipe is %d bytes, want %d", n, floodPipeBytes)
	}
}
