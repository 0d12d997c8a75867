package protocol

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// chunks runs a chunker over reads, as a terminal's or a kernel's reader
// does, and returns the chunks it sends, the flush at the end included.
func chunks(reads ...[]byte) []string {
	var c UTF8Chunker
	var out []string
	for _, r := range reads {
		if s := c.Chunk(r); s != "" {
			out = append(out, s)
		}
	}
	if s := c.Flush(); s != "" {
		out = append(out, s)
	}
	return out
}

func TestUTF8Chunker(t *testing.T) {
	euro := []byte("€")  // e2 82 ac
	smile := []byte("😀") // f0 9f 98 80
	b := func(s string) []byte { return []byte(s) }
	cat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	tests := []struct {
		name  string
		reads [][]byte
		want  []string
	}{
		{"valid", [][]byte{b("a€😀")}, []string{"a€😀"}},
		{"ascii", [][]byte{b("hello"), b(" world")}, []string{"hello", " world"}},
		{"invalid byte", [][]byte{b("a\xffb")}, []string{"a\uFFFDb"}},
		// One U+FFFD per byte, in a kernel as in a terminal.
		{"a run of invalid bytes", [][]byte{b("a\xff\xfe\xfdb")}, []string{"a\uFFFD\uFFFD\uFFFDb"}},
		{"overlong", [][]byte{b("\xc0\xafz")}, []string{"\uFFFD\uFFFDz"}},
		{"surrogate", [][]byte{b("\xed\xa0\x80")}, []string{"\uFFFD\uFFFD\uFFFD"}},
		{"an encoded U+FFFD is kept", [][]byte{b("x\uFFFDy")}, []string{"x\uFFFDy"}},
		{"split 1+2", [][]byte{cat(b("a"), euro[:1]), cat(euro[1:], b("b"))}, []string{"a", "€b"}},
		{"split 2+1", [][]byte{cat(b("a"), euro[:2]), euro[2:]}, []string{"a", "€"}},
		{"four bytes over three reads", [][]byte{smile[:1], smile[1:3], smile[3:]}, []string{"😀"}},
		{"four bytes over four reads", [][]byte{smile[:1], smile[1:2], smile[2:3], smile[3:]}, []string{"😀"}},
		{"an empty read keeps the carry", [][]byte{euro[:1], nil, euro[1:]}, []string{"€"}},
		{"not completed", [][]byte{euro[:2], b("q")}, []string{"\uFFFD\uFFFDq"}},
		{"lone lead byte then ascii", [][]byte{euro[:1], b("q")}, []string{"\uFFFDq"}},
		{"cut short at the end", [][]byte{cat(b("x"), smile[:2])}, []string{"x", "\uFFFD\uFFFD"}},
		{"not completed, then a sequence", [][]byte{smile[:2], euro}, []string{"\uFFFD\uFFFD€"}},
		{"ends inside a sequence", [][]byte{cat(b("x"), smile[:3])}, []string{"x", "\uFFFD\uFFFD\uFFFD"}},
		{"an invalid byte at the end is not carried", [][]byte{b("a\xff"), b("b")}, []string{"a\uFFFD", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := chunks(tt.reads...)
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("chunks %q, want %q", got, tt.want)
			}
			for _, c := range got {
				if !utf8.ValidString(c) {
					t.Fatalf("chunk %q is not valid UTF-8", c)
				}
			}
		})
	}
}

// TestUTF8ChunkerEverySplit cuts texts at every pair of positions: the
// chunks are valid UTF-8 and join to what the whole text gives in one read
// (the text itself when it is valid).
func TestUTF8ChunkerEverySplit(t *testing.T) {
	for _, text := range []string{"aé€😀b€😀é", "a\xff\xfe€\xe2\x82😀\xf0\x9f\x98z\xed\xa0\x80"} {
		whole := strings.Join(chunks([]byte(text)), "")
		if utf8.ValidString(text) && whole != text {
			t.Fatalf("%q in one read: %q", text, whole)
		}
		raw := []byte(text)
		for i := 0; i <= len(raw); i++ {
			for j := i; j <= len(raw); j++ {
				got := chunks(raw[:i], raw[i:j], raw[j:])
				for _, c := range got {
					if c == "" || !utf8.ValidString(c) {
						t.Fatalf("%q split at %d,%d: chunk %q", text, i, j, c)
					}
				}
				if strings.Join(got, "") != whole {
					t.Fatalf("%q split at %d,%d: %q, want %q", text, i, j, got, whole)
				}
			}
		}
	}
}
