package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/cellbox-dev/cellbox/kernel"
	"github.com/cellbox-dev/cellbox/kernel/jupyter"
)

// runJupyter is `cellbox jupyter install|list|uninstall`: cellbox's
// languages as Jupyter kernelspecs (PROTOCOL.md §8).
func runJupyter(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printJupyterHelp(stderr)
		return 2
	}
	switch args[0] {
	case "install":
		return runJupyterInstall(ctx, args[1:], stdout, stderr)
	case "list":
		return runJupyterList(args[1:], stdout, stderr)
	case "uninstall":
		return runJupyterUninstall(args[1:], stdout, stderr)
	case "help", "-h", "--help", "-help":
		printJupyterHelp(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "cellbox jupyter: unknown command %q\n\n", args[0])
	printJupyterHelp(stderr)
	return 2
}

func printJupyterHelp(w io.Writer) {
	fmt.Fprint(w, `Usage:
  cellbox jupyter install [--user | --prefix P | --sys-prefix] [--language L,...]
  cellbox jupyter list [--all] [--json]
  cellbox jupyter uninstall [--user | --prefix P | --sys-prefix] [NAME...]

Makes cellbox's languages Jupyter kernels. install writes a kernelspec
cellbox-LANGUAGE (cellbox-python, cellbox-javascript, cellbox-bash, ...) for
every language available on this host (cellbox doctor lists them), or for
those --language names, and prints the directory of each. Jupyter's clients
(notebook, lab, nbclient, editors) then run "cellbox jupyter-kernel", which
runs the code in a cellbox kernel of your daemon, sandboxed in the overlay
workspace of the notebook's directory: what it writes is yours to review
with cellbox's diff and commit.

A kernelspec names this binary by its absolute path (symlinks resolved), so
Jupyter finds it without PATH. After moving or replacing the binary, run
install again: it replaces the cellbox kernelspecs of the same names (never
another kernelspec), and list shows a kernelspec whose binary is gone.

Where install and uninstall work:
  --user        the default: Jupyter's user data dir, as for
                "jupyter kernelspec install --user": $JUPYTER_DATA_DIR/kernels,
                else ~/.local/share/jupyter/kernels ($XDG_DATA_HOME/jupyter/kernels
                when set), ~/Library/Jupyter/kernels on macOS
  --prefix P    P/share/jupyter/kernels, found by a Jupyter whose Python
                environment is P
  --sys-prefix  the active Python environment's share/jupyter/kernels:
                $VIRTUAL_ENV, else $CONDA_PREFIX; an error when neither is
                set (cellbox does not run Python to ask for its sys.prefix)

install flags:
  --language L  only these languages (repeatable, or a comma list)

list shows the cellbox kernelspecs Jupyter finds, first wins: JUPYTER_PATH,
the user data dir, the environment's ($VIRTUAL_ENV or $CONDA_PREFIX), then
/usr/local/share/jupyter and /usr/share/jupyter; with each one's language,
directory and whether its binary exists. Broken kernelspecs are reported
on stderr.
  --all         every kernelspec, as "jupyter kernelspec list" shows them
  --json        print JSON

uninstall removes the cellbox kernelspecs of its directory: those named,
else every cellbox-* one. It refuses to remove a kernelspec that is not
cellbox's (whose argv does not run "jupyter-kernel --language").

Every flag can also be set with a CELLBOX_* environment variable
(--sys-prefix is CELLBOX_SYS_PREFIX).
`)
}

// jupyterTarget is where install and uninstall work.
type jupyterTarget struct {
	user, sysPrefix bool
	prefix          string
}

func (t *jupyterTarget) flags(fs *flag.FlagSet) {
	fs.BoolVar(&t.user, "user", false, "Jupyter's user data dir (the default)")
	fs.StringVar(&t.prefix, "prefix", "", "`P`/share/jupyter/kernels")
	fs.BoolVar(&t.sysPrefix, "sys-prefix", false, "$VIRTUAL_ENV or $CONDA_PREFIX's share/jupyter/kernels")
}

