package workspace

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	udiff "github.com/aymanbagabas/go-udiff"
)

// Diff limits (PROTOCOL.md §3 workspace/diff). A file over maxDiffInput
// on either side is not diffed: its diff is the header and a marker line.
// A diff longer than maxDiffOutput is cut at a line end and ends with a
// marker line. Once a response holds maxDiffTotal bytes of diffs, the
// files after it carry only the marker (ask for them with paths). Marker
// lines start with "\ " as "\ No newline at end of file" does, so unified
// diff readers pass over them.
const (
	maxDiffInput  = 8 << 20
	maxDiffOutput = 1 << 20
	maxDiffTotal  = 32 << 20
	diffContext   = 3
)

// isBinary: head (the first bytes of a file; full says it filled the
// binaryPrefix, so a character may be cut at its end) holds a NUL byte or
// is not UTF-8.
func isBinary(head []byte, full bool) bool {
	if bytes.IndexByte(head, 0) >= 0 {
		return true
	}
	if full {
		// Drop a trailing character cut by the prefix's end.
		for i := 1; i <= utf8.UTFMax && i <= len(head); i++ {
			if utf8.RuneStart(head[len(head)-i]) {
				if !utf8.FullRune(head[len(head)-i:]) {
					head = head[:len(head)-i]
				}
				break
			}
		}
	}
	return !utf8.Valid(head)
}

// diffSide is one side of a diff: a file's text, or nothing (added,
// deleted).
type diffSide struct {
	exists bool
	text   []byte
	mode   uint32 // st_mode: type and permission bits
	size   int64  // the file's size, when text was not read (over the cap)
}

// unifiedDiff is the unified diff of old against new for path, with git's
// "old mode"/"new mode" lines when the mode changed, and the markers of the
// limits above.
func unifiedDiff(p string, old, new diffSide) string {
	var b strings.Builder
	if old.exists && new.exists && old.mode != new.mode {
		fmt.Fprintf(&b, "old mode %06o\nnew mode %06o\n", old.mode, new.mode)
	}
	oldLabel, newLabel := quotePath("a/"+p), quotePath("b/"+p)
	if !old.exists {
		oldLabel = "/dev/null"
	}
	if !new.exists {
		newLabel = "/dev/null"
	}
	if big := max(old.size, new.size); big > maxDiffInput {
		fmt.Fprintf(&b, "--- %s\n+++ %s\n\\ cellbox: diff omitted: the file is %d bytes, over the %d-byte diff limit\n", oldLabel, newLabel, big, maxDiffInput)
		return b.String()
	}
	// udiff.Unified would log.Fatal on an internal error; ToUnified returns it.
	d, err := udiff.ToUnified(oldLabel, newLabel, string(old.text), udiff.Lines(string(old.text), string(new.text)), diffContext)
	if err != nil {
		fmt.Fprintf(&b, "--- %s\n+++ %s\n\\ cellbox: no diff: %v\n", oldLabel, newLabel, err)
		return b.String()
	}
	if d == "" {
		return b.String()
	}
	if len(d) > maxDiffOutput {
		cut := strings.LastIndexByte(d[:maxDiffOutput], '\n') + 1
		d = d[:cut] + fmt.Sprintf("\\ cellbox: diff truncated at %d of %d bytes (limit %d)\n", cut, len(d), maxDiffOutput)
	}
	b.WriteString(d)
	return b.String()
}

// omittedDiff is the diff of a file left out because the response is full.
func omittedDiff(p string) string {
	return fmt.Sprintf("--- %s\n+++ %s\n\\ cellbox: diff omitted: this response already holds %d bytes of diffs; ask for this path alone\n", quotePath("a/"+p), quotePath("b/"+p), maxDiffTotal)
}
