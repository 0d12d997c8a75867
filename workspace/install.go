package workspace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/packages"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// Installs (workspace/install): pip or npm runs in the workspace's
// sandbox, into /env (a Python virtual environment with the system's
// packages, and an npm prefix at /env/npm), fetching through the sandbox's
// package index, so every file comes from the daemon's verified cache.

// Install bounds.
const (
	maxInstallPackages = 100
	maxSpecBytes       = 512
	installTimeout     = 30 * time.Minute
	maxReportBytes     = 32 << 20 // pip's report, npm ls's JSON
	maxLogTail         = 8 << 10  // of the installer's stderr, for an error
)

// InstallProgress is told of each package file the install fetched.
type InstallProgress func(files int, bytes int64, name string)

// installRun counts what one install fetched.
type installRun struct {
	progress InstallProgress

	mu    sync.Mutex // guards the fields below
	files int
	hits  int
	bytes int64
	// refusals are why the package index refused files, first ones.
	refusals []string
}

func (r *installRun) refused(why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if why != "" && len(r.refusals) < 5 && !slices.Contains(r.refusals, why) {
		r.refusals = append(r.refusals, why)
	}
}

func (r *installRun) fetched(f packages.Fetch) {
	r.mu.Lock()
	r.files++
	if f.CacheHit {
		r.hits++
	} else {
		r.bytes += f.Bytes
	}
	files, n := r.files, r.bytes
	r.mu.Unlock()
	if r.progress != nil {
		r.progress(files, n, f.Name)
	}
}

// CheckInstall checks workspace/install's manager and packages.
func CheckInstall(manager protocol.PackageManager, pkgs []string) error {
	switch manager {
	case protocol.PackageManagerPip, protocol.PackageManagerNpm:
	default:
		return fmt.Errorf("%w: field \"manager\" must be \"pip\" or \"npm\", got %q", ErrInvalid, manager)
	}
	if len(pkgs) == 0 {
		return fmt.Errorf("%w: field \"packages\" is empty", ErrInvalid)
	}
	if len(pkgs) > maxInstallPackages {
		return fmt.Errorf("%w: %d packages; at most %d in one install", ErrInvalid, len(pkgs), maxInstallPackages)
	}
	for _, p := range pkgs {
		switch {
		case p == "" || len(p) > maxSpecBytes:
			return fmt.Errorf("%w: package %q: empty or longer than %d bytes", ErrInvalid, p, maxSpecBytes)
		case strings.HasPrefix(p, "-"):
			return fmt.Errorf("%w: package %q: options are not taken, only requirement specifiers", ErrInvalid, p)
		case strings.IndexFunc(p, func(r rune) bool { return unicode.IsControl(r) }) >= 0:
			return fmt.Errorf("%w: package %q holds a control character", ErrInvalid, p)
		}
	}
	return nil
}

