package workspace

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Export (PROTOCOL.md §11 workspace/export): the workspace as its sandbox
// sees it, with its /env's packages, written as a runnable bundle by
// workspace/export (export_linux.go feeds it the view and /env).

// ExportProgress is told of each step of an export.
type ExportProgress func(msg string)

// maxExportPath bounds dest and base.
const maxExportPath = 4096

// CheckExport checks workspace/export's params, naming the field at
// fault.
func CheckExport(p protocol.WorkspaceExportParams) error {
	checkPath := func(field, v string) error {
		switch {
		case v == "":
			return fmt.Errorf("%w: field %q is empty", ErrInvalid, field)
		case len(v) > maxExportPath || strings.IndexByte(v, 0) >= 0:
			return fmt.Errorf("%w: field %q is longer than %d bytes or holds a NUL byte", ErrInvalid, field, maxExportPath)
		case !filepath.IsAbs(v):
			return fmt.Errorf("%w: field %q must be an absolute host path, got %q", ErrInvalid, field, cut(v))
		}
		return nil
	}
	if err := checkPath("dest", p.Dest); err != nil {
		return err
	}
	if filepath.Clean(p.Dest) != p.Dest || p.Dest == "/" {
		return fmt.Errorf("%w: field \"dest\" must be a clean path below /, got %q", ErrInvalid, cut(p.Dest))
	}
	switch p.Format {
	case protocol.ExportDir, protocol.ExportOCI:
	default:
		return fmt.Errorf("%w: field \"format\" must be %q or %q, got %q", ErrInvalid, protocol.ExportDir, protocol.ExportOCI, cut(string(p.Format)))
	}
	if p.Base != "" {
		if p.Format != protocol.ExportOCI {
			return fmt.Errorf("%w: field \"base\" is for format %q", ErrInvalid, protocol.ExportOCI)
		}
		if err := checkPath("base", p.Base); err != nil {
			return err
		}
	}
	if p.Port < 0 || p.Port > 65535 {
		return fmt.Errorf("%w: field \"port\" must be 1 to 65535, got %d", ErrInvalid, p.Port)
	}
	if p.Command != nil && len(p.Command) == 0 {
		return fmt.Errorf("%w: field \"command\" is empty (leave it out to detect the command)", ErrInvalid)
	}
	return nil
}

// cut is v for a message: a long one is cut in the middle.
func cut(v string) string {
	if len(v) <= 200 {
		return v
	}
	return v[:100] + fmt.Sprintf("...(%d bytes)...", len(v)-200) + v[len(v)-100:]
}
