package packages

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// pypiFixture serves project "demo-pkg" from up in the given format: a good
// wheel, a good sdist (yanked, with requires-python), a file without a
// sha256, and a file whose published sha256 is wrong.
type pypiFixture struct {
	wheel, sdist, nohash, bad []byte
	wheelSHA, sdistSHA        string
}

func newPyPIFixture(up *upstream, format string) *pypiFixture {
	f := &pypiFixture{
		wheel:  []byte("wheel bytes of demo_pkg 1.0"),
		sdist:  []byte("sdist bytes of demo-pkg 1.0"),
		nohash: []byte("no hash"),
		bad:    []byte("the real bytes of bad"),
	}
	f.wheelSHA, f.sdistSHA = sha256hex(f.wheel), sha256hex(f.sdist)
	badSHA := sha256hex([]byte("what the index published"))
	up.set("/files/demo_pkg-1.0-py3-none-any.whl", "application/octet-stream", f.wheel)
	up.set("/files/demo-pkg-1.0.tar.gz", "application/octet-stream", f.sdist)
	up.set("/files/demo-pkg-0.9.tar.gz", "application/octet-stream", f.nohash)
	up.set("/files/demo-pkg-0.1.tar.gz", "application/octet-stream", f.bad)
	switch format {
	case "html":
		up.set("/simple/demo-pkg/", "text/html", htmlPage(
			// relative and absolute URLs
			anchor("../../files/demo_pkg-1.0-py3-none-any.whl#sha256="+f.wheelSHA, "demo_pkg-1.0-py3-none-any.whl", `data-dist-info-metadata="sha256=00"`),
			anchor(up.URL+"/files/demo-pkg-1.0.tar.gz#sha256="+strings.ToUpper(f.sdistSHA), "demo-pkg-1.0.tar.gz", `data-requires-python="&gt;=3.8" data-yanked="broken"`),
			anchor("/files/demo-pkg-0.9.tar.gz#md5=0123456789abcdef0123456789abcdef", "demo-pkg-0.9.tar.gz", ""),
			anchor("/files/demo-pkg-0.1.tar.gz#sha256="+badSHA, "demo-pkg-0.1.tar.gz", ""),
		))
	case "json":
		doc := map[string]any{
			"meta": map[string]any{"api-version": "1.1"},
			"name": "demo-pkg",
			"files": []map[string]any{
				{"filename": "demo_pkg-1.0-py3-none-any.whl", "url": "../../files/demo_pkg-1.0-py3-none-any.whl", "hashes": map[string]string{"sha256": f.wheelSHA}, "core-metadata": map[string]string{"sha256": "00"}},
				{"filename": "demo-pkg-1.0.tar.gz", "url": up.URL + "/files/demo-pkg-1.0.tar.gz", "hashes": map[string]string{"sha256": f.sdistSHA}, "requires-python": ">=3.8", "yanked": "broken"},
				{"filename": "demo-pkg-0.9.tar.gz", "url": "/files/demo-pkg-0.9.tar.gz", "hashes": map[string]string{}},
				{"filename": "demo-pkg-0.1.tar.gz", "url": "/files/demo-pkg-0.1.tar.gz", "hashes": map[string]string{"sha256": badSHA}},
			},
		}
		b, _ := json.Marshal(doc)
		up.set("/simple/demo-pkg/", pypiJSON, b)
	}
	return f
}

type simpleJSON struct {
	Meta  map[string]string `json:"meta"`
	Name  string            `json:"name"`
	Files []struct {
		Filename       string            `json:"filename"`
		URL            string            `json:"url"`
		Hashes         map[string]string `json:"hashes"`
		RequiresPython string            `json:"requires-python"`
		Yanked         any               `json:"yanked"`
	} `json:"files"`
}