// Install installs packages into the workspace's environment with
// manager (pip or npm) and says what it installed. One install runs at a
// time per workspace; another waits for it.
func (w *Workspace) Install(ctx context.Context, manager protocol.PackageManager, pkgs []string, progress InstallProgress) (*protocol.WorkspaceInstallResult, error) {
	if err := CheckInstall(manager, pkgs); err != nil {
		return nil, err
	}
	if w.m.opts.Packages == nil {
		return nil, fmt.Errorf("%w: this daemon has no package cache (see its log: the directory given by --package-cache could not be opened)", ErrInvalid)
	}
	if w.Network() == protocol.NetworkModeHost {
		return nil, fmt.Errorf("%w: workspace %s runs with the host's network: its programs have no package index, and installs go through the daemon's verified cache (PROTOCOL.md §9); shut down its kernels and terminals and start them without network \"host\", or run pip or npm in its terminal", ErrInvalid, w.id)
	}
	start := time.Now()
	run := &installRun{progress: progress}
	select {
	case w.installing <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the workspace's install under way: %w", ctx.Err())
	}
	defer func() { <-w.installing }()
	w.mu.Lock()
	w.install = run
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.install = nil
		w.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(ctx, installTimeout)
	defer cancel()

	var installed []protocol.InstalledPackage
	var err error
	switch manager {
	case protocol.PackageManagerPip:
		installed, err = w.pipInstall(ctx, pkgs)
	case protocol.PackageManagerNpm:
		installed, err = w.npmInstall(ctx, pkgs)
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	if err != nil {
		if len(run.refusals) > 0 {
			err = fmt.Errorf("%w; the package cache refused: %s", err, strings.Join(run.refusals, "; "))
		}
		return nil, err
	}
	return &protocol.WorkspaceInstallResult{
		Installed: installed, CacheHits: run.hits, DownloadedBytes: run.bytes,
		DurationMs: time.Since(start).Milliseconds(),
	}, nil
}

// ErrInstallFailed: the package manager ran and failed (its words are in
// the error).
var ErrInstallFailed = errors.New("install failed")

func (w *Workspace) pipInstall(ctx context.Context, pkgs []string) ([]protocol.InstalledPackage, error) {
	py := sandbox.EnvPath + "/bin/python"
	if _, _, err := w.runTool(ctx, []string{"sh", "-c", `test -x "$1" || python3 -m venv --system-site-packages "$2"`, "sh", py, sandbox.EnvPath}); err != nil {
		return nil, fmt.Errorf("create the workspace's Python environment at %s: %w", sandbox.EnvPath, err)
	}
	argv := append([]string{py, "-m", "pip", "install", "--quiet", "--no-input", "--progress-bar", "off", "--report", "-", "--"}, pkgs...)
	out, _, err := w.runTool(ctx, argv)
	if err != nil {
		return nil, err
	}
	// pip's installation report (pip >= 22.2): {"install": [{"metadata": {"name", "version"}}]}.
	var report struct {
		Install []struct {
			Metadata struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"metadata"`
		} `json:"install"`
	}
	if err := json.Unmarshal(lastJSON(out), &report); err != nil {
		return nil, fmt.Errorf("read pip's installation report: %w", err)
	}
	installed := []protocol.InstalledPackage{}
	for _, p := range report.Install {
		installed = append(installed, protocol.InstalledPackage{Name: p.Metadata.Name, Version: p.Metadata.Version})
	}
	return installed, nil
}

func (w *Workspace) npmInstall(ctx context.Context, pkgs []string) ([]protocol.InstalledPackage, error) {
	prefix := sandbox.EnvPath + "/npm"
	before, err := w.npmList(ctx, prefix)
	if err != nil {
		return nil, err
	}
	argv := append([]string{"npm", "install", "--prefix", prefix, "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel", "error", "--"}, pkgs...)
	if _, _, err := w.runTool(ctx, argv); err != nil {
		return nil, err
	}
	after, err := w.npmList(ctx, prefix)
	if err != nil {
		return nil, err
	}
	installed := []protocol.InstalledPackage{}
	for _, p := range after {
		if !slices.Contains(before, p) {
			installed = append(installed, p)
		}
	}
	return installed, nil
}

// npmList is every package under prefix, sorted: npm's hidden lockfile
// (node_modules/.package-lock.json, npm 7 and later), read in the sandbox
// (a file a sandbox wrote is read where it is, by a program there).
func (w *Workspace) npmList(ctx context.Context, prefix string) ([]protocol.InstalledPackage, error) {
	out, _, err := w.runTool(ctx, []string{"sh", "-c", `cat "$1/node_modules/.package-lock.json" 2>/dev/null; exit 0`, "sh", prefix})
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(out)) == 0 {
		return nil, nil
	}
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
			Link    bool   `json:"link"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(out, &lock); err != nil {
		return nil, fmt.Errorf("read npm's lockfile: %w", err)
	}
	var list []protocol.InstalledPackage
	for path, p := range lock.Packages {
		i := strings.LastIndex(path, "node_modules/")
		if i < 0 || p.Version == "" || p.Link {
			continue
		}
		pkg := protocol.InstalledPackage{Name: path[i+len("node_modules/"):], Version: p.Version}
		if !slices.Contains(list, pkg) {
			list = append(list, pkg)
		}
	}
	slices.SortFunc(list, func(a, b protocol.InstalledPackage) int {
		return strings.Compare(a.Name+"@"+a.Version, b.Name+"@"+b.Version)
	})
	return list, nil
}

// lastJSON is the last line of out that starts a JSON object (pip may
// print warnings before its report).
func lastJSON(out []byte) []byte {
	if i := bytes.LastIndex(out, []byte("\n{")); i >= 0 {
		return out[i+1:]
	}
	return out
}

// runTool runs argv in the workspace's sandbox (as it runs: a kernel may
// have asked for the host's network) with Run, and returns its stdout; a
// failure carries the end of its stderr.
func (w *Workspace) runTool(ctx context.Context, argv []string) (stdout, stderr []byte, err error) {
	limits, _ := ResolveLimits(nil, DefaultLimits)
	limits.TimeoutMs = installTimeout.Milliseconds()
	res, err := Run(ctx, w, ProcSpec{Argv: argv, Limits: limits, Network: w.Network()}, nil, maxReportBytes)
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, nil, fmt.Errorf("%w: %s ran past the install's %v", ErrLimit, argv[0], installTimeout)
	case ctx.Err() != nil:
		return nil, nil, fmt.Errorf("%s: %w", argv[0], ctx.Err())
	case err != nil:
		return nil, nil, fmt.Errorf("run %s in the sandbox: %w", argv[0], err)
	}
	if st := res.Status; st.Code != 0 || st.Signal != 0 {
		tail := func(b []byte) string { return strings.TrimSpace(string(b[max(0, len(b)-maxLogTail):])) }
		msg := tail(res.Stderr)
		if msg == "" {
			msg = tail(res.Stdout)
		}
		if st.Reason != "" {
			msg = st.Reason + ": " + msg
		}
		return nil, nil, fmt.Errorf("%w: %s %s: %s", ErrInstallFailed, strings.Join(argv[:min(len(argv), 4)], " "), st.ExitStatus, msg)
	}
	if res.Truncated {
		return nil, nil, fmt.Errorf("%w: %s printed more than %d bytes", ErrInstallFailed, argv[0], maxReportBytes)
	}
	return res.Stdout, res.Stderr, nil
}
