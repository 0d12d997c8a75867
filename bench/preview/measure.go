//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/cellbox-dev/cellbox/bench/internal/benchutil"
)

// side is one way to the app: through the preview, or direct.
type side struct {
	name   string
	base   string // http://127.0.0.1:PORT
	cookie string // the preview's cookie, as a browser sends it; "" direct
	appPID int    // the python process serving the app

	keep  *http.Client // one keep-alive connection
	fresh *http.Client // a new connection per request
	dials atomic.Int64 // connections the clients opened
	ws    *websocket.Conn
	buf   []byte // the bodies are read into it
}

func newSide(name, base, cookie string) *side {
	s := &side{name: name, base: base, cookie: cookie, buf: make([]byte, 256<<10)}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		s.dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	s.keep = &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		DialContext: dial, MaxIdleConnsPerHost: 1, DisableCompression: true, Proxy: nil}}
	s.fresh = &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		DialContext: dial, DisableKeepAlives: true, DisableCompression: true, Proxy: nil}}
	return s
}

// newPreviewSide opens the preview's URL once, as a browser does: the
// token in the query sets the cookie the later requests carry.
func newPreviewSide(u string) (*side, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return nil, err
	}
	s := newSide("preview", "http://"+pu.Host, "")
	pu.Path = "/conns"
	resp, err := s.keep.Get(pu.String())
	if err != nil {
		return nil, fmt.Errorf("the preview: %w", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the preview: %s: %.300s", resp.Status, body)
	}
	for _, c := range resp.Cookies() {
		if strings.HasPrefix(c.Name, "cellbox-preview-") && !strings.HasSuffix(c.Name, "-embed") {
			s.cookie = c.Name + "=" + c.Value
		}
	}
	if s.cookie == "" {
		return nil, fmt.Errorf("the preview set no cookie: %q", resp.Header.Values("Set-Cookie"))
	}
	return s, nil
}

func (s *side) close() {
	if s.ws != nil {
		_ = s.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		s.ws.Close()
	}
	s.keep.CloseIdleConnections()
}

// get GETs path with c and checks the status and the body's length; it
// returns the body's length.
func (s *side) get(c *http.Client, path string, want int) (int64, error) {
	req, err := http.NewRequest(http.MethodGet, s.base+path, nil)
	if err != nil {
		return 0, err
	}
	if s.cookie != "" {
		req.Header.Set("Cookie", s.cookie)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s: GET %s: %w", s.name, path, err)
	}
	// 256 KiB reads: io.Discard's ReadFrom would read 8 KiB at a time,
	// and the client's share of the CPU would weigh on the throughput.
	n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, resp.Body, s.buf)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || want >= 0 && n != int64(want) {
		return n, fmt.Errorf("%s: GET %s: %s, %d bytes (%v)", s.name, path, resp.Status, n, err)
	}
	return n, nil
}

// conns is how many connections the side's app has accepted.
func (s *side) conns() (int, error) {
	req, _ := http.NewRequest(http.MethodGet, s.base+"/conns", nil)
	if s.cookie != "" {
		req.Header.Set("Cookie", s.cookie)
	}
	resp, err := s.keep.Do(req)
	if err != nil {
		return 0, err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return strconv.Atoi(string(b))
}

func (s *side) dialWS() error {
	h := http.Header{}
	if s.cookie != "" {
		h.Set("Cookie", s.cookie)
	}
	d := *websocket.DefaultDialer
	d.HandshakeTimeout = time.Minute
	d.NetDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		s.dials.Add(1)
		var nd net.Dialer
		return nd.DialContext(ctx, network, addr)
	}
	ws, _, err := d.Dial("ws"+strings.TrimPrefix(s.base, "http")+"/ws", h)
	if err != nil {
		return fmt.Errorf("%s: websocket: %w", s.name, err)
	}
	s.ws = ws
	return nil
}

var wsMsg = []byte("0123456789abcdef0123456789abcdef") // 32 bytes

func (s *side) echo() error {
	if err := s.ws.WriteMessage(websocket.TextMessage, wsMsg); err != nil {
		return fmt.Errorf("%s: websocket: %w", s.name, err)
	}
	_ = s.ws.SetReadDeadline(time.Now().Add(time.Minute))
	_, m, err := s.ws.ReadMessage()
	if err != nil || !bytes.Equal(m, append([]byte("echo:"), wsMsg...)) {
		return fmt.Errorf("%s: websocket echo %q (%v)", s.name, m, err)
	}
	return nil
}

// cpu is the CPU time some processes used.
type cpu struct {
	daemon, helpers, app, client time.Duration
}

func (c cpu) sub(o cpu) cpu {
	return cpu{c.daemon - o.daemon, c.helpers - o.helpers, c.app - o.app, c.client - o.client}
}

func (c *cpu) add(o cpu) {
	c.daemon += o.daemon
	c.helpers += o.helpers
	c.app += o.app
	c.client += o.client
}

