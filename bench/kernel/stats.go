//go:build linux

package main

import (
	"fmt"
	"io"
	"time"

	"github.com/cellbox-dev/cellbox/bench/internal/benchutil"
)

func p50(s *benchutil.Series) time.Duration { return s.Summary().P50 }
func p99(s *benchutil.Series) time.Duration { return s.Summary().P99 }

func printSeriesHeader(w io.Writer) {
	fmt.Fprintf(w, "  %-70s %5s %10s %10s %10s %10s %10s %10s\n", "", "n", "p50", "p90", "p99", "min", "mean", "max")
}

func printSeries(w io.Writer, s *benchutil.Series) {
	if s == nil || len(s.D) == 0 {
		return
	}
	m := s.Summary()
	fmt.Fprintf(w, "  %-70s %5d %10s %10s %10s %10s %10s %10s\n", s.Name, m.N, benchutil.Ms(m.P50), benchutil.Ms(m.P90),
		benchutil.Ms(m.P99), benchutil.Ms(m.Min), benchutil.Ms(m.Mean), benchutil.Ms(m.Max))
}
