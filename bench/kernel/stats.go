//go:build linux

package main

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// series is the durations of one measured thing, in the order taken.
type series struct {
	name string
	d    []time.Duration
}

func (s *series) add(d time.Duration) { s.d = append(s.d, d) }

// summary is a series' order statistics.
type summary struct {
	n                                 int
	p50, p90, p99, min, mean, max, fi time.Duration // fi: the first taken
}

func (s *series) summary() summary {
	if len(s.d) == 0 {
		return summary{}
	}
	d := slices.Clone(s.d)
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return summary{n: len(d), p50: quantile(d, 0.5), p90: quantile(d, 0.9), p99: quantile(d, 0.99),
		min: d[0], max: d[len(d)-1], mean: sum / time.Duration(len(d)), fi: s.d[0]}
}

func (s *series) p50() time.Duration { return s.summary().p50 }
func (s *series) p99() time.Duration { return s.summary().p99 }

// quantile is the nearest-rank q-quantile of sorted.
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(float64(len(sorted))*q+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// ms formats a duration in milliseconds, with more digits when small.
func ms(d time.Duration) string {
	f := float64(d) / float64(time.Millisecond)
	switch {
	case f == 0:
		return "-"
	case f < 10:
		return fmt.Sprintf("%.3f ms", f)
	case f < 1000:
		return fmt.Sprintf("%.1f ms", f)
	default:
		return fmt.Sprintf("%.0f ms", f)
	}
}

func printSeriesHeader(w io.Writer) {
	fmt.Fprintf(w, "  %-70s %5s %10s %10s %10s %10s %10s %10s\n", "", "n", "p50", "p90", "p99", "min", "mean", "max")
}

func printSeries(w io.Writer, s *series) {
	if s == nil || len(s.d) == 0 {
		return
	}
	m := s.summary()
	fmt.Fprintf(w, "  %-70s %5d %10s %10s %10s %10s %10s %10s\n", s.name, m.n, ms(m.p50), ms(m.p90), ms(m.p99), ms(m.min), ms(m.mean), ms(m.max))
}
