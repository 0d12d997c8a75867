package main

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Round trips of daemon/stats (a no-op request) against the real binary,
// the way an editor sees them. Run with `make bench` (bench/rpc.sh); the
// figures are wall-clock and printed per benchmark:
//
//	p50-µs, p99-µs  latency of one request
//	req/s           requests per second over all connections

func BenchmarkRoundTrip(b *testing.B) {
	testLogLevel = "warn"
	b.Run("stdio", func(b *testing.B) {
		p := startStdioB(b)
		c := p.client()
		c.initialize(b)
		measure(b, []*client{c}, 1)
	})
	b.Run("websocket", func(b *testing.B) {
		p := startListenB(b)
		c := wsClientB(b, p)
		c.initialize(b)
		measure(b, []*client{c}, 1)
	})
}

func BenchmarkConcurrent(b *testing.B) {
	testLogLevel = "warn"
	b.Run("websocket-16-connections", func(b *testing.B) {
		p := startListenB(b)
		var cs []*client
		for i := 0; i < 16; i++ {
			c := wsClientB(b, p)
			c.initialize(b)
			cs = append(cs, c)
		}
		measure(b, cs, 1)
	})
	b.Run("stdio-16-in-flight", func(b *testing.B) {
		p := startStdioB(b)
		c := p.client()
		c.initialize(b)
		measure(b, []*client{c}, 16)
	})
}

// measure runs b.N daemon/stats calls spread over the clients, perClient
// at a time on each, and reports latency percentiles and throughput.
func measure(b *testing.B, cs []*client, perClient int) {
	workers := len(cs) * perClient
	lat := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < workers; w++ {
		c := cs[w%len(cs)]
		n := b.N / workers
		if w < b.N%workers {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			ds := make([]time.Duration, 0, n)
			for i := 0; i < n; i++ {
				t0 := time.Now()
				if _, err := c.conn.Call(ctx, protocol.MethodDaemonStats, struct{}{}, nil); err != nil {
					b.Error(err)
					return
				}
				ds = append(ds, time.Since(t0))
			}
			lat[w] = ds
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	if len(all) == 0 {
		return
	}
	slices.Sort(all)
	pct := func(q float64) float64 { return float64(all[int(q*float64(len(all)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "req/s")
}

func startStdioB(b *testing.B) *stdioProc   { return startStdio(b) }
func startListenB(b *testing.B) *listenProc { return startListen(b) }

func wsClientB(b *testing.B, p *listenProc) *client {
	c, _ := p.wsClient(b)
	return c
}
