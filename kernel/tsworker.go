package kernel

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/debug"
	"sync"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
)

// A typescript cell is parsed by esbuild, whose parser recurses: a cell
// nested deeply enough (a few hundred thousand brackets or operators, well
// within maxCodeBytes) overflows the goroutine's stack, which no recover
// catches. So esbuild runs in a helper process of the daemon's (this
// binary's entry tsWorkerEntry, outside every sandbox: it only parses
// text), one per Manager, started on first use: a cell that kills it is
// that cell's SyntaxError, and the next cell starts a new one.
const tsWorkerEntry = "typescript-transpiler"

// tsWorkerStack bounds the helper's stack (the Go default is 1 GB), so a
// cell nested too deeply ends it soon.
const tsWorkerStack = 256 << 20

// tsWorkerTimeout bounds one cell's parse: inputs exist on which a parser
// is slow, and the helper is killed rather than waited for.
const tsWorkerTimeout = 20 * time.Second

func init() { workspace.RegisterHelper(tsWorkerEntry, tsWorkerMain) }

// tsJob is one request to the helper; tsAnswer its answer.
type tsJob struct {
	Op   string `json:"op"` // "transpile" or "isComplete"
	Code string `json:"code"`
}

type tsAnswer struct {
	Code     string                           `json:"code,omitempty"`
	Lines    [][]int                          `json:"lines,omitempty"`
	Err      *cellSyntaxError                 `json:"err,omitempty"`
	Complete *protocol.KernelIsCompleteResult `json:"complete,omitempty"`
}

// tsWorkerMain is the helper: jobs on stdin, answers on stdout, one JSON
// value each, until stdin closes (the daemon is gone).
func tsWorkerMain([]string) int {
	debug.SetMaxStack(tsWorkerStack)
	dec, enc := json.NewDecoder(os.Stdin), json.NewEncoder(os.Stdout)
	for {
		var j tsJob
		if err := dec.Decode(&j); err != nil {
			return 0
		}
		var a tsAnswer
		switch j.Op {
		case "transpile":
			t := tsTranspile(j.Code)
			a = tsAnswer{Code: t.code, Lines: t.lines, Err: t.err}
		case "isComplete":
			c := tsIsCompleteHere(j.Code)
			a.Complete = &c
		}
		if err := enc.Encode(&a); err != nil {
			return 1
		}
	}
}

// tsWorker is the daemon's side of the helper: one job at a time.
type tsWorker struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *json.Decoder
	closed bool
}

// do runs j in the helper, starting one if none runs. A helper that dies
// or takes longer than tsWorkerTimeout is killed, and the job fails.
func (w *tsWorker) do(j tsJob) (tsAnswer, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return tsAnswer{}, ErrClosed
	}
	if w.cmd == nil {
		if err := w.start(); err != nil {
			return tsAnswer{}, fmt.Errorf("start the typescript transpiler: %w", err)
		}
	}
	var a tsAnswer
	done := make(chan error, 1)
	go func() {
		if err := json.NewEncoder(w.in).Encode(&j); err != nil {
			done <- err
			return
		}
		done <- w.out.Decode(&a)
	}()
	timer := time.NewTimer(tsWorkerTimeout)
	defer timer.Stop()
	select {
	case err := <-done:
		if err == nil {
			return a, nil
		}
		w.stop()
		return tsAnswer{}, fmt.Errorf("the typescript transpiler died on this cell (nested too deeply?): %w", err)
	case <-timer.C:
		w.stop()
		<-done
		return tsAnswer{}, fmt.Errorf("the typescript transpiler did not finish this cell within %v", tsWorkerTimeout)
	}
}

func (w *tsWorker) start() error {
	cmd := workspace.HelperCommand(tsWorkerEntry)
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = nil // a crash's trace is not the user's business
	if err := cmd.Start(); err != nil {
		return err
	}
	w.cmd, w.in, w.out = cmd, in, json.NewDecoder(out)
	return nil
}

// stop kills the helper and waits for it (w.mu held).
func (w *tsWorker) stop() {
	if w.cmd == nil {
		return
	}
	_ = w.cmd.Process.Kill()
	_ = w.in.Close()
	_ = w.cmd.Wait()
	w.cmd, w.in, w.out = nil, nil, nil
}

// close stops the helper for good (Manager.Close).
func (w *tsWorker) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	w.stop()
}
