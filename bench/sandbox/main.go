//go:build linux

// Command sandbox is issue 3's side-by-side benchmark: bubblewrap against a
// cellbox workspace sandbox, cold (a new sandbox, start + spawn + wait +
// close) running `true` and `python3 -c pass`, a spawn into an open
// sandbox (warm), and references (unshare, python on the host). Every case
// runs once per iteration, in a shuffled order, so machine noise hits all
// of them alike. bench/sandbox.sh builds it (CGO_ENABLED=0) and runs it as
// an unprivileged user.
//
// cellbox is timed in process, as the daemon pays for a new sandbox
// (sandbox.Start, Spawn, Wait, Close), and also as the `cellbox exec`
// command a shell user runs, next to the bwrap command.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/bench/internal/benchutil"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
	"github.com/cellbox-dev/cellbox/workspace/sandbox/helper"

	// The sandbox's init and spawner re-execute this binary; linking what
	// cmd/cellbox links makes them pay the daemon's package init and
	// binary size, not a smaller binary's.
	_ "github.com/cellbox-dev/cellbox/kernel"
	_ "github.com/cellbox-dev/cellbox/protocol"
	_ "github.com/cellbox-dev/cellbox/rpc"
	_ "github.com/cellbox-dev/cellbox/workspace"
)

func main() {
	if sandbox.Main() { // re-executed as a sandbox's init or spawner
		return
	}
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-bench:", err)
		os.Exit(1)
	}
}

type options struct {
	n, warmup int
	cellbox   string // the cellbox binary, for `cellbox exec`; "" skips it
	bwrap     string
	unshare   string
	python    string
	label     string
}

// etcFiles and topLinks are what a sandbox binds; bwrap gets the same.
var (
	etcFiles = sandbox.EtcFiles()
	topLinks = sandbox.TopLinks()
)

func run(args []string, stdout io.Writer) error {
	var o options
	fs := flag.NewFlagSet("sandbox-bench", flag.ContinueOnError)
	fs.IntVar(&o.n, "n", 200, "measured `iterations` (each runs every case once)")
	fs.IntVar(&o.warmup, "warmup", 5, "unmeasured `iterations` first")
	fs.StringVar(&o.cellbox, "cellbox", "", "the cellbox `binary` for `cellbox exec` (built with CGO_ENABLED=0); empty: skip those cases")
	fs.StringVar(&o.bwrap, "bwrap", "/usr/bin/bwrap", "bubblewrap `binary`")
	fs.StringVar(&o.unshare, "unshare", "/usr/bin/unshare", "util-linux unshare `binary`")
	fs.StringVar(&o.python, "python", "/usr/bin/python3", "python `binary` (a path under /usr, seen alike in both sandboxes)")
	fs.StringVar(&o.label, "label", "", "`text` naming this run in the output")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.n < 1 {
		return fmt.Errorf("-n %d: need at least one iteration", o.n)
	}

	base, err := os.MkdirTemp("", "cellbox-bench-")
	if err != nil {
		return err
	}
	defer removeAll(base)
	b, err := newBench(base, o)
	if err != nil {
		return err
	}
	defer b.close()
	if err := b.check(); err != nil {
		return err
	}

	fmt.Fprintf(os.Stderr, "sandbox-bench: %d warm-up and %d measured iterations of %d cases...\n", o.warmup, o.n, len(b.cases))
	printEnv(stdout, o, b)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	order := make([]int, len(b.cases))
	for i := range order {
		order[i] = i
	}
	for it := -o.warmup; it < o.n; it++ {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, k := range order {
			c := b.cases[k]
			d, err := c.run(it >= 0)
			switch {
			case err != nil:
				// Counted and reported, not measured; the run goes on
				// unless the case fails often.
				c.errs++
				if c.firstErr == nil {
					c.firstErr = err
				}
				if c.errs > o.n/10+2 {
					return fmt.Errorf("%s: %d failures, the first: %w", strings.TrimSpace(c.total.Name), c.errs, c.firstErr)
				}
			case it >= 0:
				c.total.Add(d)
			}
		}
	}
	b.report(stdout)
	return nil
}

