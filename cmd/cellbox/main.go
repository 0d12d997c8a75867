// Command cellbox is the cellbox daemon and its tools. See `cellbox help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

func main() {
	if sandbox.Main() { // re-executed as a sandbox helper: never returns
		return
	}
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if len(os.Args) > 1 && os.Args[1] == "jupyter-kernel" {
		// Jupyter interrupts a kernel with SIGINT (its signal mode): the
		// kernel handles it, and ends on SIGTERM or a shutdown request.
		sigs = sigs[1:]
	}
	ctx, stop := signal.NotifyContext(context.Background(), sigs...)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
