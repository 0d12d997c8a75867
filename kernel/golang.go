package kernel

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/cellbox-dev/cellbox/kernel/drivers/godriver"
	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
)

// The go language (PROTOCOL.md §8): its driver is this binary's entry
// godriver, which builds each cell with the host's go command inside the
// sandbox.
var goDriverSpec = driverSpec{
	entry:     godriver.Command,
	mimetype:  "text/x-go",
	extension: ".go",
}

// goVersionFile reads the first line of the VERSION file of the Go
// toolchain whose go command is path (GOROOT/bin/go, symlinks resolved):
// "go1.26.8", or "" when there is none.
func goVersionFile(path string) string {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return ""
	}
	f, err := os.Open(filepath.Join(filepath.Dir(filepath.Dir(real)), "VERSION"))
	if err != nil {
		return ""
	}
	defer f.Close()
	b := make([]byte, 64)
	n, _ := io.ReadFull(f, b)
	line, _, _ := strings.Cut(string(b[:n]), "\n")
	if !strings.HasPrefix(line, "go1") {
		return ""
	}
	return strings.TrimSpace(line)
}

// versionArgs are the arguments that print a language's version, where
// it is not --version.
var versionArgs = map[string]string{"go": "version"}

// languageUnsupported are the methods of §4 a language cannot answer
// (languages[].unsupported). A go program's standard input is the
// request's stdin, then end of file: a running program cannot ask for
// input.
var languageUnsupported = map[string][]string{
	"go": {protocol.MethodKernelInputRequest},
}

// shownPathLanguages are found on the daemon's whole PATH, in any
// directory a sandbox shows (below /usr), not only the sandbox's PATH: the
// driver runs the program by its absolute path. Go installs in
// /usr/local/go/bin, which no default PATH names.
var shownPathLanguages = map[string]bool{"go": true}

// lookShownPath finds command on the daemon's PATH, in a directory that
// every sandbox shows at the same path.
func lookShownPath(command string) (string, error) {
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(filepath.Clean(dir), command)
		if !isExecutable(p) {
			continue
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		if workspace.SandboxShows(p) && workspace.SandboxShows(real) {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// GoSharedCache prepares the go kernels' shared build cache, the user's
// (godriver.SharedCacheDir), when the go command is found: the kernels
// started after it use it, and it returns the directories every sandbox
// must bind read-only for that (workspace Options.ReadOnly). The cache is
// filled on the host at the first go kernel (godriver.WarmShared).
func GoSharedCache() []string {
	if _, err := lookShownPath("go"); err != nil {
		return nil
	}
	dir := godriver.SharedCacheDir()
	if dir == "" {
		return nil
	}
	godriver.SetSharedCache(dir)
	return []string{dir}
}
