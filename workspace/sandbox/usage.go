package sandbox

import "time"

// Usage is what a program and everything it started use at one moment.
type Usage struct {
	// CPU is the user and system time of the program's processes,
	// including that of their children that ended and were waited for.
	CPU time.Duration
	// RSSBytes is the resident memory of the processes, summed (a page
	// two of them share counts twice).
	RSSBytes int64
	// Processes is how many processes the tree has.
	Processes int
}
