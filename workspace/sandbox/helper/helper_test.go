package helper

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// moduleRoot is where go.mod is, from this package's directory.
const moduleRoot = "../../.."

// TestCommittedHelperIsFresh: the committed helper was built from the
// sources as they are now (every file of this module cmd/cellbox-sandbox
// is built from, go.mod and go.sum). Fails naming the changed files, with
// what to do.
func TestCommittedHelperIsFresh(t *testing.T) {
	want := map[string]string{}
	f, err := os.Open("sources.sha256")
	if err != nil {
		t.Fatalf("%v (run make helper and commit workspace/sandbox/helper)", err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("sources.sha256: malformed line %q", line)
		}
		want[name] = sum
	}
	f.Close()

	goBin := os.Getenv("GO")
	if goBin == "" {
		goBin = "go"
	}
	cmd := exec.Command(goBin, "list", "-deps", "-f",
		`{{if .Module}}{{if .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}{{end}}`,
		"./cmd/cellbox-sandbox")
	cmd.Dir = moduleRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list the helper's sources: %v", err)
	}
	root, err := filepath.Abs(moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"go.mod", "go.sum"}
	for _, p := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, rel)
	}
	sort.Strings(files)
	var stale []string
	for _, name := range files {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if want[name] != hex.EncodeToString(sum[:]) {
			stale = append(stale, name)
		}
		delete(want, name)
	}
	for name := range want {
		stale = append(stale, name+" (no longer a source)")
	}
	if len(stale) > 0 {
		sort.Strings(stale)
		t.Errorf("workspace/sandbox/helper/cellbox-sandbox was built from other sources: %s changed; run make helper and commit workspace/sandbox/helper", strings.Join(stale, ", "))
	}
}

// TestHelperIsAnExecutable: what is embedded is an ELF executable of a
// sensible size.
func TestHelperIsAnExecutable(t *testing.T) {
	bin := Binary
	if !bytes.HasPrefix(bin, []byte("\x7fELF")) || len(bin) < 1<<20 || len(bin) > 16<<20 {
		t.Fatalf("the helper is %d bytes starting %q", len(bin), bin[:min(len(bin), 4)])
	}
}
