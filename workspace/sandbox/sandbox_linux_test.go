package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"syscall"

	"github.com/cellbox-dev/cellbox/workspace/sandbox/sandboxtest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testSandbox starts a sandbox over a new project directory holding
// hello.txt and returns it with the project and upper directories.
func testSandbox(t *testing.T, mode Mode) (*Sandbox, string, string) {
	t.Helper()
	base := t.TempDir()
	project := filepath.Join(base, "project")
	dir := filepath.Join(base, "sb")
	upper := filepath.Join(dir, "upper")
	work := filepath.Join(dir, "work")
	scratch := filepath.Join(dir, "scratch")
	for _, d := range []string{project, upper, work, scratch} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(project, "hello.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	uid, gid := SandboxRootHostIDs()
	for _, d := range []string{upper, work, scratch} {
		if err := os.Chown(d, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(work, "work"), 0o700) })
	s, err := Start(context.Background(), Config{ID: "test", Mode: mode, Project: project, Upper: upper, Work: work, Scratch: scratch})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, project, upper
}

// run runs argv in s and returns its output and status.
func run(t *testing.T, s *Sandbox, spec Spec) (string, ExitStatus) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	spec.Stdout, spec.Stderr = w, w
	p, err := s.Spawn(context.Background(), spec)
	w.Close()
	if err != nil {
		r.Close()
		t.Fatalf("Spawn %v: %v", spec.Argv, err)
	}
	var out bytes.Buffer
	done := make(chan struct{})
	go func() { out.ReadFrom(r); close(done) }()
	st, err := p.Wait()
	if err != nil {
		t.Fatalf("Wait %v: %v", spec.Argv, err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("output of %v not closed", spec.Argv)
	}
	r.Close()
	return out.String(), st
}

func sh(t *testing.T, s *Sandbox, script string) (string, ExitStatus) {
	t.Helper()
	return run(t, s, Spec{Argv: []string{"/bin/sh", "-c", script}})
}

func TestSandboxBasics(t *testing.T) {
	s, project, upper := testSandbox(t, ModeOverlay)
	out, st := sh(t, s, `id; hostname; cat /workspace/hello.txt; echo changed > /workspace/hello.txt; echo new > /workspace/new.txt; pwd; grep -E '^(Cap|NoNewPrivs|Seccomp)' /proc/self/status; ls /`)
	t.Logf("%s\n%v", out, st)
	if st.Code != 0 {
		t.Fatalf("status %v", st)
	}
	for _, want := range []string{"uid=1000(cellbox) gid=1000(cellbox)", "cellbox\n", "hello\n", "/workspace\n", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(project, "hello.txt")); string(b) != "hello\n" {
		t.Errorf("project changed: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(upper, "hello.txt")); string(b) != "changed\n" {
		t.Errorf("upper hello.txt = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(upper, "new.txt")); string(b) != "new\n" {
		t.Errorf("upper new.txt = %q", b)
	}
}

// BenchmarkSandbox: a cold sandbox (start, spawn /bin/true, close) and a
// spawn of /bin/true into an open one. bench/sandbox.sh runs these side by
// side with bubblewrap.
func BenchmarkSandbox(b *testing.B) {
	base := b.TempDir()
	project := filepath.Join(base, "project")
	_ = os.MkdirAll(project, 0o755)
	uid, gid := SandboxRootHostIDs()
	newCfg := func(i int) Config {
		dir := filepath.Join(base, "sb", strconv.Itoa(i))
		for _, d := range []string{"upper", "work"} {
			_ = os.MkdirAll(filepath.Join(dir, d), 0o755)
			_ = os.Chown(filepath.Join(dir, d), uid, gid)
		}
		return Config{ID: "bench", Mode: ModeOverlay, Project: project, Upper: filepath.Join(dir, "upper"), Work: filepath.Join(dir, "work")}
	}
	trueSpec := Spec{Argv: []string{"/bin/true"}}
	b.Run("cold-start-spawn-true", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			s, err := Start(context.Background(), newCfg(i))
			if err != nil {
				b.Fatal(err)
			}
			p, err := s.Spawn(context.Background(), trueSpec)
			if err != nil {
				b.Fatal(err)
			}
			if st, err := p.Wait(); err != nil || st.Code != 0 {
				b.Fatal(st, err)
			}
			s.Close()
		}
	})
	b.Run("spawn-true-warm", func(b *testing.B) {
		s, err := Start(context.Background(), newCfg(-1))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			p, err := s.Spawn(context.Background(), trueSpec)
			if err != nil {
				b.Fatal(err)
			}
			if st, err := p.Wait(); err != nil || st.Code != 0 {
				b.Fatal(st, err)
			}
		}
	})
}

