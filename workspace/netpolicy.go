package workspace

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/netutil"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/network"
	"github.com/cellbox-dev/cellbox/workspace/packages"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// A workspace's network (PROTOCOL.md §9). Its sandbox has a network
// namespace of its own unless it runs with the host's network; the
// namespace's only way out are the listeners its init made there
// (sandbox.Listeners), which the daemon serves here: the HTTP and SOCKS5
// proxies with the workspace's policy (workspace/network), and the package
// index (workspace/packages). "none" and "allowlist" are the same sandbox
// with another policy, so a policy changes live, for new connections.

// netState is a workspace's network policy, kept in its meta.json.
type netState struct {
	mode  network.Mode
	rules []network.Rule
}

// ParseNetwork checks a network mode and its rules as kernel/start,
// pty/open and workspace/setNetwork take them; mode "" keeps the
// workspace's.
func ParseNetwork(mode protocol.NetworkMode, allow []string) (protocol.NetworkMode, []network.Rule, error) {
	switch mode {
	case "", protocol.NetworkModeNone, protocol.NetworkModeHost:
		if len(allow) > 0 {
			return "", nil, fmt.Errorf("%w: field \"allow\" needs network \"allowlist\", not %q", ErrInvalid, orNone(mode))
		}
		return mode, nil, nil
	case protocol.NetworkModeAllowlist:
	default:
		return "", nil, fmt.Errorf("%w: field \"network\" must be \"none\", \"allowlist\" or \"host\", got %q", ErrInvalid, mode)
	}
	if len(allow) > maxRules {
		return "", nil, fmt.Errorf("%w: %d allowlist rules; at most %d", ErrInvalid, len(allow), maxRules)
	}
	rules, err := network.ParseRules(allow)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return mode, rules, nil
}

// maxRules bounds a workspace's allowlist.
const maxRules = 1000

func orNone(m protocol.NetworkMode) protocol.NetworkMode {
	if m == "" {
		return protocol.NetworkModeNone
	}
	return m
}

// SetNetwork sets the workspace's policy: "none" or "allowlist" with
// rules. It applies to new connections at once, and to the sandboxes the
// workspace starts later (it is kept with the workspace).
func (w *Workspace) SetNetwork(mode protocol.NetworkMode, rules []network.Rule) error {
	var nm network.Mode
	switch mode {
	case protocol.NetworkModeNone:
		nm, rules = network.ModeNone, nil
	case protocol.NetworkModeAllowlist:
		nm = network.ModeAllowlist
	default:
		return fmt.Errorf("%w: workspace/setNetwork takes network \"none\" or \"allowlist\", not %q (the host's network is a sandbox of its own: kernel/start asks for it)", ErrInvalid, mode)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("workspace %s: %w", w.id, ErrClosed)
	}
	if w.sb != nil && w.sb.Err() == nil && w.network == sandbox.NetworkHost {
		return fmt.Errorf("%w: workspace %s runs with the host's network; shut down its kernels and terminals first", ErrInvalid, w.id)
	}
	w.net = netState{mode: nm, rules: rules}
	return w.saveMetaLocked()
}

func (w *Workspace) policy() network.Policy {
	w.mu.Lock()
	defer w.mu.Unlock()
	return network.Policy{Mode: w.net.mode, Rules: w.net.rules}
}

// saveMetaLocked rewrites meta.json with the workspace's policy.
func (w *Workspace) saveMetaLocked() error {
	md := meta{ID: w.id, Root: w.root, Mode: w.mode, Name: w.name, CreatedAt: w.createdAt, Network: string(w.net.mode)}
	for _, r := range w.net.rules {
		md.Allow = append(md.Allow, r.String())
	}
	return writeMeta(w.dir, md)
}

// netStateOf reads a meta.json's policy; a bad one (edited by hand) is
// "none", logged.
func (m *Manager) netStateOf(md meta) netState {
	if md.Network != string(network.ModeAllowlist) {
		return netState{mode: network.ModeNone}
	}
	rules, err := network.ParseRules(md.Allow)
	if err != nil {
		m.log.Warn("the workspace's allowlist is not valid; its network is none", "workspace", md.ID, "err", err)
		return netState{mode: network.ModeNone}
	}
	return netState{mode: network.ModeAllowlist, rules: rules}
}

// envDir is the workspace's environment on disk (/env in the sandbox).
func (w *Workspace) envDir() string { return filepath.Join(w.dir, "env") }

