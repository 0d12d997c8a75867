package kernel

import (
	"context"
	"fmt"
	"testing"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
)

// BenchmarkDisplayEvents is the cost of the driver's events on the output
// path: a real python kernel sends 2,000 display events per execution, each
// read, validated (for the running execution), numbered and delivered.
// ns/op is one execution; the per-event figure is printed.
func BenchmarkDisplayEvents(b *testing.B) {
	ws, err := workspace.NewManager(workspace.Options{StateDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ws.Close)
	m := NewManager(Options{Workspaces: ws, Languages: func() []Language { return DetectLanguages(context.Background()) }})
	b.Cleanup(m.Close)
	k, err := m.Start(context.Background(), protocol.KernelStartParams{Language: "python"}, &sink{})
	if err != nil {
		b.Fatal(err)
	}
	const events = 2000
	code := fmt.Sprintf("for i in range(%d):\n    display({'text/plain': str(i)}, raw=True)", events)
	b.ResetTimer()
	for b.Loop() {
		s := &sink{}
		res, err := k.Execute(context.Background(), ExecRequest{Params: protocol.KernelExecuteParams{Code: code}, Sink: s})
		if err != nil || res.Status != protocol.ExecutionStatusOK {
			b.Fatalf("%v %+v", err, res)
		}
		if n := len(s.of(res.ExecutionID)); n != events {
			b.Fatalf("%d outputs, want %d", n, events)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
}
