//go:build !linux

package sandbox

import (
	"context"
	"os"
)

func probe(ctx context.Context, opts ProbeOptions) Report {
	r := Report{ScratchDir: os.TempDir()}
	for _, name := range LayerNames() {
		r.Layers = append(r.Layers, Layer{
			Name:   name,
			Reason: ErrLinuxOnly.Error(),
			Fix:    "run cellbox on Linux (5.11 or newer), for example in a Linux VM",
		})
	}
	return r
}

// FilesystemType returns ErrLinuxOnly.
func FilesystemType(path string) (string, error) {
	return "", ErrLinuxOnly
}