func TestPyPIRewritesAndVerifies(t *testing.T) {
	for _, format := range []string{"html", "json"} {
		t.Run(format, func(t *testing.T) {
			up := newUpstream(t)
			fx := newPyPIFixture(up, format)
			c, srv, fetched := setup(t, Options{PyPI: up.URL + "/simple/"})

			// The client asked for JSON (as pip does), under a name to normalize.
			status, body := get(t, srv.URL+"/pypi/simple/Demo_.Pkg/", "application/vnd.pypi.simple.v1+json, text/html; q=0.01")
			if status != 200 {
				t.Fatalf("project page: %d %s", status, body)
			}
			var doc simpleJSON
			if err := json.Unmarshal(body, &doc); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			if doc.Name != "demo-pkg" || len(doc.Files) != 3 {
				t.Fatalf("page: %s", body)
			}
			w, s := doc.Files[0], doc.Files[1]
			if w.URL != "/pypi/files/"+fx.wheelSHA+"/demo_pkg-1.0-py3-none-any.whl" || w.Hashes["sha256"] != fx.wheelSHA || w.Yanked != false {
				t.Errorf("wheel entry: %+v", w)
			}
			if s.URL != "/pypi/files/"+fx.sdistSHA+"/demo-pkg-1.0.tar.gz" || s.RequiresPython != ">=3.8" || s.Yanked != "broken" {
				t.Errorf("sdist entry: %+v", s)
			}
			if strings.Contains(string(body), "metadata") || strings.Contains(string(body), "0.9") {
				t.Errorf("metadata attributes or the file without sha256 left in: %s", body)
			}

			// The same page as HTML, for a client that asks for it.
			status, body = get(t, srv.URL+"/pypi/simple/demo-pkg/", "text/html")
			want := `<a href="/pypi/files/` + fx.sdistSHA + `/demo-pkg-1.0.tar.gz#sha256=` + fx.sdistSHA + `" data-requires-python="&gt;=3.8" data-yanked="broken">demo-pkg-1.0.tar.gz</a>`
			if status != 200 || !strings.Contains(string(body), want) || strings.Contains(string(body), "0.9") {
				t.Errorf("HTML page: %d\n%s\nwant it to hold %s", status, body, want)
			}

			// The files: fetched and verified once, then served from the store.
			for i, hit := range []bool{false, true} {
				status, body = get(t, srv.URL+w.URL, "")
				if status != 200 || string(body) != string(fx.wheel) {
					t.Fatalf("wheel, try %d: %d %q", i, status, body)
				}
				if f := fetched.last(t); f != (Fetch{Manager: "pip", Name: "demo_pkg-1.0-py3-none-any.whl", Bytes: int64(len(fx.wheel)), CacheHit: hit}) {
					t.Errorf("fetch reported %+v, want a hit: %v", f, hit)
				}
			}
			if status, body = get(t, srv.URL+s.URL, ""); status != 200 || string(body) != string(fx.sdist) {
				t.Fatalf("sdist: %d %q", status, body)
			}
			if n := up.count("/files/demo_pkg-1.0-py3-none-any.whl"); n != 1 {
				t.Errorf("the wheel was fetched upstream %d times, want 1", n)
			}
			got, err := os.ReadFile(filepath.Join(c.store.dir, "blobs/sha256", fx.wheelSHA))
			if err != nil || string(got) != string(fx.wheel) {
				t.Errorf("stored wheel: %q, %v", got, err)
			}
			if info, err := os.Stat(filepath.Join(c.store.dir, "blobs/sha256", fx.wheelSHA)); err != nil || info.Mode().Perm() != 0o644 {
				t.Errorf("stored wheel mode: %v, %v", info.Mode(), err)
			}
			if info, err := os.Stat(c.store.dir); err != nil || info.Mode().Perm() != 0o700 {
				t.Errorf("cache dir mode: %v, %v", info.Mode(), err)
			}
			tmpEmpty(t, c.store.dir)
		})
	}
}