// A benchCase is timed once per iteration; run may also record its parts.
type benchCase struct {
	total *series
	parts []*series
	run   func(record bool) (time.Duration, error)

	errs     int // failed runs, not measured
	firstErr error
}

type bench struct {
	o         options
	base      string
	project   string
	stateDir  string   // for `cellbox exec`
	env       []string // of every command started, and the sandboxes' programs
	devNull   *os.File
	bwrapPre  []string // bwrap's arguments before the program
	warm      *sandbox.Sandbox
	pool      *sandbox.Pool // as the daemon keeps one
	poolTaken time.Time
	next      int // numbers the cold sandboxes' directories

	cases []*benchCase
	// by name, for the report
	bwrapTrue, cbTrue, cbSelfTrue, cbPoolTrue, cbDirect, execTrue, bwrapPy, cbPy, cbSelfPy, cbPoolPy, execPy, warmSpawn, unshareTrue, hostTrue, hostPy *benchCase
}

func newBench(base string, o options) (*bench, error) {
	b := &bench{o: o, base: base, project: filepath.Join(base, "project"), stateDir: filepath.Join(base, "state"), env: sandbox.DefaultEnv()}
	for _, d := range []string{b.project, b.stateDir, filepath.Join(base, "sb")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(b.project, "hello.txt"), []byte("hello\n"), 0o644); err != nil {
		return nil, err
	}
	var err error
	if b.devNull, err = os.OpenFile(os.DevNull, os.O_RDWR, 0); err != nil {
		return nil, err
	}
	b.bwrapPre = bwrapArgs(b.project)

	trueArgv := []string{"true"}
	pyArgv := []string{o.python, "-c", "pass"}
	b.bwrapTrue = b.command("bwrap ... -- true (whole command)", append(append([]string{o.bwrap}, b.bwrapPre...), trueArgv...))
	b.pool = sandbox.NewPool()
	// The pool launches its next sandbox 250 ms after one is taken; a daemon
	// opens workspaces at a person's pace, so the pool cases wait (untimed)
	// until it has had time to.

	b.cbTrue = b.cold("cellbox sandbox + true, in process", sandbox.ModeOverlay, trueArgv, sandbox.Start)
	b.cbSelfTrue = b.cold("the same, re-executing the daemon's binary (before the lean helper)", sandbox.ModeOverlay, trueArgv, startSelf)
	b.cbPoolTrue = b.cold("cellbox sandbox from the daemon's pool + true, in process", sandbox.ModeOverlay, trueArgv, b.pool.Start)
	b.cbDirect = b.cold("cellbox sandbox, direct mode (no overlay) + true, in process", sandbox.ModeDirect, trueArgv, sandbox.Start)
	b.bwrapPy = b.command("bwrap ... -- python3 -c pass (whole command)", append(append([]string{o.bwrap}, b.bwrapPre...), pyArgv...))
	b.cbPy = b.cold("cellbox sandbox + python3 -c pass, in process", sandbox.ModeOverlay, pyArgv, sandbox.Start)
	b.cbSelfPy = b.cold("the same, re-executing the daemon's binary (before the lean helper)", sandbox.ModeOverlay, pyArgv, startSelf)
	b.cbPoolPy = b.cold("cellbox sandbox from the daemon's pool + python3 -c pass, in process", sandbox.ModeOverlay, pyArgv, b.pool.Start)
	if o.cellbox != "" {
		execArgv := []string{o.cellbox, "exec", "--mode", "scratch", "--state-dir", b.stateDir, "--"}
		b.execTrue = b.command("cellbox exec --mode scratch -- true (whole command)", append(execArgv, trueArgv...))
		b.execPy = b.command("cellbox exec --mode scratch -- python3 -c pass (whole command)", append(execArgv, pyArgv...))
	}
	b.unshareTrue = b.command("unshare -Urmpf --mount-proc true", []string{o.unshare, "-Urmpf", "--mount-proc", "true"})
	b.hostTrue = b.command("true on the host (a bare fork+exec from this process)", []string{"/bin/true"})
	b.hostPy = b.command("python3 -c pass on the host", pyArgv)

	cfg, err := b.config(sandbox.ModeOverlay)
	if err != nil {
		return nil, err
	}
	if b.warm, err = sandbox.Start(context.Background(), cfg); err != nil {
		return nil, fmt.Errorf("start the warm sandbox: %w", err)
	}
	b.warmSpawn = &benchCase{total: &series{Name: "spawn true into an open sandbox (Spawn+Wait)"}}
	b.warmSpawn.run = func(bool) (time.Duration, error) {
		t0 := time.Now()
		err := spawnWait(b.warm, trueArgv)
		return time.Since(t0), err
	}
	for _, c := range []*benchCase{b.bwrapTrue, b.cbTrue, b.cbSelfTrue, b.cbPoolTrue, b.cbDirect, b.execTrue, b.bwrapPy, b.cbPy, b.cbSelfPy, b.cbPoolPy, b.execPy, b.warmSpawn, b.unshareTrue, b.hostTrue, b.hostPy} {
		if c != nil {
			b.cases = append(b.cases, c)
		}
	}
	return b, nil
}

