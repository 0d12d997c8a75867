package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	xterm "golang.org/x/term"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/rpc"
)

// `cellbox run-agent`: a whole agent CLI run in a terminal of a
// workspace's sandbox, over the user's daemon (PROTOCOL.md §5 pty/open,
// §9 workspace/setNetwork), so every edit it makes, by its own editing
// tools or its shell, lands in the overlay for review.

type runAgentConfig struct {
	stateDir, logLevel, root, name string
	allow, env                     []string
}

// knownAgents are the API hosts and key variables of agent CLIs people
// run: `run-agent -- claude` allows its host and passes its key without
// being told.
var knownAgents = map[string]struct {
	hosts, keys []string
}{
	"claude": {[]string{"api.anthropic.com", "statsig.anthropic.com"}, []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"}},
	"codex":  {[]string{"api.openai.com"}, []string{"OPENAI_API_KEY", "OPENAI_BASE_URL"}},
	"aider":  {[]string{"api.openai.com", "api.anthropic.com"}, []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}},
	"gemini": {[]string{"generativelanguage.googleapis.com"}, []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}},
	"goose":  {[]string{"api.openai.com", "api.anthropic.com"}, []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}},
}

// passEnv are variables of the caller's terminal the agent gets.
var passEnv = []string{"TERM", "COLORTERM", "LANG", "LC_ALL", "LC_CTYPE", "NO_COLOR"}

func runAgentFlags(cfg *runAgentConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("run-agent", flag.ContinueOnError)
	fs.StringVar(&cfg.stateDir, "state-dir", defaultStateDir(), "the daemon's state `DIR` (where its runtime file is found when $XDG_RUNTIME_DIR is unset)")
	fs.StringVar(&cfg.logLevel, "log-level", "warn", "log `LEVEL` on stderr, also passed to a daemon this starts")
	fs.StringVar(&cfg.root, "root", "", "the project `DIR` (default: the current directory)")
	fs.StringVar(&cfg.name, "name", "", "the workspace's `NAME`, for a project with several")
	fs.Var((*listFlag)(&cfg.allow), "allow", "a `HOST` the agent may reach (repeat; \"host\", \"*.domain\", \"host:port\"); known agents' API hosts are allowed without it")
	fs.Var((*listFlag)(&cfg.env), "env", "a `NAME` or NAME=VALUE to pass to the agent (repeat); known agents' key variables are passed without it")
	return fs
}

