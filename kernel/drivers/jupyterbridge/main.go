package jupyterbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/cellbox-dev/cellbox/kernel/drivers/driverio"
)

// Main is the bridge's entry: args is its config (Command). It returns
// the kernel's exit code when the kernel died, or dies of the signal that
// killed it.
func Main(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "jupyter bridge: want one argument, the config")
		return 2
	}
	var cfg Config
	if err := json.Unmarshal([]byte(args[0]), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "jupyter bridge: bad config: %v\n", err)
		return 2
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintf(os.Stderr, "jupyter bridge: %v\n", err)
		return 2
	}
	// The manager's requests (fd 3) and events (fd 4) move to high
	// descriptors, close-on-exec, so that the kernel and the programs it
	// runs do not inherit them (drivers/README.md).
	reqs, evs, err := driverio.Channel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "jupyter bridge: %v\n", err)
		return 2
	}
	// SIGINT is the manager's interrupt: caught, never ignored (an ignored
	// signal would stay ignored in the kernel across exec).
	interrupts := make(chan os.Signal, 4)
	signal.Notify(interrupts, syscall.SIGINT)
	cwd, err := os.Getwd()
	if err != nil {
		cwd = "/workspace"
	}
	w := &wire{ev: evs, out: os.Stdout, err: os.Stderr}
	code := run(context.Background(), cfg, env{environ: os.Environ(), dir: cwd, tmp: os.TempDir()}, reqs, w, interrupts)
	if code < 0 {
		signal.Reset(syscall.SIGINT)
		dieOf(syscall.Signal(-code))
	}
	return code
}
