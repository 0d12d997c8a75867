package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/rpc"
)

// The review commands: a workspace's changes reviewed from a terminal,
// over the user's long-lived daemon (found or started as `cellbox connect`
// does). Each is one or two §3 requests; this file maps the command line
// to them and their results to text.

// reviewCommand is one review subcommand.
type reviewCommand struct {
	args    string // the usage after the flags
	summary string // the help text
	// minArgs, maxArgs bound the positional arguments (maxArgs -1: any).
	minArgs, maxArgs int
	run              func(r *review, ctx context.Context, args []string) int
}

var reviewCommands = map[string]reviewCommand{
	"changes": {maxArgs: 0, run: (*review).changes,
		summary: `Lists the workspace's changes, one per line as "git status --short" does:
A (added), M (modified) or D (deleted), and the path relative to the current
directory. Prints nothing when there are none.`},
	"diff": {args: "[PATH...]", maxArgs: -1, run: (*review).diff,
		summary: `Prints the workspace's changes (all, or those at or below each PATH) as a
unified diff of the project's files against the workspace's.`},
	"commit": {args: "[PATH...]", maxArgs: -1, run: (*review).commit,
		summary: `Copies the workspace's changes (all, or those at or below each PATH) into the
project, each file atomically, and prints each path committed. Without PATHs,
the changes of paths the project's git ignores are left out, as changes leaves
them out, unless --ignored. A file changed
in the project since the workspace saw it is a conflict: it is not
overwritten, its reason is printed, and the command exits 1.`},
	"discard": {args: "(PATH... | --all)", maxArgs: -1, run: (*review).discard,
		summary: `Drops the workspace's changes at or below each PATH, or every change with
--all (nothing is dropped without one or the other), and prints each path
discarded. The project is not touched.`},
	"checkpoint": {args: "[NAME]", maxArgs: 1, run: (*review).checkpoint,
		summary: `Saves the workspace's changes as a checkpoint, named NAME or by the daemon.`},
	"checkpoints": {maxArgs: 0, run: (*review).checkpoints,
		summary: `Lists the workspace's checkpoints, oldest first.`},
	"export-git": {args: "BRANCH [PATH...]", minArgs: 1, maxArgs: -1, run: (*review).exportGit,
		summary: `Writes the workspace's changes (all, or those at or below each PATH) as a
commit on BRANCH of the project's git repository, without touching the
project's files, its index, HEAD or the branch it has checked out. When the
project has uncommitted work (modified, deleted or untracked files), that
work is committed first as it is, as a "baseline" commit, so that the
branch's last commit holds exactly the workspace's changes. An existing
BRANCH is moved only when it points at the project's HEAD, or with --force;
the branch checked out is refused. Paths the project's .gitignore ignores
are left out unless --ignored. Prints the commit.`},
	"export-patch": {args: "[PATH...]", maxArgs: -1, run: (*review).exportPatch,
		summary: `Prints the workspace's changes (all, or those at or below each PATH) as one
patch that "git apply" takes in the project, onto its files as they are now.
In a git repository it is git's own format with binary files (paths from the
repository's top level); elsewhere binary files are left out, each named in a
"# binary file not included" line at the top. The project is not touched.`},
	"export": {args: "DEST", minArgs: 1, maxArgs: 1, run: (*review).export,
		summary: `Writes the workspace as its sandbox sees it (the project with the
workspace's changes, without the paths the project's git ignores) as a
runnable bundle in DEST, a new or empty directory: the app in DEST/app with
its packages (the workspace's /env) in requirements.txt or package.json, a
Dockerfile, a .dockerignore, a compose.yaml and a README.md with three ways to
run it. The command that runs the app is --command, or found: Flask, FastAPI,
Streamlit, "npm start", or a main script (app.py, server.js, ...). With
--format oci, DEST/image is also an OCI image layout of the app built without
Docker on a base image layout: --base, else the one for the app's language in
$XDG_DATA_HOME/cellbox/images (python/ or node/, tagged as the official
image, e.g. python:3.11-slim), as
"skopeo copy docker://python:3.11-slim oci:$HOME/.local/share/cellbox/images/python:3.11-slim"
writes it. Prints what it wrote.`},
	"restore": {args: "CHECKPOINT", minArgs: 1, maxArgs: 1, run: (*review).restore,
		summary: `Brings the workspace's changes back to a checkpoint, given by its id or its
name (the newest of that name). The changes before it are kept as a
checkpoint named before-restore.`},
}

