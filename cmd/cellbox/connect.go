package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/cellbox-dev/cellbox/rpc"
)

func connectFlags(stateDir *string, logLevel *string, maxMsg *int) *flag.FlagSet {
	fs := flag.NewFlagSet("connect", flag.ContinueOnError)
	fs.StringVar(stateDir, "state-dir", defaultStateDir(), "the daemon's state `DIR` (where its runtime file is found when $XDG_RUNTIME_DIR is unset)")
	fs.StringVar(logLevel, "log-level", "warn", "log `LEVEL` on stderr, also passed to a daemon this starts")
	fs.IntVar(maxMsg, "max-message-bytes", rpc.DefaultMaxMessageBytes, "largest message in `BYTES` accepted from the editor")
	return fs
}

// runConnect is `cellbox connect`: the editor's stdio bridged to the user's
// long-lived daemon, started in the background when none runs, so kernels
// outlive an editor restart (PROTOCOL.md §2).
func runConnect(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var stateDir, logLevel string
	var maxMsg int
	fs := connectFlags(&stateDir, &logLevel, &maxMsg)
	fs.SetOutput(stderr)
	fs.Usage = func() { printConnectHelp(stderr) }
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "cellbox connect: %v\n", err)
		return 2
	}
	log, err := newLogger(stderr, logLevel, "text")
	if err != nil {
		fmt.Fprintf(stderr, "cellbox connect: %v\n", err)
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "cellbox connect: find own executable: %v\n", err)
		return 1
	}
	code, err := rpc.Connect(ctx, rpc.ConnectOptions{
		StateDir:        stateDir,
		Executable:      exe,
		ServeArgs:       []string{"--log-level", logLevel},
		Stdin:           stdin,
		Stdout:          stdout,
		Logger:          log,
		MaxMessageBytes: maxMsg,
	})
	if err != nil {
		log.Error("connect failed", "err", err)
		return 1
	}
	return code
}
