package workspace

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestQuotePathAsGit: quotePath quotes names exactly as git does (with
// core.quotePath off), checked against git itself on real files.
func TestQuotePathAsGit(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("git is needed to check the quoting against: %v", err)
	}
	names := []string{"plain.txt", "with space.txt", "ünï ✓.txt", "new\nline", "tab\there", `quo"te`, `back\slash`,
		"bell\a", "del\x7f", "ctl\x01x", "bad\xff\xfeutf8", "cr\rlf"}
	dir := t.TempDir()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(gitBin, "-c", "core.quotepath=false", "init", "-q", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	// Valid UTF-8 as git prints it with core.quotePath off; bytes that are
	// not UTF-8 as git's default prints them (octal), since a JSON string
	// cannot carry them as they are.
	lsFiles := func(quotePathOn string) (map[string]bool, string) {
		cmd := exec.Command(gitBin, "-c", "core.quotepath="+quotePathOn, "ls-files", "--others")
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git ls-files: %v", err)
		}
		lines := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
			lines[l] = true
		}
		return lines, string(out)
	}
	off, offOut := lsFiles("false")
	on, onOut := lsFiles("true")
	for _, n := range names {
		q := quotePath(n)
		if utf8.ValidString(n) && !off[q] {
			t.Errorf("quotePath(%q) = %s, which git does not print; git printed:\n%s", n, q, offOut)
		}
		if !utf8.ValidString(n) && !on[q] {
			t.Errorf("quotePath(%q) = %s, which git does not print; git printed:\n%s", n, q, onOut)
		}
	}
}
