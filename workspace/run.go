package workspace

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// outputGrace is how long Run reads output after the program exits.
const outputGrace = time.Second

// RunResult is a finished program with its output.
type RunResult struct {
	Status         ProcStatus
	Stdout, Stderr []byte
	// Truncated: an output stream was longer than the cap (the rest was
	// read and dropped, so the program was never blocked on it).
	Truncated bool
	Duration  time.Duration
}

// Run runs a program to completion with stdin fed from in and the first
// maxOutput bytes of stdout and stderr kept. ctx ending kills its tree.
func Run(ctx context.Context, w *Workspace, spec ProcSpec, in io.Reader, maxOutput int) (*RunResult, error) {
	start := time.Now()
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("pipe: %w", err)
	}
	spec.Stdin, spec.Stdout, spec.Stderr = inR, outW, errW
	p, err := w.Spawn(ctx, spec)
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, err
	}
	res := &RunResult{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	collect := func(r *os.File, dst *[]byte) {
		defer wg.Done()
		defer r.Close()
		var buf bytes.Buffer
		n, _ := io.Copy(&buf, io.LimitReader(r, int64(maxOutput)))
		if m, _ := io.Copy(io.Discard, r); m > 0 || n > int64(maxOutput) {
			mu.Lock()
			res.Truncated = true
			mu.Unlock()
		}
		*dst = buf.Bytes()
	}
	wg.Add(2)
	go collect(outR, &res.Stdout)
	go collect(errR, &res.Stderr)
	go func() {
		if in != nil {
			_, _ = io.Copy(inW, in)
		}
		inW.Close()
	}()
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			p.kill("killed: request cancelled")
		case <-done:
		}
	}()
	st, err := p.Wait()
	close(done)
	// A background child may still hold the output open; give it a moment,
	// then stop reading.
	collected := make(chan struct{})
	go func() { wg.Wait(); close(collected) }()
	select {
	case <-collected:
	case <-time.After(outputGrace):
		outR.Close()
		errR.Close()
		<-collected
	}
	res.Status, res.Duration = st, time.Since(start)
	return res, err
}
