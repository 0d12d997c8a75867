package benchutil

import (
	"fmt"
	"slices"
	"time"
)

// Series is the durations of one measured thing, in the order taken.
type Series struct {
	Name string
	D    []time.Duration
}

// Add records one duration.
func (s *Series) Add(d time.Duration) { s.D = append(s.D, d) }

// Summary is a series' order statistics.
type Summary struct {
	N                             int
	P50, P90, P99, Min, Mean, Max time.Duration
}

// Summary computes the order statistics (zero for an empty series).
func (s *Series) Summary() Summary {
	if len(s.D) == 0 {
		return Summary{}
	}
	d := slices.Clone(s.D)
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return Summary{N: len(d), P50: quantile(d, 0.5), P90: quantile(d, 0.9), P99: quantile(d, 0.99),
		Min: d[0], Max: d[len(d)-1], Mean: sum / time.Duration(len(d))}
}

// quantile is the nearest-rank q-quantile of sorted.
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(float64(len(sorted))*q+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Ms formats a duration in milliseconds, with more digits when small.
func Ms(d time.Duration) string {
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
