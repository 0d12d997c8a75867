package rpc

import (
	"context"
	"testing"
	"time"
)

// done reports whether ch is closed.
func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// ready reports whether t's turn has come.
func ready(t *turn) bool {
	for _, ch := range t.wait {
		if !closed(ch) {
			return false
		}
	}
	return true
}

func TestSequencerSharedAndExclusive(t *testing.T) {
	var s sequencer
	w := func(key string) []claim { return []claim{{key: key, exclusive: true}} }
	r := func(key string) []claim { return []claim{{key: key}} }

	w1 := s.take(w("w:a"))
	r1 := s.take(r("w:a"))
	r2 := s.take(r("w:a"))
	other := s.take(w("w:b"))
	w2 := s.take(w("w:a"))
	r3 := s.take(r("w:a"))

	if !ready(w1) || !ready(other) {
		t.Fatal("the first turn on a resource must not wait")
	}
	if ready(r1) || ready(r2) || ready(w2) || ready(r3) {
		t.Fatal("turns behind an exclusive one must wait for it")
	}
	w1.done()
	if !ready(r1) || !ready(r2) {
		t.Fatal("shared turns must go together once the write before them is done")
	}
	if ready(w2) {
		t.Fatal("a write must wait for the reads before it")
	}
	r2.done()
	if ready(w2) {
		t.Fatal("a write must wait for every read before it")
	}
	r1.done()
	if !ready(w2) || ready(r3) {
		t.Fatal("the write goes after the reads, the read after it waits")
	}
	w2.done()
	w2.done() // done twice is harmless
	if !ready(r3) {
		t.Fatal("the last read's turn never came")
	}
	r3.done()
	other.done()
	if n := s.size(); n != 0 {
		t.Fatalf("%d resources still tracked after every turn was done", n)
	}
}

// A request cancelled while it waits answers at once, but passes its turn
// on only when the turns before it are done: the order behind it holds.
func TestSequencerCancelKeepsOrder(t *testing.T) {
	var s sequencer
	ex := []claim{{key: "k:1", exclusive: true}}
	first := s.take(ex)
	second := s.take(ex)
	third := s.take(ex)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := second.await(ctx); err == nil {
		t.Fatal("await of a cancelled request returned nil")
	}
	second.done() // as the handler's defer does
	if ready(third) {
		t.Fatal("the turn after a cancelled one came before the turn before it was done")
	}
	first.done()
	deadline := time.Now().Add(10 * time.Second)
	for !ready(third) {
		if time.Now().After(deadline) {
			t.Fatal("the turn after a cancelled one never came")
		}
		time.Sleep(time.Millisecond)
	}
	if err := third.await(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestSequencerTwoResources(t *testing.T) {
	var s sequencer
	write := s.take([]claim{{key: "w:a", exclusive: true}})
	exec := s.take([]claim{{key: "k:1", exclusive: true}, {key: "w:a"}})
	if ready(exec) {
		t.Fatal("an execute must wait for the write to its workspace sent before it")
	}
	write.done()
	if !ready(exec) {
		t.Fatal("the execute's turn never came")
	}
	exec.done()
}
