package sandbox

import (
	"os"
	"strconv"
	"strings"
)

// ParentPID reads a process's parent from /proc/PID/stat (as the caller's
// /proc sees it); ok is false when the process is gone.
func ParentPID(pid string) (ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, false
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, err == nil
}

// EtcFiles are the host's /etc entries a sandbox binds read-only when they
// exist (for tools that mirror its layout, like the benchmark's bwrap).
func EtcFiles() []string { return append([]string(nil), etcFiles...) }

// TopLinks are the host's top-level directories a sandbox keeps as
// symlinks (merged /usr) or binds.
func TopLinks() []string { return append([]string(nil), topLinks...) }