// kernelsDir is the target's kernels directory.
func (t jupyterTarget) kernelsDir() (string, error) {
	n := 0
	for _, set := range []bool{t.user, t.prefix != "", t.sysPrefix} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return "", errors.New("--user, --prefix and --sys-prefix exclude one another")
	case t.prefix != "":
		p, err := filepath.Abs(t.prefix)
		if err != nil {
			return "", err
		}
		return filepath.Join(p, "share", "jupyter", "kernels"), nil
	case t.sysPrefix:
		p, ok := jupyter.SysPrefix()
		if !ok {
			return "", errors.New("--sys-prefix: neither VIRTUAL_ENV nor CONDA_PREFIX is set; activate the Python environment Jupyter runs in, or name it with --prefix")
		}
		return filepath.Join(p, "share", "jupyter", "kernels"), nil
	}
	return filepath.Join(jupyter.DataDir(), "kernels"), nil
}

// ownExecutable is the running binary's absolute path, symlinks resolved.
func ownExecutable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	return filepath.Abs(exe)
}

func runJupyterInstall(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("jupyter install", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { printJupyterHelp(stderr) }
	var target jupyterTarget
	target.flags(fs)
	var only listFlag
	fs.Var(&only, "language", "only these `LANGUAGES` (repeatable, or a comma list)")
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "cellbox jupyter install: "+format+"\n", a...)
		return code
	}
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return fail(2, "%v", err)
	}
	kdir, err := target.kernelsDir()
	if err != nil {
		return fail(2, "%v", err)
	}
	exe, err := ownExecutable()
	if err != nil {
		return fail(1, "find own executable: %v", err)
	}

	langs, err := installLanguages(kernel.DetectLanguages(ctx), only, stderr)
	if err != nil {
		return fail(1, "%v", err)
	}
	specs := make([]jupyter.KernelSpec, 0, len(langs))
	for _, l := range langs {
		spec := jupyter.CellboxKernelSpec(exe, l.ID, l.DisplayName)
		if err := replaceable(filepath.Join(kdir, spec.Name)); err != nil {
			return fail(1, "%v", err)
		}
		specs = append(specs, spec)
	}

	logos := jupyter.CellboxLogos()
	for _, spec := range specs {
		dir, err := jupyter.WriteKernelSpec(kdir, spec, logos)
		if err != nil {
			return fail(1, "%v", err)
		}
		fmt.Fprintln(stdout, dir)
	}
	warnUnseen(stderr, kdir, specs)
	return 0
}

// installLanguages are the languages to install: the available ones, or
// those named in only (each must be available). Unavailable languages
// that were not asked for are noted on stderr.
func installLanguages(all []kernel.Language, only []string, stderr io.Writer) ([]kernel.Language, error) {
	// A language id that cannot be part of a kernel name (jupyter:NAME) is
	// a Jupyter kernel already.
	var known []kernel.Language
	for _, l := range all {
		if jupyter.ValidKernelName(jupyter.CellboxKernelPrefix + l.ID) {
			known = append(known, l)
		}
	}
	if len(only) == 0 {
		var out []kernel.Language
		for _, l := range known {
			if l.Available {
				out = append(out, l)
			} else {
				fmt.Fprintf(stderr, "cellbox jupyter install: not installing %s: %s\n", l.ID, l.Reason)
			}
		}
		if len(out) == 0 {
			return nil, errors.New("no cellbox language is available on this host; cellbox doctor says why")
		}
		return out, nil
	}
	var out []kernel.Language
	for _, id := range only {
		i := slices.IndexFunc(known, func(l kernel.Language) bool { return l.ID == strings.ToLower(id) })
		switch {
		case i < 0:
			var ids []string
			for _, l := range known {
				ids = append(ids, l.ID)
			}
			return nil, fmt.Errorf("unknown language %q; cellbox has %s", id, strings.Join(ids, ", "))
		case !known[i].Available:
			return nil, fmt.Errorf("%s is not available on this host: %s", known[i].ID, known[i].Reason)
		case !slices.ContainsFunc(out, func(l kernel.Language) bool { return l.ID == known[i].ID }):
			out = append(out, known[i])
		}
	}
	return out, nil
}