type reviewConfig struct {
	stateDir, logLevel, root, name, color string
	json, all                             bool
	ignored, force                        bool   // changes, diff, export-*; export-git
	message                               string // export-git
	// export's
	format, command, base, workspace string
	port                             int
}

func reviewFlags(cmd string, cfg *reviewConfig) *flag.FlagSet {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.StringVar(&cfg.stateDir, "state-dir", defaultStateDir(), "the daemon's state `DIR` (where its runtime file is found when $XDG_RUNTIME_DIR is unset)")
	fs.StringVar(&cfg.logLevel, "log-level", "warn", "log `LEVEL` on stderr, also passed to a daemon this starts")
	fs.StringVar(&cfg.root, "root", "", "the project `DIR` of the workspace (default: see above)")
	fs.StringVar(&cfg.name, "name", "", "the workspace's `NAME`, for a project with several")
	fs.BoolVar(&cfg.json, "json", false, "print the daemon's result as JSON (PROTOCOL.md §3)")
	if cmd == "diff" {
		fs.StringVar(&cfg.color, "color", "auto", "colour the diff: `WHEN` is auto (when stdout is a terminal), always or never")
	}
	switch cmd {
	case "changes", "diff", "commit", "export-git", "export-patch":
		fs.BoolVar(&cfg.ignored, "ignored", false, "also the changes of paths the project's git ignores (.gitignore, .git/info/exclude)")
	}
	return fs
}

// addAllFlag adds discard's --all. It is defined after the CELLBOX_*
// variables are applied, so only the command line can ask to drop every
// change.
func addAllFlag(fs *flag.FlagSet, cfg *reviewConfig) {
	fs.BoolVar(&cfg.all, "all", false, "discard every change")
}

// addExportGitFlags adds export-git's -m and --force, after the CELLBOX_*
// variables too: a message and moving a branch are one command's.
func addExportGitFlags(fs *flag.FlagSet, cfg *reviewConfig) {
	fs.StringVar(&cfg.message, "m", "", "the commit `MESSAGE` (default: one naming the workspace)")
	fs.StringVar(&cfg.message, "message", "", "the same as -m")
	fs.BoolVar(&cfg.force, "force", false, "move BRANCH even when it does not point at the project's HEAD (its commits are then no longer on it)")
}

// review is one review command connected to its workspace.
type review struct {
	cmd    string
	cfg    reviewConfig
	c      *rpc.Client
	ws     protocol.WorkspaceInfo
	cwd    string // the working directory as the shell gives it
	root   string // the project root as given or found (absolute)
	stdout io.Writer
	stderr io.Writer
}

