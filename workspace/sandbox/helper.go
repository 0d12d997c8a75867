package sandbox

import (
	"os"
	"sync"
)

// HelperEnv chooses the binary a sandbox's init and spawner run: unset or
// "lean", the small helper registered with UseHelper (when there is one);
// "self", this binary, re-executed as the helper. It is read at each
// sandbox's launch; the benchmarks compare the two in one run with it.
const HelperEnv = "CELLBOX_SANDBOX_HELPER"

// lean is the lean helper: as registered, and once copied into a memfd
// (helper_linux.go).
var lean struct {
	mu  sync.Mutex
	bin []byte // as registered

	once   sync.Once
	path   string   // what to exec, or "" when the binary itself is used
	reason string   // why the binary itself is used, when it is
	file   *os.File // the memfd holding the helper, open for good
	// refused says why the kernel would not execute the helper, once it
	// did not (guarded by mu).
	refused string
}

// UseHelper registers the lean helper: the executable built from
// cmd/cellbox-sandbox, which runs the sandbox's init and spawner with
// none of the daemon's packages (a fraction of its start-up time and
// memory). Without one, or when it cannot be run, the daemon's own binary
// is re-executed as before. Call it before the first sandbox starts.
func UseHelper(bin []byte) {
	lean.mu.Lock()
	defer lean.mu.Unlock()
	lean.bin = bin
}

// HelperInfo says which binary sandboxes' inits and spawners run: the lean
// helper (lean true), or this binary and why.
func HelperInfo() (lean bool, reason string) {
	path, reason := helperPath()
	return path != "", reason
}

// helperEnv is the whole environment of a sandbox's init or spawner running
// entry: one P (neither runs Go code in parallel; fewer threads start, and
// Landlock's all-threads restriction signals fewer), and no race-detector
// exit delay. Programs never inherit it: the spawner gives each its own.
func helperEnv(entry string) []string {
	return []string{ReexecEnv + "=" + entry, "GOMAXPROCS=1", "GORACE=atexit_sleep_ms=0"}
}