// replaceable says whether install may replace dir: it does not exist, or
// holds a cellbox kernelspec.
func replaceable(dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	spec, err := jupyter.ReadKernelSpec(dir)
	if err != nil {
		return fmt.Errorf("refusing to replace %s, which is not a readable kernelspec (%v); remove it first", dir, err)
	}
	if !jupyter.IsCellboxKernelSpec(spec) {
		return fmt.Errorf("refusing to replace %s: it is not a cellbox kernelspec (its argv is %q); remove it first", dir, spec.Argv)
	}
	return nil
}

// warnUnseen warns when Jupyter will not find what install wrote: kdir is
// not on its path, or an earlier directory holds a spec of the same name.
func warnUnseen(stderr io.Writer, kdir string, written []jupyter.KernelSpec) {
	if !slices.Contains(jupyter.KernelDirs(), kdir) {
		fmt.Fprintf(stderr, "cellbox jupyter install: warning: %s is not on Jupyter's path here (cellbox jupyter list shows what Jupyter finds); Jupyter finds these kernelspecs when it runs in the Python environment there, or with JUPYTER_PATH=%s\n", kdir, filepath.Dir(kdir))
		return
	}
	found, _ := jupyter.FindKernelSpecs()
	for _, w := range written {
		for _, f := range found {
			if f.Name == w.Name && f.Dir != filepath.Join(kdir, w.Name) {
				fmt.Fprintf(stderr, "cellbox jupyter install: warning: Jupyter finds %s in %s first, not the one installed\n", w.Name, f.Dir)
			}
		}
	}
}

// jupyterListEntry is a kernelspec as `cellbox jupyter list --json` prints it.
type jupyterListEntry struct {
	Name        string `json:"name"`
	Dir         string `json:"dir"`
	DisplayName string `json:"displayName"`
	// Language is Jupyter's; CellboxLanguage the cellbox language a cellbox
	// kernelspec runs.
	Language        string   `json:"language"`
	Cellbox         bool     `json:"cellbox"`
	CellboxLanguage string   `json:"cellboxLanguage,omitempty"`
	Argv            []string `json:"argv"`
	// Binary is argv[0], found on PATH when not a path.
	Binary       string `json:"binary"`
	BinaryExists bool   `json:"binaryExists"`
}

type jupyterSkipped struct {
	Dir   string `json:"dir"`
	Error string `json:"error"`
}

type jupyterListReport struct {
	KernelSpecs []jupyterListEntry `json:"kernelspecs"`
	Skipped     []jupyterSkipped   `json:"skipped,omitempty"`
}

