package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/rpc"
	"github.com/cellbox-dev/cellbox/rpc/mcp"
)

type mcpConfig struct {
	root, name, language, stateDir, logLevel, toolsets, exportDir string
	allowCommit                                                   bool
}

func mcpFlags(cfg *mcpConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.StringVar(&cfg.root, "root", "", "the project `DIR` whose overlay workspace the agent works in (default: the current directory)")
	fs.StringVar(&cfg.name, "name", "", "the workspace's `NAME` (default: none, the workspace editors open for the same directory, so their review views show the agent's changes live)")
	fs.StringVar(&cfg.language, "language", "python", "run's default `LANGUAGE`")
	fs.BoolVar(&cfg.allowCommit, "allow-commit", false, "let the agent copy its changes into the project with the commit tool")
	fs.StringVar(&cfg.toolsets, "toolsets", "", "opt-in `TOOLSETS`, comma-separated: apps (expose_port, export_app)")
	fs.StringVar(&cfg.exportDir, "export-dir", "", "the `DIR` export_app writes bundles in, one directory per name the agent gives (default $XDG_DATA_HOME/cellbox/exports)")
	fs.StringVar(&cfg.stateDir, "state-dir", defaultStateDir(), "the daemon's state `DIR`, as for cellbox connect")
	fs.StringVar(&cfg.logLevel, "log-level", "warn", "log `LEVEL` on stderr, also passed to a daemon this starts")
	return fs
}

// runMCP is `cellbox mcp`: a Model Context Protocol server on stdio over
// the user's long-lived daemon (found or started as cellbox connect does),
// in the overlay workspace of --root (PROTOCOL.md §10).
func runMCP(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var cfg mcpConfig
	fs := mcpFlags(&cfg)
	fs.SetOutput(stderr)
	fs.Usage = func() { printMCPHelp(stderr) }
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "cellbox mcp: %v\n", err)
		return 2
	}
	log, err := newLogger(stderr, cfg.logLevel, "text")
	if err != nil {
		fmt.Fprintf(stderr, "cellbox mcp: %v\n", err)
		return 2
	}
	if cfg.root == "" {
		cfg.root, _ = os.Getwd()
	}
	root, err := filepath.Abs(cfg.root)
	if err != nil {
		fmt.Fprintf(stderr, "cellbox mcp: --root %s: %v\n", cfg.root, err)
		return 2
	}
	toolsets, err := parseToolsets(cfg.toolsets)
	if err != nil {
		fmt.Fprintf(stderr, "cellbox mcp: --toolsets: %v\n", err)
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "cellbox mcp: find own executable: %v\n", err)
		return 1
	}
	srv := mcp.New(mcp.Options{
		Dial: func(ctx context.Context, notify func(string, json.RawMessage)) (mcp.Conn, error) {
			return rpc.Dial(ctx, rpc.ClientOptions{
				StateDir:   cfg.stateDir,
				Executable: exe,
				ServeArgs:  []string{"--log-level", cfg.logLevel},
				Logger:     log,
				ClientInfo: protocol.ClientInfo{Name: "cellbox mcp", Version: cellboxVersion()},
				OnNotify:   notify,
			})
		},
		Root:        root,
		Name:        cfg.name,
		Language:    cfg.language,
		AllowCommit: cfg.allowCommit,
		Toolsets:    toolsets,
		ExportDir:   cfg.exportDir,
		Version:     cellboxVersion(),
		Logger:      log,
	})
	if err := srv.Serve(ctx, stdin, stdout); err != nil {
		log.Error("mcp server ended", "err", err)
		return 1
	}
	return 0
}

func printMCPHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: cellbox mcp [flags]

A Model Context Protocol server on stdin/stdout for coding agents. It runs
the agent's code in your daemon (found or started as cellbox connect does),
in the overlay workspace of the project directory: the agent's writes stay
there for you to review (cellbox changes, cellbox diff, your editor's source
control view, live) until you commit them. Kernels and workspaces belong to
the daemon, so a restarted server finds them again.

Add it to an agent, e.g.:
    claude mcp add cellbox -- cellbox mcp
    codex mcp add cellbox -- cellbox mcp
or in an mcp.json: {"mcpServers": {"cellbox": {"command": "cellbox", "args": ["mcp"]}}}

Tools: run, poll, stop (code in a persistent kernel, with an automatic
checkpoint before each run), read_file, write_file (whole or exact
search/replace edits), changes, checkpoint, restore, discard, commit (only
with --allow-commit), install (pip or npm through the package cache).
--toolsets apps adds expose_port (a preview URL of a server the agent
started in the sandbox) and export_app (the workspace as a runnable bundle
and image, written under --export-dir by a name the agent gives, never a
path it picks); over HTTP, serve --mcp-toolsets apps.
A daemon started with serve --listen also serves MCP over Streamable HTTP at
/mcp, with the same token (Authorization: Bearer TOKEN); its workspace is the
daemon's directory unless the URL says ?root=DIR&name=NAME.

Flags:
`)
	var cfg mcpConfig
	printFlags(w, mcpFlags(&cfg))
}

// parseToolsets parses a comma-separated list of MCP toolsets.
func parseToolsets(list string) ([]string, error) {
	var out []string
	for _, t := range strings.Split(list, ",") {
		switch t = strings.TrimSpace(t); t {
		case "":
		case mcp.ToolsetApps:
			out = append(out, t)
		default:
			return nil, fmt.Errorf("unknown toolset %q (there is: apps)", t)
		}
	}
	return out, nil
}
