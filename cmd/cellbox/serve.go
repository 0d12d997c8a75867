package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cellbox-dev/cellbox/editors/browser"
	"github.com/cellbox-dev/cellbox/kernel"
	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/pty"
	"github.com/cellbox-dev/cellbox/rpc"
	"github.com/cellbox-dev/cellbox/rpc/mcp"
	"github.com/cellbox-dev/cellbox/workspace"
	"github.com/cellbox-dev/cellbox/workspace/network"
	"github.com/cellbox-dev/cellbox/workspace/packages"
)

type serveConfig struct {
	stdio           bool
	listen          string
	allowRemote     bool
	token           string
	allowOrigins    listFlag
	maxMessageBytes int
	maxInFlight     int
	stateDir        string
	logLevel        string
	logFormat       string
	testHooks       bool
	maxCheckpoints  int
	cullIdle        time.Duration
	allowSystemRoot bool
	packageCache    string
	packageCacheMax int64
	pypiIndex       string
	npmRegistry     string
	upstreamProxy   string
	mcpAllowCommit  bool
	mcpToolsets     string
	maxKernels      int
	maxTerminals    int
}

func serveFlags(cfg *serveConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.BoolVar(&cfg.stdio, "stdio", false, "serve one client on stdin/stdout with LSP framing (stdout carries protocol bytes only)")
	fs.StringVar(&cfg.listen, "listen", "", "serve websocket (`ADDR`/rpc) and HTTP on ADDR, e.g. 127.0.0.1:8765 (port 0 picks one)")
	fs.BoolVar(&cfg.allowRemote, "allow-remote", false, "allow --listen on a non-loopback address (the token is still required)")
	fs.StringVar(&cfg.token, "token", "", "the websocket/HTTP token (default: 192 random bits, printed once in the URL)")
	fs.Var(&cfg.allowOrigins, "allow-origin", "an extra browser `ORIGIN` allowed to connect, e.g. http://localhost:5173 (repeatable, or comma-separated)")
	fs.IntVar(&cfg.maxMessageBytes, "max-message-bytes", rpc.DefaultMaxMessageBytes, "largest incoming JSON-RPC message in `BYTES`; a larger websocket message closes that connection, a larger stdio frame is skipped and answered -32600")
	fs.IntVar(&cfg.maxInFlight, "max-in-flight", rpc.DefaultMaxInFlight, "concurrent requests per connection; more are answered -32012 with retryAfterMs")
	fs.StringVar(&cfg.stateDir, "state-dir", defaultStateDir(), "`DIR` for workspaces, checkpoints, logs and (without $XDG_RUNTIME_DIR) the runtime file")
	fs.StringVar(&cfg.logLevel, "log-level", "info", "log `LEVEL` on stderr: debug, info, warn or error")
	fs.StringVar(&cfg.logFormat, "log-format", "text", "log `FORMAT` on stderr: text or json")
	fs.DurationVar(&cfg.cullIdle, "cull-idle", 24*time.Hour, "close a terminal or kernel that no client is attached to and that has been idle for `DURATION` (0: never)")
	fs.IntVar(&cfg.maxKernels, "max-kernels", kernel.DefaultMaxKernels, "kernels running at once in the daemon; one more is refused with -32012 (limit exceeded)")
	fs.IntVar(&cfg.maxTerminals, "max-terminals", pty.DefaultMaxPtys, "terminals running at once in the daemon; one more is refused with -32012 (limit exceeded)")
	fs.IntVar(&cfg.maxCheckpoints, "max-checkpoints", workspace.DefaultMaxCheckpoints, "checkpoints kept per workspace (at least 1); taking one more removes the oldest")
	fs.BoolVar(&cfg.allowSystemRoot, "allow-system-root", false, "allow / and system directories (/etc, /usr, /var/lib, ...) as project roots; a root daemon's commits would write into them")
	fs.StringVar(&cfg.packageCache, "package-cache", defaultPackageCache(), "`DIR` of the verified package cache the sandboxes install from (shared by the workspaces)")
	fs.Int64Var(&cfg.packageCacheMax, "package-cache-max", 5<<30, "size cap of the package cache in `BYTES`; the least recently used files go first")
	fs.StringVar(&cfg.pypiIndex, "pypi-index", "", "the simple index (`URL`) the package cache fetches Python packages from (default: pip's configuration, else https://pypi.org/simple/)")
	fs.StringVar(&cfg.npmRegistry, "npm-registry", "", "the npm registry (`URL`) the package cache fetches from (default: npm's configuration, else https://registry.npmjs.org/)")
	fs.StringVar(&cfg.upstreamProxy, "upstream-proxy", "", "an HTTP proxy (`URL`, http://[user:pass@]host:port) the sandboxes' allowlisted connections and the package cache go through; never taken from HTTP_PROXY and the like")
	fs.BoolVar(&cfg.mcpAllowCommit, "mcp-allow-commit", false, "let the agents of /mcp (--listen) copy their changes into the project with the commit tool")
	fs.StringVar(&cfg.mcpToolsets, "mcp-toolsets", "", "opt-in `TOOLSETS` of /mcp (--listen), comma-separated: apps (expose_port, export_app)")
	fs.BoolVar(&cfg.testHooks, "test-hooks", false, "enable the cellboxTest/* methods used by cellbox's own tests; never in production")
	return fs
}