func runJupyterList(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("jupyter list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { printJupyterHelp(stderr) }
	all := fs.Bool("all", false, "every kernelspec, not only cellbox's")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "cellbox jupyter list: %v\n", err)
		return 2
	}
	specs, skipped := jupyter.FindKernelSpecs()
	rep := jupyterListReport{KernelSpecs: []jupyterListEntry{}}
	for _, s := range specs {
		e := jupyterListEntry{
			Name: s.Name, Dir: s.Dir, DisplayName: s.DisplayName, Language: s.Language,
			CellboxLanguage: jupyter.CellboxLanguage(s), Argv: s.Argv,
		}
		e.Cellbox = e.CellboxLanguage != ""
		if !e.Cellbox && !*all {
			continue
		}
		e.Binary, e.BinaryExists = findBinary(s.Argv[0])
		rep.KernelSpecs = append(rep.KernelSpecs, e)
	}
	for _, s := range skipped {
		rep.Skipped = append(rep.Skipped, jupyterSkipped{Dir: s.Dir, Error: s.Err.Error()})
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "cellbox jupyter list: %v\n", err)
			return 1
		}
		return 0
	}
	for _, s := range rep.Skipped {
		fmt.Fprintf(stderr, "cellbox jupyter list: skipped %s: %s\n", s.Dir, s.Error)
	}
	if len(rep.KernelSpecs) == 0 {
		if *all {
			fmt.Fprintln(stderr, "no kernelspecs on Jupyter's path")
		} else {
			fmt.Fprintln(stderr, "no cellbox kernelspecs on Jupyter's path; cellbox jupyter install writes them")
		}
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	header := "NAME\tLANGUAGE\tBINARY\tDIR"
	if *all {
		header = "NAME\tLANGUAGE\tCELLBOX\tBINARY\tDIR"
	}
	fmt.Fprintln(tw, header)
	missing := false
	for _, e := range rep.KernelSpecs {
		lang, bin := e.Language, "ok"
		if e.Cellbox {
			lang = e.CellboxLanguage
		}
		if !e.BinaryExists {
			bin = "missing"
			missing = missing || e.Cellbox
		}
		if *all {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Name, lang, yesNo(e.Cellbox), bin, e.Dir)
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Name, lang, bin, e.Dir)
		}
	}
	tw.Flush()
	if missing {
		fmt.Fprintln(stderr, "a cellbox kernelspec names a binary that is gone: run \"cellbox jupyter install\" with the binary you use now")
	}
	return 0
}

// findBinary is where argv0 runs from, and whether it is an executable
// file there: a path as it is, a bare name looked up on PATH.
func findBinary(argv0 string) (string, bool) {
	if !strings.ContainsRune(argv0, filepath.Separator) {
		p, err := exec.LookPath(argv0)
		if err != nil {
			return argv0, false
		}
		return p, true
	}
	fi, err := os.Stat(argv0)
	return argv0, err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

func runJupyterUninstall(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("jupyter uninstall", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { printJupyterHelp(stderr) }
	var target jupyterTarget
	target.flags(fs)
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "cellbox jupyter uninstall: "+format+"\n", a...)
		return code
	}
	// The CELLBOX_* variables, then flags and names in any order.
	if err := parseFlags(fs, nil); err != nil {
		return fail(2, "%v", err)
	}
	var names []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return fail(2, "%v", err)
		}
		if fs.NArg() == 0 {
			break
		}
		names = append(names, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	kdir, err := target.kernelsDir()
	if err != nil {
		return fail(2, "%v", err)
	}

	var dirs []string
	if len(names) == 0 {
		entries, err := os.ReadDir(kdir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fail(1, "%v", err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), jupyter.CellboxKernelPrefix) && jupyter.ValidKernelName(e.Name()) {
				dirs = append(dirs, filepath.Join(kdir, e.Name()))
			}
		}
		if len(dirs) == 0 {
			fmt.Fprintf(stderr, "no cellbox kernelspecs in %s\n", kdir)
			return 0
		}
	}
	for _, n := range names {
		if !jupyter.ValidKernelName(n) {
			return fail(2, "%q is not a kernel name", n)
		}
		dirs = append(dirs, filepath.Join(kdir, strings.ToLower(n)))
	}

	code := 0
	for _, dir := range dirs {
		if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
			code = fail(1, "no kernelspec %s in %s", filepath.Base(dir), kdir)
			continue
		}
		spec, err := jupyter.ReadKernelSpec(dir)
		if err != nil {
			code = fail(1, "refusing to remove %s, which is not a readable kernelspec (%v)", dir, err)
			continue
		}
		if !jupyter.IsCellboxKernelSpec(spec) {
			code = fail(1, "refusing to remove %s: it is not a cellbox kernelspec (its argv is %q)", dir, spec.Argv)
			continue
		}
		if err := jupyter.RemoveKernelSpec(dir); err != nil {
			code = fail(1, "%v", err)
			continue
		}
		fmt.Fprintf(stdout, "removed %s\n", dir)
	}
	return code
}
