package kernel

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/sandbox/sandboxtest"
)

// TestRealDrivers runs each language's real driver in a sandbox: output,
// a result or exit status, state, and an interrupt. It also runs as an
// unprivileged user (TestRealDriversAsUser), as users mostly run cellbox;
// the full end-to-end suite is in cmd/cellbox.
func TestRealDrivers(t *testing.T) {
	// Go's own archive installs in /usr/local/go/bin, which the test
	// user's PATH (sandboxtest) does not name.
	if _, err := exec.LookPath("go"); err != nil {
		t.Setenv("PATH", os.Getenv("PATH")+string(os.PathListSeparator)+"/usr/local/go/bin")
	}
	m := newRealManager(t)
	cases := []struct{ lang, set, get, loop string }{
		// Each loop says it has begun, so the interrupt comes inside it.
		{"python", "v = 'ünï'", "print(v)", "print('looping', flush=True)\nwhile True: pass"},
		{"javascript", "let v = 'ünï'", "console.log(v)", "console.log('looping'); while (true) {}"},
		{"typescript", "interface V { s: string }\nlet v: V['s'] = 'ünï'", "console.log(v as string)", "console.log('looping'); while (true as boolean) {}"},
		{"bash", "v=ünï", "echo $v", "echo looping; while :; do :; done"},
		{"ruby", "v = 'ünï'", "puts v", "puts 'looping'\nloop {}"},
		{"r", "v <- 'ünï'", "cat(v, '\\n', sep = '')", "cat('looping\\n')\nwhile (TRUE) {}"},
		// Declarations persist; a busy loop stops (SIGINT to the program).
		{"go", "import \"fmt\"\nvar v = \"ünï\"", "fmt.Println(v)", "fmt.Println(\"looping\")\nfor {\n}"},
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
			// R writes each piece of cat's output through at once: the
			// manager may read them as more than one chunk.
			res, outs := execProbe(t, k, s, tc.get)
			if stdoutOnly(outs) != "ünï\n" {
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
			if res, outs = execProbe(t, k, s, tc.get); len(outs) == 0 || !strings.HasPrefix(outs[0].Text, "ünï") {
				t.Fatalf("after the interrupt: %+v %+v", res, outs)
			}
		})
	}
	// node can lose a SIGINT that lands as vm's breakOnSigint watchdog
	// stops; a cell that then awaits never sees it, so kernel/interrupt
	// also sends the javascript driver an interrupt request. Here the
	// request comes alone, as when the SIGINT was lost: it ends the cell
	// that awaits, and the kernel goes on.
	t.Run("javascript/SIGINT lost", func(t *testing.T) {
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
			k.mu.Lock()
			d, e := k.drv, k.current
			k.mu.Unlock()
			if e == nil || !d.cfg.interruptRequest {
				t.Errorf("no execution running (%v), or no interrupt request for javascript", e)
				return
			}
			if err := d.send(&request{Op: "interrupt", ID: e.id}); err != nil {
				t.Error(err)
			}
		}()
		res, _ := execProbe(t, k, s, "console.log('waiting'); await new Promise((r) => setTimeout(r, 30000)); console.log('slept')")
		if res.Status != protocol.ExecutionStatusInterrupted || s.has("slept") {
			t.Fatalf("a cell interrupted by the request alone: %+v", res)
		}
		if res, outs := execProbe(t, k, s, "1 + 1"); res.Status != protocol.ExecutionStatusOK || len(outs) != 1 || outs[0].Data["text/plain"] != "2" {
			t.Fatalf("after the interrupt: %+v %+v", res, outs)
		}
	})
}

// stdoutOnly is the text of outs if they are all stdout, else a mark.
func stdoutOnly(outs []protocol.KernelOutputParams) string {
	var b strings.Builder
	for _, o := range outs {
		if o.Kind != protocol.OutputKindStream || o.Name != protocol.StreamStdout {
			return "<not only stdout>"
		}
		b.WriteString(o.Text)
	}
	return b.String()
}

func TestRealDriversAsUser(t *testing.T) {
	if sandboxtest.AsTestUser() {
		t.Skip("already the test user")
	}
	sandboxtest.RunAsTestUser(t, "^(TestRealDrivers|TestRealSQLDriver|TestRealPostgresDriver|TestOrderAndTruncation|TestInputAndDeath|TestForged.*)$")
}
