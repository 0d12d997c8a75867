package workspace

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// BenchmarkQuotaTick is what one quota tick costs on a workspace whose
// upper layer holds 10,000 files in 100 directories: the walk by
// descriptors (walkUsage), the walk by paths it replaced (filepath.WalkDir,
// which skipped what it could not reach), and the scan of this process's
// descriptors and maps for deleted files (heldDeleted).
func BenchmarkQuotaTick(b *testing.B) {
	dir := b.TempDir()
	for i := range 100 {
		d := filepath.Join(dir, fmt.Sprint("d", i))
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
		for j := range 100 {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprint("f", j)), []byte("x"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("walkUsage", func(b *testing.B) {
		for b.Loop() {
			if _, err := walkUsage(dir, 1<<40); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("WalkDir-by-path", func(b *testing.B) {
		for b.Loop() {
			var used int64
			_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
				if err == nil {
					if fi, err := d.Info(); err == nil {
						used += blocks(fi)
					}
				}
				return nil
			})
		}
	})
	b.Run("heldDeleted", func(b *testing.B) {
		for b.Loop() {
			heldDeleted(os.Getpid())
		}
	})
}

// blocks is the space a file takes, as the walk by paths counted it.
func blocks(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}
