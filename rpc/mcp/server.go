package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Conn is a connection to the daemon, as *rpc.Client is one: calls whose
// daemon errors come back as *protocol.Error, and Done closed once the
// connection has ended.
type Conn interface {
	Call(ctx context.Context, method string, params, result any) error
	Done() <-chan struct{}
	Close() error
}

// Dialer opens a connection to the daemon whose notifications go to
// notify, in the order sent, on the connection's read goroutine (notify
// does not block).
type Dialer func(ctx context.Context, notify func(method string, params json.RawMessage)) (Conn, error)

// Options configure a Server.
type Options struct {
	// Dial connects to the daemon, once per MCP session and again when a
	// connection is lost (required).
	Dial Dialer
	// Root is the project directory whose overlay workspace the tools work
	// in (absolute), Name the workspace's name ("" is the one editors open).
	// Over HTTP a client may name another (HTTPHandler).
	Root, Name string
	// Language is run's default language (default python).
	Language string
	// AllowCommit lets the commit tool copy changes into the project.
	AllowCommit bool
	// Toolsets are the opt-in toolsets served besides the default tools:
	// ToolsetApps.
	Toolsets []string
	// ExportDir is the directory export_app writes bundles in, one
	// directory per name (default DefaultExportDir): an agent names a
	// bundle, never a host path.
	ExportDir string
	// Version is reported in serverInfo.
	Version string
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Server is the MCP server: the SDK's server with cellbox's tools and
// resources, and the session state behind them.
type Server struct {
	opts Options
	log  *slog.Logger
	mcp  *sdk.Server // the default tools, and ToolsetApps's when Options.Toolsets says so

	mu sync.Mutex // guards sessions and stdio
	// sessions are the HTTP sessions' states, by session id (or by
	// workspace for clients without a session id).
	sessions map[string]*session
	// stdio is the one session of Serve.
	stdio *session
}

// New returns a Server with the tools of PROTOCOL.md §10.
func New(o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Language == "" {
		o.Language = "python"
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	s := &Server{opts: o, log: o.Logger, sessions: map[string]*session{}}
	if o.ExportDir == "" {
		o.ExportDir = DefaultExportDir()
	}
	s.opts = o
	newServer := func(apps bool) *sdk.Server {
		srv := sdk.NewServer(&sdk.Implementation{Name: "cellbox", Title: "cellbox sandbox", Version: o.Version}, &sdk.ServerOptions{
			Instructions: instructions(o, apps),
			Logger:       o.Logger,
			// No logging capability: diagnostics go to stderr.
			Capabilities: &sdk.ServerCapabilities{},
		})
		s.addTools(srv)
		if apps {
			s.addAppTools(srv)
		}
		s.addResources(srv)
		return srv
	}
	s.mcp = newServer(slices.Contains(o.Toolsets, ToolsetApps))
	return s
}

// DefaultExportDir is where export_app writes bundles unless
// Options.ExportDir says otherwise: $XDG_DATA_HOME/cellbox/exports.
func DefaultExportDir() string {
	data := os.Getenv("XDG_DATA_HOME")
	if data == "" || !filepath.IsAbs(data) {
		home, _ := os.UserHomeDir()
		data = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(data, "cellbox", "exports")
}

// Toolsets the human opts into (Options.Toolsets: cellbox mcp --toolsets,
// serve --mcp-toolsets); an agent cannot turn one on.
const (
	// ToolsetApps: expose_port (a preview URL of a server the agent
	// started) and export_app (the workspace as a runnable bundle).
	ToolsetApps = "apps"
)

// Serve serves one MCP client on in and out (stdio: newline-delimited
// JSON-RPC) until it ends or ctx does. The workspace is opened (and its
// kernels found) at once; a daemon that cannot be reached yet is retried
// by each tool call.
func (s *Server) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	sess := newSession(s, s.opts.Root, s.opts.Name)
	s.mu.Lock()
	s.stdio = sess
	s.mu.Unlock()
	defer sess.close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if _, ws, err := sess.connect(cctx); err != nil {
		s.log.Warn("the daemon is not reachable yet; tool calls will retry", "err", err)
	} else {
		s.log.Info("serving MCP on stdio", "workspace", ws.WorkspaceID, "root", ws.Root)
	}
	cancel()
	err := s.mcp.Run(ctx, &sdk.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Headers an HTTP client names its workspace with (or the query
// parameters root and name of the /mcp URL).
const (
	RootHeader = "Cellbox-Root"
	NameHeader = "Cellbox-Name"
)

// HTTPHandler serves MCP over Streamable HTTP. Each MCP session has its
// own connection to the daemon; its workspace is the overlay of Options'
// Root and Name unless the client names another with ?root=DIR&name=NAME
// on the URL (or the Cellbox-Root and Cellbox-Name headers). The caller
// puts the handler behind its authentication.
func (s *Server) HTTPHandler() http.Handler {
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.mcp }, &sdk.StreamableHTTPOptions{
		Logger: s.log,
		// A client that vanished without DELETE: its session (and daemon
		// connection) goes after an hour without requests.
		SessionTimeout: time.Hour,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if v := q.Get("root"); v != "" {
			r.Header.Set(RootHeader, v)
		}
		if v := q.Get("name"); v != "" {
			r.Header.Set(NameHeader, v)
		}
		h.ServeHTTP(w, r)
	})
}

// Close ends every session's daemon connection.
func (s *Server) Close() {
	s.mu.Lock()
	all := make([]*session, 0, len(s.sessions))
	for _, x := range s.sessions {
		all = append(all, x)
	}
	clear(s.sessions)
	s.mu.Unlock()
	for _, x := range all {
		x.close()
	}
}

// sessionFor is the state of the MCP session of a request.
func (s *Server) sessionFor(ss *sdk.ServerSession, h http.Header) (*session, error) {
	s.mu.Lock()
	if s.stdio != nil {
		defer s.mu.Unlock()
		return s.stdio, nil
	}
	s.mu.Unlock()
	root, name := s.opts.Root, s.opts.Name
	if h != nil {
		if v := h.Get(RootHeader); v != "" {
			if !filepath.IsAbs(v) {
				return nil, fmt.Errorf("root %q: give the project directory as an absolute path", v)
			}
			root = filepath.Clean(v)
		}
		if v := h.Get(NameHeader); v != "" {
			name = v
		}
	}
	key := ""
	if ss != nil {
		key = ss.ID()
	}
	shared := key == ""
	if shared { // a client without sessions: one state per workspace
		key = "workspace\x00" + root + "\x00" + name
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if x, ok := s.sessions[key]; ok {
		return x, nil
	}
	x := newSession(s, root, name)
	s.sessions[key] = x
	if !shared {
		go func() {
			_ = ss.Wait()
			s.mu.Lock()
			if s.sessions[key] == x {
				delete(s.sessions, key)
			}
			s.mu.Unlock()
			x.close()
		}()
	}
	return x, nil
}

// toolError is how a failed request to the daemon reads in a tool result:
// a failure of the sandbox or the daemon (no connection, a dead kernel, a
// sandbox this host cannot build, a limit) starts with "sandbox failure:";
// other errors the daemon answered name their §7 error
// ("PathOutsideWorkspace: ...").
func toolError(err error) error {
	var pe *protocol.Error
	var ce *connErr
	switch {
	case errors.Is(err, errClosed):
		return err
	case errors.As(err, &ce):
		return fmt.Errorf("sandbox failure: %v (the next call tries again)", err)
	case errors.As(err, &pe):
		name := codeName(pe.Code)
		msg := err.Error()
		if !strings.Contains(msg, pe.Message) {
			msg += ": " + pe.Message
		}
		switch pe.Code {
		case protocol.CodeSandboxUnavailable, protocol.CodeKernelDead, protocol.CodeLimitExceeded,
			protocol.CodeLanguageUnavailable, protocol.CodeInternalError:
			return fmt.Errorf("sandbox failure: %s: %s", name, msg)
		}
		return fmt.Errorf("%s: %s", name, msg)
	}
	// Not an answer of the daemon: the connection broke under the call.
	return fmt.Errorf("sandbox failure: %v (the next call reconnects)", err)
}

// codeName is the name PROTOCOL.md §7 gives code, e.g. PathOutsideWorkspace.
func codeName(code protocol.ErrorCode) string {
	var b strings.Builder
	for _, w := range strings.Split(code.ErrorName(), "_") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}

// instructions is what the server tells the model once, at initialize.
func instructions(o Options, apps bool) string {
	commit := `commit is off: the human reviews the changes and commits them from an editor or with "cellbox commit"; tell them what you changed and why.`
	if o.AllowCommit {
		commit = `commit copies the changes into the project (the human allowed it with --allow-commit); check changes with diff first.`
	}
	return `cellbox runs code in a sandbox whose /workspace is a copy-on-write overlay of the project directory; paths are relative to it. Nothing you write or run touches the project itself: every change waits in the overlay, where the human reviews it (the editor's source control view, "cellbox diff").

Work in small verified steps:
1. write_file the code, and a test that shows the behaviour you want (before you change it).
2. run the test: run executes code in a persistent ` + o.Language + ` kernel (variables and imports stay between calls; the working directory is /workspace; subprocess or "!cmd" runs shell commands, e.g. the project's test runner).
3. Read the failure: a failing program is status "error" with error.ename, error.evalue, a traceback of your code's frames, and error.location (file:line). stdout and stderr come bounded (head and tail); the whole is a resource named in the note.
4. Fix it with write_file edits (exact search/replace; each search must occur exactly once) and run again until it passes.
5. Before you finish, call changes (diff: true) and check every change is intended.

Long work: run waits waitS seconds (default 30); code still running answers status "running" with its output so far. poll {executionId} waits again and returns the output since the last look; stop interrupts it (restart: true also clears the kernel's memory).
Undo: before each run, write_file, discard, restore and install an automatic checkpoint is taken when the files changed; a run names its own ("checkpoint"), so you can restore to before any execution. checkpoint saves a named one. restore brings the files back, not the kernel's memory.
Packages: install {manager: "pip" or "npm", packages} installs into the workspace's environment; installs are not changes to review.
` + commit + appsText(apps)
}

// appsText is what the instructions say of ToolsetApps's tools.
func appsText(apps bool) string {
	if !apps {
		return ""
	}
	return `
Apps: a server you start in the sandbox (e.g. from run, in a background thread or with subprocess.Popen, listening on 127.0.0.1 or 0.0.0.0) is reachable by nobody until expose_port {port} gives a preview: browserUrl for the human (its own origin, with its own token; give them that URL), url for your own programs (curl, python) to check it. export_app {name} writes the workspace as a runnable bundle (the app, requirements.txt or package.json, a Dockerfile, compose.yaml, a README; format "oci" adds an OCI image) into the human's exports directory, under that name; tell them its path.`
}

// asProtocolError is the daemon's answer in err, if it is one.
func asProtocolError(err error) (*protocol.Error, bool) {
	var pe *protocol.Error
	ok := errors.As(err, &pe)
	return pe, ok
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
