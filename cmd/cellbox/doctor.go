package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/cellbox-dev/cellbox/kernel"
	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// doctorReport is what `cellbox doctor` found; --json prints it.
type doctorReport struct {
	OK       bool              `json:"ok"`
	Verdict  string            `json:"verdict"`
	Problems []string          `json:"problems,omitempty"` // what makes OK false
	Warnings []string          `json:"warnings,omitempty"` // missing extras
	Sandbox  doctorSandbox     `json:"sandbox"`
	Langs    []kernel.Language `json:"languages"`
	// Jupyter are the installed kernelspecs, languages jupyter:NAME
	// (PROTOCOL.md §8); informational: none is needed.
	Jupyter     []kernel.Language `json:"jupyterKernels"`
	LangsTookMs float64           `json:"languagesTookMs"`
	StateDir    doctorStateDir    `json:"stateDir"`
	Project     doctorProject     `json:"project"`
	// Interpreters are the host's (initialize's capabilities.interpreters);
	// ProjectInterpreters the one a kernel of each language would run in a
	// workspace on the project (kernel/start without interpreter).
	Interpreters        []protocol.InterpreterInfo `json:"interpreters"`
	ProjectInterpreters []protocol.InterpreterInfo `json:"projectInterpreters"`
}

// doctorProject: files of the project the sandbox cannot write through its
// overlay, because it cannot map their owner (EOVERFLOW on copy-up).
type doctorProject struct {
	Path     string   `json:"path"`
	Unmapped int      `json:"unmappedFiles"`
	Examples []string `json:"examples,omitempty"`
	Scanned  int      `json:"scanLimit"`
	Note     string   `json:"note,omitempty"`
}

type doctorSandbox struct {
	Layers      []doctorLayer `json:"layers"`
	LandlockABI int           `json:"landlockABI,omitempty"`
	TookMs      float64       `json:"tookMs"`
	// Helper says what a sandbox's init and spawner run: "lean" (the
	// cellbox-sandbox helper the binary carries) or "self" (this binary,
	// re-executed), and HelperReason why not lean.
	Helper       string `json:"helper"`
	HelperReason string `json:"helperReason,omitempty"`
}

type doctorLayer struct {
	sandbox.Layer
	// Need is "required" (the default sandbox mode cannot start without
	// it), "extra" (used when available) or "info" (reported only).
	Need string `json:"need"`
}

type doctorStateDir struct {
	Path       string `json:"path"`
	Exists     bool   `json:"exists"`
	Writable   bool   `json:"writable"`
	Filesystem string `json:"filesystem,omitempty"`
	// OverlayUpper: the filesystem can hold overlay upper layers.
	OverlayUpper bool   `json:"overlayUpper"`
	Note         string `json:"note,omitempty"`
}

// doctorExtras are the layers used when available; every other layer
// that is not required is reported only.
var doctorExtras = []string{sandbox.LayerLandlock, sandbox.LayerCgroups}

// runDoctor is `cellbox doctor`: what this host can provide, what is
// missing and what to do about it. It exits 1 when something the defaults
// need is missing (a required sandbox layer, every language, a usable
// state dir), 0 otherwise, 2 on bad usage.
func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fset.SetOutput(stderr)
	asJSON := fset.Bool("json", false, "print the report as JSON")
	stateDir := fset.String("state-dir", defaultStateDir(), "the state `DIR` whose filesystem will hold workspaces")
	cwd, _ := os.Getwd()
	project := fset.String("project", cwd, "a project `DIR` to check for files the sandbox cannot write (default: the current directory)")
	if err := parseFlags(fset, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "cellbox doctor: %v\n", err)
		return 2
	}
	if abs, err := filepath.Abs(*stateDir); err == nil {
		*stateDir = abs
	}

	rep := diagnose(ctx, *stateDir)
	rep.Project = checkProject(*project)
	if rep.Project.Unmapped > 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%d file(s) of %s cannot be written in a sandbox", rep.Project.Unmapped, rep.Project.Path))
	}
	rep.Interpreters = kernel.HostInterpreters(rep.Langs)
	if *project != "" {
		rep.ProjectInterpreters = kernel.ProjectInterpreters(ctx, *project, []string{*stateDir}, rep.Langs)
		for _, in := range rep.ProjectInterpreters {
			if in.Warning != "" {
				rep.Warnings = append(rep.Warnings, in.Language+": "+in.Warning)
			}
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "cellbox doctor: %v\n", err)
			return 1
		}
	} else {
		printDoctor(stdout, rep)
	}
	if !rep.OK {
		return 1
	}
	return 0
}

