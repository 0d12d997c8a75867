package workspace

import (
	"testing"
	"unicode/utf8"
)

// FuzzWireName: every name survives wireName and fromWire byte for byte,
// and what wireName makes is valid UTF-8 (a JSON string carries it as it
// is); a UTF-8 name that does not begin with `"` is carried unchanged.
func FuzzWireName(f *testing.F) {
	for _, s := range []string{"a.txt", "bad\xffname", `"q".txt`, `"`, `""`, `"\377"`, "caf\xe9/\n+++ b/x", "dir/\"x\"", "é/ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w := wireName(s)
		if !utf8.ValidString(w) {
			t.Fatalf("wireName(%q) = %q, not UTF-8", s, w)
		}
		if got := fromWire(w); got != s {
			t.Fatalf("fromWire(wireName(%q)) = %q", s, got)
		}
		if utf8.ValidString(s) && (s == "" || s[0] != '"') && w != s {
			t.Fatalf("wireName(%q) = %q, want it unchanged", s, w)
		}
	})
}
