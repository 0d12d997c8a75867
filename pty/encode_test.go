package pty

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

// feed runs the encoder over reads as the reader does and returns the
// chunks.
func feed(e *encoder, reads ...[]byte) []string {
	var out []string
	for _, r := range reads {
		if s := e.encode(r); s != "" {
			out = append(out, s)
		}
	}
	if s := e.flush(); s != "" {
		out = append(out, s)
	}
	return out
}

// TestEncoderUTF8: in utf8 the encoder is protocol.UTF8Chunker (tested
// there): a sequence split between reads is carried, and each byte that is
// not UTF-8 is one U+FFFD.
func TestEncoderUTF8(t *testing.T) {
	euro := []byte("€") // e2 82 ac
	reads := [][]byte{append([]byte("a\xff\xfe"), euro[:1]...), append(euro[1:], 'b'), euro[:2]}
	want := []string{"a\uFFFD\uFFFD", "€b", "\uFFFD\uFFFD"}
	if got := feed(&encoder{}, reads...); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("chunks %q, want %q", got, want)
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