// The environment a program of a sandbox with a network namespace of its
// own gets, so that pip, npm, git, curl, requests, urllib and node's fetch
// find the proxies and the package index unmodified.
var (
	proxyURL  = "http://127.0.0.1:" + strconv.Itoa(int(port(sandbox.ListenerHTTPProxy)))
	socksURL  = "socks5h://127.0.0.1:" + strconv.Itoa(int(port(sandbox.ListenerSOCKS)))
	indexBase = "http://127.0.0.1:" + strconv.Itoa(int(port(sandbox.ListenerPackages)))
	// PipIndexURL and NPMRegistryURL are the package index as programs in
	// a sandbox reach it.
	PipIndexURL    = indexBase + "/pypi/simple/"
	NPMRegistryURL = indexBase + "/npm/"
	noProxy        = "localhost,127.0.0.1,::1"
)

func port(name string) uint16 {
	for _, l := range sandbox.Listeners {
		if l.Name == name {
			return l.Port
		}
	}
	panic("no sandbox listener " + name)
}

// networkEnv are the variables added to a program's environment (those
// it sets itself win).
var networkEnv = []string{
	"HTTP_PROXY=" + proxyURL, "http_proxy=" + proxyURL,
	"HTTPS_PROXY=" + proxyURL, "https_proxy=" + proxyURL,
	"ALL_PROXY=" + socksURL, "all_proxy=" + socksURL,
	"NO_PROXY=" + noProxy, "no_proxy=" + noProxy,
	"npm_config_proxy=" + proxyURL, "npm_config_https_proxy=" + proxyURL, "npm_config_noproxy=" + noProxy,
	"NODE_USE_ENV_PROXY=1",
	"PIP_INDEX_URL=" + PipIndexURL,
	"npm_config_registry=" + NPMRegistryURL,
	"npm_config_audit=false", "npm_config_fund=false", "npm_config_update_notifier=false",
	"npm_config_ignore_scripts=true",
	"PIP_DISABLE_PIP_VERSION_CHECK=1",
}

// envPathDirs go on PATH before the system's directories: the
// environment's programs (pip and python of its virtual environment, npm
// packages' bins) come before the system's, and after what a kernel put
// first (a project's virtual environment, its interpreter's bin/), whose
// pip installs into the project's as it did.
var envPathDirs = []string{sandbox.EnvPath + "/bin", sandbox.EnvPath + "/npm/node_modules/.bin"}

// withNetworkEnv adds networkEnv (with a network namespace of its own) and
// the /env variables to env.
func withNetworkEnv(env []string, ownNamespace bool) []string {
	if env == nil {
		env = sandbox.DefaultEnv()
	}
	has := make(map[string]int, len(env))
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		has[k] = i
	}
	out := append([]string(nil), env...)
	add := func(kv string) {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := has[k]; !ok {
			out = append(out, kv)
			has[k] = len(out) - 1
		}
	}
	if ownNamespace {
		for _, kv := range networkEnv {
			add(kv)
		}
	}
	add("NODE_PATH=" + sandbox.EnvPath + "/npm/node_modules")
	add("CELLBOX_ENV=" + sandbox.EnvPath)
	if i, ok := has["PATH"]; ok {
		out[i] = "PATH=" + withEnvPath(strings.TrimPrefix(out[i], "PATH="))
	}
	return out
}

// withEnvPath puts envPathDirs into path before its first system
// directory (at its end when it has none).
func withEnvPath(path string) string {
	dirs := strings.Split(path, ":")
	at := len(dirs)
	for i, d := range dirs {
		if slices.Contains(systemPathDirs, d) {
			at = i
			break
		}
	}
	return strings.Join(slices.Concat(dirs[:at], envPathDirs, dirs[at:]), ":")
}

