package browser

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The committed page is built from the sources as they are: dist/sources.sha256
// (written by build.mjs) is the hash of every file the page is built from, and
// this test computes it again. It fails when a source changed and dist/ was not
// rebuilt and committed, so that `go install` and `go build` serve the page of
// the sources they were built with.
func TestCommittedPageIsFresh(t *testing.T) {
	stamp, err := fs.ReadFile(FS(), "sources.sha256")
	if err != nil {
		t.Fatalf("dist/sources.sha256: %v (run make ui and commit editors/browser/dist)", err)
	}
	editors := ".."
	files := []string{"browser/build.mjs", "browser/tsconfig.json", "browser/package-lock.json"}
	for _, dir := range []string{"browser/src", "browser/client", "protocol"} {
		err := filepath.WalkDir(filepath.Join(editors, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type().IsRegular() {
				rel, err := filepath.Rel(editors, path)
				if err != nil {
					return err
				}
				files = append(files, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			t.Fatalf("list the page's sources: %v", err)
		}
	}
	sort.Strings(files)
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(editors, f))
		if err != nil {
			t.Fatalf("read %s: %v", f, err)
		}
		h.Write([]byte(f + "\x00"))
		h.Write(b)
		h.Write([]byte{0})
	}
	if got, want := hex.EncodeToString(h.Sum(nil)), strings.TrimSpace(string(stamp)); got != want {
		t.Errorf("editors/browser/dist was built from other sources (theirs %s, now %s): run make ui and commit editors/browser/dist", want, got)
	}
}

// The embedded page is one self-contained file whose inline script is the
// one its CSP allows by hash, and it fetches nothing from elsewhere.
func TestEmbeddedPage(t *testing.T) {
	page, err := fs.ReadFile(FS(), "index.html")
	if err != nil {
		t.Fatalf("dist/index.html: %v (run npm ci && npm run build in editors/browser)", err)
	}
	csp, err := fs.ReadFile(FS(), "csp")
	if err != nil {
		t.Fatalf("dist/csp: %v", err)
	}
	scripts := regexp.MustCompile(`(?s)<script>(.*?)</script>`).FindAllSubmatch(page, -1)
	if len(scripts) != 1 {
		t.Fatalf("page has %d inline scripts, want 1", len(scripts))
	}
	sum := sha256.Sum256(scripts[0][1])
	if want := "script-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(string(csp), want) {
		t.Errorf("csp %q does not allow the page's script (%s): dist is stale, rebuild it", csp, want)
	}
	if regexp.MustCompile(`<script[^>]+src=|<link[^>]+href=|https?://[a-z0-9.-]+/[^"' ]*\.(js|css)\b`).Match(page) {
		t.Error("the page loads a script or stylesheet from elsewhere; it must be self-contained")
	}
	for _, bad := range []string{"'unsafe-eval'", "script-src 'unsafe-inline'", "default-src *"} {
		if strings.Contains(string(csp), bad) {
			t.Errorf("csp allows %s", bad)
		}
	}
}
