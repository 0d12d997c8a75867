package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func cellboxVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			return bi.Main.Version
		}
		var rev, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			return "0.1.0-dev+" + rev + dirty
		}
	}
	return "0.1.0-dev"
}

// run dispatches a subcommand and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printUsage(stderr)
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return runServe(ctx, rest, stdin, stdout, stderr)
	case "connect":
		return runConnect(ctx, rest, stdin, stdout, stderr)
	case "mcp":
		return runMCP(ctx, rest, stdin, stdout, stderr)
	case "exec":
		return runExec(ctx, rest, stdin, stdout, stderr)
	case "run-agent":
		return runRunAgent(ctx, rest, stdin, stdout, stderr)
	case "jupyter-kernel":
		return runJupyterKernel(ctx, rest, stdout, stderr)
	case "doctor":
		return runDoctor(ctx, rest, stdout, stderr)
	case "jupyter":
		return runJupyter(ctx, rest, stdout, stderr)
	case "changes", "diff", "commit", "discard", "checkpoint", "checkpoints", "restore", "export-git", "export-patch", "export":
		return runReview(ctx, cmd, rest, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintf(stdout, "cellbox %s\n", cellboxVersion())
		return 0
	case "help", "-h", "--help", "-help":
		return runHelp(rest, stdout, stderr)
	}
	fmt.Fprintf(stderr, "cellbox: unknown command %q\n\n", cmd)
	printUsage(stderr)
	return 2
}
