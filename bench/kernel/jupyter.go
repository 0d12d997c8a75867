//go:build linux

package main

import (
	_ "embed"
	"time"
)

// jupyterSide is the Python half of the benchmark, run by the python
// that has Debian's jupyter_client and ipykernel (benchutil.StartJupyter).
//
//go:embed jupyter_side.py
var jupyterSide string

// msDur is milliseconds from Python as a duration.
func msDur(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
