package packages

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

type packument struct {
	Name     string            `json:"name"`
	DistTags map[string]string `json:"dist-tags"`
	Versions map[string]struct {
		Version string `json:"version"`
		Dist    struct {
			Tarball   string `json:"tarball"`
			Integrity string `json:"integrity"`
			Shasum    string `json:"shasum"`
		} `json:"dist"`
	} `json:"versions"`
}

func TestNPMRewritesAndVerifies(t *testing.T) {
	up := newUpstream(t)
	good := []byte("tarball of 1.0.0")
	goodSRI, goodHex := sha512sri(good)
	old := []byte("tarball of 0.1.0")
	oldSum := sha1.Sum(old)
	bad := []byte("tarball of 2.0.0, tampered")
	badSRI, badHex := sha512sri([]byte("tarball of 2.0.0"))
	up.set("/@scope/pkg/-/pkg-1.0.0.tgz", "application/octet-stream", good)
	up.set("/@scope/pkg/-/pkg-0.1.0.tgz", "application/octet-stream", old)
	up.set("/@scope/pkg/-/pkg-2.0.0.tgz", "application/octet-stream", bad)
	doc := map[string]any{
		"name":      "@scope/pkg",
		"dist-tags": map[string]string{"latest": "2.0.0", "stable": "1.0.0", "nohash": "3.0.0"},
		"modified":  "2024-01-01T00:00:00.000Z",
		"versions": map[string]any{
			"1.0.0": map[string]any{"name": "@scope/pkg", "version": "1.0.0", "dist": map[string]any{
				"tarball": up.URL + "/@scope/pkg/-/pkg-1.0.0.tgz", "integrity": "sha1-AAAA " + goodSRI, "fileCount": 3}},
			"0.1.0": map[string]any{"name": "@scope/pkg", "version": "0.1.0", "dist": map[string]any{
				"tarball": "/@scope/pkg/-/pkg-0.1.0.tgz", "shasum": hex.EncodeToString(oldSum[:])}},
			"2.0.0": map[string]any{"name": "@scope/pkg", "version": "2.0.0", "dist": map[string]any{
				"tarball": up.URL + "/@scope/pkg/-/pkg-2.0.0.tgz", "integrity": badSRI}},
			"3.0.0": map[string]any{"name": "@scope/pkg", "version": "3.0.0", "dist": map[string]any{
				"tarball": up.URL + "/@scope/pkg/-/pkg-3.0.0.tgz"}},
		},
	}
	b, _ := json.Marshal(doc)
	up.set("/@scope%2fpkg", "application/vnd.npm.install-v1+json", b)
	c, srv, fetched := setup(t, Options{NPM: up.URL + "/"})

	var p packument
	for _, path := range []string{"/npm/@scope%2fpkg", "/npm/@scope%2Fpkg", "/npm/@scope/pkg"} {
		status, body := get(t, srv.URL+path, "application/vnd.npm.install-v1+json")
		if status != 200 {
			t.Fatalf("%s: %d %s", path, status, body)
		}
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatal(err)
		}
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	want := map[string]string{
		"1.0.0": "http://" + host + "/npm/-/blob/sha512/" + goodHex + "/@scope/pkg/-/pkg-1.0.0.tgz",
		"0.1.0": "http://" + host + "/npm/-/blob/sha1/" + hex.EncodeToString(oldSum[:]) + "/@scope/pkg/-/pkg-0.1.0.tgz",
		"2.0.0": "http://" + host + "/npm/-/blob/sha512/" + badHex + "/@scope/pkg/-/pkg-2.0.0.tgz",
	}
	if len(p.Versions) != len(want) {
		t.Errorf("versions %v, want %v (3.0.0 has no hash)", p.Versions, want)
	}
	for v, u := range want {
		if got := p.Versions[v].Dist.Tarball; got != u {
			t.Errorf("%s: tarball %s, want %s", v, got, u)
		}
	}
	if p.Versions["1.0.0"].Dist.Integrity != "sha1-AAAA "+goodSRI {
		t.Errorf("integrity changed: %q", p.Versions["1.0.0"].Dist.Integrity)
	}
	if _, ok := p.DistTags["nohash"]; ok || p.DistTags["stable"] != "1.0.0" {
		t.Errorf("dist-tags %v", p.DistTags)
	}

	for i, hit := range []bool{false, true} {
		status, body := get(t, want["1.0.0"], "")
		if status != 200 || string(body) != string(good) {
			t.Fatalf("try %d: %d %q", i, status, body)
		}
		if f := fetched.last(t); f != (Fetch{Manager: "npm", Name: "pkg-1.0.0.tgz", Bytes: int64(len(good)), CacheHit: hit}) {
			t.Errorf("reported %+v", f)
		}
	}
	if status, body := get(t, want["0.1.0"], ""); status != 200 || string(body) != string(old) {
		t.Errorf("shasum version: %d %q", status, body)
	}
	status, body := get(t, want["2.0.0"], "")
	if status != http.StatusBadGateway || !strings.Contains(string(body), "refused pkg-2.0.0.tgz: its sha512 is ") ||
		!strings.Contains(string(body), "the registry published "+badHex+"; nothing was cached") {
		t.Errorf("tampered tarball: %d %s", status, body)
	}
	if got := blobs(t, c.store.dir); len(got) != 2 {
		t.Errorf("stored %v, want the two good tarballs", got)
	}
	tmpEmpty(t, c.store.dir)
	// Another package's name on a good hash: not in its packument.
	if status, _ := get(t, "http://"+host+"/npm/-/blob/sha512/"+badHex+"/other/-/other-1.0.0.tgz", ""); status != 404 {
		t.Errorf("unknown package's tarball: %d", status)
	}

	// The upstream gone: the kept packument and the stored tarball serve.
	up.Close()
	if status, body := get(t, srv.URL+"/npm/@scope%2fpkg", ""); status != 200 || !strings.Contains(string(body), goodHex) {
		t.Errorf("kept packument: %d %s", status, body)
	}
	if status, _ := get(t, want["1.0.0"], ""); status != 200 || !fetched.last(t).CacheHit {
		t.Errorf("stored tarball offline: %d", status)
	}
	if status, body := get(t, srv.URL+"/npm/left-pad", ""); status != http.StatusBadGateway || !strings.Contains(string(body), up.URL+"/left-pad") {
		t.Errorf("unknown package offline: %d %s", status, body)
	}
}