// systemPathDirs are the system's directories of sandbox.DefaultEnv's PATH.
var systemPathDirs = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// serveNetwork serves a sandbox's listeners until it ends: the proxies
// with the workspace's policy, and the package index.
func (w *Workspace) serveNetwork(sb *sandbox.Sandbox) {
	httpL, socksL, pkgL := sb.Listener(sandbox.ListenerHTTPProxy), sb.Listener(sandbox.ListenerSOCKS), sb.Listener(sandbox.ListenerPackages)
	if httpL == nil || socksL == nil || pkgL == nil {
		return // the host's network
	}
	log := w.m.log.With("workspace", w.id)
	var th blockedThrottle
	srv := network.NewServer(network.Options{
		Policy: w.policy,
		OnBlocked: func(b network.Blocked) {
			if !th.allow(time.Now()) {
				return
			}
			log.Info("connection refused", "host", b.Host, "port", b.Port, "via", b.Via, "reason", b.Reason)
			if f := w.m.opts.OnBlocked; f != nil {
				f(w.id, b)
			}
		},
		Upstream: w.m.opts.UpstreamProxy,
		Logger:   log,
	})
	var handler http.Handler = http.HandlerFunc(noPackageCache)
	if c := w.m.opts.Packages; c != nil {
		handler = w.noteRefusals(c.Handler(w.fetched))
	}
	idx := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second, // GET and HEAD only: no bodies to wait for
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	// As many connections as the proxies take, each bounded: a sandbox
	// cannot hold the daemon's descriptors and memory through the index.
	pkgL = netutil.LimitListener(pkgL, maxIndexConns)
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.ServeHTTP(httpL) })
	wg.Go(func() { _ = srv.ServeSOCKS(socksL) })
	wg.Go(func() {
		if err := idx.Serve(pkgL); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			log.Debug("package index ended", "err", err)
		}
	})
	<-sb.Done()
	_ = srv.Close()
	_ = idx.Close()
	wg.Wait()
}

// blockedThrottle bounds the refusals a sandbox's programs can make the
// daemon announce: at most blockedPerSecond in a second (a program
// flooding refusals on purpose is a few notifications a second, not
// thousands). The editors ask once per rule; each refusal is still
// announced, so that a client sees the retry it does not ask about again.
type blockedThrottle struct {
	mu     sync.Mutex // guards the fields below
	second time.Time
	count  int
}

const blockedPerSecond = 20

func (t *blockedThrottle) allow(now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now.Sub(t.second) >= time.Second {
		t.second, t.count = now, 0
	}
	if t.count >= blockedPerSecond {
		return false
	}
	t.count++
	return true
}

// maxIndexConns bounds a sandbox's connections to its package index (pip
// and npm open a few each).
const maxIndexConns = 64

func noPackageCache(w http.ResponseWriter, _ *http.Request) {
	http.Error(w, "this cellbox daemon has no package cache", http.StatusServiceUnavailable)
}

// fetched counts a package file served to this workspace's sandbox for
// the install that runs, if one does.
func (w *Workspace) fetched(f packages.Fetch) {
	w.mu.Lock()
	in := w.install
	w.mu.Unlock()
	if in != nil {
		in.fetched(f)
	}
}

// prepareEnv makes the workspace's environment directory, owned by the
// sandbox's root.
// prepareEnv makes the workspace's environment directory: env/upper
// (what /env shows) and env/work (overlayfs's), owned by the sandbox's
// root; env/ itself is the daemon's.
func (w *Workspace) prepareEnv() error {
	dir := w.envDir()
	if err := os.Mkdir(dir, 0o711); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create the workspace's environment %s: %w", dir, err)
	}
	uid, gid := SandboxOwner()
	for _, d := range []string{"upper", "work"} {
		p := filepath.Join(dir, d)
		if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create %s: %w", p, err)
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return fmt.Errorf("chown %s to the sandbox's root (%d:%d): %w", p, uid, gid, err)
		}
	}
	return nil
}

// noteRefusals keeps, for the install that runs, why the package index
// refused a file (a hash that does not match, an upstream that failed):
// pip and npm print only the status.
func (w *Workspace) noteRefusals(h http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		in := w.install
		w.mu.Unlock()
		if in == nil {
			h.ServeHTTP(rw, r)
			return
		}
		rec := &refusalWriter{ResponseWriter: rw}
		h.ServeHTTP(rec, r)
		if rec.status >= 400 {
			in.refused(strings.TrimSpace(rec.body.String()))
		}
	})
}

// refusalWriter keeps the status and the start of an error's body.
type refusalWriter struct {
	http.ResponseWriter
	status int
	body   strings.Builder
}

func (r *refusalWriter) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *refusalWriter) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.status >= 400 && r.body.Len() < 1024 {
		r.body.Write(b[:min(len(b), 1024-r.body.Len())])
	}
	return r.ResponseWriter.Write(b)
}
