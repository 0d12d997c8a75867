package protocol

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestGeneratedFilesFresh regenerates the client types into a temporary
// directory and fails when a committed file differs.
func TestGeneratedFilesFresh(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go command not found: %v", err)
	}
	out := t.TempDir()
	cmd := exec.Command(gobin, "run", "./gen", "-out", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./gen: %v\n%s", err, b)
	}
	for _, name := range []string{
		"editors/protocol/protocol.ts",
		"editors/neovim/lua/cellbox/protocol.lua",
	} {
		want, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Errorf("%s: %v; run go generate ./protocol", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale (%s); run go generate ./protocol", name, firstDiff(got, want))
		}
	}
}

// firstDiff describes the first line where got and want differ.
func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl || i >= len(g) || i >= len(w) {
			return "first difference at line " + strconv.Itoa(i+1) + ": have " + strconv.Quote(gl) + ", want " + strconv.Quote(wl)
		}
	}
	return "no line differs"
}
