package mcp

import (
	"strings"
	"testing"
)

func TestApplyEdits(t *testing.T) {
	src := "def add(a, b):\n    return a - b\n\ndef sub(a, b):\n    return a - b\n"
	for _, tt := range []struct {
		name    string
		edits   []Edit
		want    string
		wantErr string
	}{
		{"one edit", []Edit{{Search: "def add(a, b):\n    return a - b", Replace: "def add(a, b):\n    return a + b"}},
			"def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n", ""},
		{"in order, each on the result of the one before", []Edit{{Search: "add", Replace: "plus"}, {Search: "def plus(a, b):\n    return a - b", Replace: "def plus(a, b):\n    return a + b"}},
			"def plus(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n", ""},
		{"not found", []Edit{{Search: "add", Replace: "x"}, {Search: "mul", Replace: "y"}}, "", "edit 2: search text not found"},
		{"twice", []Edit{{Search: "return a - b", Replace: "x"}}, "", "edit 1: search text occurs 2 times"},
		{"whitespace counts", []Edit{{Search: "return  a - b", Replace: "x"}}, "", "not found"},
		{"empty search", []Edit{{Search: "", Replace: "x"}}, "", "edit 1: search is empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := applyEdits(src, tt.edits)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("applyEdits = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestLineRange(t *testing.T) {
	text := numbered(100) // "line 0001\n" ... 10 bytes a line
	for _, tt := range []struct {
		name               string
		start, end, max    int
		first, last, total int
		head, noteHas      string
	}{
		{"whole", 0, 0, 1 << 20, 1, 100, 100, "line 0001\n", ""},
		{"a range", 10, 12, 1 << 20, 10, 12, 100, "line 0010\nline 0011\nline 0012\n", ""},
		{"end past the file", 99, 500, 1 << 20, 99, 100, 100, "line 0099\nline 0100\n", ""},
		{"bounded", 1, 0, 55, 1, 5, 100, "line 0001\n", "read on with startLine: 6"},
		{"past the end", 200, 0, 1 << 20, 200, 199, 100, "", "the file has 100 lines"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, first, last, total, note := lineRange(text, tt.start, tt.end, tt.max)
			if first != tt.first || last != tt.last || total != tt.total || !strings.HasPrefix(out, tt.head) {
				t.Fatalf("lineRange = %q, %d-%d of %d", out, first, last, total)
			}
			if tt.name == "a range" && out != tt.head {
				t.Fatalf("lineRange = %q", out)
			}
			if tt.noteHas == "" && note != "" || !strings.Contains(note, tt.noteHas) {
				t.Fatalf("note %q, want %q", note, tt.noteHas)
			}
		})
	}
	if out, _, _, total, _ := lineRange("no newline at end", 0, 0, 100); out != "no newline at end" || total != 1 {
		t.Fatalf("lineRange without a final newline = %q, %d lines", out, total)
	}
}
