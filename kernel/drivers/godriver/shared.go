package godriver

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// The build cache has two layers. The shared one is the user's, on the
// host (SharedCacheDir): the daemon fills it with the packages every
// program needs by building warmSource there with the host's go command
// (WarmShared, once per daemon, at its first go kernel), and every sandbox
// binds it read-only at the same path. The workspace's layer is in the
// sandbox's /tmp. The go command in a sandbox reaches both through
// GOCACHEPROG, this binary's entry CacheEntry; what a cell's build adds
// goes to the workspace's layer only, so no sandbox can change what
// another one reads, and nothing lands in /workspace.

// readyFile is written in the shared layer once a warm-up has filled it:
// the toolchain's version.
const readyFile = "cellbox-ready"

var (
	sharedMu  sync.Mutex
	sharedDir string
)

// SharedCacheDir is the user's shared layer: CacheDir/cellbox/go-build
// (~/.cache/cellbox/go-build), made if missing; "" when there is no user
// cache directory, or it is where a sandbox has its own (below /tmp). Sandboxes must bind it read-only (workspace
// Options.ReadOnly) for kernels to use it; SetSharedCache says they do.
func SharedCacheDir() string {
	base, err := os.UserCacheDir()
	if err != nil || !filepath.IsAbs(base) {
		return ""
	}
	dir := filepath.Join(base, "cellbox", "go-build")
	for _, own := range sandboxOwn {
		if dir == own || strings.HasPrefix(dir, own+"/") {
			return "" // the sandbox's own mount would hide the bind
		}
	}
	// Readable by all: a root daemon's sandboxes run as another user, and
	// the standard library's compiled packages are no secret.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ""
	}
	_ = os.Chmod(dir, 0o755)
	return dir
}

// SetSharedCache makes the kernels started after it use dir, which every
// sandbox binds read-only, as the shared layer.
func SetSharedCache(dir string) {
	sharedMu.Lock()
	sharedDir = dir
	sharedMu.Unlock()
}

func sharedCache() string {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	return sharedDir
}

// sandboxOwn are the directories a sandbox mounts its own (tmpfs, proc,
// the workspace), over what it binds from the host.
var sandboxOwn = []string{"/tmp", "/var/tmp", "/home/cellbox", "/workspace", "/proc", "/dev", "/run", "/.cellbox"}

var warmOnce sync.Once

// WarmShared fills the shared layer with the host's go command at goPath,
// in the background, once per process: a build of warmSource with the
// environment a sandbox's builds have, so that the packages' cache keys
// are theirs. It then writes readyFile, which a kernel's driver waits for
// (a while) before its own warm-up.
func WarmShared(goPath string) {
	dir := sharedCache()
	if dir == "" {
		return
	}
	warmOnce.Do(func() { go warmShared(goPath, dir) })
}

func warmShared(goPath, dir string) {
	tmp, err := os.MkdirTemp("", "cellbox-go-warm-")
	if err != nil {
		return
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	// In a directory of its own with the builds' settings, never the
	// daemon's (a project's go.mod there would choose the toolchain).
	env := exec.CommandContext(ctx, goPath, "env", "GOVERSION")
	env.Dir, env.Env = tmp, buildEnv(os.Environ(), nil)
	version, err := env.Output()
	if err != nil {
		return
	}
	toolchain := strings.TrimPrefix(strings.TrimSpace(string(version)), "go")
	if i := strings.IndexAny(toolchain, " -"); i > 0 {
		toolchain = toolchain[:i]
	}
	for name, text := range map[string]string{"go.mod": "module cellbox.warm\n\ngo " + toolchain + "\n", "main.go": warmSource, "cellbox.go": helperSource} {
		if os.WriteFile(filepath.Join(tmp, name), []byte(text), 0o600) != nil {
			return
		}
	}
	cmd := exec.CommandContext(ctx, goPath, "build", "-o", os.DevNull, ".")
	cmd.Dir = tmp
	cmd.Env = buildEnv(os.Environ(), map[string]string{"GOCACHE": dir, "GOPATH": filepath.Join(tmp, "gopath")})
	if err := cmd.Run(); err != nil {
		return
	}
	_ = writeAtomic(filepath.Join(dir, readyFile), []byte(strings.TrimSpace(string(version))+"\n"))
}

// buildEnv is env with the settings of every build (no network, no
// toolchain download, no cgo, no VCS stamping) and set.
func buildEnv(env []string, set map[string]string) []string {
	all := map[string]string{
		"GOPROXY": "off", "GOTOOLCHAIN": "local", "GOFLAGS": "-buildvcs=false", "CGO_ENABLED": "0",
		"GOTELEMETRY": "off", "GOWORK": "off", "GONOSUMDB": "*", "GOSUMDB": "off", "GOENV": "off",
		"GOCACHEPROG": "", "GOEXPERIMENT": "", "GOAMD64": "", "GOARM64": "", "GOOS": "", "GOARCH": "",
	}
	for n, v := range set {
		all[n] = v
	}
	out := make([]string, 0, len(env)+len(all))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := all[name]; !ok {
			out = append(out, kv)
		}
	}
	for n, v := range all {
		if v != "" {
			out = append(out, n+"="+v)
		}
	}
	return out
}

// cacheProg is GOCACHEPROG for a sandbox's builds: this binary's entry
// CacheEntry with the shared layer and the workspace's; "" without a
// shared layer (or with paths the go command could not split).
func cacheProg(self, shared, own string) string {
	if shared == "" {
		return ""
	}
	var parts []string
	for _, p := range []string{self, shared, own} {
		if strings.ContainsAny(p, "'\"\n") {
			return ""
		}
		parts = append(parts, "'"+p+"'")
	}
	return strings.Join(parts, " ")
}

// waitShared waits, up to limit, for the shared layer's readyFile: a
// warm-up the daemon runs on the host, so the driver's own build hits
// the shared layer instead of compiling the same packages alongside it.
func waitShared(shared string, limit time.Duration) {
	if shared == "" {
		return
	}
	deadline := time.Now().Add(limit)
	for {
		if _, err := os.Stat(filepath.Join(shared, readyFile)); err == nil || time.Now().After(deadline) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}
