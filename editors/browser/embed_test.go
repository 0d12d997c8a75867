package browser

import (
	"crypto/sha256"
	"encoding/base64"
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

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