func runServe(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var cfg serveConfig
	fs := serveFlags(&cfg)
	fs.SetOutput(stderr)
	fs.Usage = func() { printServeHelp(stderr) }
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "cellbox serve: %v\n", err)
		return 2
	}
	if cfg.maxKernels < 1 || cfg.maxTerminals < 1 {
		fmt.Fprintf(stderr, "cellbox serve: --max-kernels %d, --max-terminals %d: allow at least 1 of each\n", cfg.maxKernels, cfg.maxTerminals)
		return 2
	}
	if cfg.maxCheckpoints < 1 {
		fmt.Fprintf(stderr, "cellbox serve: --max-checkpoints %d: keep at least 1\n", cfg.maxCheckpoints)
		return 2
	}
	if cfg.stdio == (cfg.listen != "") {
		fmt.Fprintln(stderr, "cellbox serve: give exactly one of --stdio or --listen ADDR")
		return 2
	}
	log, err := newLogger(stderr, cfg.logLevel, cfg.logFormat)
	if err != nil {
		fmt.Fprintf(stderr, "cellbox serve: %v\n", err)
		return 2
	}
	if abs, err := filepath.Abs(cfg.stateDir); err == nil {
		cfg.stateDir = abs
	}
	if err := os.MkdirAll(cfg.stateDir, 0o700); err != nil {
		log.Error("cannot create the state dir", "dir", cfg.stateDir, "err", err)
		return 1
	}
	if cfg.listen != "" && cfg.token == "" {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			log.Error("cannot generate a token", "err", err)
			return 1
		}
		cfg.token = hex.EncodeToString(b)
	}
	cwd, _ := os.Getwd()
	var upstream *url.URL
	if cfg.upstreamProxy != "" {
		if upstream, err = url.Parse(cfg.upstreamProxy); err != nil || upstream.Scheme != "http" || upstream.Host == "" {
			fmt.Fprintf(stderr, "cellbox serve: --upstream-proxy %q: want http://HOST:PORT\n", cfg.upstreamProxy)
			return 2
		}
	}
	pkgs, err := packages.New(packages.Options{Dir: cfg.packageCache, MaxBytes: cfg.packageCacheMax, PyPI: cfg.pypiIndex, NPM: cfg.npmRegistry, Proxy: upstream, Logger: log})
	if err != nil {
		// Kernels and terminals do not need it: the daemon serves without
		// one, and installs say why they cannot run.
		log.Warn("no package cache: installs are refused", "dir", cfg.packageCache, "err", err)
		pkgs = nil
	} else {
		defer pkgs.Close()
	}
	// network/blocked and workspace/ports go to the daemon's connections, made below.
	var blocked atomic.Pointer[rpc.Daemon]
	ws, err := workspace.NewManager(workspace.Options{StateDir: cfg.stateDir, DefaultRoot: cwd, Logger: log, MaxCheckpoints: cfg.maxCheckpoints, AllowSystemRoots: cfg.allowSystemRoot,
		Packages: pkgs, UpstreamProxy: upstream,
		OnBlocked: func(id string, b network.Blocked) {
			if d := blocked.Load(); d != nil {
				d.NetworkBlocked(id, b)
			}
		},
		OnPorts: func(id string, ports []int) {
			if d := blocked.Load(); d != nil {
				d.WorkspacePorts(id, ports)
			}
		},
		// The runtime dir holds the token: no sandbox sees it, even in a
		// project that contains it.
		Hidden:          []string{rpc.RuntimeDir(cfg.stateDir)},
		ProjectReadOnly: kernel.ProjectBinds,
		// The go kernels' shared build cache (kernel.GoSharedCache).
		ReadOnly: kernel.GoSharedCache()})
	if err != nil {
		log.Error("cannot open the workspaces", "err", err)
		return 1
	}
	defer ws.Close()
	ptys := pty.NewManager(pty.Options{Workspaces: ws, Logger: log, CullIdle: cfg.cullIdle, MaxPtys: cfg.maxTerminals})
	defer ptys.Close() // before the workspaces'
	hostCaps, languages := hostCapabilities(cfg.stateDir, log)
	caps := func(ctx context.Context) protocol.ServerCapabilities {
		c := hostCaps(ctx)
		c.Limits.MaxKernels, c.Limits.MaxPtys = cfg.maxKernels, cfg.maxTerminals
		return c
	}
	kernels := kernel.NewManager(kernel.Options{
		Workspaces: ws, Languages: languages, Logger: log, CullIdle: cfg.cullIdle, MaxKernels: cfg.maxKernels,
		AuditDir: filepath.Join(cfg.stateDir, "audit"),
	})
	defer kernels.Close() // before the workspaces'
	d := rpc.New(rpc.Options{
		Workspaces:      ws,
		Ptys:            ptys,
		Version:         cellboxVersion(),
		Logger:          log,
		Kernels:         kernels,
		Capabilities:    caps,
		MaxMessageBytes: cfg.maxMessageBytes,
		MaxInFlight:     cfg.maxInFlight,
		StateDir:        cfg.stateDir,
		TestHooks:       cfg.testHooks,
		Token:           cfg.token,
		AllowOrigins:    cfg.allowOrigins,
		UI:              browser.FS(),
	})
	blocked.Store(d)

	if cfg.stdio {
		log.Debug("serving on stdio")
		return d.ServeStdio(ctx, stdin, stdout) // the deferred Close ends every sandbox
	}
	if err := serveListen(ctx, d, &cfg, cwd, log, stdout); err != nil {
		log.Error("serve failed", "err", err)
		return 1
	}
	return 0
}