func TestPyPIHashMismatchStoresNothing(t *testing.T) {
	up := newUpstream(t)
	newPyPIFixture(up, "html")
	c, srv, fetched := setup(t, Options{PyPI: up.URL + "/simple/"})
	if status, body := get(t, srv.URL+"/pypi/simple/demo-pkg/", ""); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	badSHA := sha256hex([]byte("what the index published"))
	status, body := get(t, srv.URL+"/pypi/files/"+badSHA+"/demo-pkg-0.1.tar.gz", "")
	want := "refused demo-pkg-0.1.tar.gz: its sha256 is " + sha256hex([]byte("the real bytes of bad")) +
		", the index published " + badSHA + "; nothing was cached"
	if status != http.StatusBadGateway || strings.TrimSpace(string(body)) != want {
		t.Errorf("got %d %q\nwant 502 %q", status, body, want)
	}
	if b := blobs(t, c.store.dir); len(b) != 0 {
		t.Errorf("stored %v", b)
	}
	tmpEmpty(t, c.store.dir)
	if len(fetched.all) != 0 {
		t.Errorf("reported %v for a refused file", fetched.all)
	}
	// Asked again, it is fetched and refused again: a refusal is not kept.
	if status, _ := get(t, srv.URL+"/pypi/files/"+badSHA+"/demo-pkg-0.1.tar.gz", ""); status != http.StatusBadGateway {
		t.Errorf("again: %d", status)
	}
}

func TestPyPIOfflineServesKept(t *testing.T) {
	up := newUpstream(t)
	fx := newPyPIFixture(up, "json")
	dir := filepath.Join(t.TempDir(), "cache")
	c, srv, _ := setup(t, Options{Dir: dir, PyPI: up.URL + "/simple/"})
	_, online := get(t, srv.URL+"/pypi/simple/demo-pkg/", pypiJSON)
	wheel := "/pypi/files/" + fx.wheelSHA + "/demo_pkg-1.0-py3-none-any.whl"
	if status, _ := get(t, srv.URL+wheel, ""); status != 200 {
		t.Fatal(status)
	}
	up.Close() // the upstream is gone: connections are refused
	srv.Close()
	c.Close()

	// A new daemon on the same directory, with no network.
	_, srv2, fetched := setup(t, Options{Dir: dir, PyPI: up.URL + "/simple/"})
	status, offline := get(t, srv2.URL+"/pypi/simple/demo-pkg/", pypiJSON)
	if status != 200 || string(offline) != string(online) {
		t.Errorf("kept page: %d\n%s\nwant\n%s", status, offline, online)
	}
	status, body := get(t, srv2.URL+wheel, "")
	if status != 200 || string(body) != string(fx.wheel) || !fetched.last(t).CacheHit {
		t.Errorf("cached wheel offline: %d %q %+v", status, body, fetched.all)
	}
	// A listed file never fetched cannot be had: 502 naming the upstream.
	status, body = get(t, srv2.URL+"/pypi/files/"+fx.sdistSHA+"/demo-pkg-1.0.tar.gz", "")
	if status != http.StatusBadGateway || !strings.Contains(string(body), up.URL+"/files/demo-pkg-1.0.tar.gz") {
		t.Errorf("uncached file offline: %d %s", status, body)
	}
	// A project never seen: 502 naming the upstream and the error.
	status, body = get(t, srv2.URL+"/pypi/simple/other/", pypiJSON)
	if status != http.StatusBadGateway || !strings.Contains(string(body), up.URL+"/simple/other/") || !strings.Contains(string(body), "the cache kept none") {
		t.Errorf("unknown project offline: %d %s", status, body)
	}
}

