package packages

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func sha256hex(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func sha512sri(b []byte) (sri, hexsum string) {
	s := sha512.Sum512(b)
	return "sha512-" + base64.StdEncoding.EncodeToString(s[:]), hex.EncodeToString(s[:])
}

// upstream is a test registry on loopback: fixed pages and files, counting
// the requests for each path.
type upstream struct {
	*httptest.Server
	mu    sync.Mutex
	pages map[string]page   // by path
	hits  map[string]int    // by path
	hook  func(path string) // called before a file is answered, if set
	fail  int               // when set, every request is answered with this status
}

type page struct {
	ctype string
	body  []byte
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{pages: map[string]page{}, hits: map[string]int{}}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		p, ok := u.pages[r.URL.EscapedPath()]
		u.hits[r.URL.EscapedPath()]++
		hook, fail := u.hook, u.fail
		u.mu.Unlock()
		if fail != 0 {
			http.Error(w, "failing", fail)
			return
		}
		if !ok {
			http.NotFound(w, r)
			return
		}
		if hook != nil {
			hook(r.URL.EscapedPath())
		}
		w.Header().Set("Content-Type", p.ctype)
		w.Write(p.body)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) set(path, ctype string, body []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.pages[path] = page{ctype, body}
}

func (u *upstream) failWith(status int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.fail = status
}

func (u *upstream) count(path string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.hits[path]
}

func testLogger(t *testing.T) *slog.Logger {
	t.Helper()
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// fetches records what a handler reported.
type fetches struct {
	mu  sync.Mutex
	all []Fetch
}

func (f *fetches) add(x Fetch) { f.mu.Lock(); f.all = append(f.all, x); f.mu.Unlock() }

func (f *fetches) last(t *testing.T) Fetch {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.all) == 0 {
		t.Fatal("no fetch reported")
	}
	return f.all[len(f.all)-1]
}

// setup opens a cache in a fresh directory with o (Dir filled in) and
// serves one sandbox's handler on loopback.
func setup(t *testing.T, o Options) (*Cache, *httptest.Server, *fetches) {
	t.Helper()
	if o.Dir == "" {
		o.Dir = filepath.Join(t.TempDir(), "cache")
	}
	if o.Logger == nil {
		o.Logger = testLogger(t)
	}
	if o.PyPI == "" {
		o.PyPI = "http://127.0.0.1:1/simple/"
	}
	if o.NPM == "" {
		o.NPM = "http://127.0.0.1:1/"
	}
	if o.Fresh == 0 {
		o.Fresh = -1 // every page from the upstream, unless the test says otherwise
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	f := &fetches{}
	srv := httptest.NewServer(c.Handler(f.add))
	t.Cleanup(func() {
		srv.Close()
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c, srv, f
}

// get fetches url with an Accept header; it returns the status and body.
func get(t *testing.T, url, accept string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// blobs lists the files stored under dir/blobs.
func blobs(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(filepath.Join(dir, "blobs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

func tmpEmpty(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Errorf("tmp holds %d files, want none", len(ents))
	}
}

func htmlPage(files ...string) []byte {
	return []byte("<!DOCTYPE html><html><body>\n" + strings.Join(files, "<br>\n") + "</body></html>")
}

func anchor(href, text, attrs string) string {
	return fmt.Sprintf(`<a href="%s" %s>%s</a>`, href, attrs, text)
}