func TestPickNPMHash(t *testing.T) {
	sri, hx := sha512sri([]byte("x"))
	tests := []struct {
		name       string
		d          npmDist
		algo, want string
		ok         bool
	}{
		{"sha512", npmDist{Integrity: sri}, "sha512", hx, true},
		{"strongest of several", npmDist{Integrity: "sha1-C+7Hteo/D9vJXQ3UfzxbwnXaijM= " + sri + "?opt"}, "sha512", hx, true},
		{"shasum", npmDist{Shasum: "0BEEC7B5EA3F0FDBC95D0DD47F3C5BC275DA8A33"}, "sha1", "0beec7b5ea3f0fdbc95d0dd47f3c5bc275da8a33", true},
		{"bad base64 falls to shasum", npmDist{Integrity: "sha512-!!", Shasum: "0beec7b5ea3f0fdbc95d0dd47f3c5bc275da8a33"}, "sha1", "0beec7b5ea3f0fdbc95d0dd47f3c5bc275da8a33", true},
		{"short digest", npmDist{Integrity: "sha512-AAAA"}, "", "", false},
		{"md5 only", npmDist{Integrity: "md5-XUFAKrxLKna5cZ2REBfFkg=="}, "", "", false},
		{"nothing", npmDist{}, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			algo, got, ok := pickNPMHash(tt.d)
			if algo != tt.algo || got != tt.want || ok != tt.ok {
				t.Errorf("got %s %s %v, want %s %s %v", algo, got, ok, tt.algo, tt.want, tt.ok)
			}
		})
	}
}
