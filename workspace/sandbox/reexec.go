package sandbox

import (
	"fmt"
	"os"
)

// ReexecEnv names the entry a re-executed helper runs. The parent sets it
// on the child it starts from /proc/self/exe; Main reads and clears it.
const ReexecEnv = "CELLBOX_SANDBOX_ENTRY"

// argv0Prefix starts the helper's argv[0] so that ps shows what it is.
const argv0Prefix = "cellbox-sandbox:"

// entry is code that runs in a re-executed helper. args are the arguments
// after argv[0]; the result is the process's exit code.
type entry func(args []string) int

// entries are the helper entries by name. They are registered from init
// functions (this package's probes, init and spawner; Register's callers),
// so the map is never written after main starts.
var entries = map[string]entry{}

// SelfPath is where this binary is inside every sandbox (read-only), so
// that a program in a sandbox can run one of its entries: the sandbox runs
// SelfPath with ReexecEnv set to the entry's name.
const SelfPath = "/.cellbox/cellbox"

// Register adds an entry that a program started in a sandbox runs (see
// SelfPath): Main runs fn with the arguments after argv[0] and exits with
// its result. Call it from an init function; it panics on a duplicate name.
// Such an entry runs as the sandboxed program it is, with the sandbox's
// limits and no more privilege than any program there.
func Register(name string, fn func(args []string) int) {
	register(name, fn)
}

// register adds a helper entry; it panics on a duplicate name (a
// programming error caught by any test).
func register(name string, fn entry) {
	if _, dup := entries[name]; dup {
		panic("sandbox: duplicate helper entry " + name)
	}
	entries[name] = fn
}

// Main runs the requested helper entry and exits if this process was
// started as a sandbox helper; otherwise it returns false at once. Call it
// first thing in main and in the TestMain of tests that start helpers.
// It never returns true: when it handles the process it calls os.Exit.
func Main() (handled bool) {
	name, ok := os.LookupEnv(ReexecEnv)
	if !ok {
		return false
	}
	// Nothing the helper starts may mistake itself for a helper.
	os.Unsetenv(ReexecEnv)
	fn := entries[name]
	if fn == nil {
		fmt.Fprintf(os.Stderr, "sandbox: unknown helper entry %q\n", name)
		os.Exit(2)
	}
	var args []string
	if len(os.Args) > 1 {
		args = os.Args[1:]
	}
	os.Exit(runEntry(fn, args))
	return true
}

// runEntry runs fn, turning a panic into exit code 2 with the panic on
// stderr, so that a parent never mistakes a crash for a verdict.
func runEntry(fn entry, args []string) (code int) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(os.Stderr, "sandbox helper panicked: %v\n", p)
			code = 2
		}
	}()
	return fn(args)
}
