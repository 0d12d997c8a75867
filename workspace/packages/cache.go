package packages

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// Options configure a [Cache].
type Options struct {
	Dir      string // the cache directory (e.g. ~/.cache/cellbox/packages); created 0700
	MaxBytes int64  // size cap of stored files and pages; 0: 5 GiB. Least-recently-used files are evicted past it.
	// PyPI is the upstream simple index URL; "": from the host's pip
	// configuration ([HostPipIndex]), else https://pypi.org/simple/.
	PyPI string
	// NPM is the upstream npm registry URL; "": from the host's npm
	// configuration ([HostNPMRegistry]), else https://registry.npmjs.org/.
	NPM string
	// Client fetches from the upstreams; nil: a client with timeouts that
	// goes through Proxy (never through a proxy named only by the
	// environment).
	Client *http.Client
	// Proxy is the HTTP proxy of the default client; nil: direct.
	Proxy *url.URL
	// Fresh is how long a kept project page or packument answers without
	// asking the upstream again; 0: DefaultFresh, < 0: always ask.
	Fresh  time.Duration
	Logger *slog.Logger
}

// DefaultFresh is Options.Fresh's default: the max-age the public
// registries give their pages (npm's packuments, PyPI's simple pages), and
// as long as npm's own cache trusts one.
const DefaultFresh = 5 * time.Minute

// Bounds.
const (
	DefaultMaxBytes = 5 << 30
	// MaxPageBytes bounds a project page or packument, upstream or kept.
	MaxPageBytes = 64 << 20
	// MaxFileBytes bounds one package file (also never over MaxBytes).
	MaxFileBytes = 4 << 30

	defaultPyPI = "https://pypi.org/simple/"
	defaultNPM  = "https://registry.npmjs.org/"

	// pageTimeout bounds fetching one page; past it the kept page serves.
	pageTimeout = 60 * time.Second
	// stallTimeout ends a file download that received nothing for so long.
	stallTimeout = 60 * time.Second
)

// Cache is the daemon's verified, shared package cache. One Cache serves
// every sandbox, each through its own [Cache.Handler].
type Cache struct {
	store   *store
	client  *http.Client
	log     *slog.Logger
	pypi    *url.URL
	npm     *url.URL
	maxFile int64
	fresh   time.Duration // Options.Fresh

	ctx    context.Context // cancelled by Close: ends the downloads
	cancel context.CancelFunc
	wg     sync.WaitGroup // the download goroutines

	mu sync.Mutex
	// guarded by mu
	closed  bool
	flights map[string]*flight // downloads under way, by store path
}

// Fetch reports one file served to a sandbox.
type Fetch struct {
	Manager  string // "pip" or "npm"
	Name     string // the file's name
	Bytes    int64
	CacheHit bool
}

// New opens (and creates) the cache in o.Dir.
func New(o Options) (*Cache, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.Dir == "" {
		return nil, errors.New("packages.New: no Dir")
	}
	if o.MaxBytes < 0 {
		return nil, fmt.Errorf("packages.New: MaxBytes %d is negative", o.MaxBytes)
	}
	if o.Fresh == 0 {
		o.Fresh = DefaultFresh
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("packages.New: %w", err)
	}
	if err := os.Chmod(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("packages.New: %w", err)
	}
	home, _ := os.UserHomeDir()
	pypi, err := pickUpstream("PyPI", o.PyPI, func() string { return HostPipIndex(os.Getenv, home) }, defaultPyPI, log)
	if err != nil {
		return nil, fmt.Errorf("packages.New: %w", err)
	}
	npm, err := pickUpstream("npm", o.NPM, func() string { return HostNPMRegistry(os.Getenv, home) }, defaultNPM, log)
	if err != nil {
		return nil, fmt.Errorf("packages.New: %w", err)
	}
	st, err := openStore(o.Dir, o.MaxBytes, log)
	if err != nil {
		return nil, fmt.Errorf("packages.New: %w", err)
	}
	client := o.Client
	if client == nil {
		client = defaultClient(o.Proxy)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cache{
		store:   st,
		client:  client,
		log:     log,
		pypi:    pypi,
		npm:     npm,
		maxFile: min(o.MaxBytes, MaxFileBytes),
		fresh:   o.Fresh,
		ctx:     ctx,
		cancel:  cancel,
		flights: map[string]*flight{},
	}
	total, n := st.usage()
	log.Info("package cache", "dir", o.Dir, "files", n, "bytes", total, "max_bytes", o.MaxBytes,
		"pypi", pypi.Redacted(), "npm", npm.Redacted())
	return c, nil
}

// pickUpstream picks an upstream URL: explicit (an error when unusable), else the
// host's configuration (ignored with a warning when unusable), else def.
func pickUpstream(what, explicit string, host func() string, def string, log *slog.Logger) (*url.URL, error) {
	if explicit != "" {
		u, err := parseUpstream(explicit)
		if err != nil {
			return nil, fmt.Errorf("%s upstream: %w", what, err)
		}
		return u, nil
	}
	if h := host(); h != "" {
		u, err := parseUpstream(h)
		if err == nil {
			return u, nil
		}
		log.Warn("package cache: the host's configured registry is unusable; using the default", "manager", what, "err", err)
	}
	return parseUpstream(def)
}

func parseUpstream(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http(s) URL", u.Redacted())
	}
	u.Fragment, u.RawQuery = "", ""
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
		if u.RawPath != "" {
			u.RawPath += "/"
		}
	}
	return u, nil
}

func defaultClient(proxy *url.URL) *http.Client {
	t := &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   15 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   8,
		ForceAttemptHTTP2:     true,
	}
	if proxy != nil {
		t.Proxy = http.ProxyURL(proxy)
	}
	return &http.Client{Transport: t}
}

// Upstreams reports the registries in use, credentials redacted.
func (c *Cache) Upstreams() (pypi, npm string) {
	return c.pypi.Redacted(), c.npm.Redacted()
}

// Close ends the downloads under way and waits for them. Handlers answer 503
// from then on.
func (c *Cache) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	return nil
}

func (c *Cache) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// withAuth gives u the credentials of the upstream URL on the same host, as
// pip does for files beside its index.
func (c *Cache) withAuth(u *url.URL) *url.URL {
	if u.User != nil {
		return u
	}
	for _, up := range []*url.URL{c.pypi, c.npm} {
		if up.User != nil && up.Scheme == u.Scheme && up.Host == u.Host {
			v := *u
			v.User = up.User
			return &v
		}
	}
	return u
}

// kindError carries a message of its own and a sentinel (and cause) for
// errors.Is.
type kindError struct {
	kind  error
	msg   string
	cause error
}

func (e *kindError) Error() string   { return e.msg }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.cause} }

func errorf(kind, cause error, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...), cause: cause}
}