// runReview is `cellbox changes|diff|commit|discard|checkpoint|checkpoints|restore|export-git|export-patch|export`.
func runReview(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) int {
	spec := reviewCommands[cmd]
	var cfg reviewConfig
	fs := reviewFlags(cmd, &cfg)
	fs.SetOutput(stderr)
	fs.Usage = func() { printReviewHelp(stderr, cmd) }
	var late func(*flag.FlagSet)
	switch cmd {
	case "discard":
		late = func(fs *flag.FlagSet) { addAllFlag(fs, &cfg) }
	case "export-git":
		late = func(fs *flag.FlagSet) { addExportGitFlags(fs, &cfg) }
	case "export":
		late = func(fs *flag.FlagSet) { addExportFlags(fs, &cfg) }
	}
	pos, err := parseReviewArgs(fs, args, late)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "cellbox %s: %v\n", cmd, err)
		return 2
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "cellbox %s: %s\nUsage: cellbox %s [flags] %s (cellbox help %s)\n", cmd, fmt.Sprintf(format, a...), cmd, spec.args, cmd)
		return 2
	}
	switch {
	case len(pos) < spec.minArgs:
		return usageErr("missing argument")
	case spec.maxArgs >= 0 && len(pos) > spec.maxArgs:
		return usageErr("unexpected argument %q", pos[spec.maxArgs])
	case cmd == "discard" && cfg.all && len(pos) > 0:
		return usageErr("give PATHs or --all, not both")
	case cmd == "discard" && !cfg.all && len(pos) == 0:
		return usageErr("name the PATHs to discard, or give --all to discard every change")
	case cmd == "diff" && cfg.color != "auto" && cfg.color != "always" && cfg.color != "never":
		return usageErr("--color %q: want auto, always or never", cfg.color)
	case cmd == "export" && cfg.format != string(protocol.ExportDir) && cfg.format != string(protocol.ExportOCI):
		return usageErr("--format %q: want dir or oci", cfg.format)
	case cmd == "export" && (cfg.port < 0 || cfg.port > 65535):
		return usageErr("--port %d: want a TCP port, 1 to 65535", cfg.port)
	}
	log, err := newLogger(stderr, cfg.logLevel, "text")
	if err != nil {
		return usageErr("%v", err)
	}
	r := &review{cmd: cmd, cfg: cfg, stdout: stdout, stderr: stderr}
	if r.cwd, err = os.Getwd(); err != nil {
		return r.fail(fmt.Errorf("the current directory: %w", err))
	}
	exe, err := os.Executable()
	if err != nil {
		return r.fail(fmt.Errorf("find own executable: %w", err))
	}
	r.c, err = rpc.Dial(ctx, rpc.ClientOptions{
		StateDir:   cfg.stateDir,
		Executable: exe,
		ServeArgs:  []string{"--log-level", cfg.logLevel},
		Logger:     log,
		ClientInfo: protocol.ClientInfo{Name: "cellbox " + cmd, Version: cellboxVersion()},
	})
	if err != nil {
		return r.fail(err)
	}
	defer r.c.Close()
	if err := r.open(ctx); err != nil {
		return r.fail(err)
	}
	return spec.run(r, ctx, pos)
}

