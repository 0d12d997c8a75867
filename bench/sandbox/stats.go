//go:build linux

package main

import (
	"fmt"
	"io"
	"time"

	"github.com/cellbox-dev/cellbox/bench/internal/benchutil"
)

// series is benchutil's: the durations of one measured thing.
type series = benchutil.Series

func ms(d time.Duration) string { return fmt.Sprintf("%8.2f ms", float64(d)/float64(time.Millisecond)) }

// printRow prints one series as a table row, its name after indent.
func printRow(w io.Writer, s *series, indent string) {
	m := s.Summary()
	fmt.Fprintf(w, "  %-64s %s %s %s %s\n", indent+s.Name, ms(m.P50), ms(m.P90), ms(m.Min), ms(m.Mean))
}

func printHeader(w io.Writer) {
	fmt.Fprintf(w, "  %-64s %11s %11s %11s %11s\n", "", "p50", "p90", "min", "mean")
}

// printRatio prints a/b at p50 and p90 against an aim (a/b at most aim).
func printRatio(w io.Writer, what string, a, b *series, aim float64) {
	sa, sb := a.Summary(), b.Summary()
	r50 := float64(sa.P50) / float64(sb.P50)
	r90 := float64(sa.P90) / float64(sb.P90)
	verdict := "met"
	if r50 > aim {
		verdict = "MISSED"
	}
	fmt.Fprintf(w, "  %-64s p50 %5.2fx   p90 %5.2fx   (aim <= %.1fx at p50: %s)\n", what, r50, r90, aim, verdict)
}

// printUnder prints a series' p50 and p90 against an absolute aim.
func printUnder(w io.Writer, what string, s *series, aim time.Duration) {
	m := s.Summary()
	verdict := "met"
	if m.P50 >= aim {
		verdict = "MISSED"
	}
	fmt.Fprintf(w, "  %-64s p50 %.2f ms   p90 %.2f ms   (aim < %v at p50: %s)\n", what,
		float64(m.P50)/float64(time.Millisecond), float64(m.P90)/float64(time.Millisecond), aim, verdict)
}
