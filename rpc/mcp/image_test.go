package mcp

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"testing"
)

func encodePNG(t *testing.T, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestFitImage(t *testing.T) {
	gradient := func(w, h int) image.Image {
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				img.Set(x, y, color.RGBA{uint8(x), uint8(y), 128, 255})
			}
		}
		return img
	}
	noise := func(w, h int) image.Image {
		r := rand.New(rand.NewPCG(1, 2))
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		for i := range img.Pix {
			img.Pix[i] = uint8(r.IntN(256))
		}
		return img
	}
	for _, tt := range []struct {
		name          string
		img           image.Image
		wantW, wantH  int
		wantMime      string
		wantUnchanged bool
	}{
		{"small stays as it is", gradient(200, 100), 200, 100, "image/png", true},
		{"wide is scaled to 1024", gradient(3000, 1000), 1024, 341, "image/png", false},
		{"tall is scaled to 1024", gradient(500, 2048), 250, 1024, "image/png", false},
		{"noise over the byte cap becomes JPEG (halved: not even q50 fits)", noise(1024, 1024), 512, 512, "image/jpeg", false},
		{"smaller noise fits as JPEG at full size", noise(400, 400), 400, 400, "image/jpeg", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data := encodePNG(t, tt.img)
			f, err := fitImage(data, imageMaxSide, imageMaxBytes)
			if err != nil {
				t.Fatal(err)
			}
			if f.width != tt.wantW || f.height != tt.wantH || f.mime != tt.wantMime {
				t.Fatalf("fitted %dx%d %s, want %dx%d %s", f.width, f.height, f.mime, tt.wantW, tt.wantH, tt.wantMime)
			}
			if len(f.data) > imageMaxBytes {
				t.Fatalf("%d bytes, over the %d-byte cap", len(f.data), imageMaxBytes)
			}
			if tt.wantUnchanged != bytes.Equal(f.data, data) {
				t.Fatalf("unchanged = %v, want %v", bytes.Equal(f.data, data), tt.wantUnchanged)
			}
			b := tt.img.Bounds()
			if f.origW != b.Dx() || f.origH != b.Dy() {
				t.Fatalf("original %dx%d, want %dx%d", f.origW, f.origH, b.Dx(), b.Dy())
			}
			cfg, _, err := image.DecodeConfig(bytes.NewReader(f.data))
			if err != nil || cfg.Width != f.width || cfg.Height != f.height {
				t.Fatalf("the fitted data decodes as %+v, %v", cfg, err)
			}
		})
	}
	t.Run("not an image", func(t *testing.T) {
		if _, err := fitImage([]byte("<svg/>"), imageMaxSide, imageMaxBytes); err == nil {
			t.Fatal("no error")
		}
	})
	t.Run("a header claiming a huge image", func(t *testing.T) {
		data := encodePNG(t, gradient(10, 10))
		// IHDR width at offset 16: claim 100000x10 pixels... times 100000.
		copy(data[16:24], []byte{0, 1, 0x86, 0xa0, 0, 1, 0x86, 0xa0})
		if _, err := fitImage(data, imageMaxSide, imageMaxBytes); err == nil {
			t.Fatal("a 10-gigapixel header was decoded")
		}
	})
}

// BenchmarkFitImage: a 3000x2000 photo-like PNG scaled to 1024 px.
func BenchmarkFitImage(b *testing.B) {
	img := image.NewRGBA(image.Rect(0, 0, 3000, 2000))
	r := rand.New(rand.NewPCG(3, 4))
	for y := 0; y < 2000; y++ {
		for x := 0; x < 3000; x++ {
			img.Set(x, y, color.RGBA{uint8(x / 12), uint8(y / 8), uint8(r.IntN(32)), 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.ResetTimer()
	for b.Loop() {
		if _, err := fitImage(data, imageMaxSide, imageMaxBytes); err != nil {
			b.Fatal(err)
		}
	}
}
