package rpc

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/cellbox-dev/cellbox/kernel"
	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/pty"
	"github.com/cellbox-dev/cellbox/workspace"
)

// Options configure a Daemon.
type Options struct {
	// Version is reported in serverInfo.
	Version string
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Capabilities returns what this host provides; it is called once per
	// initialize and should be cheap (probe once, cache).
	Capabilities func(ctx context.Context) protocol.ServerCapabilities
	// MaxMessageBytes bounds one incoming message on every transport.
	MaxMessageBytes int
	// MaxInFlight bounds concurrent requests per connection.
	MaxInFlight int
	// StateDir is where workspaces live; /healthz checks it is writable.
	StateDir string
	// TestHooks enables the cellboxTest/* methods (see testhooks.go).
	TestHooks bool
	// Workspaces runs the workspaces (required).
	Workspaces *workspace.Manager
	// Ptys runs the terminals (required).
	Ptys *pty.Manager
	// Kernels runs the kernels (required).
	Kernels *kernel.Manager
	// Token, AllowOrigins: websocket security (PROTOCOL.md §1), see http.go.
	Token        string
	AllowOrigins []string
	// UI is the browser IDE served at / (index.html and csp, see ui.go);
	// nil serves a short page that says how to connect.
	UI fs.FS
}

// Daemon owns what outlives a connection: the services, counters and
// metrics. Connections come and go through ServeStdio and Handler.
type Daemon struct {
	opts    Options
	log     *slog.Logger
	started time.Time
	metrics *metrics
	lat     latencyRing

	connCount atomic.Int64
	watches   watchSet // fs/watch, see fs_watch.go
	connSeq   atomic.Uint64

	mu    sync.Mutex // guards conns and extra
	conns map[*conn]struct{}
	extra map[string]http.Handler // HandleHTTP's, by pattern

	ports portsQueue // workspace/ports, in order per workspace (previews.go)
}

// New returns a Daemon.
func New(opts Options) *Daemon {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.Capabilities == nil {
		opts.Capabilities = func(context.Context) protocol.ServerCapabilities { return protocol.ServerCapabilities{} }
	}
	if opts.Workspaces == nil {
		panic("rpc.New: Options.Workspaces is required")
	}
	if opts.Kernels == nil {
		panic("rpc.New: Options.Kernels is required")
	}
	if opts.Ptys == nil {
		panic("rpc.New: Options.Ptys is required")
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	d := &Daemon{
		opts:    opts,
		log:     opts.Logger,
		started: time.Now(),
		conns:   make(map[*conn]struct{}),
	}
	d.metrics = newMetrics(d)
	wsLog.Store(d.log)
	if opts.TestHooks {
		setTestWSStall()
	}
	return d
}

// DefaultMaxInFlight is the default bound on concurrent requests per connection.
const DefaultMaxInFlight = 1024

func (d *Daemon) addConn(c *conn) {
	c.num = d.connSeq.Add(1)
	d.mu.Lock()
	d.conns[c] = struct{}{}
	d.mu.Unlock()
	d.connCount.Add(1)
	d.metrics.connections.WithLabelValues(c.transport).Inc()
}

func (d *Daemon) removeConn(c *conn) {
	d.mu.Lock()
	delete(d.conns, c)
	d.mu.Unlock()
	d.connCount.Add(-1)
	d.metrics.connections.WithLabelValues(c.transport).Dec()
}

// Stats is daemon/stats.
func (d *Daemon) Stats() protocol.DaemonStats {
	p50, p99 := d.lat.percentiles()
	return protocol.DaemonStats{
		UptimeMs:    time.Since(d.started).Milliseconds(),
		Workspaces:  d.opts.Workspaces.Len(),
		Ptys:        d.opts.Ptys.Len(),
		Watches:     d.watches.len(),
		Kernels:     d.opts.Kernels.Len(),
		Executions:  executionCounts(d.opts.Kernels.Stats()),
		LatencyMs:   protocol.LatencyMs{P50: p50, P99: p99},
		MemoryBytes: residentBytes(),
		Connections: int(d.connCount.Load()),
	}
}

// observe records one finished request.
func (d *Daemon) observe(method string, code protocol.ErrorCode, dur time.Duration) {
	d.lat.add(dur)
	label := methodLabel(method)
	codeLabel := "ok"
	if code != 0 {
		codeLabel = code.ErrorName()
	}
	d.metrics.requests.WithLabelValues(label, codeLabel).Inc()
	d.metrics.duration.WithLabelValues(label).Observe(dur.Seconds())
}

// methodLabel keeps metric cardinality bounded: a method the daemon does not
// know is counted as "unknown", so a client cannot mint label values.
func methodLabel(method string) string {
	if _, ok := methodTable[method]; ok {
		return method
	}
	if _, ok := testMethods[method]; ok {
		return method
	}
	return "unknown"
}

// latencyRing keeps the durations of the most recent requests. Percentiles
// are recomputed at most every latencyRefresh, so daemon/stats stays cheap.
type latencyRing struct {
	mu       sync.Mutex // guards the fields below
	buf      [2048]time.Duration
	next     int
	full     bool
	computed time.Time
	p50, p99 float64
}

const latencyRefresh = 500 * time.Millisecond

func (r *latencyRing) add(d time.Duration) {
	r.mu.Lock()
	r.buf[r.next] = d
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
	r.mu.Unlock()
}

func (r *latencyRing) percentiles() (p50, p99 float64) {
	r.mu.Lock()
	if time.Since(r.computed) < latencyRefresh {
		defer r.mu.Unlock()
		return r.p50, r.p99
	}
	n := r.next
	if r.full {
		n = len(r.buf)
	}
	s := slices.Clone(r.buf[:n])
	r.mu.Unlock()
	if len(s) == 0 {
		return 0, 0
	}
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(q * float64(len(s)-1))
		return float64(s[i].Microseconds()) / 1000
	}
	p50, p99 = at(0.50), at(0.99)
	r.mu.Lock()
	r.p50, r.p99, r.computed = p50, p99, time.Now()
	r.mu.Unlock()
	return p50, p99
}

