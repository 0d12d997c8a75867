package packages

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func putBlob(t *testing.T, s *store, content []byte) string {
	t.Helper()
	f, err := s.tempFile()
	if err != nil {
		t.Fatal(err)
	}
	f.Write(content)
	f.Close()
	rel := "blobs/sha256/" + sha256hex(content)
	if err := s.put(f.Name(), rel); err != nil {
		t.Fatal(err)
	}
	return rel
}

func TestStoreEvictsLeastRecentlyUsed(t *testing.T) {
	dir := t.TempDir()
	s, err := openStore(dir, 2500, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	a := putBlob(t, s, bytes.Repeat([]byte("a"), 1000))
	b := putBlob(t, s, bytes.Repeat([]byte("b"), 1000))
	f, err := s.open(a) // a is now used after b
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	c := putBlob(t, s, bytes.Repeat([]byte("c"), 1000))
	for rel, want := range map[string]bool{a: true, b: false, c: true} {
		if _, err := os.Stat(filepath.Join(dir, rel)); (err == nil) != want || s.has(rel) != want {
			t.Errorf("%s kept: %v, want %v", rel, err == nil, want)
		}
	}
	if total, n := s.usage(); total != 2000 || n != 2 {
		t.Errorf("usage %d bytes in %d files", total, n)
	}

	// Opened again with a smaller cap, the store counts what is there (by
	// its mtime, the last use) and evicts past the cap; a stray file goes.
	old := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(dir, c), old, old)
	os.WriteFile(filepath.Join(dir, "blobs/sha256/not-a-hash"), []byte("x"), 0o644)
	s2, err := openStore(dir, 1500, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if total, n := s2.usage(); total != 1000 || n != 1 || !s2.has(a) {
		t.Errorf("reopened: %d bytes in %d files, has a: %v", total, n, s2.has(a))
	}
	if got := blobs(t, dir); len(got) != 1 {
		t.Errorf("blobs %v", got)
	}
}

func TestCacheSizeCap(t *testing.T) {
	up := newUpstream(t)
	files := map[string][]byte{}
	var list []map[string]any
	for _, n := range []string{"1", "2", "3"} {
		b := bytes.Repeat([]byte(n), 1000)
		name := "capped-" + n + ".0.tar.gz"
		files[name] = b
		up.set("/files/"+name, "application/octet-stream", b)
		list = append(list, map[string]any{"filename": name, "url": "/files/" + name, "hashes": map[string]string{"sha256": sha256hex(b)}})
	}
	big := bytes.Repeat([]byte("B"), 4000)
	up.set("/files/capped-9.0.tar.gz", "application/octet-stream", big)
	list = append(list, map[string]any{"filename": "capped-9.0.tar.gz", "url": "/files/capped-9.0.tar.gz", "hashes": map[string]string{"sha256": sha256hex(big)}})
	doc, _ := json.Marshal(map[string]any{"meta": map[string]string{"api-version": "1.0"}, "files": list})
	up.set("/simple/capped/", pypiJSON, doc)

	const max = 3000
	c, srv, _ := setup(t, Options{MaxBytes: max, PyPI: up.URL + "/simple/"})
	get(t, srv.URL+"/pypi/simple/capped/", pypiJSON)
	for _, n := range []string{"1", "2", "3"} {
		name := "capped-" + n + ".0.tar.gz"
		status, body := get(t, srv.URL+"/pypi/files/"+sha256hex(files[name])+"/"+name, "")
		if status != 200 || !bytes.Equal(body, files[name]) {
			t.Fatalf("%s: %d", name, status)
		}
		if total, _ := c.store.usage(); total > max {
			t.Errorf("after %s: %d bytes stored, over the cap %d", name, total, max)
		}
	}
	if !c.store.has("blobs/sha256/" + sha256hex(files["capped-3.0.tar.gz"])) {
		t.Error("the newest file was evicted")
	}
	if c.store.has("blobs/sha256/" + sha256hex(files["capped-1.0.tar.gz"])) {
		t.Error("the oldest file was kept")
	}
	// A file over the cap is refused, not stored.
	status, body := get(t, srv.URL+"/pypi/files/"+sha256hex(big)+"/capped-9.0.tar.gz", "")
	if status != http.StatusBadGateway || !bytes.Contains(body, []byte("over the cache's limit of 3000 bytes")) {
		t.Errorf("too big: %d %s", status, body)
	}
	if c.store.has("blobs/sha256/" + sha256hex(big)) {
		t.Error("stored a file over the cap")
	}
	tmpEmpty(t, c.store.dir)
}
