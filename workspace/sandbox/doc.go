// Package sandbox holds the mechanics of cellbox's unprivileged sandboxes:
// user, mount, pid, network, ipc and uts namespaces, pivot_root into a
// minimal root, the /workspace overlay, rlimits, seccomp, landlock and
// cgroups where they are delegated, and the in-sandbox init.
//
// It imports nothing of cellbox's own. It is Linux only; on other systems
// every layer reports "sandbox: Linux only".
//
// # Probing the host
//
// [Probe] tells which layers this host can provide, and for each one it
// cannot, why (naming the host policy that blocks it) and what to do about
// it. `cellbox doctor` prints the [Report]; `initialize` reports its
// [Summary] as the server's sandbox capabilities.
//
// # Re-executing as a helper
//
// A Go process is multithreaded, so it cannot unshare(CLONE_NEWUSER)
// itself. Anything that must run inside new namespaces (the probes, the
// sandbox's init and spawner) runs in a child created with clone flags that
// executes a binary with the environment variable [ReexecEnv] naming an
// entry: the sandbox's init and spawner run the lean helper registered
// with [UseHelper] (cmd/cellbox-sandbox) when there is one, everything
// else re-executes the current binary (/proc/self/exe). The binary's main, and the TestMain
// of every test binary that probes or starts sandboxes, must call [Main]
// first thing:
//
//	func main() {
//		if sandbox.Main() {
//			return // not reached: Main exits when it ran an entry
//		}
//		...
//	}
//
// Entries are registered from init functions (the registry is in
// reexec.go, the probe entries in reexec_linux.go, the sandbox's init in
// init_linux.go); each runs in the child and returns its exit code. Other
// packages register with [Register] the entries that programs inside a
// sandbox run: the binary is bound read-only at [SelfPath] in every sandbox.
// A probe entry writes one error line to stderr and exits 1 when its
// check fails; "probe-all" runs every namespace check in one helper and
// writes one "LAYER<TAB>ok|error" line per check to stdout.
package sandbox