// cpuNow reads the CPU the daemon, the sandbox's helpers (its init among
// them), s's app and this program have used: utime+stime, which counts
// the threads that have exited (the app's, one per connection).
func (b *bench) cpuNow(s *side) cpu {
	ps := benchutil.Scan()
	var c cpu
	if p := ps[b.d.PID()]; p != nil {
		c.daemon = p.CPU
	}
	for _, p := range ps.Under(b.d.PID()) {
		if p.IsHelper() {
			c.helpers += p.CPU
		}
	}
	if p := ps[s.appPID]; p != nil {
		c.app = p.CPU
	}
	if p := ps[os.Getpid()]; p != nil {
		c.client = p.CPU
	}
	return c
}

// figure is one measured thing, on both sides.
type figure struct {
	name, note string
	throughput bool                // MiB/s, not latency
	lat        [2]benchutil.Series // per operation
	bytes      [2]int64            // throughput: bytes fetched,
	dur        [2]time.Duration    // in this time
	ops        [2]int
	cpu        [2]cpu
	conns      [2]int // connections the app accepted
	dials      [2]int // connections the client opened
}

// op is one measured operation on a side.
type op func(s *side, f *figure, i int) error

// interleave runs o.warmup unmeasured operations per side, then total
// measured ones cut into o.rounds rounds, the sides alternating and taking
// turns at going first; it counts the CPU used and the connections opened.
func (b *bench) interleave(f *figure, total int, one op) error {
	fmt.Fprintf(os.Stderr, "preview-bench:   %s...\n", f.name)
	warm := &figure{}
	for i, s := range b.sides {
		for range b.o.warmup {
			if err := one(s, warm, i); err != nil {
				return err
			}
		}
	}
	var conns0 [2]int
	for i, s := range b.sides {
		var err error
		if conns0[i], err = s.conns(); err != nil {
			return fmt.Errorf("%s: /conns: %w", s.name, err)
		}
		f.dials[i] = -int(s.dials.Load())
	}
	per := max(1, total/b.o.rounds)
	for r := range b.o.rounds {
		for k := range 2 {
			i := (r + k) % 2
			s := b.sides[i]
			c0 := b.cpuNow(s)
			for range per {
				if err := one(s, f, i); err != nil {
					return err
				}
			}
			f.cpu[i].add(b.cpuNow(s).sub(c0))
			f.ops[i] += per
		}
	}
	for i, s := range b.sides {
		f.dials[i] += int(s.dials.Load())
		n, err := s.conns()
		if err != nil {
			return fmt.Errorf("%s: /conns: %w", s.name, err)
		}
		f.conns[i] = n - conns0[i]
	}
	return nil
}

func timed(f *figure, i int, do func() error) error {
	t0 := time.Now()
	if err := do(); err != nil {
		return err
	}
	f.lat[i].Add(time.Since(t0))
	return nil
}

func (b *bench) measure() error {
	fmt.Fprintf(os.Stderr, "preview-bench: measuring, %d rounds, the sides alternating:\n", b.o.rounds)
	keepAlive := &figure{name: "GET 1 KiB, one keep-alive connection"}
	if err := b.interleave(keepAlive, b.o.n, func(s *side, f *figure, i int) error {
		return timed(f, i, func() error { _, err := s.get(s.keep, "/small", 1024); return err })
	}); err != nil {
		return err
	}
	closing := &figure{name: "GET 1 KiB, a new connection each", note: "the app closes it: the preview dials the sandbox for each"}
	if err := b.interleave(closing, b.o.nNew, func(s *side, f *figure, i int) error {
		return timed(f, i, func() error { _, err := s.get(s.fresh, "/close", 1024); return err })
	}); err != nil {
		return err
	}
	fresh := &figure{name: "GET 1 KiB, a new client connection each", note: "the app keeps its own: the preview reuses it"}
	if err := b.interleave(fresh, b.o.nNew, func(s *side, f *figure, i int) error {
		return timed(f, i, func() error { _, err := s.get(s.fresh, "/small", 1024); return err })
	}); err != nil {
		return err
	}
	big := &figure{name: "GET 1 MiB, one keep-alive connection", throughput: true}
	if err := b.interleave(big, b.o.mib, func(s *side, f *figure, i int) error {
		t0 := time.Now()
		n, err := s.get(s.keep, "/big", 1<<20)
		f.dur[i] += time.Since(t0)
		f.bytes[i] += n
		return err
	}); err != nil {
		return err
	}
	for _, s := range b.sides {
		if err := s.dialWS(); err != nil {
			return err
		}
	}
	ws := &figure{name: "websocket echo, 32 bytes, one connection"}
	if err := b.interleave(ws, b.o.nWS, func(s *side, f *figure, i int) error {
		return timed(f, i, s.echo)
	}); err != nil {
		return err
	}
	b.figs = []*figure{keepAlive, closing, fresh, big, ws}
	return nil
}