// runRunAgent is `cellbox run-agent [flags] -- COMMAND [ARGS...]`.
func runRunAgent(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var cfg runAgentConfig
	fs := runAgentFlags(&cfg)
	fs.SetOutput(stderr)
	fs.Usage = func() { printRunAgentHelp(stderr) }
	args, argv := splitCommand(args)
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "cellbox run-agent: %v\n", err)
		return 2
	}
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "cellbox run-agent: give the agent's command after --, e.g. cellbox run-agent -- claude")
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "cellbox run-agent: %v\n", err)
		return 1
	}
	root := cfg.root
	if root == "" {
		var err error
		if root, err = os.Getwd(); err != nil {
			return fail(fmt.Errorf("the current directory: %w", err))
		}
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return fail(fmt.Errorf("--root %s: %w", cfg.root, err))
	}
	allow, env := agentNetworkAndEnv(argv[0], cfg.allow, cfg.env, os.Getenv)

	log, err := newLogger(stderr, cfg.logLevel, "text")
	if err != nil {
		fmt.Fprintf(stderr, "cellbox run-agent: %v\n", err)
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		return fail(fmt.Errorf("find own executable: %w", err))
	}
	a := &agentTerm{out: stdout, exit: make(chan protocol.PtyExitParams, 1), wake: make(chan struct{}, 1)}
	c, err := rpc.Dial(ctx, rpc.ClientOptions{
		StateDir: cfg.stateDir, Executable: exe, ServeArgs: []string{"--log-level", cfg.logLevel}, Logger: log,
		ClientInfo: protocol.ClientInfo{Name: "cellbox run-agent", Version: cellboxVersion()},
		OnNotify:   a.notify,
	})
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	a.c = c

	var ws protocol.WorkspaceInfo
	if err := c.Call(ctx, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: root, Mode: protocol.WorkspaceModeOverlay, Name: cfg.name}, &ws); err != nil {
		return fail(err)
	}
	network := protocol.NetworkModeAllowlist
	if len(allow) == 0 {
		network = protocol.NetworkModeNone
	}
	if err := c.Call(ctx, protocol.MethodWorkspaceSetNetwork, protocol.WorkspaceSetNetworkParams{WorkspaceID: ws.WorkspaceID, Network: network, Allow: allow}, nil); err != nil {
		return fail(err)
	}
	if len(allow) > 0 {
		fmt.Fprintf(stderr, "cellbox run-agent: %s runs in workspace %s of %s; it may reach %s\n", argv[0], ws.WorkspaceID, root, strings.Join(allow, ", "))
	} else {
		fmt.Fprintf(stderr, "cellbox run-agent: %s runs in workspace %s of %s, without network (--allow HOST to give it its API)\n", argv[0], ws.WorkspaceID, root)
	}

	inFile, _ := stdin.(*os.File)
	tty := inFile != nil && xterm.IsTerminal(int(inFile.Fd()))
	cols, rows := 100, 30
	if outFile, ok := stdout.(*os.File); ok && xterm.IsTerminal(int(outFile.Fd())) {
		if w, h, err := xterm.GetSize(int(outFile.Fd())); err == nil {
			cols, rows = w, h
		}
	}
	var open protocol.PtyOpenResult
	err = c.Call(ctx, protocol.MethodPtyOpen, protocol.PtyOpenParams{
		WorkspaceID: ws.WorkspaceID, Command: argv, Cols: cols, Rows: rows, Env: env,
		Encoding: protocol.EncodingBase64, Network: network, Allow: allow,
	}, &open)
	if err != nil {
		return fail(err)
	}
	// Output may have come before the answer: the consumer starts now.
	a.ptyID = open.PtyID
	go a.consume()

	if tty {
		if old, err := xterm.MakeRaw(int(inFile.Fd())); err == nil {
			defer func() { _ = xterm.Restore(int(inFile.Fd()), old) }()
		}
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		go func() {
			for range winch {
				if w, h, err := xterm.GetSize(int(inFile.Fd())); err == nil {
					_ = c.Call(ctx, protocol.MethodPtyResize, protocol.PtyResizeParams{PtyID: open.PtyID, Cols: w, Rows: h}, nil)
				}
			}
		}()
	}
	if stdin != nil {
		go a.forward(ctx, stdin)
	}

	var exit protocol.PtyExitParams
	select {
	case exit = <-a.exit:
	case <-c.Done():
		return fail(errors.New("the daemon went away; the agent's changes so far are in the workspace"))
	case <-ctx.Done():
		_ = c.Call(context.Background(), protocol.MethodPtyClose, protocol.PtyIDParams{PtyID: open.PtyID}, nil)
		return 130
	}
	if tty {
		fmt.Fprint(stdout, "\r\n")
	}
	var changes protocol.WorkspaceChangesResult
	if err := c.Call(ctx, protocol.MethodWorkspaceChanges, protocol.WorkspaceChangesParams{WorkspaceID: ws.WorkspaceID}, &changes); err == nil {
		if n := len(changes.Changes); n == 0 {
			fmt.Fprintf(stderr, "cellbox run-agent: the workspace has no changes\n")
		} else {
			fmt.Fprintf(stderr, "cellbox run-agent: %s in the workspace, none in %s yet: review with `cellbox diff`, keep with `cellbox commit`, drop with `cellbox discard --all`\n", plural(n, "change"), root)
		}
	}
	return exit.ExitCode // 128+N when a signal ended it
}

