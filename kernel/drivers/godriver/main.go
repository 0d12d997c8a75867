// Package godriver is the driver of the go language (PROTOCOL.md §8): an
// entry of the cellbox binary that the kernel manager starts inside the
// workspace's sandbox (sandbox.SelfPath), speaking the driver contract
// (kernel/drivers/README.md). It compiles each cell with the host's Go
// toolchain, playground style, as gonb does: the top-level declarations of
// the cells (imports, func, type, var, const) accumulate, a name declared
// again replacing the one before, and the statements of a cell are the body
// of main, built with all the declarations and run once. Nothing but the
// declarations survives a cell: a variable's value is computed anew by each
// program.
package godriver

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/cellbox-dev/cellbox/kernel/drivers/driverio"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// Entry is the driver's re-exec entry (sandbox.ReexecEnv).
const Entry = "go-driver"

func init() {
	sandbox.Register(Entry, Main)
}

// Command is how the manager starts the driver in a sandbox for the go
// command at goPath: the argv, and the environment entry that selects the
// driver.
func Command(goPath string) (argv []string, envEntry string) {
	argv = []string{sandbox.SelfPath, goPath}
	if s := sharedCache(); s != "" {
		argv = append(argv, s)
		WarmShared(goPath)
	}
	return argv, sandbox.ReexecEnv + "=" + Entry
}

// request is a request of the kernel manager.
type request struct {
	Op          string `json:"op"`
	ID          string `json:"id"`
	Code        string `json:"code"`
	Count       int    `json:"count"`
	Silent      bool   `json:"silent"`
	Stdin       string `json:"stdin"`
	CursorPos   int    `json:"cursorPos"`
	DetailLevel int    `json:"detailLevel"`
	Source      *struct {
		Path string `json:"path"`
		Line int    `json:"line"`
	} `json:"source"`
}

// Main is the driver's entry: args are the go command's path and the
// shared build cache's, if any (shared.go).
func Main(args []string) int {
	if len(args) < 1 || len(args) > 2 || args[0] == "" {
		fmt.Fprintln(os.Stderr, "go driver: want the go command and, optionally, the shared build cache")
		return 2
	}
	shared := ""
	if len(args) == 2 {
		shared = args[1]
	}
	// The manager's requests (fd 3) and events (fd 4) move to high
	// descriptors, close-on-exec, so the programs do not inherit them.
	reqs, evs, err := driverio.Channel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go driver: %v\n", err)
		return 2
	}
	interrupts := make(chan os.Signal, 4)
	signal.Notify(interrupts, syscall.SIGINT)

	k, err := newKernel(args[0], shared, &events{w: evs})
	if err != nil {
		fmt.Fprintf(os.Stderr, "go driver: %v\n", err)
		return 2
	}
	defer k.close()
	go func() {
		for range interrupts {
			k.interrupt()
		}
	}()
	k.ev.send(map[string]any{"ev": "ready", "version": k.version, "pid": os.Getpid()})
	go k.warm()
	return k.serve(reqs)
}

// events writes events, one JSON line each.
type events struct {
	mu sync.Mutex
	w  io.Writer
}

func (e *events) send(ev map[string]any) {
	b, err := json.Marshal(ev)
	if err != nil {
		b, _ = json.Marshal(map[string]any{"ev": "reply", "id": ev["id"], "error": err.Error()})
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _ = e.w.Write(append(b, '\n'))
}

// serve reads requests until the pipe closes. Executions run one at a
// time in order; the other requests are answered at once, while one runs.
func (k *kernel) serve(r io.Reader) int {
	br := bufio.NewReaderSize(r, 64<<10)
	execs := make(chan request, 16)
	var wg sync.WaitGroup
	wg.Go(func() {
		for req := range execs {
			k.execute(req)
		}
	})
	defer wg.Wait()
	defer close(execs)
	for {
		line, err := driverio.ReadLine(br)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				fmt.Fprintf(os.Stderr, "go driver: read requests: %v\n", err)
				return 1
			}
			return 0
		}
		var req request
		if err := json.Unmarshal(line, &req); err != nil {
			fmt.Fprintf(os.Stderr, "go driver: bad request: %v\n", err)
			continue
		}
		switch req.Op {
		case "execute":
			execs <- req
		case "input", "interrupt":
			// No input events are sent; interrupts come as SIGINT.
		default:
			go k.answer(req)
		}
	}
}

// answer answers a request other than execute.
func (k *kernel) answer(req request) {
	var result any
	switch req.Op {
	case "complete":
		result = k.complete(req.Code, req.CursorPos)
	case "inspect":
		result = k.inspect(req.Code, req.CursorPos, req.DetailLevel)
	case "isComplete":
		result = isComplete(req.Code)
	case "variables":
		result = k.variables()
	default:
		k.ev.send(map[string]any{"ev": "reply", "id": req.ID, "error": "unknown op " + req.Op})
		return
	}
	k.ev.send(map[string]any{"ev": "reply", "id": req.ID, "result": result})
}
