package kernel

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
	"github.com/cellbox-dev/cellbox/workspace/sandbox/sandboxtest"
)

// TestRealDrivers runs each language's real driver in a sandbox: output,
// a result or exit status, state, and an interrupt. It also runs as an
// unprivileged user (TestRealDriversAsUser), as users mostly run cellbox;
// the full end-to-end suite is in cmd/cellbox.
func TestRealDrivers(t *testing.T) {
	ws, err := workspace.NewManager(workspace.Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ws.Close)
	m := NewManager(Options{Workspaces: ws, Languages: func() []Language { return DetectLanguages(context.Background()) }})
	t.Cleanup(m.Close)
	cases := []struct{ lang, set, get, loop string }{
		// Each loop says it has begun, so the interrupt comes inside it.
		{"python", "v = 'ünï'", "print(v)", "print('looping', flush=True)\nwhile True: pass"},
		{"javascript", "let v = 'ünï'", "console.log(v)", "console.log('looping'); while (true) {}"},
		{"bash", "v=ünï", "echo $v", "echo looping; while :; do :; done"},
	}
	for _, tc := range cases {
		t.Run(tc.lang, func(t *testing.T) {
			s := &sink{}
			k, err := m.Start(context.Background(), protocol.KernelStartParams{Language: tc.lang}, s)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Shutdown(context.Background(), k.ID())
			for _, code := range []string{tc.set, tc.get} {
				if res, outs := execProbe(t, k, s, code); res.Status != protocol.ExecutionStatusOK {
					t.Fatalf("%q: %+v %+v", code, res, outs)
				}
			}
			res, outs := execProbe(t, k, s, tc.get)
			if len(outs) != 1 || outs[0].Text != "ünï\n" {
				t.Fatalf("state: %+v %+v", res, outs)
			}
			go func() {
				for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
					if s.has("looping\n") {
						break
					}
				}
				_ = k.Interrupt()
			}()
			res, _ = execProbe(t, k, s, tc.loop)
			if res.Status != protocol.ExecutionStatusInterrupted {
				t.Fatalf("interrupt: %+v", res)
			}
			if res, outs = execProbe(t, k, s, tc.get); !strings.HasPrefix(outs[0].Text, "ünï") {
				t.Fatalf("after the interrupt: %+v %+v", res, outs)
			}
		})
	}
	// node can lose a SIGINT that lands as vm's breakOnSigint watchdog
	// stops; a cell that then awaits never sees it. The cell here swallows
	// every SIGINT itself once it awaits (from a timer, outside vm's
	// handling of SIGINT), as a lost one would be: kernel/interrupt still
	// ends it, through the interrupt request.
	t.Run("javascript/SIGINT swallowed", func(t *testing.T) {
		s := &sink{}
		k, err := m.Start(context.Background(), protocol.KernelStartParams{Language: "javascript"}, s)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Shutdown(context.Background(), k.ID())
		go func() {
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if s.has("waiting\n") {
					break
				}
			}
			_ = k.Interrupt()
		}()
		res, _ := execProbe(t, k, s, "setTimeout(() => { process.removeAllListeners('SIGINT'); process.on('SIGINT', () => {}); console.log('waiting') }, 0)\nawait new Promise((r) => setTimeout(r, 30000)); console.log('slept')")
		if res.Status != protocol.ExecutionStatusInterrupted || s.has("slept") {
			t.Fatalf("a cell that swallows SIGINT, interrupted: %+v", res)
		}
		if res, outs := execProbe(t, k, s, "1 + 1"); res.Status != protocol.ExecutionStatusOK || len(outs) != 1 || outs[0].Data["text/plain"] != "2" {
			t.Fatalf("after the interrupt: %+v %+v", res, outs)
		}
	})
}

func TestRealDriversAsUser(t *testing.T) {
	if sandboxtest.AsTestUser() {
		t.Skip("already the test user")
	}
	sandboxtest.RunAsTestUser(t, "^(TestRealDrivers|TestOrderAndTruncation|TestInputAndDeath|TestForged.*)$")
}
