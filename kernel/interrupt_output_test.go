package kernel

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// TestInterruptedPrintsOnce: a python cell that prints without end is
// interrupted again and again; what reached the client is each line once,
// in order. A SIGINT that lands in the driver's raw write, after its bytes
// reached the pipe, used to leave them in Python's BufferedWriter, which
// wrote them again (seen as "started\nstarted\n" from an interrupted !cmd).
func TestInterruptedPrintsOnce(t *testing.T) {
	m := newRealManager(t)
	k, err := m.Start(context.Background(), protocol.KernelStartParams{Language: "python"}, &sink{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.Background(), k.ID())
	for round := range 8 {
		s := &sink{}
		// Small writes (line-buffered) make many raw writes for a SIGINT to land in.
		code := fmt.Sprintf("import sys\nsys.stdout.reconfigure(line_buffering=True)\ni = 0\nwhile True:\n    print('r%d', i)\n    i += 1", round)
		go func() {
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				if s.has(fmt.Sprintf("r%d %d\n", round, 200+round*37)) {
					break
				}
			}
			_ = k.Interrupt()
		}()
		res, outs := execProbe(t, k, s, code)
		if res.Status != protocol.ExecutionStatusInterrupted {
			t.Fatalf("round %d: %+v", round, res)
		}
		var text strings.Builder
		for _, o := range outs {
			if o.Kind == protocol.OutputKindStream && o.Name == protocol.StreamStdout {
				text.WriteString(o.Text)
			}
		}
		lines := strings.Split(text.String(), "\n")
		lines = lines[:len(lines)-1] // the last is empty or cut short by the interrupt
		for i, l := range lines {
			if want := fmt.Sprintf("r%d %s", round, strconv.Itoa(i)); l != want {
				t.Fatalf("round %d: line %d is %q, want %q", round, i, l, want)
			}
		}
	}
}