// diagnose probes the sandbox layers, then the languages (one after the
// other, so that the probe's timing is its own), and checks the state dir.
func diagnose(ctx context.Context, stateDir string) doctorReport {
	probe := sandbox.Probe(ctx, sandbox.ProbeOptions{StateDir: stateDir})
	langStart := time.Now()
	langs := kernel.DetectLanguages(ctx)
	langTook := time.Since(langStart)

	rep := doctorReport{
		Sandbox:     doctorSandbox{LandlockABI: probe.LandlockABI, TookMs: float64(probe.Took.Microseconds()) / 1000, Helper: "lean"},
		Langs:       langs,
		LangsTookMs: float64(langTook.Microseconds()) / 1000,
		Jupyter:     kernel.JupyterLanguages(),
	}
	if lean, why := sandbox.HelperInfo(); !lean {
		rep.Sandbox.Helper, rep.Sandbox.HelperReason = "self", why
		rep.Warnings = append(rep.Warnings, "sandboxes re-execute the cellbox binary as their init and spawner ("+why+"): slower starts and more memory per sandbox")
	}
	required := sandbox.DefaultRequired()
	for _, l := range probe.Layers {
		need := "info"
		switch {
		case slices.Contains(required, l.Name):
			need = "required"
		case slices.Contains(doctorExtras, l.Name):
			need = "extra"
		}
		rep.Sandbox.Layers = append(rep.Sandbox.Layers, doctorLayer{Layer: l, Need: need})
		switch {
		case l.Available:
		case need == "required":
			rep.Problems = append(rep.Problems, fmt.Sprintf("sandbox layer %s is missing: %s", l.Name, l.Reason))
		case need == "extra":
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s is missing (%s)", l.Name, extraEffect(l.Name)))
		}
	}

	var avail, missing []string
	for _, l := range langs {
		if l.Available {
			avail = append(avail, l.ID)
		} else {
			missing = append(missing, l.ID)
		}
	}
	switch {
	case len(avail) == 0:
		rep.Problems = append(rep.Problems, "no language is available: install python3, node or bash")
	case len(missing) > 0:
		rep.Warnings = append(rep.Warnings, "languages unavailable: "+strings.Join(missing, ", "))
	}

	rep.StateDir = checkStateDir(stateDir, probe)
	if !rep.StateDir.Writable {
		rep.Problems = append(rep.Problems, "the state dir "+stateDir+" is not writable: "+rep.StateDir.Note)
	} else if !rep.StateDir.OverlayUpper {
		rep.Problems = append(rep.Problems, "the state dir "+stateDir+" cannot hold overlay upper layers: "+rep.StateDir.Note)
	}

	rep.OK = len(rep.Problems) == 0
	if rep.OK {
		rep.Verdict = fmt.Sprintf("ready: sandboxed %s kernels can run with the default sandbox (\"required\")", strings.Join(avail, ", "))
		if len(rep.Warnings) > 0 {
			rep.Verdict += "; " + strings.Join(rep.Warnings, "; ")
		}
	} else {
		rep.Verdict = fmt.Sprintf("NOT READY: %d problem(s) must be fixed first", len(rep.Problems))
	}
	return rep
}

// extraEffect says what a sandbox lacks without an extra layer.
func extraEffect(layer string) string {
	switch layer {
	case sandbox.LayerLandlock:
		return "sandboxes run without Landlock's file access rules"
	case sandbox.LayerCgroups:
		return "memory and process limits are rlimits per process and per sandbox user; the daemon adds up a sandbox's memory (memfd and /dev/shm included) every 250 ms and kills its programs past their memoryBytes, so a burst can pass the limit for that long (with delegated cgroups the kernel counts and enforces it between ticks)"
	}
	return "not used"
}

