//go:build linux

package main

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"time"
)

// TestSoak is the soak for 60 s, part of `make test`, with the same
// verdict as bench/soak.sh: every request answered without an error, every
// output whole and in order, every file event and terminal command seen,
// and the daemon back within the leak limits once its clients have left.
// It builds the daemon from this tree, or uses the binary that
// CELLBOX_SOAK_BIN names.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak runs for a minute; skipped with -short")
	}
	var out bytes.Buffer
	err := run(t.Context(), options{cellbox: os.Getenv("CELLBOX_SOAK_BIN"), duration: time.Minute, clients: 16, settle: 30 * time.Second, rssLimitMiB: 256}, &out)
	t.Log("\n" + out.String())
	if errors.Is(err, errUnavailable) {
		t.Skipf("the soak needs the sandbox and python3, node and bash: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
}
