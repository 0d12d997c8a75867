package godriver

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestRemoveStale: the directory of a driver that is gone is removed, a
// live one's is not.
func TestRemoveStale(t *testing.T) {
	tmp := t.TempDir()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(tmp, "kernel-"+strconv.Itoa(gone.Process.Pid))
	live := filepath.Join(tmp, "kernel-"+strconv.Itoa(os.Getpid()))
	other := filepath.Join(tmp, "cache")
	for _, d := range []string{dead, live, other} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	removeStale(tmp)
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("a gone driver's directory is left: %v", err)
	}
	for _, d := range []string{live, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
}

// TestCompileErrors: the go command's headers go, the first message is
// the evalue without its position.
func TestCompileErrors(t *testing.T) {
	lines := compileErrors([]byte("# cellbox.cell\n<cell-3>:2:5: undefined: x\n<cell-3>:3:1: declared and not used: y\n"))
	if len(lines) != 2 || firstMessage(lines) != "undefined: x" {
		t.Fatalf("lines = %q, first %q", lines, firstMessage(lines))
	}
	if m := unusedImport.FindStringSubmatch(`<cell-1>:1:8: "os" imported and not used`); m == nil || m[1] != "os" {
		t.Fatalf("unused import = %q", m)
	}
}
