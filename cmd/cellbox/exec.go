package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cellbox-dev/cellbox/kernel"
	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
)

type execConfig struct {
	root, mode, name, network, stateDir, cwd string
	allowDirect, keep                        bool
	limits                                   protocol.Limits
}

func execFlags(cfg *execConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	fs.StringVar(&cfg.root, "root", "", "project `DIR` seen at /workspace (default: the current directory)")
	fs.StringVar(&cfg.mode, "mode", "overlay", "workspace `MODE`: overlay (writes kept aside for review), scratch (empty) or direct (the project itself, with --allow-direct)")
	fs.BoolVar(&cfg.allowDirect, "allow-direct", false, "allow --mode direct")
	fs.StringVar(&cfg.name, "name", "", "workspace `NAME`, to keep several workspaces of one project")
	fs.StringVar(&cfg.network, "network", "none", "`NETWORK`: none (loopback only) or host")
	fs.StringVar(&cfg.cwd, "cwd", "", "working `DIR` inside the sandbox (default /workspace)")
	fs.StringVar(&cfg.stateDir, "state-dir", defaultStateDir(), "`DIR` holding the workspaces")
	fs.BoolVar(&cfg.keep, "keep", true, "keep a scratch workspace's files after the program ends")
	fs.Int64Var(&cfg.limits.MemoryBytes, "memory-bytes", 0, "address-space limit of each process (0: the default)")
	fs.Int64Var(&cfg.limits.CPUSeconds, "cpu-seconds", 0, "CPU-time limit of each process (0: none)")
	fs.Int64Var(&cfg.limits.Pids, "pids", 0, "process limit of the sandbox (0: the default)")
	fs.Int64Var(&cfg.limits.FileSizeBytes, "file-size-bytes", 0, "largest file a process may write (0: the default)")
	fs.Int64Var(&cfg.limits.DiskBytes, "disk-bytes", 0, "bytes the workspace may write (0: the default)")
	fs.Int64Var(&cfg.limits.OpenFiles, "open-files", 0, "open-file limit of each process (0: the default)")
	fs.Int64Var(&cfg.limits.TimeoutMs, "timeout-ms", 0, "wall-clock limit (0: none)")
	return fs
}

// runExec is `cellbox exec [flags] -- PROGRAM [ARGS...]`: one program in a
// workspace's sandbox, with this terminal's stdin, stdout and stderr, and
// its exit code (128+N when killed by signal N). An overlay workspace's
// changes stay in the state dir for review, as after workspace/close.
func runExec(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var cfg execConfig
	fs := execFlags(&cfg)
	fs.SetOutput(stderr)
	fs.Usage = func() { printExecHelp(stderr) }
	args, argv := splitCommand(args)
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "cellbox exec: %v\n", err)
		return 2
	}
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "cellbox exec: give the program after --, e.g. cellbox exec -- python3 -c 'print(1)'")
		return 2
	}
	if cfg.root == "" {
		cfg.root, _ = os.Getwd()
	}
	root, _ := filepath.Abs(cfg.root)
	stateDir, _ := filepath.Abs(cfg.stateDir)
	log, _ := newLogger(stderr, "warn", "text")
	m, err := workspace.NewManager(workspace.Options{StateDir: stateDir, Logger: log, NoPool: true, ProjectReadOnly: kernel.ProjectBinds})
	if err != nil {
		fmt.Fprintf(stderr, "cellbox exec: %v\n", err)
		return 1
	}
	w, err := m.Open(ctx, protocol.WorkspaceOpenParams{Root: root, Mode: protocol.WorkspaceMode(cfg.mode), Name: cfg.name, AllowDirect: cfg.allowDirect})
	if err != nil {
		fmt.Fprintf(stderr, "cellbox exec: %v\n", err)
		return 1
	}
	defer func() { _ = m.CloseWorkspace(context.Background(), w.ID(), cfg.mode == "scratch" && !cfg.keep) }()
	limits, err := workspace.ResolveLimits(&cfg.limits, workspace.DefaultLimits)
	if err != nil {
		fmt.Fprintf(stderr, "cellbox exec: %v\n", err)
		return 2
	}
	spec := workspace.ProcSpec{Argv: argv, Dir: cfg.cwd, Limits: limits, Network: protocol.NetworkMode(cfg.network)}
	spec.Stdin, spec.Stdout, spec.Stderr = fileOr(stdin, os.Stdin), fileOr(stdout, os.Stdout), fileOr(stderr, os.Stderr)
	p, err := w.Spawn(ctx, spec)
	if err != nil {
		fmt.Fprintf(stderr, "cellbox exec: %v\n", err)
		return 1
	}
	go func() {
		<-ctx.Done()
		_ = p.Kill()
	}()
	st, err := p.Wait()
	if err != nil {
		fmt.Fprintf(stderr, "cellbox exec: %v\n", err)
		return 1
	}
	if st.Reason != "" {
		fmt.Fprintf(stderr, "cellbox exec: %s\n", st.Reason)
	}
	if st.Signal != 0 {
		return 128 + int(st.Signal)
	}
	return st.Code
}

// fileOr passes the process's own descriptor when the stream is it.
func fileOr(s any, f *os.File) *os.File {
	if sf, ok := s.(*os.File); ok {
		return sf
	}
	return f
}

func printExecHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: cellbox exec [flags] -- PROGRAM [ARGS...]

Runs one program in a workspace's sandbox, without a daemon: /workspace is
an overlay of the project (the current directory by default), the network
is loopback only, and the program runs as an unprivileged user with no
capabilities. Its writes stay in cellbox's state dir for review.

Flags:
`)
	var cfg execConfig
	printFlags(w, execFlags(&cfg))
}
