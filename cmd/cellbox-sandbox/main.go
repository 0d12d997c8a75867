// Command cellbox-sandbox is the sandbox's init and spawner as a small
// binary: it links workspace/sandbox and nothing else of cellbox's (no
// protocol, no rpc, no metrics), so that a sandbox's two long-lived
// processes start in a few milliseconds and map a few hundred kilobytes
// of code instead of the daemon's tens of megabytes.
//
// It is not run by hand. `make helper` builds it and compresses it into
// workspace/sandbox/helper, which the daemon embeds and registers with
// sandbox.UseHelper; the daemon runs it from a sealed memfd with the
// entry to run named in CELLBOX_SANDBOX_ENTRY.
package main

import (
	"fmt"
	"os"

	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

func main() {
	if sandbox.Main() { // never returns when it ran an entry
		return
	}
	fmt.Fprintln(os.Stderr, "cellbox-sandbox is the sandbox helper the cellbox daemon runs; it is not run by hand")
	os.Exit(2)
}
