package rpc

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cellbox-dev/cellbox/protocol"
)

// TestAppendPtyOutput: the hand-written pty/output encoding decodes to the
// same params, for terminal-like text with every control character.
func TestAppendPtyOutput(t *testing.T) {
	var all strings.Builder
	for c := range 0x80 {
		all.WriteByte(byte(c))
	}
	cases := []string{"", "$ ", "a\"b\\c", "\x1b[31mred\x1b[0m\r\n", "€😀\u2028\u2029\uFFFD\x7f", all.String()}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		b := make([]byte, rng.IntN(300))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		cases = append(cases, strings.ToValidUTF8(string(b), "\uFFFD"))
	}
	for _, data := range cases {
		p := protocol.PtyOutputParams{PtyID: "pty-0123abcd", Seq: 1 << 40, Data: data}
		b := appendPtyOutput(nil, &p)
		if !json.Valid(b) || !utf8.Valid(b) {
			t.Fatalf("invalid JSON for %q: %s", data, b)
		}
		var got protocol.PtyOutputParams
		if err := json.Unmarshal(b, &got); err != nil || got != p {
			t.Fatalf("%s decodes to %+v (%v), want %+v", b, got, err, p)
		}
		want, _ := marshal(p)
		if !strings.ContainsAny(data, "\u2028\u2029") && string(b) != string(want) {
			t.Fatalf("encoded %s, encoding/json says %s", b, want)
		}
	}
}
