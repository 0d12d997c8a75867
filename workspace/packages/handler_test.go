package packages

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUntrustedPaths sends what code in a sandbox might: traversal, encoded
// dots and slashes, bad hashes and names, writes. Each is a 4xx, nothing
// leaves Dir and nothing is read from outside it.
func TestUntrustedPaths(t *testing.T) {
	up := newUpstream(t)
	parent := t.TempDir()
	secret := filepath.Join(parent, "passwd")
	if err := os.WriteFile(secret, []byte("root:secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "cache")
	_, srv, _ := setup(t, Options{Dir: dir, PyPI: up.URL + "/simple/", NPM: up.URL + "/"})
	sha := sha256hex([]byte("x"))
	long := strings.Repeat("a", 300)
	tests := []struct {
		method, path string
		status       int
	}{
		{"GET", "/pypi/files/../../etc/passwd", 400},
		{"GET", "/pypi/files/" + sha + "/../../passwd", 400},
		{"GET", "/pypi/files/%2e%2e/%2e%2e/passwd", 400},
		{"GET", "/pypi/files/" + sha + "/%2e%2e", 400},
		{"GET", "/pypi/files/" + sha + "/..%2f..%2fpasswd", 400},
		{"GET", "/pypi/files/" + sha + "/.hidden.whl", 400},
		{"GET", "/pypi/files/" + strings.ToUpper(sha) + "/x-1.0.tar.gz", 400},
		{"GET", "/pypi/files/" + sha[:63] + "/x-1.0.tar.gz", 400},
		{"GET", "/pypi/files/" + sha + "/" + long + ".whl", 400},
		{"GET", "/pypi/files/" + sha + "/a%00b.whl", 400},
		{"GET", "/pypi/simple/../../passwd/", 400},
		{"GET", "/pypi/simple/%2e%2e/", 400},
		{"GET", "/pypi/simple/a%2fb/", 400},
		{"GET", "/pypi/simple/-x/", 400},
		{"GET", "/pypi/simple/" + long + "/", 400},
		{"GET", "/pypi/simple/a b/", 400},
		{"GET", "/npm/../passwd", 400},
		{"GET", "/npm/%2e%2e%2fpasswd", 400},
		{"GET", "/npm/.bin", 400},
		{"GET", "/npm/@scope/../x", 400},
		{"GET", "/npm/@scope/pkg/1.0.0", 400},
		{"GET", "/npm/" + long, 400},
		{"GET", "/npm/-/blob/sha512/" + sha + "/x/-/x-1.0.0.tgz", 400},
		{"GET", "/npm/-/blob/md5/0123456789abcdef0123456789abcdef/x/-/x.tgz", 400},
		{"GET", "/npm/-/blob/sha256/" + sha + "/../-/passwd", 400},
		{"GET", "/npm/-/blob/sha256/" + sha + "/x/-/..", 400},
		{"GET", "/npm/-/whoami", 404},
		{"GET", "/etc/passwd", 404},
		{"GET", "/pypi/" + strings.Repeat("a/", 1100), 414},
		{"PUT", "/npm/x", 405},
		{"POST", "/npm/-/npm/v1/security/advisories/bulk", 405},
		{"DELETE", "/pypi/files/" + sha + "/x-1.0.tar.gz", 405},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader("body"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 512)
		n, _ := resp.Body.Read(b)
		resp.Body.Close()
		if resp.StatusCode != tt.status || strings.Contains(string(b[:n]), "secret") {
			t.Errorf("%s %s: %d %q, want %d", tt.method, tt.path, resp.StatusCode, b[:n], tt.status)
		}
	}
	ents, _ := os.ReadDir(parent)
	if len(ents) != 2 {
		t.Errorf("the cache's parent holds %v", ents)
	}
	if got := blobs(t, dir); len(got) != 0 {
		t.Errorf("stored %v", got)
	}
	for path, n := range up.hits {
		t.Errorf("upstream asked for %s (%d times)", path, n)
	}
}

func TestHeadServesNoBodyAndReportsNothing(t *testing.T) {
	up := newUpstream(t)
	fx := newPyPIFixture(up, "html")
	_, srv, fetched := setup(t, Options{PyPI: up.URL + "/simple/"})
	get(t, srv.URL+"/pypi/simple/demo-pkg/", "")
	resp, err := http.Head(srv.URL + "/pypi/files/" + fx.wheelSHA + "/demo_pkg-1.0-py3-none-any.whl")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ContentLength != int64(len(fx.wheel)) || len(fetched.all) != 0 {
		t.Errorf("HEAD: %d, length %d, reported %v", resp.StatusCode, resp.ContentLength, fetched.all)
	}
}