// parseReviewArgs is parseFlags (CELLBOX_* variables, then the command
// line) keeping the positional arguments, which may come between flags
// ("commit a.txt --name nb"); after "--" every argument is positional.
// late defines flags that the variables do not set.
func parseReviewArgs(fs *flag.FlagSet, args []string, late func(*flag.FlagSet)) ([]string, error) {
	if err := parseFlags(fs, nil); err != nil {
		return nil, err
	}
	if late != nil {
		late(fs)
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// open finds the workspace: that of --root, else the deepest open overlay
// workspace (of --name) at or above the current directory, else that of
// the current directory. workspace/open of an existing root and name
// returns that workspace with its changes; of a new one, an empty one.
func (r *review) open(ctx context.Context) error {
	if r.cfg.workspace != "" {
		if st, err := os.Stat(r.cfg.workspace); err == nil && st.IsDir() {
			r.cfg.root = r.cfg.workspace
		} else {
			return r.openID(ctx, r.cfg.workspace)
		}
	}
	if r.cfg.root == "" {
		var list protocol.WorkspaceListResult
		if err := r.c.Call(ctx, protocol.MethodWorkspaceList, protocol.WorkspaceListParams{}, &list); err != nil {
			return err
		}
		here := realPath(r.cwd)
		best := -1
		for i, w := range list.Workspaces {
			if w.Mode == protocol.WorkspaceModeOverlay && w.Name == r.cfg.name && within(w.Root, here) &&
				(best < 0 || len(w.Root) > len(list.Workspaces[best].Root)) {
				best = i
			}
		}
		if best >= 0 {
			r.ws, r.root = list.Workspaces[best], list.Workspaces[best].Root
			return nil
		}
		r.root = r.cwd
	} else {
		root, err := filepath.Abs(r.cfg.root)
		if err != nil {
			return fmt.Errorf("--root %s: %w", r.cfg.root, err)
		}
		r.root = root
	}
	p := protocol.WorkspaceOpenParams{Root: r.root, Mode: protocol.WorkspaceModeOverlay, Name: r.cfg.name}
	return r.c.Call(ctx, protocol.MethodWorkspaceOpen, p, &r.ws)
}

// fail prints err as "cellbox CMD: message (Name)", with the §7 name of
// a protocol error's code, and returns exit code 1.
func (r *review) fail(err error) int {
	msg := err.Error()
	var pe *protocol.Error
	if errors.As(err, &pe) {
		msg += " (" + codeName(pe.Code) + ")"
	}
	fmt.Fprintf(r.stderr, "cellbox %s: %s\n", r.cmd, msg)
	return 1
}

// codeName is the name PROTOCOL.md §7 gives code, e.g. PathOutsideWorkspace.
func codeName(code protocol.ErrorCode) string {
	if !slices.Contains(protocol.ErrorCodes, code) {
		return fmt.Sprintf("error %d", int32(code))
	}
	var b strings.Builder
	for _, w := range strings.Split(code.ErrorName(), "_") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}

// printJSON prints a result for --json.
func (r *review) printJSON(v any) int {
	enc := json.NewEncoder(r.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return r.fail(fmt.Errorf("write stdout: %w", err))
	}
	return 0
}

func (r *review) changes(ctx context.Context, _ []string) int {
	res, err := r.listChanges(ctx, r.cfg.ignored)
	if err != nil {
		return r.fail(err)
	}
	if r.cfg.json {
		return r.printJSON(res)
	}
	w := bufio.NewWriter(r.stdout)
	for _, ch := range res.Changes {
		fmt.Fprintf(w, "%s %s\n", kindLetter(ch.Kind), r.display(ch.Path))
	}
	if err := w.Flush(); err != nil {
		return r.fail(fmt.Errorf("write stdout: %w", err))
	}
	if res.Ignored > 0 {
		fmt.Fprintf(r.stderr, "cellbox changes: %s of paths the project's git ignores not shown (--ignored shows them)\n", plural(res.Ignored, "change"))
	}
	return 0
}

// listChanges is workspace/changes; ignored includes the changes of paths
// the project's git ignores.
func (r *review) listChanges(ctx context.Context, ignored bool) (*protocol.WorkspaceChangesResult, error) {
	var res protocol.WorkspaceChangesResult
	err := r.c.Call(ctx, protocol.MethodWorkspaceChanges, protocol.WorkspaceChangesParams{WorkspaceID: r.ws.WorkspaceID, Ignored: ignored}, &res)
	return &res, err
}

func kindLetter(k protocol.ChangeKind) string {
	switch k {
	case protocol.ChangeKindAdded:
		return "A"
	case protocol.ChangeKindModified:
		return "M"
	case protocol.ChangeKindDeleted:
		return "D"
	}
	return "?"
}

func (r *review) diff(ctx context.Context, args []string) int {
	paths, err := r.selectPaths(ctx, args)
	if err != nil {
		return r.fail(err)
	}
	var res protocol.WorkspaceDiffResult
	if err := r.c.Call(ctx, protocol.MethodWorkspaceDiff, protocol.WorkspaceDiffParams{WorkspaceID: r.ws.WorkspaceID, Paths: paths, Ignored: r.cfg.ignored}, &res); err != nil {
		return r.fail(err)
	}
	if r.cfg.json {
		return r.printJSON(res)
	}
	color := r.cfg.color == "always" ||
		r.cfg.color == "auto" && isTerminal(r.stdout) && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
	w := bufio.NewWriter(r.stdout)
	for _, f := range res.Files {
		text := f.Diff
		if f.Binary {
			from, to := "a/"+f.Path, "b/"+f.Path
			switch f.Kind {
			case protocol.ChangeKindAdded:
				from = "/dev/null"
			case protocol.ChangeKindDeleted:
				to = "/dev/null"
			}
			text = fmt.Sprintf("Binary files %s and %s differ\n", from, to)
		}
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		if !color {
			w.WriteString(text)
			continue
		}
		for line := range strings.Lines(text) {
			w.WriteString(colorLine(line))
		}
	}
	if err := w.Flush(); err != nil {
		return r.fail(fmt.Errorf("write stdout: %w", err))
	}
	return 0
}

// colorLine colours one line of a unified diff as git does.
func colorLine(line string) string {
	const reset = "\x1b[m"
	var c string
	switch {
	case strings.HasPrefix(line, "+++ "), strings.HasPrefix(line, "--- "),
		strings.HasPrefix(line, "old mode "), strings.HasPrefix(line, "new mode "), strings.HasPrefix(line, "Binary files "):
		c = "\x1b[1m"
	case strings.HasPrefix(line, "@@"):
		c = "\x1b[36m"
	case strings.HasPrefix(line, "+"):
		c = "\x1b[32m"
	case strings.HasPrefix(line, "-"):
		c = "\x1b[31m"
	default:
		return line
	}
	body, nl := strings.CutSuffix(line, "\n")
	s := c + body + reset
	if nl {
		s += "\n"
	}
	return s
}

// isTerminal reports whether w is a terminal (TIOCGWINSZ answers).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	return err == nil
}

func (r *review) commit(ctx context.Context, args []string) int {
	paths, err := r.selectPaths(ctx, args)
	if err != nil {
		return r.fail(err)
	}
	var res protocol.WorkspaceCommitResult
	if err := r.c.Call(ctx, protocol.MethodWorkspaceCommit, protocol.WorkspaceCommitParams{WorkspaceID: r.ws.WorkspaceID, Paths: paths, Ignored: r.cfg.ignored}, &res); err != nil {
		return r.fail(err)
	}
	code := 0
	if r.cfg.json {
		code = r.printJSON(res)
	} else {
		for _, p := range res.Applied {
			fmt.Fprintf(r.stdout, "committed %s\n", r.display(p))
		}
		for _, c := range res.Conflicts {
			fmt.Fprintf(r.stderr, "conflict %s: %s\n", r.display(c.Path), c.Reason)
		}
		if len(res.Applied) == 0 && len(res.Conflicts) == 0 {
			fmt.Fprintf(r.stderr, "cellbox commit: no changes to commit\n")
		}
	}
	if n := len(res.Conflicts); n > 0 {
		what := "1 path not committed: it conflicts"
		if n > 1 {
			what = fmt.Sprintf("%d paths not committed: they conflict", n)
		}
		fmt.Fprintf(r.stderr, "cellbox commit: %s with the project (%s, the reasons are above); the workspace keeps its version: cellbox diff shows it against the project's file, cellbox discard PATH keeps the project's\n",
			what, codeName(protocol.CodeConflict))
		return 1
	}
	return code
}

func (r *review) discard(ctx context.Context, args []string) int {
	var paths []string
	if !r.cfg.all {
		var err error
		if paths, err = r.selectPaths(ctx, args); err != nil {
			return r.fail(err)
		}
	}
	var res protocol.WorkspaceDiscardResult
	if err := r.c.Call(ctx, protocol.MethodWorkspaceDiscard, protocol.WorkspaceDiscardParams{WorkspaceID: r.ws.WorkspaceID, Paths: paths}, &res); err != nil {
		return r.fail(err)
	}
	if r.cfg.json {
		return r.printJSON(res)
	}
	for _, p := range res.Discarded {
		fmt.Fprintf(r.stdout, "discarded %s\n", r.display(p))
	}
	if len(res.Discarded) == 0 {
		fmt.Fprintf(r.stderr, "cellbox discard: no changes to discard\n")
	}
	return 0
}

func (r *review) checkpoint(ctx context.Context, args []string) int {
	p := protocol.WorkspaceCheckpointParams{WorkspaceID: r.ws.WorkspaceID}
	if len(args) > 0 {
		p.Name = args[0]
	}
	var cp protocol.Checkpoint
	if err := r.c.Call(ctx, protocol.MethodWorkspaceCheckpoint, p, &cp); err != nil {
		return r.fail(err)
	}
	if r.cfg.json {
		return r.printJSON(cp)
	}
	fmt.Fprintf(r.stdout, "checkpoint %s %s: %s, %s\n", cp.CheckpointID, cp.Name, plural(cp.Files, "file"), plural(int(cp.Bytes), "byte"))
	return 0
}

// plural is "1 file", "2 files".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

func (r *review) listCheckpoints(ctx context.Context) (*protocol.WorkspaceCheckpointsResult, error) {
	var res protocol.WorkspaceCheckpointsResult
	err := r.c.Call(ctx, protocol.MethodWorkspaceCheckpoints, protocol.WorkspaceCheckpointsParams{WorkspaceID: r.ws.WorkspaceID}, &res)
	return &res, err
}

func (r *review) checkpoints(ctx context.Context, _ []string) int {
	res, err := r.listCheckpoints(ctx)
	if err != nil {
		return r.fail(err)
	}
	if r.cfg.json {
		return r.printJSON(res)
	}
	if len(res.Checkpoints) == 0 {
		return 0
	}
	tw := tabwriter.NewWriter(r.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tCREATED\tFILES\tBYTES")
	for _, cp := range res.Checkpoints {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", cp.CheckpointID, cp.Name, cp.CreatedAt.Local().Format(time.DateTime), cp.Files, cp.Bytes)
	}
	if err := tw.Flush(); err != nil {
		return r.fail(fmt.Errorf("write stdout: %w", err))
	}
	return 0
}

func (r *review) restore(ctx context.Context, args []string) int {
	res, err := r.listCheckpoints(ctx)
	if err != nil {
		return r.fail(err)
	}
	// An id names one checkpoint; a name may be on several
	// (before-restore is): the newest is meant.
	var cp *protocol.Checkpoint
	for i := range res.Checkpoints {
		c := &res.Checkpoints[i]
		if c.CheckpointID == args[0] {
			cp = c
			break
		}
		if c.Name == args[0] && (cp == nil || c.CreatedAt.After(cp.CreatedAt)) {
			cp = c
		}
	}
	if cp == nil {
		return r.fail(fmt.Errorf("no checkpoint has the id or name %q (cellbox checkpoints lists them)", args[0]))
	}
	var empty protocol.Empty
	p := protocol.WorkspaceRestoreParams{WorkspaceID: r.ws.WorkspaceID, CheckpointID: cp.CheckpointID}
	if err := r.c.Call(ctx, protocol.MethodWorkspaceRestore, p, &empty); err != nil {
		return r.fail(err)
	}
	if r.cfg.json {
		return r.printJSON(cp)
	}
	fmt.Fprintf(r.stdout, "restored checkpoint %s %s; the changes before it are kept as checkpoint before-restore\n", cp.CheckpointID, cp.Name)
	return 0
}

func (r *review) exportGit(ctx context.Context, args []string) int {
	paths, err := r.selectPaths(ctx, args[1:])
	if err != nil {
		return r.fail(err)
	}
	p := protocol.WorkspaceExportGitParams{WorkspaceID: r.ws.WorkspaceID, Branch: args[0], Message: r.cfg.message,
		Force: r.cfg.force, Paths: paths, Ignored: r.cfg.ignored}
	var res protocol.WorkspaceExportGitResult
	if err := r.c.Call(ctx, protocol.MethodWorkspaceExportGit, p, &res); err != nil {
		return r.fail(err)
	}
	if r.cfg.json {
		return r.printJSON(res)
	}
	fmt.Fprintf(r.stdout, "branch %s: commit %s (%s)\n", res.Branch, res.Commit, plural(res.Files, "file"))
	if res.Baseline != "" {
		fmt.Fprintf(r.stdout, "on top of commit %s, the project's uncommitted work as it is now\n", res.Baseline)
	}
	return 0
}

func (r *review) exportPatch(ctx context.Context, args []string) int {
	paths, err := r.selectPaths(ctx, args)
	if err != nil {
		return r.fail(err)
	}
	var res protocol.WorkspaceExportPatchResult
	p := protocol.WorkspaceExportPatchParams{WorkspaceID: r.ws.WorkspaceID, Paths: paths, Ignored: r.cfg.ignored}
	if err := r.c.Call(ctx, protocol.MethodWorkspaceExportPatch, p, &res); err != nil {
		return r.fail(err)
	}
	if r.cfg.json {
		return r.printJSON(res)
	}
	if _, err := io.WriteString(r.stdout, res.Patch); err != nil {
		return r.fail(fmt.Errorf("write stdout: %w", err))
	}
	if res.Files == 0 {
		fmt.Fprintf(r.stderr, "cellbox export-patch: no changes to export\n")
	}
	return 0
}

// selectPaths maps command-line paths to workspace paths and checks that
// each names at least one change, so that a mistyped path is an error
// rather than a command that does nothing. No args: nil (every change).
func (r *review) selectPaths(ctx context.Context, args []string) ([]string, error) {
	if len(args) == 0 {
		return nil, nil
	}
	var paths []string
	for _, a := range args {
		p, err := r.workspacePath(a)
		if err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	// commit and discard take every change; the others leave the ignored
	// paths out unless --ignored.
	res, err := r.listChanges(ctx, r.cfg.ignored || r.cmd == "commit" || r.cmd == "discard")
	if err != nil {
		return nil, err
	}
	for i, p := range paths {
		name := unquoteName(p)
		if name == "." {
			continue
		}
		if !slices.ContainsFunc(res.Changes, func(c protocol.Change) bool {
			n := unquoteName(c.Path)
			return n == name || strings.HasPrefix(n, name+"/")
		}) {
			return nil, fmt.Errorf("no change at %s (cellbox changes lists them)", args[i])
		}
	}
	return paths, nil
}

// workspacePath is the workspace path (relative to its root, as the
// protocol carries names) of a path given relative to the current
// directory, or absolute.
func (r *review) workspacePath(arg string) (string, error) {
	if arg == "" {
		// Not the current directory: "discard $UNSET" must not drop all.
		return "", errors.New(`an empty PATH names nothing (the current directory is ".")`)
	}
	name := unquoteName(arg)
	abs := name
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(r.cwd, abs)
	}
	// Lexically, against the root as given or found; then against the
	// daemon's root (symlinks resolved) with the path's directory resolved.
	tries := [][2]string{{r.root, abs}, {r.ws.Root, abs}, {r.ws.Root, filepath.Join(realPath(filepath.Dir(abs)), filepath.Base(abs))}}
	for _, t := range tries {
		if rel, ok := relWithin(t[0], t[1]); ok {
			return wireName(filepath.ToSlash(rel)), nil
		}
	}
	return "", fmt.Errorf("%s is outside the workspace's root %s", arg, r.ws.Root)
}

// display is a workspace path as the user names it: relative to the
// current directory.
func (r *review) display(p string) string {
	name := unquoteName(p)
	rel, err := filepath.Rel(realPath(r.cwd), filepath.Join(r.ws.Root, filepath.FromSlash(name)))
	if err != nil {
		rel = name
	}
	return quoteName(rel)
}

// realPath is p with its symlinks resolved, or p when that fails.
func realPath(p string) string {
	if real, err := filepath.EvalSymlinks(p); err == nil {
		return real
	}
	return p
}

// within reports whether path is root or below it.
func within(root, path string) bool {
	_, ok := relWithin(root, path)
	return ok
}

// relWithin is path relative to root, when it does not leave root.
func relWithin(root, path string) (string, bool) {
	rel, err := filepath.Rel(root, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return rel, true
}

// A file name is bytes; the protocol carries one that is not UTF-8, or
// that begins with `"`, quoted (workspace/names.go). unquoteName is the
// name a quoted path means; wireName quotes a name as the daemon reads it
// back; quoteName also quotes names with control characters for printing.
func unquoteName(p string) string {
	if len(p) >= 2 && p[0] == '"' && p[len(p)-1] == '"' {
		if s, err := strconv.Unquote(p); err == nil {
			return s
		}
	}
	return p
}

func wireName(s string) string {
	if utf8.ValidString(s) && !strings.HasPrefix(s, `"`) {
		return s
	}
	return strconv.Quote(s)
}

func quoteName(s string) string {
	if strings.ContainsFunc(s, unicode.IsControl) {
		return strconv.Quote(s)
	}
	return wireName(s)
}

// printReviewHelp is `cellbox help CMD` of a review command.
func printReviewHelp(w io.Writer, cmd string) {
	spec := reviewCommands[cmd]
	fmt.Fprintf(w, "Usage: cellbox %s [flags] %s\n\n%s\n\n", cmd, spec.args, spec.summary)
	fmt.Fprint(w, `The review commands work on an overlay workspace through your long-lived
daemon, started in the background when none runs (as "cellbox connect" does):
the workspace of --root and --name or, without --root, of the nearest
directory at or above the current one with such a workspace open in the
daemon, else of the current directory. PATHs are relative to the current
directory and must be inside the workspace's root. Exit status: 0 done,
1 failed (the message names the protocol's error, PROTOCOL.md §7) or a
commit conflict, 2 bad usage.

Flags:
`)
	var cfg reviewConfig
	printFlags(w, reviewFlags(cmd, &cfg))
	switch cmd {
	case "discard":
		fmt.Fprint(w, "  --all\n      discard every change (no environment variable sets it)\n")
	case "export":
		printExportFlags(w)
	case "export-git":
		fmt.Fprint(w, "  -m, --message MESSAGE\n      the commit message (default: one naming the workspace; no environment variable sets it)\n")
		fmt.Fprint(w, "  --force\n      move BRANCH even when it does not point at the project's HEAD (no environment variable sets it)\n")
	}
}