func (b *bench) close() {
	if b.warm != nil {
		b.warm.Close()
	}
	b.devNull.Close()
}

// bwrapArgs are bwrap's options for the binds a cellbox sandbox makes
// (mounts_linux.go), with the project bound read-write at /workspace.
func bwrapArgs(project string) []string {
	a := []string{"--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr"}
	for _, name := range topLinks {
		host := "/" + name
		fi, err := os.Lstat(host)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(host); err == nil {
				a = append(a, "--symlink", target, host)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", host, host)
		}
	}
	for _, name := range etcFiles {
		if _, err := os.Stat("/etc/" + name); err == nil {
			a = append(a, "--ro-bind", "/etc/"+name, "/etc/"+name)
		}
	}
	return append(a, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--bind", project, "/workspace", "--chdir", "/workspace", "--")
}

// config is a new workspace's sandbox over the project; an overlay one gets
// fresh upper and work directories, as a first workspace/open makes them.
func (b *bench) config(mode sandbox.Mode) (sandbox.Config, error) {
	b.next++
	dir := filepath.Join(b.base, "sb", strconv.Itoa(b.next))
	uid, gid := sandbox.SandboxRootHostIDs()
	for _, d := range []string{"upper", "work"} {
		p := filepath.Join(dir, d)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return sandbox.Config{}, err
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return sandbox.Config{}, err
		}
	}
	return sandbox.Config{ID: "bench-" + strconv.Itoa(b.next), Mode: mode, Network: sandbox.NetworkNone,
		Project: b.project, Upper: filepath.Join(dir, "upper"), Work: filepath.Join(dir, "work")}, nil
}

// cold times a new sandbox running argv: Start, Spawn, Wait, Close, as the
// daemon pays for a workspace's first program. Its parts are rows too.
func (b *bench) cold(name string, mode sandbox.Mode, argv []string, startFn func(context.Context, sandbox.Config) (*sandbox.Sandbox, error)) *benchCase {
	// The pool's refill (250 ms after a take) must not launch while a
	// case re-executes the daemon's binary (the environment says so).
	pooled := strings.Contains(name, "pool") || strings.Contains(name, "re-executing")
	start, spawn, closing := &series{Name: "sandbox.Start"}, &series{Name: "Spawn+Wait"}, &series{Name: "Close"}
	c := &benchCase{total: &series{Name: name}, parts: []*series{start, spawn, closing}}
	c.run = func(record bool) (time.Duration, error) {
		cfg, err := b.config(mode) // not timed: the workspace's directories exist already
		if err != nil {
			return 0, err
		}
		if pooled {
			time.Sleep(time.Until(b.poolTaken.Add(400 * time.Millisecond)))
			b.poolTaken = time.Now()
		}
		t0 := time.Now()
		s, err := startFn(context.Background(), cfg)
		if err != nil {
			return 0, err
		}
		t1 := time.Now()
		err = spawnWait(s, argv)
		t2 := time.Now()
		s.Close()
		t3 := time.Now()
		if err != nil {
			return 0, err
		}
		if record {
			start.Add(t1.Sub(t0))
			spawn.Add(t2.Sub(t1))
			closing.Add(t3.Sub(t2))
		}
		return t3.Sub(t0), nil
	}
	return c
}

