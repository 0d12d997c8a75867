package main

import (
	"fmt"
	"io"
)

const usage = `cellbox runs code for editors: persistent kernels and terminals in
unprivileged sandboxes whose /workspace is a reviewable overlay of your project.

Usage:
  cellbox serve --listen 127.0.0.1:8765   websocket + HTTP daemon; prints the URL with its token
  cellbox serve --stdio                   one client on stdin/stdout (LSP framing)
  cellbox connect                         bridge stdio to your long-lived daemon, starting it if needed
  cellbox mcp                             an MCP server for coding agents over your daemon (stdio)
  cellbox exec -- PROGRAM [ARGS...]       run one program in a sandboxed workspace of the current directory
  cellbox run-agent [--allow HOST] -- CMD  run an agent CLI in a terminal of that workspace's sandbox, over the daemon
  cellbox changes                         the changes of the workspace of the current directory (A/M/D PATH)
  cellbox diff [PATH...]                  those changes as a unified diff
  cellbox commit [PATH...]                copy the changes (all, or at PATHs) into the project
  cellbox discard (PATH... | --all)       drop the changes at PATHs, or all of them
  cellbox checkpoint [NAME]               save the workspace's changes as a checkpoint
  cellbox checkpoints                     list the checkpoints
  cellbox restore CHECKPOINT              bring the changes back to a checkpoint (by id or name)
  cellbox export-git BRANCH [-m MSG]      commit the changes on a branch of the project's git repository,
                                          leaving its files, index and checked-out branch as they are
  cellbox export-patch [PATH...]          print the changes as a patch that git apply takes
  cellbox export [--format dir|oci] DEST  write the workspace as a runnable bundle (Dockerfile, compose.yaml,
                                          requirements, README) and, with oci, an OCI image layout
  cellbox jupyter install                 make cellbox's languages Jupyter kernels (cellbox-python, ...)
  cellbox jupyter list                    the cellbox kernelspecs Jupyter finds (--all: every kernelspec)
  cellbox jupyter uninstall [NAME...]     remove cellbox kernelspecs
  cellbox jupyter-kernel --language L -f F  the kernel process Jupyter starts from those kernelspecs
  cellbox doctor                          what this host can provide, and what to fix
  cellbox version                         print the version
  cellbox help [command]                  this text, or a command's flags

Every flag can also be set with a CELLBOX_* environment variable
(--max-message-bytes is CELLBOX_MAX_MESSAGE_BYTES); the command line wins.
The protocol is in PROTOCOL.md; see the README for a tour.
`

func printUsage(w io.Writer) { fmt.Fprint(w, usage) }

func runHelp(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printUsage(stdout)
		return 0
	}
	switch args[0] {
	case "serve":
		printServeHelp(stdout)
	case "connect":
		printConnectHelp(stdout)
	case "mcp":
		printMCPHelp(stdout)
	case "exec":
		printExecHelp(stdout)
	case "run-agent":
		printRunAgentHelp(stdout)
	case "doctor":
		fmt.Fprint(stdout, "Usage: cellbox doctor [--json] [--state-dir DIR]\n\nPrints every sandbox layer this host can or cannot provide (with the reason and\nwhat to do), the interpreters found, the installed Jupyter kernels, and the state dir. Exits 1 when something\nthe defaults need is missing.\n")
	case "version":
		fmt.Fprint(stdout, "Usage: cellbox version\n")
	case "jupyter-kernel":
		printJupyterKernelHelp(stdout)
	case "jupyter":
		printJupyterHelp(stdout)
	case "changes", "diff", "commit", "discard", "checkpoint", "checkpoints", "restore", "export-git", "export-patch", "export":
		printReviewHelp(stdout, args[0])
	default:
		fmt.Fprintf(stderr, "cellbox help: unknown command %q\n", args[0])
		return 2
	}
	return 0
}

func printServeHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: cellbox serve (--stdio | --listen ADDR) [flags]

Serves the cellbox protocol (PROTOCOL.md). With --stdio, one client speaks on
stdin/stdout with LSP Content-Length framing and the daemon ends with it. With
--listen, browsers and editors connect to ws://ADDR/rpc with the token printed
at start (also in $XDG_RUNTIME_DIR/cellbox/server-PID.json, mode 0600), and
kernels and terminals outlive a dropped connection.

Flags:
`)
	var cfg serveConfig
	printFlags(w, serveFlags(&cfg))
}

func printConnectHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: cellbox connect [flags]

Editors start this instead of "serve --stdio": it speaks LSP framing on
stdin/stdout and bridges to the user's long-lived daemon over websocket,
starting "cellbox serve --listen 127.0.0.1:0" in the background when none
runs, so kernels outlive an editor restart. Exits 0 after shutdown+exit (or
when the editor closes stdin), 1 otherwise.

Flags:
`)
	var s, l string
	var m int
	printFlags(w, connectFlags(&s, &l, &m))
}
