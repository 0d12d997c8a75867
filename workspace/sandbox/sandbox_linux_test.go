package sandbox

import (
	"bytes"
	"context"
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
