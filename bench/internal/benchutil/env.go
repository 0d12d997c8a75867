package benchutil

import (
	"fmt"
	"os"
	"os/user"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Host says who runs the benchmark and on what, for a report's header:
// "as USER (uid N); Linux RELEASE; N cores; goVERSION".
func Host() string {
	who := strconv.Itoa(os.Getuid())
	if u, err := user.Current(); err == nil {
		who = u.Username + " (uid " + u.Uid + ")"
	}
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	return fmt.Sprintf("as %s; Linux %s; %d cores; %s", who, unix.ByteSliceToString(uts.Release[:]), runtime.NumCPU(), runtime.Version())
}

// Layers names the sandbox layers a kernel got, space-separated.
func Layers(sb protocol.SandboxInfo) string {
	var layers []string
	for _, l := range []struct {
		name string
		on   bool
	}{{"userns", sb.UserNamespaces}, {"overlay", sb.Overlay}, {"pidns", sb.PidNamespace}, {"netns", sb.NetworkNamespace},
		{"seccomp", sb.Seccomp}, {"landlock", sb.Landlock}, {"cgroups", sb.Cgroups}} {
		if l.on {
			layers = append(layers, l.name)
		}
	}
	return strings.Join(layers, " ")
}

// Title is a report's title with the run's label, if any: "TITLE — LABEL".
func Title(title, label string) string {
	if label != "" {
		title += " — " + label
	}
	return title
}

// FileSize says how large the file at path is ("12.3 MB"), for a report.
func FileSize(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return "size unknown"
	}
	return fmt.Sprintf("%.1f MB", float64(fi.Size())/1e6)
}
