package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	_ "image/gif" // decoded for read_file
	"image/jpeg"
	"image/png"

	"golang.org/x/image/draw"
)

// Images go to the model as MCP image content, fitted: at most maxSide
// pixels on the long side and at most maxBytes encoded. The full-size image
// stays available as a resource.
const (
	imageMaxSide  = 1024
	imageMaxBytes = 256 << 10
	// imageMaxPixels bounds what is decoded at all (a PNG header can claim
	// any size): 64 megapixels.
	imageMaxPixels = 64 << 20
)

// fittedImage is an image as sent to the model.
type fittedImage struct {
	data          []byte
	mime          string
	width, height int // of data
	origW, origH  int // of the original
}

// fitImage decodes a PNG, JPEG or GIF and returns it within maxSide pixels
// on its long side and maxBytes: the original when it already fits (PNG or
// JPEG), else scaled down (Catmull-Rom) and encoded as PNG, or as JPEG at a
// falling quality when the PNG is too big, halving the size again when
// even that does not fit. A 3000x2000 photo takes about 0.5 s
// (decoding and scaling are most of it).
func fitImage(data []byte, maxSide, maxBytes int) (*fittedImage, error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("decode image: %w", err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > imageMaxPixels {
		return nil, fmt.Errorf("decode image: %dx%d pixels is over the %d-pixel bound", cfg.Width, cfg.Height, imageMaxPixels)
	}
	f := &fittedImage{origW: cfg.Width, origH: cfg.Height}
	if (format == "png" || format == "jpeg") && max(cfg.Width, cfg.Height) <= maxSide && len(data) <= maxBytes {
		f.data, f.mime, f.width, f.height = data, "image/"+format, cfg.Width, cfg.Height
		return f, nil
	}
	src, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("decode %s image: %w", format, err)
	}
	side := min(maxSide, max(cfg.Width, cfg.Height))
	for side >= 16 {
		w, h := scaledSize(cfg.Width, cfg.Height, side)
		dst := image.NewRGBA(image.Rect(0, 0, w, h))
		draw.CatmullRom.Scale(dst, dst.Bounds(), src, src.Bounds(), draw.Src, nil)
		// PNG fast first (a plot's flat colours compress well); harder only
		// when that comes close, as more effort gains a few percent at many
		// times the cost; else JPEG (a photo).
		var buf bytes.Buffer
		for _, level := range []png.CompressionLevel{png.BestSpeed, png.DefaultCompression} {
			buf.Reset()
			if err := (&png.Encoder{CompressionLevel: level}).Encode(&buf, dst); err != nil {
				return nil, fmt.Errorf("encode png: %w", err)
			}
			if buf.Len() <= maxBytes {
				f.data, f.mime, f.width, f.height = buf.Bytes(), "image/png", w, h
				return f, nil
			}
			if buf.Len() > maxBytes*3/2 {
				break
			}
		}
		// JPEG has no alpha: flatten onto white.
		flat := image.NewRGBA(dst.Bounds())
		draw.Draw(flat, flat.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
		draw.Draw(flat, flat.Bounds(), dst, image.Point{}, draw.Over)
		for _, q := range []int{85, 70, 50} {
			buf.Reset()
			if err := jpeg.Encode(&buf, flat, &jpeg.Options{Quality: q}); err != nil {
				return nil, fmt.Errorf("encode jpeg: %w", err)
			}
			if buf.Len() <= maxBytes {
				f.data, f.mime, f.width, f.height = buf.Bytes(), "image/jpeg", w, h
				return f, nil
			}
		}
		side /= 2
	}
	return nil, errors.New("the image does not fit the size bound even at 16 pixels")
}

// scaledSize is w×h scaled so that its long side is side, at least 1×1.
func scaledSize(w, h, side int) (int, int) {
	if w >= h {
		return side, max(1, int(int64(h)*int64(side)/int64(w)))
	}
	return max(1, int(int64(w)*int64(side)/int64(h))), side
}
