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
	n                   int
	p50, p90, min, mean time.Duration
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
	return summary{n: len(d), p50: quantile(d, 0.5), p90: quantile(d, 0.9), min: d[0], mean: sum / time.Duration(len(d))}
}

// quantile is the nearest-rank q-quantile of sorted.
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(float64(len(sorted))*q+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%8.2f ms", float64(d)/float64(time.Millisecond)) }

// printRow prints one series as a table row, its name after indent.
func printRow(w io.Writer, s *series, indent string) {
	m := s.summary()
	fmt.Fprintf(w, "  %-64s %s %s %s %s\n", indent+s.name, ms(m.p50), ms(m.p90), ms(m.min), ms(m.mean))
}

func printHeader(w io.Writer) {
	fmt.Fprintf(w, "  %-64s %11s %11s %11s %11s\n", "", "p50", "p90", "min", "mean")
}

// printRatio prints a/b at p50 and p90 against an aim (a/b at most aim).
func printRatio(w io.Writer, what string, a, b *series, aim float64) {
	sa, sb := a.summary(), b.summary()
	r50 := float64(sa.p50) / float64(sb.p50)
	r90 := float64(sa.p90) / float64(sb.p90)
	verdict := "met"
	if r50 > aim {
		verdict = "MISSED"
	}
	fmt.Fprintf(w, "  %-64s p50 %5.2fx   p90 %5.2fx   (aim <= %.1fx at p50: %s)\n", what, r50, r90, aim, verdict)
}

// printUnder prints a series' p50 and p90 against an absolute aim.
func printUnder(w io.Writer, what string, s *series, aim time.Duration) {
	m := s.summary()
	verdict := "met"
	if m.p50 >= aim {
		verdict = "MISSED"
	}
	fmt.Fprintf(w, "  %-64s p50 %.2f ms   p90 %.2f ms   (aim < %v at p50: %s)\n", what,
		float64(m.p50)/float64(time.Millisecond), float64(m.p90)/float64(time.Millisecond), aim, verdict)
}