// checkStateDir says whether the state dir is (or can be made) writable and
// whether its filesystem can hold overlay upper layers.
func checkStateDir(dir string, probe sandbox.Report) doctorStateDir {
	s := doctorStateDir{Path: dir}
	fi, err := os.Stat(dir)
	switch {
	case err == nil && !fi.IsDir():
		s.Exists = true
		s.Note = "it is not a directory"
		return s
	case err == nil:
		s.Exists = true
		f, err := os.CreateTemp(dir, ".doctor-")
		if err != nil {
			s.Note = err.Error()
			return s
		}
		f.Close()
		os.Remove(f.Name())
		s.Writable = true
		s.Filesystem, _ = sandbox.FilesystemType(dir)
	case errors.Is(err, fs.ErrNotExist):
		// It is created on first use: check its nearest existing parent.
		parent := filepath.Dir(dir)
		for {
			if _, err := os.Stat(parent); err == nil || parent == filepath.Dir(parent) {
				break
			}
			parent = filepath.Dir(parent)
		}
		f, err := os.CreateTemp(parent, ".cellbox-doctor-")
		if err != nil {
			s.Note = fmt.Sprintf("it does not exist and cannot be created in %s: %v", parent, err)
			return s
		}
		f.Close()
		os.Remove(f.Name())
		s.Writable = true
		s.Filesystem, _ = sandbox.FilesystemType(parent)
		s.Note = fmt.Sprintf("does not exist yet; created on first use (%s is writable)", parent)
	default:
		s.Note = err.Error()
		return s
	}

	overlay, _ := probe.Layer(sandbox.LayerOverlay)
	switch {
	case probe.ScratchDir == dir && overlay.Available:
		s.OverlayUpper = true
		s.Note = joinNote(s.Note, "overlay with an upper layer here works (probed)")
	case probe.ScratchDir == dir:
		s.Note = joinNote(s.Note, "overlay with an upper layer here failed: "+overlay.Reason)
	case s.Filesystem == "overlay":
		s.Note = joinNote(s.Note, "overlayfs cannot hold an overlay's upper layer; use --state-dir on another filesystem (in a container, a volume)")
	case s.Filesystem != "" && s.Filesystem == probe.ScratchFS && overlay.Available:
		s.OverlayUpper = true
		s.Note = joinNote(s.Note, fmt.Sprintf("overlay upper layers work on %s (probed in %s, a filesystem of the same type)", s.Filesystem, probe.ScratchDir))
	default:
		s.OverlayUpper = true
		s.Note = joinNote(s.Note, fmt.Sprintf("%s is not overlayfs, so it can hold upper layers (overlay itself was probed in %s)", orUnknown(s.Filesystem), probe.ScratchDir))
	}
	if s.Filesystem == "tmpfs" {
		s.Note = joinNote(s.Note, "tmpfs loses workspaces and checkpoints on reboot")
	}
	return s
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func orUnknown(s string) string {
	if s == "" {
		return "its filesystem"
	}
	return s
}

// printDoctor writes the report as tables for a person.
func printDoctor(w io.Writer, rep doctorReport) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("cellbox doctor: cellbox %s on %s/%s, uid %d\n\n", cellboxVersion(), runtime.GOOS, runtime.GOARCH, os.Getuid())

	if rep.Sandbox.Helper == "lean" {
		p("Sandbox helper: cellbox-sandbox, the lean helper this binary carries (run from a sealed memfd)\n\n")
	} else {
		p("Sandbox helper: this binary, re-executed (%s)\n\n", rep.Sandbox.HelperReason)
	}
	p("Sandbox layers (probed in %.1f ms)\n", rep.Sandbox.TookMs)
	p("  %-18s %-9s %-8s %s\n", "LAYER", "NEEDED", "STATUS", "DETAIL")
	for _, l := range rep.Sandbox.Layers {
		if l.Available {
			p("  %-18s %-9s %-8s %s\n", l.Name, l.Need, "ok", l.Detail)
			continue
		}
		status := "MISSING"
		if l.Need == "info" {
			status = "no"
		}
		p("  %-18s %-9s %s\n", l.Name, l.Need, status)
		p("      why: %s\n", l.Reason)
		if l.Fix != "" {
			p("      fix: %s\n", l.Fix)
		}
	}

	p("\nLanguages (detected in %.1f ms)\n", rep.LangsTookMs)
	p("  %-11s %-8s %-9s %s\n", "LANGUAGE", "STATUS", "VERSION", "INTERPRETER")
	for _, l := range rep.Langs {
		if l.Available {
			p("  %-11s %-8s %-9s %s\n", l.ID, "ok", l.Version, l.Path)
		} else {
			p("  %-11s %-8s %-9s %s\n", l.ID, "MISSING", "-", l.Reason)
		}
	}

	p("\nInterpreters (the host's; a kernel/start interpreter may name any)\n")
	p("  %-11s %-8s %-9s %s\n", "LANGUAGE", "SOURCE", "VERSION", "PATH")
	for _, in := range rep.Interpreters {
		p("  %-11s %-8s %-9s %s\n", in.Language, in.Source, in.Version, in.Path)
	}

	p("\nJupyter kernels (run sandboxed as jupyter:NAME; cellbox jupyter list shows cellbox's own kernelspecs)\n")
	if len(rep.Jupyter) == 0 {
		p("  none installed\n")
	}
	for _, l := range rep.Jupyter {
		if l.Available {
			p("  %-20s %-8s %s (%s)\n", l.ID, "ok", l.DisplayName, l.Path)
		} else {
			p("  %-20s %-8s %s\n", l.ID, "MISSING", l.Reason)
		}
	}

	s := rep.StateDir
	p("\nState dir\n  %s\n", s.Path)
	fsName := s.Filesystem
	if fsName == "" {
		fsName = "unknown"
	}
	p("      writable: %s, filesystem: %s, overlay upper layers: %s\n", yesNo(s.Writable), fsName, yesNo(s.OverlayUpper))
	if s.Note != "" {
		p("      %s\n", s.Note)
	}

	if pr := rep.Project; pr.Path != "" {
		p("\nProject\n  %s\n", pr.Path)
		if pr.Unmapped == 0 {
			p("      every file (of the first %d) can be written through the overlay\n", pr.Scanned)
		} else {
			p("      %d file(s) have an owner the sandbox cannot map; writing them fails with EOVERFLOW:\n", pr.Unmapped)
			for _, e := range pr.Examples {
				p("        %s\n", e)
			}
			p("      %s\n", pr.Note)
		}
		if len(rep.ProjectInterpreters) > 0 {
			p("      its kernels run (kernel/start without interpreter):\n")
		}
		for _, in := range rep.ProjectInterpreters {
			line := fmt.Sprintf("        %-11s %-12s %-9s %s", in.Language, in.Source, in.Version, in.Path)
			if in.Prefix != "" {
				line += " (bound read-only: " + in.Prefix + ")"
			}
			p("%s\n", line)
			if in.Warning != "" {
				p("          warning: %s\n", in.Warning)
			}
		}
	}

	p("\n")
	for _, prob := range rep.Problems {
		p("problem: %s\n", prob)
	}
	p("Verdict: %s\n", rep.Verdict)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

const projectScanLimit = 20000

func checkProject(dir string) doctorProject {
	pr := doctorProject{Path: dir, Scanned: projectScanLimit}
	if dir == "" {
		return doctorProject{}
	}
	found, n, err := workspace.UnmappedOwners(dir, projectScanLimit, 5)
	if err != nil {
		pr.Note = err.Error()
		return pr
	}
	pr.Unmapped = n
	for _, f := range found {
		pr.Examples = append(pr.Examples, f.String())
	}
	if n > 0 {
		pr.Note = fmt.Sprintf("fix: chown them to uid %d (the user running cellbox), or run cellbox as root, which maps ids below 65536 and the project's owner", os.Geteuid())
	}
	return pr
}
