package mcp

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func numbered(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %04d\n", i)
	}
	return b.String()
}

func TestHeadTail(t *testing.T) {
	t.Run("short text is kept", func(t *testing.T) {
		in := numbered(10)
		out, n := headTail(in, 1000, "cellbox://x")
		if out != in || n != 0 {
			t.Fatalf("headTail = %q, %d", out, n)
		}
	})
	t.Run("long text keeps whole lines of head and tail", func(t *testing.T) {
		in := numbered(1000) // 10 bytes a line
		out, n := headTail(in, 1000, "cellbox://executions/x/stdout")
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if lines[0] != "line 0001" || lines[len(lines)-1] != "line 1000" {
			t.Fatalf("head %q, tail %q", lines[0], lines[len(lines)-1])
		}
		var note string
		kept := 0
		for _, l := range lines {
			switch {
			case strings.HasPrefix(l, "…"):
				note = l
			case strings.HasPrefix(l, "line "):
				kept++
			default:
				t.Fatalf("a cut line: %q", l)
			}
		}
		want := fmt.Sprintf("… %d lines omitted (%d bytes); full output: cellbox://executions/x/stdout", n, n*10)
		if note != want {
			t.Fatalf("note %q, want %q", note, want)
		}
		if kept+n != 1000 {
			t.Fatalf("kept %d lines and omitted %d, want 1000 in all", kept, n)
		}
		if len(out) > 1000+len(note)+2 {
			t.Fatalf("%d bytes out of a 1000-byte bound", len(out))
		}
	})
	t.Run("one long line is cut on UTF-8 boundaries", func(t *testing.T) {
		in := strings.Repeat("é", 2000) // 4000 bytes, no newline
		out, n := headTail(in, 1001, "")
		if !utf8.ValidString(out) || n != 1 || len(out) > 1100 {
			t.Fatalf("headTail = %d bytes (valid %v), %d lines omitted", len(out), utf8.ValidString(out), n)
		}
		if !strings.Contains(out, "… 1 line omitted") || strings.Contains(out, "full output") {
			t.Fatalf("note in %q", out[400:700])
		}
	})
}

func TestCollapseCRAndANSI(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"10%\r50%\r100%\ndone\n", "100%\ndone\n"},
		{"a\r\nb\r\n", "a\nb\n"},
		{"plain\n", "plain\n"},
	} {
		if got := collapseCR(tt.in); got != tt.want {
			t.Errorf("collapseCR(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	for _, tt := range []struct{ in, want string }{
		{"\x1b[31mred\x1b[0m text", "red text"},
		{"\x1b[1;32m===\x1b[K done", "=== done"},
		{"\x1b]0;title\x07after", "after"},
		{"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"},
		{"no escapes", "no escapes"},
	} {
		if got := stripANSI(tt.in); got != tt.want {
			t.Errorf("stripANSI(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := lastLine("step 1\nstep 2\r\x1b[32mstep 3\x1b[0m\n\n", 100); got != "step 3" {
		t.Errorf("lastLine = %q, want step 3", got)
	}
}

func TestCaptureWindow(t *testing.T) {
	c := newCapture(100, 20)
	c.write(strings.Repeat("a", 60))
	if text, gap := c.window(0); text != strings.Repeat("a", 60) || gap != 0 {
		t.Fatalf("window(0) = %q, %d", text, gap)
	}
	c.write(strings.Repeat("b", 60)) // head full at 100: 20 b's go past it
	if text, gap := c.window(50); text != strings.Repeat("a", 10)+strings.Repeat("b", 60) || gap != 0 {
		t.Fatalf("window(50) = %q, %d", text, gap)
	}
	for i := 0; i < 10; i++ {
		c.write(fmt.Sprintf("%09d\n", i)) // 100 bytes more
	}
	text, gap := c.window(0)
	if gap != 120+100-100-int64(len(c.tail)) || !strings.HasPrefix(text, strings.Repeat("a", 60)) || !strings.HasSuffix(text, "000000009\n") {
		t.Fatalf("window(0) = %q, gap %d (tail %d)", text, gap, len(c.tail))
	}
	if len(c.tail) > 40 {
		t.Fatalf("tail grew to %d bytes", len(c.tail))
	}
	if w := c.whole(); !strings.Contains(w, "not kept") || !strings.HasSuffix(w, "000000009\n") {
		t.Fatalf("whole = %q", w)
	}
	if text, gap := c.window(c.total); text != "" || gap != 0 {
		t.Fatalf("window(total) = %q, %d", text, gap)
	}
}

func TestShowStream(t *testing.T) {
	c := newCapture(streamKeepBytes, streamTailBytes)
	c.write(numbered(5000)) // 50 KB
	text, shown := showStream(&c, 0, "cellbox://executions/e/stdout")
	if shown != c.total || len(text) > streamShowBytes+200 {
		t.Fatalf("shown %d of %d, %d bytes", shown, c.total, len(text))
	}
	if !strings.HasPrefix(text, "line 0001\n") || !strings.HasSuffix(text, "line 5000\n") || !strings.Contains(text, "full output: cellbox://executions/e/stdout") {
		t.Fatalf("showStream = %q", text)
	}
	c.write("more\n")
	if text, _ := showStream(&c, shown, ""); text != "more\n" {
		t.Fatalf("since the last look: %q", text)
	}
}
