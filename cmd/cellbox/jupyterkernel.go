package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/cellbox-dev/cellbox/kernel/jupyter"
	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/rpc"
)

type jupyterKernelConfig struct {
	language, connFile, root, name, stateDir, logLevel string
}

func jupyterKernelFlags(cfg *jupyterKernelConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("jupyter-kernel", flag.ContinueOnError)
	fs.StringVar(&cfg.language, "language", "", "the cellbox `LANGUAGE` of the kernel (python, javascript, bash, ...)")
	fs.StringVar(&cfg.connFile, "f", "", "the Jupyter connection `FILE` (Jupyter passes {connection_file})")
	fs.StringVar(&cfg.root, "root", "", "project `DIR` whose overlay workspace the code runs in (default: the current directory, which Jupyter sets to the notebook's)")
	fs.StringVar(&cfg.name, "name", "", "workspace `NAME`, to keep several workspaces of one project")
	fs.StringVar(&cfg.stateDir, "state-dir", defaultStateDir(), "the daemon's state `DIR`, as for cellbox connect")
	fs.StringVar(&cfg.logLevel, "log-level", "warn", "log `LEVEL` on stderr, also passed to a daemon this starts")
	return fs
}

// runJupyterKernel is `cellbox jupyter-kernel --language L -f FILE`: a
// Jupyter kernel process (PROTOCOL.md §8) whose code runs in a cellbox
// kernel of the user's daemon, in the overlay workspace of the notebook's
// directory.
func runJupyterKernel(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cfg jupyterKernelConfig
	fs := jupyterKernelFlags(&cfg)
	fs.SetOutput(stderr)
	fs.Usage = func() { printJupyterKernelHelp(stderr) }
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "cellbox jupyter-kernel: %v\n", err)
		return 2
	}
	if cfg.language == "" || cfg.connFile == "" {
		fmt.Fprintln(stderr, "cellbox jupyter-kernel: give --language and -f CONNECTION_FILE (cellbox jupyter install writes kernelspecs that do)")
		return 2
	}
	log, err := newLogger(stderr, cfg.logLevel, "text")
	if err != nil {
		fmt.Fprintf(stderr, "cellbox jupyter-kernel: %v\n", err)
		return 2
	}
	fail := func(format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		log.Error(msg)
		fmt.Fprintf(stderr, "cellbox jupyter-kernel: %s\n", msg)
		return 1
	}
	// Jupyter's signal interrupt mode sends SIGINT to this process: caught
	// from the start (main leaves SIGINT to this command), so an early one
	// cannot kill the kernel.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)
	if cfg.root == "" {
		cfg.root, _ = os.Getwd()
	}
	root, err := filepath.Abs(cfg.root)
	if err != nil {
		return fail("project dir %s: %v", cfg.root, err)
	}

	ci, err := jupyter.ReadConnectionFile(cfg.connFile)
	if err != nil {
		return fail("%v", err)
	}
	if ci.Key == "" && ci.Transport == "tcp" {
		fmt.Fprintln(stderr, "cellbox jupyter-kernel: warning: the connection file has no key, so messages are not signed and any local user can run code in this kernel's workspace")
	}
	signer, err := jupyter.NewSigner(ci.SignatureScheme, []byte(ci.Key))
	if err != nil {
		return fail("%v", err)
	}
	socks, err := jupyter.Listen(ctx, &ci, signer)
	if err != nil {
		return fail("%v", err)
	}
	defer socks.Close()

	// The server needs the kernel's id, and the connection's handlers the
	// server: the handlers wait for it.
	var srv *jupyter.Server
	ready := make(chan struct{})
	exe, err := os.Executable()
	if err != nil {
		return fail("find own executable: %v", err)
	}
	client, err := rpc.Dial(ctx, rpc.ClientOptions{
		StateDir:     cfg.stateDir,
		Executable:   exe,
		ServeArgs:    []string{"--log-level", cfg.logLevel},
		Logger:       log,
		ClientInfo:   protocol.ClientInfo{Name: "cellbox-jupyter-kernel", Version: cellboxVersion()},
		Capabilities: protocol.ClientCapabilities{InputRequest: true},
		OnNotify: func(method string, params json.RawMessage) {
			select {
			case <-ready:
			default:
				return // nothing of ours runs yet
			}
			switch method {
			case protocol.MethodKernelOutput:
				var p protocol.KernelOutputParams
				if json.Unmarshal(params, &p) == nil {
					srv.Output(p)
				}
			case protocol.MethodKernelStatus:
				var p protocol.KernelStatusParams
				if json.Unmarshal(params, &p) == nil {
					srv.Status(p)
				}
			}
		},
		OnRequest: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
			if method != protocol.MethodKernelInputRequest {
				return nil, protocol.Errorf(protocol.CodeMethodNotFound, "%s is not served by cellbox jupyter-kernel", method)
			}
			var p protocol.KernelInputRequestParams
			if err := json.Unmarshal(params, &p); err != nil {
				return nil, protocol.Errorf(protocol.CodeInvalidParams, "kernel/inputRequest: %v", err)
			}
			select {
			case <-ready:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return srv.Input(ctx, p)
		},
	})
	if err != nil {
		return fail("%v", err)
	}
	defer client.Close()

	var ws protocol.WorkspaceInfo
	if err := client.Call(ctx, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: root, Mode: protocol.WorkspaceModeOverlay, Name: cfg.name}, &ws); err != nil {
		return fail("open the overlay workspace of %s: %v", root, err)
	}
	// Jupyter's client is ready as soon as kernel_info is answered, from
	// initialize's languages; the kernel starts meanwhile, and requests
	// that need it wait for it.
	li := protocol.LanguageInfo{Name: cfg.language}
	for _, l := range client.Capabilities().Languages {
		if l.ID == cfg.language {
			li.Version = l.Version
			if len(l.FileExtensions) > 0 {
				li.FileExtension = l.FileExtensions[0]
			}
		}
	}
	srv = jupyter.NewServer(jupyter.ServerOptions{
		Sockets:  socks,
		Caller:   client,
		Language: li,
		Banner: fmt.Sprintf("cellbox %s kernel, sandboxed: /workspace is an overlay of %s (review its writes with cellbox changes, diff and commit)",
			cfg.language, root),
		Version: cellboxVersion(),
		Logger:  log,
	})
	close(ready)
	var started protocol.KernelStartResult
	startDone := make(chan struct{}) // started is set
	go func() {
		defer close(startDone)
		err := client.Call(ctx, protocol.MethodKernelStart, protocol.KernelStartParams{Language: cfg.language, WorkspaceID: ws.WorkspaceID}, &started)
		if err != nil {
			err = fmt.Errorf("start a %s kernel: %w", cfg.language, err)
			log.Error(err.Error())
			fmt.Fprintf(stderr, "cellbox jupyter-kernel: %v\n", err)
		} else {
			log.Info("kernel started", "kernel", started.KernelID, "workspace", ws.WorkspaceID, "root", root)
		}
		// A kernel that cannot start leaves the process up, answering
		// every execution with the reason, which Jupyter shows in the
		// notebook (a process that ended would be restarted, and fail
		// again, with the reason only in the server's log).
		srv.Started(started.KernelID, started.LanguageInfo, err)
	}()

	serveCtx, stopServe := context.WithCancel(ctx)
	defer stopServe()
	go func() {
		for {
			select {
			case <-serveCtx.Done():
				return
			case <-sigs:
				if err := srv.Interrupt(serveCtx); err != nil {
					log.Warn("interrupt", "err", err)
				}
			}
		}
	}()
	go func() {
		select {
		case <-client.Done():
			log.Error("the connection to the daemon was lost")
			stopServe()
		case <-serveCtx.Done():
		}
	}()

	_ = srv.Serve(serveCtx)
	select {
	case <-srv.Done(): // shut down by a client: kernel/shutdown was called
		return 0
	default:
	}
	<-startDone
	if started.KernelID == "" {
		return 1
	}
	// Ended by a signal or a lost daemon: shut the cellbox kernel down.
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.Call(sctx, protocol.MethodKernelShutdown, protocol.KernelIDParams{KernelID: started.KernelID}, nil); err != nil {
		log.Warn("shut the kernel down", "err", err)
	}
	select {
	case <-client.Done():
		return 1
	default:
	}
	return 0
}

func printJupyterKernelHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: cellbox jupyter-kernel --language LANGUAGE -f CONNECTION_FILE

A Jupyter kernel (the Jupyter messaging protocol 5.3 over ZeroMQ, tcp or
ipc) whose code runs in a cellbox kernel of your daemon (started as cellbox
connect starts it), in the overlay workspace of the current directory:
Jupyter starts kernels in the notebook's directory. What the code writes
stays in the workspace until you review it with cellbox changes, cellbox
diff and cellbox commit in that directory.

Jupyter runs this command from the kernelspecs cellbox jupyter install
writes; you do not run it yourself.

Flags:
`)
	var cfg jupyterKernelConfig
	printFlags(w, jupyterKernelFlags(&cfg))
}