// startSelf starts a sandbox whose init and spawner re-execute this
// binary, as every sandbox did before the lean helper.
func startSelf(ctx context.Context, cfg sandbox.Config) (*sandbox.Sandbox, error) {
	os.Setenv(sandbox.HelperEnv, "self")
	defer os.Unsetenv(sandbox.HelperEnv)
	return sandbox.Start(ctx, cfg)
}

func spawnWait(s *sandbox.Sandbox, argv []string) error {
	p, err := s.Spawn(context.Background(), sandbox.Spec{Argv: argv})
	if err != nil {
		return err
	}
	st, err := p.Wait()
	if err != nil {
		return err
	}
	if st.Code != 0 || st.Signal != 0 {
		return fmt.Errorf("%s %v", strings.Join(argv, " "), st)
	}
	return nil
}

// command times a whole command, from fork to wait, with /dev/null as its
// stdio and the sandboxes' default environment.
func (b *bench) command(name string, argv []string) *benchCase {
	c := &benchCase{total: &series{Name: name}}
	c.run = func(bool) (time.Duration, error) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env, cmd.Dir = b.env, b.base
		cmd.Stdin, cmd.Stdout, cmd.Stderr = b.devNull, b.devNull, b.devNull
		t0 := time.Now()
		err := cmd.Run()
		d := time.Since(t0)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
		}
		return d, nil
	}
	return c
}