func TestPyPIUpstream5xxServesKept(t *testing.T) {
	up := newUpstream(t)
	newPyPIFixture(up, "html")
	_, srv, _ := setup(t, Options{PyPI: up.URL + "/simple/"})
	_, first := get(t, srv.URL+"/pypi/simple/demo-pkg/", "")
	up.failWith(http.StatusServiceUnavailable)
	status, again := get(t, srv.URL+"/pypi/simple/demo-pkg/", "")
	if status != 200 || string(again) != string(first) {
		t.Errorf("after a 503: %d %s", status, again)
	}
	// A 404 upstream is a 404: the project is not there.
	up.failWith(http.StatusNotFound)
	if status, _ := get(t, srv.URL+"/pypi/simple/demo-pkg/", ""); status != 404 {
		t.Errorf("after a 404: %d", status)
	}
}

func TestPyPIFileNotListed(t *testing.T) {
	up := newUpstream(t)
	fx := newPyPIFixture(up, "html")
	_, srv, _ := setup(t, Options{PyPI: up.URL + "/simple/"})
	get(t, srv.URL+"/pypi/simple/demo-pkg/", "")
	for _, p := range []string{
		"/pypi/files/" + sha256hex([]byte("x")) + "/demo_pkg-2.0-py3-none-any.whl", // no page lists it
		"/pypi/files/" + fx.wheelSHA + "/demo_pkg-2.0-py3-none-any.whl",            // its hash, another name
		"/pypi/files/" + fx.wheelSHA + "/other-1.0.tar.gz",                         // a project never fetched
	} {
		if status, body := get(t, srv.URL+p, ""); status != 404 {
			t.Errorf("%s: %d %s", p, status, body)
		}
	}
	if n := up.count("/files/demo_pkg-1.0-py3-none-any.whl"); n != 0 {
		t.Errorf("fetched upstream %d times", n)
	}
}

func TestConcurrentRequestsFetchOnce(t *testing.T) {
	up := newUpstream(t)
	fx := newPyPIFixture(up, "json")
	release := make(chan struct{})
	up.hook = func(p string) {
		if strings.HasPrefix(p, "/files/") {
			<-release
		}
	}
	c, srv, _ := setup(t, Options{PyPI: up.URL + "/simple/"})
	get(t, srv.URL+"/pypi/simple/demo-pkg/", pypiJSON)
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(srv.URL + "/pypi/files/" + fx.wheelSHA + "/demo_pkg-1.0-py3-none-any.whl")
			if err != nil {
				errs <- err.Error()
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				errs <- resp.Status
			}
		}()
	}
	// Wait until every request waits on the one download, then let it go.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		f := c.flights["blobs/sha256/"+fx.wheelSHA]
		waiting := 0
		if f != nil {
			waiting = f.waiters
		}
		c.mu.Unlock()
		if waiting == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests wait on the download, want %d", waiting, n)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if got := up.count("/files/demo_pkg-1.0-py3-none-any.whl"); got != 1 {
		t.Errorf("fetched upstream %d times, want 1", got)
	}
}

// TestPageFresh: a page younger than Options.Fresh answers without the
// upstream (as the registries' max-age allows); an older one is asked
// for again.
func TestPageFresh(t *testing.T) {
	up := newUpstream(t)
	newPyPIFixture(up, "html")
	dir := filepath.Join(t.TempDir(), "cache")
	_, srv, _ := setup(t, Options{Dir: dir, PyPI: up.URL + "/simple/", Fresh: time.Hour})
	_, first := get(t, srv.URL+"/pypi/simple/demo-pkg/", "")
	up.failWith(http.StatusNotFound)
	if status, again := get(t, srv.URL+"/pypi/simple/demo-pkg/", ""); status != 200 || string(again) != string(first) {
		t.Errorf("a fresh page asked the upstream: %d %s", status, again)
	}
	_, srv2, _ := setup(t, Options{Dir: dir, PyPI: up.URL + "/simple/", Fresh: time.Nanosecond})
	if status, _ := get(t, srv2.URL+"/pypi/simple/demo-pkg/", ""); status != 404 {
		t.Errorf("a stale page did not ask the upstream: %d", status)
	}
}