// serveListen is `serve --listen`: websocket + HTTP, the token printed once
// as a URL and kept in the 0600 runtime file until a clean exit.
func serveListen(ctx context.Context, d *rpc.Daemon, cfg *serveConfig, cwd string, log *slog.Logger, stdout io.Writer) error {
	if err := checkBind(cfg.listen, cfg.allowRemote); err != nil {
		return err
	}
	toolsets, err := parseToolsets(cfg.mcpToolsets)
	if err != nil {
		return fmt.Errorf("--mcp-toolsets: %w", err)
	}
	// MCP over Streamable HTTP (PROTOCOL.md §10), each session on an
	// in-process connection of its own; the workspace is the daemon's
	// directory unless the client's URL names another.
	agents := mcp.New(mcp.Options{
		Dial: func(_ context.Context, notify func(string, json.RawMessage)) (mcp.Conn, error) {
			return d.DialInProcess(ctx, rpc.ClientOptions{Logger: log, OnNotify: notify,
				ClientInfo: protocol.ClientInfo{Name: "cellbox mcp (http)", Version: cellboxVersion()}})
		},
		Root:        cwd,
		AllowCommit: cfg.mcpAllowCommit,
		Toolsets:    toolsets,
		Version:     cellboxVersion(),
		Logger:      log.With("component", "mcp"),
	})
	defer agents.Close()
	d.HandleHTTP("/mcp", agents.HTTPHandler())
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.listen, err)
	}
	defer ln.Close()
	token := cfg.token
	addr := ln.Addr().(*net.TCPAddr)
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	url := fmt.Sprintf("http://%s/?token=%s", net.JoinHostPort(host, strconv.Itoa(addr.Port)), token)
	rtDir := rpc.RuntimeDir(cfg.stateDir)
	rtFile, err := rpc.WriteRuntimeFile(rtDir, rpc.RuntimeInfo{PID: os.Getpid(), URL: url, Token: token, StartedAt: time.Now()})
	if err != nil {
		return fmt.Errorf("write runtime file: %w", err)
	}
	defer os.Remove(rtFile)
	log.Info("serving", "addr", ln.Addr().String(), "runtime_file", rtFile, "state_dir", cfg.stateDir)
	fmt.Fprintf(stdout, "cellbox %s is serving; open or connect with:\n    %s\n", cellboxVersion(), url)
	err = d.Serve(ctx, ln)
	log.Info("stopped")
	return err
}

// checkBind refuses a non-loopback address unless asked (PROTOCOL.md §1).
func checkBind(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q: %w (want HOST:PORT, e.g. 127.0.0.1:8765)", addr, err)
	}
	if allowRemote {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--listen %q is not a loopback address; cellbox runs code for whoever holds the token, so binding %q needs --allow-remote", addr, host)
	}
	return nil
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}
