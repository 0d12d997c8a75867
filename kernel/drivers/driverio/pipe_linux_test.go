package driverio

import (
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

// TestMarkWhileReadWaitsThroughSignals: Mark answers at once while a read
// waits for the manager's next request, even when signals (an interrupt's
// SIGINT) end the reader's wait with EINTR: a read that then went on
// under the lock would hold Mark, and the interrupt, until the next
// request.
func TestMarkWhileReadWaitsThroughSignals(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	p := NewRequestPipe(r)
	got := make(chan string, 1)
	go func() {
		b := make([]byte, 64)
		n, _ := p.Read(b)
		got <- string(b[:n])
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR1)
	defer signal.Stop(sigs)
	for range 300 {
		_ = syscall.Kill(os.Getpid(), syscall.SIGUSR1)
		marked := make(chan int64, 1)
		go func() { marked <- p.Mark() }()
		select {
		case m := <-marked:
			if m != 0 {
				t.Fatalf("Mark = %d before anything was written", m)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Mark waited for the next request")
		}
	}
	if _, err := w.Write([]byte("req\n")); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "req\n" {
		t.Fatalf("read %q", s)
	}
	if m := p.Mark(); m != 4 {
		t.Fatalf("Mark = %d after a 4-byte request", m)
	}
}
