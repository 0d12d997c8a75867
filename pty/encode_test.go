package pty

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
	"unicode/utf8"
)

// feed runs the encoder over reads as the reader does (tail in front of
// each read) and returns the chunks.
func feed(e *encoder, reads ...[]byte) []string {
	var out []string
	for _, r := range reads {
		buf := make([]byte, tailRoom+len(r))
		copy(buf[tailRoom:], r)
		start := e.prepend(buf)
		if s := e.encode(buf[start:]); s != "" {
			out = append(out, s)
		}
	}
	if s := e.flush(); s != "" {
		out = append(out, s)
	}
	return out
}

func TestEncoderUTF8(t *testing.T) {
	euro := []byte("€")  // e2 82 ac
	smile := []byte("😀") // f0 9f 98 80
	tests := []struct {
		name  string
		reads [][]byte
		want  []string
	}{
		{"ascii", [][]byte{[]byte("hello"), []byte(" world")}, []string{"hello", " world"}},
		{"three-byte split 1+2", [][]byte{append([]byte("a"), euro[:1]...), append(euro[1:], 'b')}, []string{"a", "€b"}},
		{"three-byte split 2+1", [][]byte{append([]byte("a"), euro[:2]...), euro[2:]}, []string{"a", "€"}},
		{"four-byte over three reads", [][]byte{smile[:1], smile[1:3], smile[3:]}, []string{"😀"}},
		{"invalid byte", [][]byte{[]byte("a\xffb")}, []string{"a\uFFFDb"}},
		{"each invalid byte", [][]byte{[]byte("\xc0\xafz")}, []string{"\uFFFD\uFFFDz"}},
		{"cut short at the end", [][]byte{append([]byte("x"), smile[:2]...)}, []string{"x", "\uFFFD\uFFFD"}},
		{"lone lead byte then ascii", [][]byte{euro[:1], []byte("q")}, []string{"\uFFFDq"}},
		{"surrogate is invalid", [][]byte{[]byte("\xed\xa0\x80")}, []string{"\uFFFD\uFFFD\uFFFD"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := feed(&encoder{}, tt.reads...)
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

// TestEncoderUTF8EverySplit cuts a text of 1- to 4-byte characters at every
// position: the chunks are valid and join to the text.
func TestEncoderUTF8EverySplit(t *testing.T) {
	text := []byte("aé€😀b€😀é")
	for i := 0; i <= len(text); i++ {
		for j := i; j <= len(text); j++ {
			got := feed(&encoder{}, text[:i], text[i:j], text[j:])
			if strings.Join(got, "") != string(text) {
				t.Fatalf("split at %d,%d: %q", i, j, got)
			}
		}
	}
}

func TestEncoderBase64(t *testing.T) {
	raw := []byte{0xff, 0x00, 0xe2, 0x82}
	got := feed(&encoder{base64: true}, raw[:3], raw[3:])
	var dec []byte
	for _, c := range got {
		b, err := base64.StdEncoding.DecodeString(c)
		if err != nil {
			t.Fatal(err)
		}
		dec = append(dec, b...)
	}
	if !bytes.Equal(dec, raw) || len(got) != 2 {
		t.Fatalf("base64 chunks %q decode to %x, want %x in 2 chunks", got, dec, raw)
	}
}

func TestRing(t *testing.T) {
	r := newRing(3 * cost("xxxx"))
	for seq := int64(1); seq <= 5; seq++ {
		r.push(chunk{seq: seq, data: "xxxx"})
	}
	if r.oldest() != 3 {
		t.Fatalf("oldest %d, want 3", r.oldest())
	}
	seqs := func(cs []chunk) (out []int64) {
		for _, c := range cs {
			out = append(out, c.seq)
		}
		return out
	}
	for _, tt := range []struct {
		from int64
		want []int64
	}{{1, []int64{3, 4, 5}}, {4, []int64{4, 5}}, {5, []int64{5}}, {6, nil}, {99, nil}} {
		if got := seqs(r.since(tt.from)); len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) {
			t.Errorf("since(%d) = %v, want %v", tt.from, got, tt.want)
		}
	}
	// A chunk bigger than the ring is not kept; the ring stays consistent.
	r.push(chunk{seq: 6, data: strings.Repeat("y", 1000)})
	if r.oldest() != 7 || len(r.since(1)) != 0 || r.bytes != 0 {
		t.Fatalf("after a huge chunk: oldest %d, held %d, bytes %d", r.oldest(), len(r.since(1)), r.bytes)
	}
	for seq := int64(7); seq < 1000; seq++ {
		r.push(chunk{seq: seq, data: "xxxx"})
	}
	if got := seqs(r.since(0)); len(got) != 3 || got[0] != 997 || len(r.chunks) > 200 {
		t.Fatalf("after many pushes: %v (slice len %d)", got, len(r.chunks))
	}
}