type metrics struct {
	reg         *prometheus.Registry
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	connections *prometheus.GaugeVec
	rejected    *prometheus.CounterVec
	httpDenied  *prometheus.CounterVec
}

func newMetrics(d *Daemon) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cellbox_rpc_requests_total", Help: "JSON-RPC requests answered, by method and outcome.",
		}, []string{"method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cellbox_rpc_request_duration_seconds", Help: "Time from a request's arrival to its response.",
			Buckets: []float64{50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 5e-3, 25e-3, 100e-3, 500e-3, 2, 10, 60},
		}, []string{"method"}),
		connections: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cellbox_rpc_connections", Help: "Open client connections, by transport.",
		}, []string{"transport"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cellbox_rpc_rejected_messages_total", Help: "Incoming messages refused before dispatch, by reason.",
		}, []string{"reason"}),
		httpDenied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cellbox_http_denied_total", Help: "HTTP requests refused by the token or Origin check.",
		}, []string{"reason"}),
	}
	m.reg.MustRegister(m.requests, m.duration, m.connections, m.rejected, m.httpDenied,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "cellbox_uptime_seconds", Help: "Seconds since the daemon started.",
		}, func() float64 { return time.Since(d.started).Seconds() }),
	)
	return m
}

// residentBytes is the daemon's RSS, read from /proc/self/statm through
// a descriptor kept open, so daemon/stats costs one pread.
func residentBytes() int64 {
	statm.once.Do(func() { statm.f, _ = os.Open("/proc/self/statm") })
	if statm.f == nil {
		return 0
	}
	var buf [128]byte
	n, err := statm.f.ReadAt(buf[:], 0)
	if n == 0 && err != nil {
		return 0
	}
	var size, rss int64
	if _, err := fmt.Sscan(string(buf[:n]), &size, &rss); err != nil {
		return 0
	}
	return rss * int64(os.Getpagesize())
}

var statm struct {
	once sync.Once
	f    *os.File
}