func TestSandboxSpawnFeatures(t *testing.T) {
	s, _, _ := testSandbox(t, ModeOverlay)
	t.Run("env cwd stdin", func(t *testing.T) {
		r, w, _ := os.Pipe()
		go func() { w.WriteString("from stdin\n"); w.Close() }()
		out, st := run(t, s, Spec{Argv: []string{"sh", "-c", `pwd; echo "$FOO"; cat`}, Env: []string{"FOO=bar", "PATH=/usr/bin:/bin"}, Dir: "/tmp", Stdin: r})
		r.Close()
		if st.Code != 0 || out != "/tmp\nbar\nfrom stdin\n" {
			t.Fatalf("%q %v", out, st)
		}
	})
	t.Run("exit code and signal", func(t *testing.T) {
		if _, st := sh(t, s, "exit 3"); st.Code != 3 || st.Signal != 0 {
			t.Fatalf("exit 3: %v", st)
		}
		if _, st := sh(t, s, "kill -SEGV $$"); st.Signal != syscall.SIGSEGV || st.Code != -1 {
			t.Fatalf("kill -SEGV: %v", st)
		}
	})
	t.Run("cpu and peak memory", func(t *testing.T) {
		_, st := run(t, s, Spec{Argv: []string{"python3", "-c", "b = bytearray(64 << 20); n = 0\nfor i in range(3_000_000): n += i"}})
		if st.Code != 0 || st.CPU < 50*time.Millisecond || st.MaxRSSBytes < 64<<20 {
			t.Fatalf("status %v cpu %v maxrss %d", st, st.CPU, st.MaxRSSBytes)
		}
	})
	t.Run("rlimits", func(t *testing.T) {
		out, st := run(t, s, Spec{Argv: []string{"bash", "-c", "ulimit -v; ulimit -n; ulimit -u; ulimit -f; ulimit -Hv"},
			Limits: Limits{MemoryBytes: 512 << 20, OpenFiles: 100, Pids: 64, FileSizeBytes: 1 << 20}})
		if st.Code != 0 || out != "524288\n100\n64\n1024\n524288\n" {
			t.Fatalf("ulimits = %q (%v)", out, st)
		}
	})
	t.Run("signal and kill tree", func(t *testing.T) {
		r, w, _ := os.Pipe()
		p, err := s.Spawn(context.Background(), Spec{Argv: []string{"sh", "-c", "sleep 1000 & sleep 1000 & echo started; wait"}, Stdout: w})
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 8)
		if n, _ := r.Read(buf); string(buf[:n]) != "started\n" {
			t.Fatalf("read %q", buf[:n])
		}
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		st, _ := p.Wait()
		if st.Signal != syscall.SIGKILL {
			t.Fatalf("status %v", st)
		}
		// The background sleeps are gone too: the output pipe closes.
		done := make(chan struct{})
		go func() { io.Copy(io.Discard, r); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("a child of the killed program still holds its output")
		}
		// Killed processes may still wait a moment for the reaper.
		deadline := time.Now().Add(5 * time.Second)
		for {
			out, _ := sh(t, s, "ps -e -o stat=,comm=")
			if !strings.Contains(out, "sleep") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sleep left in the sandbox: %q", out)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	t.Run("orphans are reaped", func(t *testing.T) {
		sh(t, s, "(sleep 0.1 &) ; true")
		// The orphan ends on its own; reaped, it is no longer listed at
		// all (a zombie would be, as sleep in state Z).
		deadline := time.Now().Add(20 * time.Second)
		for {
			out, _ := sh(t, s, `for p in /proc/[0-9]*; do grep -h -e '^State:.*Z' -e '^Name:.*sleep' $p/status 2>/dev/null; done; echo end`)
			if out == "end\n" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the orphan was not reaped: %q", out)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	t.Run("pty", func(t *testing.T) {
		p, err := s.Spawn(context.Background(), Spec{Argv: []string{"sh", "-c", "stty size; tty; echo $((6*7))"}, PTY: &WinSize{Cols: 100, Rows: 30}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.PTY.Close()
		var out bytes.Buffer
		done := make(chan struct{})
		go func() { io.Copy(&out, p.PTY); close(done) }()
		st, _ := p.Wait()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
		got := strings.ReplaceAll(out.String(), "\r", "")
		if st.Code != 0 || !strings.Contains(got, "30 100\n/dev/pts/0\n42\n") {
			t.Fatalf("pty output %q (%v)", got, st)
		}
	})
	t.Run("fds beyond stdio are closed", func(t *testing.T) {
		out, _ := sh(t, s, "ls /proc/self/fd")
		if out != "0\n1\n2\n3\n" { // 3 is ls's own directory
			t.Fatalf("open fds in the sandbox: %q", out)
		}
	})
	t.Run("own pid namespace", func(t *testing.T) {
		out, _ := sh(t, s, `echo $$ $(cut -d' ' -f1 /proc/self/stat) $(cut -d' ' -f4 /proc/$$/stat)`)
		f := strings.Fields(out)
		if len(f) != 3 || f[2] != "1" || f[0] == "1" {
			t.Fatalf("pid, /proc/self pid, ppid = %q; want the shell's parent to be pid 1 (the spawner)", out)
		}
	})
	t.Run("signals cannot stop the spawner", func(t *testing.T) {
		sh(t, s, "kill -STOP 1; kill -TERM 1; kill -KILL 1; kill -9 -1; true")
		if out, st := sh(t, s, "echo alive"); out != "alive\n" || st.Code != 0 {
			t.Fatalf("after signals to pid 1: %q %v", out, st)
		}
	})
	t.Run("spawn errors", func(t *testing.T) {
		if _, err := s.Spawn(context.Background(), Spec{Argv: []string{"no-such-program"}}); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Fatalf("missing program: %v", err)
		}
		if _, err := s.Spawn(context.Background(), Spec{}); err == nil {
			t.Fatal("empty argv accepted")
		}
	})
}

func TestSandboxModes(t *testing.T) {
	for _, mode := range []Mode{ModeScratch, ModeDirect} {
		t.Run(string(mode), func(t *testing.T) {
			s, project, _ := testSandbox(t, mode)
			out, st := sh(t, s, "ls; echo x > f.txt")
			if st.Code != 0 {
				t.Fatalf("%q %v", out, st)
			}
			_, err := os.Stat(filepath.Join(project, "f.txt"))
			if mode == ModeDirect && err != nil {
				t.Fatalf("direct mode: the write did not reach the project: %v", err)
			}
			if mode == ModeScratch && (err == nil || strings.Contains(out, "hello.txt")) {
				t.Fatalf("scratch mode sees or writes the project: %q %v", out, err)
			}
		})
	}
}

func TestSandboxClosedLeavesNothing(t *testing.T) {
	s, _, _ := testSandbox(t, ModeOverlay)
	p, err := s.Spawn(context.Background(), Spec{Argv: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	init := s.InitPID()
	s.Close()
	if _, err := p.Wait(); err == nil {
		t.Fatal("a program outlived Close without an error")
	}
	if err := syscall.Kill(init, 0); err == nil {
		t.Fatalf("init %d still exists after Close", init)
	}
	if _, err := s.Spawn(context.Background(), Spec{Argv: []string{"true"}}); err == nil {
		t.Fatal("spawn into a closed sandbox worked")
	}
}

func TestSandboxAsUnprivilegedUser(t *testing.T) {
	if sandboxtest.AsTestUser() {
		t.Skip("already the test user")
	}
	sandboxtest.RunAsTestUser(t, "^(TestSandboxBasics|TestSandboxSpawnFeatures|TestSandboxModes|TestSandboxClosedLeavesNothing|TestSandboxSelf|TestSandboxDialPort|TestSandboxDialPortGivenUp)$")
}

// Programs start with default signal handling, whatever the spawner does
// to protect itself: ^C, SIGTERM and SIGPIPE work in the sandbox.
func TestSandboxProgramsGetDefaultSignals(t *testing.T) {
	s, _, _ := testSandbox(t, ModeOverlay)
	out, st := sh(t, s, "grep '^SigIgn' /proc/self/status")
	var ignored uint64
	if _, err := fmt.Sscanf(out, "SigIgn:\t%x", &ignored); err != nil || st.Code != 0 {
		t.Fatalf("signal dispositions of a program: %q %v", out, err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGPIPE,
		syscall.SIGTERM, syscall.SIGWINCH, syscall.SIGTSTP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGCONT} {
		if ignored&(1<<(sig-1)) != 0 {
			t.Errorf("programs start with %v ignored (SigIgn %#x)", sig, ignored)
		}
	}
	if _, st := sh(t, s, "sleep 30 & kill -TERM $!; wait $!; exit $?"); st.Code != 128+int(syscall.SIGTERM) {
		t.Fatalf("SIGTERM to a program: %v", st)
	}
}
