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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