// check runs every case before any measuring, so that one that cannot work
// fails the run at once (a case may fail now and then; see run).
func (b *bench) check() error {
	for _, c := range b.cases {
		var err error
		for range 3 {
			if _, err = c.run(false); err == nil {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w (commands: run it by hand to see its output)", strings.TrimSpace(c.total.Name), err)
		}
	}
	return nil
}

func (b *bench) report(w io.Writer) {
	fmt.Fprintf(w, "\n")
	printHeader(w)
	group := func(title string, cases ...*benchCase) {
		fmt.Fprintf(w, "%s\n", title)
		for _, c := range cases {
			if c == nil {
				continue
			}
			printRow(w, c.total, "")
			for _, p := range c.parts {
				printRow(w, p, "  ")
			}
		}
	}
	group("true: cold sandbox", b.bwrapTrue, b.cbTrue, b.cbSelfTrue, b.cbPoolTrue, b.cbDirect, b.execTrue)
	group("python3 -c pass: cold sandbox", b.bwrapPy, b.cbPy, b.cbSelfPy, b.cbPoolPy, b.execPy)
	group("warm", b.warmSpawn)
	group("reference", b.unshareTrue, b.hostTrue, b.hostPy)

	fmt.Fprintf(w, "\nratios, cellbox / bwrap (aim: cold cellbox sandbox + spawn within 1.2x of bwrap)\n")
	printRatio(w, "true, cellbox from the pool / bwrap command", b.cbPoolTrue.total, b.bwrapTrue.total, 1.2)
	printRatio(w, "python3 -c pass, cellbox from the pool / bwrap command", b.cbPoolPy.total, b.bwrapPy.total, 1.2)
	printRatio(w, "true, cellbox in process / bwrap command", b.cbTrue.total, b.bwrapTrue.total, 1.2)
	printRatio(w, "python3 -c pass, cellbox in process / bwrap command", b.cbPy.total, b.bwrapPy.total, 1.2)
	printRatio(w, "true, cellbox in process, before the lean helper / bwrap command", b.cbSelfTrue.total, b.bwrapTrue.total, 1.2)
	printRatio(w, "python3 -c pass, cellbox in process, before the lean helper / bwrap", b.cbSelfPy.total, b.bwrapPy.total, 1.2)
	printRatio(w, "true, cellbox direct mode in process / bwrap command", b.cbDirect.total, b.bwrapTrue.total, 1.2)
	if b.execTrue != nil {
		printRatio(w, "true, cellbox exec command / bwrap command", b.execTrue.total, b.bwrapTrue.total, 1.2)
		printRatio(w, "python3 -c pass, cellbox exec command / bwrap command", b.execPy.total, b.bwrapPy.total, 1.2)
	}
	fmt.Fprintf(w, "warm spawn (aim: within 2x a bare fork+exec of true on this host; under 2 ms on a fast one)\n")
	printRatio(w, "spawn true into an open sandbox / true on the host", b.warmSpawn.total, b.hostTrue.total, 2)
	printUnder(w, "spawn true into an open sandbox", b.warmSpawn.total, 2*time.Millisecond)
	for _, c := range b.cases {
		if c.errs > 0 {
			fmt.Fprintf(w, "FAILED %d of %d+%d runs of %q (not measured); the first: %v\n",
				c.errs, b.o.warmup, b.o.n, strings.TrimSpace(c.total.Name), c.firstErr)
		}
	}
}

func printEnv(w io.Writer, o options, b *bench) {
	who := strconv.Itoa(os.Getuid())
	if u, err := user.Current(); err == nil {
		who = u.Username + " (uid " + u.Uid + ")"
	}
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	cgo := "?"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "CGO_ENABLED" {
				cgo = s.Value
			}
		}
	}
	bwrapVersion, _ := exec.Command(o.bwrap, "--version").Output()
	title := benchutil.Title("sandbox start + spawn, side by side", o.label)
	fmt.Fprintf(w, "== %s\n", title)
	fmt.Fprintf(w, "   as %s; Linux %s; %d cores; %s; %s; benchmark built with CGO_ENABLED=%s\n",
		who, unix.ByteSliceToString(uts.Release[:]), runtime.NumCPU(), runtime.Version(), strings.TrimSpace(string(bwrapVersion)), cgo)
	fmt.Fprintf(w, "   %d iterations after %d warm-up ones; each iteration runs every case once, in a new random order\n", o.n, o.warmup)
	fmt.Fprintf(w, "   cellbox in process: sandbox.Start (overlay workspace, network none) + Spawn + Wait + Close, as the daemon pays;\n")
	lean, why := sandbox.HelperInfo()
	if lean {
		fmt.Fprintf(w, "   its init and spawner run the lean helper the binary carries (%s); \"before\" rows re-execute this binary,\n", helperSize())
		fmt.Fprintf(w, "   which links what cmd/cellbox links (%s), as every sandbox did before it\n", benchutil.FileSize("/proc/self/exe"))
	} else {
		fmt.Fprintf(w, "   its init and spawner re-execute this binary (%s): no lean helper (%s)\n", benchutil.FileSize("/proc/self/exe"), why)
	}
	fmt.Fprintf(w, "   commands: fork+exec to wait from this process, stdio /dev/null, env: %s\n", strings.Join(b.env, " "))
	fmt.Fprintf(w, "   bwrap %s PROGRAM\n", strings.Join(b.bwrapPre, " "))
}

// helperSize describes the lean helper.
func helperSize() string {
	return fmt.Sprintf("%.1f MB", float64(len(helper.Binary))/1e6)
}

// removeAll removes the benchmark's directory; overlayfs leaves work/work
// with mode 000, which its owner must open up first.
func removeAll(dir string) {
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(path, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}
