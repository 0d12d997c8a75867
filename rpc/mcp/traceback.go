package mcp

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/cellbox-dev/cellbox/protocol"
)

// ErrorInfo is an error of the program (a run's status "error"): the
// exception, its traceback cleaned for reading, and where in the user's
// code it happened.
type ErrorInfo struct {
	Ename  string `json:"ename" jsonschema:"the exception's type, e.g. AssertionError"`
	Evalue string `json:"evalue" jsonschema:"the exception's message"`
	// Traceback is the traceback without terminal colours, with the
	// frames of library code left out (but the innermost) and paths
	// relative to the workspace.
	Traceback string `json:"traceback" jsonschema:"the traceback, frames of the user's code only, paths relative to the workspace"`
	Location  string `json:"location,omitempty" jsonschema:"file:line of the innermost frame in the user's code, e.g. src/calc.py:3"`
}

// workspaceDir is where the workspace is inside the sandbox.
const workspaceDir = "/workspace/"

var (
	// pyFrameRE is a Python traceback frame's first line.
	pyFrameRE = regexp.MustCompile(`^(\s*)File "([^"]+)", line (\d+)(?:, in (.*))?$`)
	// jsFrameRE is a V8 stack frame: "at fn (file:line:col)" or "at file:line:col".
	jsFrameRE = regexp.MustCompile(`^\s*at (?:.*\()?([^()\s]+):(\d+):(\d+)\)?\s*$`)
)

// cleanError turns the daemon's error of the user's code into an
// ErrorInfo. The traceback is bounded to max bytes (head and tail).
func cleanError(e *protocol.ExecuteError, max int) *ErrorInfo {
	if e == nil {
		return nil
	}
	var lines []string
	for _, t := range e.Traceback {
		lines = append(lines, strings.Split(strings.TrimRight(stripANSI(t), "\n"), "\n")...)
	}
	frames, loc := trimFrames(lines)
	tb, _ := headTail(strings.Join(frames, "\n"), max, "")
	return &ErrorInfo{Ename: e.Ename, Evalue: stripANSI(e.Evalue), Traceback: tb, Location: loc}
}

// frame is one stack frame found in a traceback: lines [start, end).
type frame struct {
	start, end int
	file       string
	line       int
	user       bool
}

// trimFrames drops the frames of library code from a traceback (Python's
// "File ..., line N" frames or V8's "at ... (file:line:col)"), keeping the
// innermost frame wherever it is, replaces each run of dropped frames with
// one line saying how many there were, makes workspace paths relative, and
// returns the location (file:line) of the innermost frame of the user's
// code.
func trimFrames(lines []string) (out []string, location string) {
	var frames []frame
	for i := 0; i < len(lines); i++ {
		if m := pyFrameRE.FindStringSubmatch(lines[i]); m != nil {
			n, _ := strconv.Atoi(m[3])
			f := frame{start: i, file: m[2], line: n}
			indent := len(m[1])
			j := i + 1
			// The source line and the caret line are indented deeper.
			for j < len(lines) && indentOf(lines[j]) > indent && !pyFrameRE.MatchString(lines[j]) {
				j++
			}
			f.end = j
			frames = append(frames, f)
			i = j - 1
			continue
		}
		if m := jsFrameRE.FindStringSubmatch(lines[i]); m != nil {
			n, _ := strconv.Atoi(m[2])
			frames = append(frames, frame{start: i, end: i + 1, file: m[1], line: n})
		}
	}
	if len(frames) == 0 {
		return relPaths(lines), ""
	}
	// Python lists the innermost frame last; V8 first.
	js := !pyFrameRE.MatchString(lines[frames[0].start])
	innermost := len(frames) - 1
	if js {
		innermost = 0
	}
	loc := -1
	for i := range frames {
		frames[i].user = userFile(frames[i].file)
		if frames[i].user && (!js || loc < 0) {
			loc = i
		}
	}
	if loc < 0 {
		// No frame of the user's: nothing to trim against.
		return relPaths(lines), ""
	}
	location = relPath(frames[loc].file) + ":" + strconv.Itoa(frames[loc].line)
	next, dropped, indent := 0, 0, ""
	flush := func() {
		switch {
		case dropped == 1:
			out = append(out, indent+"[1 frame of library code omitted]")
		case dropped > 1:
			out = append(out, indent+"["+strconv.Itoa(dropped)+" frames of library code omitted]")
		}
		dropped = 0
	}
	for i, f := range frames {
		if f.start > next {
			flush()
			out = append(out, relPaths(lines[next:f.start])...)
		}
		next = f.end
		if f.user || i == innermost {
			flush()
			out = append(out, relPaths(lines[f.start:f.end])...)
			continue
		}
		indent = lines[f.start][:indentOf(lines[f.start])]
		dropped++
	}
	flush()
	out = append(out, relPaths(lines[next:])...)
	return out, location
}

// userFile tells the user's code from libraries: a file of the workspace,
// a relative path, or a cell ("<cell-3>", "<stdin>", "<string>").
func userFile(file string) bool {
	switch {
	case strings.HasPrefix(file, workspaceDir):
		return !strings.Contains(file, "/node_modules/") && !strings.Contains(file, "/site-packages/")
	case strings.HasPrefix(file, "<"):
		return true
	case strings.HasPrefix(file, "node:"), strings.HasPrefix(file, "/"):
		return false
	}
	return !strings.Contains(file, "node_modules/") && !strings.Contains(file, "site-packages/")
}

// relPath makes a workspace path relative to the workspace.
func relPath(file string) string {
	return strings.TrimPrefix(file, workspaceDir)
}

// relPaths rewrites the workspace paths in lines as relative paths.
func relPaths(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.ReplaceAll(strings.ReplaceAll(l, `"`+workspaceDir, `"`), "("+workspaceDir, "(")
	}
	return out
}

func indentOf(s string) int {
	return len(s) - len(strings.TrimLeft(s, " \t"))
}
