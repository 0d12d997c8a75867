package sqldriver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestFindPostgres: the newest installation wins, whether on the PATH (a
// symbolic link to its directory) or in the glob's directories; one
// without initdb beside postgres does not count; none is errNoPostgres.
func TestFindPostgres(t *testing.T) {
	root := t.TempDir()
	fake := func(dir, version string, initdb bool) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		script := "#!/bin/sh\necho 'postgres (PostgreSQL) " + version + " (Debian)'\n"
		if err := os.WriteFile(filepath.Join(dir, "postgres"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		if initdb {
			if err := os.WriteFile(filepath.Join(dir, "initdb"), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	fake(filepath.Join(root, "lib/9.6/bin"), "9.6.24", true)
	fake(filepath.Join(root, "lib/15/bin"), "15.18", true)
	fake(filepath.Join(root, "lib/17/bin"), "17.2", false) // no initdb
	fake(filepath.Join(root, "opt/16/bin"), "16.4", true)
	path := filepath.Join(root, "path")
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "opt/16/bin/postgres"), filepath.Join(path, "postgres")); err != nil {
		t.Fatal(err)
	}
	glob := filepath.Join(root, "lib/*/bin")
	ctx := context.Background()
	if in, err := findPostgresIn(ctx, "", glob); err != nil || in.version != "15.18" || in.bin != filepath.Join(root, "lib/15/bin") {
		t.Fatalf("in the glob: %+v %v", in, err)
	}
	if in, err := findPostgresIn(ctx, "/nowhere:"+path, glob); err != nil || in.version != "16.4" || in.bin != filepath.Join(root, "opt/16/bin") {
		t.Fatalf("on the PATH: %+v %v", in, err)
	}
	if in, err := findPostgresIn(ctx, "/nowhere", filepath.Join(root, "none/*/bin")); !errors.Is(err, errNoPostgres) {
		t.Fatalf("none: %+v %v", in, err)
	}
}