// agentNetworkAndEnv is what the agent argv0 may reach and the variables
// it gets: those asked for, and a known agent's.
func agentNetworkAndEnv(argv0 string, allow, envFlags []string, getenv func(string) string) ([]string, map[string]string) {
	env := map[string]string{}
	for _, k := range passEnv {
		if v := getenv(k); v != "" {
			env[k] = v
		}
	}
	if known, ok := knownAgents[filepath.Base(argv0)]; ok {
		allow = append(append([]string(nil), known.hosts...), allow...)
		for _, k := range known.keys {
			if v := getenv(k); v != "" {
				env[k] = v
			}
		}
	}
	for _, e := range envFlags {
		if k, v, ok := strings.Cut(e, "="); ok {
			env[k] = v
		} else if v := getenv(e); v != "" {
			env[e] = v
		}
	}
	seen := map[string]bool{}
	out := allow[:0:0]
	for _, h := range allow {
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out, env
}

// agentTerm carries the agent's terminal between the daemon and this one.
type agentTerm struct {
	c     *rpc.Client
	out   io.Writer
	exit  chan protocol.PtyExitParams
	ptyID string // set before consume starts

	mu      sync.Mutex    // guards pending
	pending []agentNote   // notifications not handled yet, in order
	wake    chan struct{} // capacity 1: pending has more
}

type agentNote struct {
	method string
	params json.RawMessage
}

// notify takes the daemon's notifications on its read goroutine, which
// must never wait (pty/open's answer comes through it too): they queue for
// consume, in order.
func (a *agentTerm) notify(method string, params json.RawMessage) {
	if method != protocol.MethodPtyOutput && method != protocol.MethodPtyExit {
		return
	}
	a.mu.Lock()
	a.pending = append(a.pending, agentNote{method, params})
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// consume handles the queued notifications, in order, until the exit.
func (a *agentTerm) consume() {
	for range a.wake {
		a.mu.Lock()
		notes := a.pending
		a.pending = nil
		a.mu.Unlock()
		for _, n := range notes {
			if a.handle(n.method, n.params) {
				return
			}
		}
	}
}

// handle writes an output or passes on the exit (and says so).
func (a *agentTerm) handle(method string, params json.RawMessage) (exited bool) {
	switch method {
	case protocol.MethodPtyOutput:
		var o protocol.PtyOutputParams
		if json.Unmarshal(params, &o) != nil || o.PtyID != a.ptyID {
			return
		}
		if b, err := base64.StdEncoding.DecodeString(o.Data); err == nil {
			_, _ = a.out.Write(b)
		}
		// Acknowledged without waiting for the answer: the output goes on.
		go func() {
			_ = a.c.Call(context.Background(), protocol.MethodPtyAck, protocol.PtyAckParams{PtyID: o.PtyID, Seq: o.Seq}, nil)
		}()
	case protocol.MethodPtyExit:
		var e protocol.PtyExitParams
		if json.Unmarshal(params, &e) == nil && e.PtyID == a.ptyID {
			a.exit <- e // capacity 1, sent once
			return true
		}
	}
	return false
}

// forward sends what the user types to the agent's terminal.
func (a *agentTerm) forward(ctx context.Context, in io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			data := base64.StdEncoding.EncodeToString(buf[:n])
			if a.c.Call(ctx, protocol.MethodPtyWrite, protocol.PtyWriteParams{PtyID: a.ptyID, Data: data}, nil) != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func printRunAgentHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: cellbox run-agent [flags] -- COMMAND [ARGS...]

Runs an agent CLI (claude, codex, aider, gemini, ...) in a terminal of the
sandbox of the current directory's workspace, over the user's daemon. Every
file it writes, with its own editing tools or its shell, lands in the
workspace's overlay: the project is untouched until you review the changes
(cellbox diff, an editor's changes view) and commit them. It reaches only
the hosts allowed: a known agent's API host, and each --allow. The command
must be installed where the sandbox sees it (/usr, /opt, or the project).

Flags:
`)
	var cfg runAgentConfig
	printFlags(w, runAgentFlags(&cfg))
}
