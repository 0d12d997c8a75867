package packages

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
)

// npmAccept asks for the abbreviated packument npm install reads.
const npmAccept = "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8, */*"

// npmKept is a packument as the cache keeps it (Dir/npm/packuments/
// NAME.json): as the upstream sent it, with where it came from.
type npmKept struct {
	URL       string          `json:"url"`
	Fetched   time.Time       `json:"fetched"`
	Packument json.RawMessage `json:"packument"`
}

// validNPMName checks a package name: "pkg" or "@scope/pkg", each part of
// letters, digits, "-", ".", "_" and "~" (capitals for old packages), not
// beginning with "." or "_", at most 214 bytes in all.
func validNPMName(name string) bool {
	if len(name) == 0 || len(name) > 214 {
		return false
	}
	if scoped, ok := strings.CutPrefix(name, "@"); ok {
		scope, pkg, ok := strings.Cut(scoped, "/")
		return ok && validNPMPart(scope) && validNPMPart(pkg)
	}
	return validNPMPart(name)
}

func validNPMPart(s string) bool {
	if s == "" || s[0] == '.' || s[0] == '_' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~') {
			return false
		}
	}
	return true
}

// npmKeptPath is where a package's packument is kept; "/" of a scoped name
// is written %2f, as registries do.
func npmKeptPath(name string) string {
	return "npm/packuments/" + strings.Replace(name, "/", "%2f", 1) + ".json"
}

// validHost accepts a request's Host for the tarball URLs the packument
// points at: a name or address and a port, nothing else.
func validHost(h string) bool {
	if h == "" || len(h) > 255 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == ':' || c == '[' || c == ']') {
			return false
		}
	}
	return true
}

func (h *handler) npmPackument(w http.ResponseWriter, r *http.Request, rest string) {
	name, err := url.PathUnescape(rest)
	if err != nil || !validNPMName(name) {
		h.fail(w, r, errorf(ErrInvalidName, nil, "package name %q", rest))
		return
	}
	if !validHost(r.Host) {
		h.fail(w, r, errorf(ErrInvalidName, nil, "host %q", r.Host))
		return
	}
	kept, err := h.c.npmPackument(r.Context(), name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	body, err := h.c.rewritePackument(name, kept, "http://"+r.Host+"/npm/-/blob/")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.writePage(w, r, "application/json", body)
}

// npmPackument fetches a package's packument and keeps it; when the upstream
// cannot answer, the one kept last time serves.
func (c *Cache) npmPackument(ctx context.Context, name string) (*npmKept, error) {
	rel := npmKeptPath(name)
	u, err := url.Parse(strings.TrimSuffix(c.npm.String(), "/") + "/" + strings.Replace(name, "/", "%2f", 1))
	if err != nil {
		return nil, errorf(ErrInvalidName, err, "package name %q: %v", name, err)
	}
	return keptPage(ctx, c, rel, "packument for "+name, func() (*npmKept, error) {
		body, final, _, err := c.getPage(ctx, u, npmAccept)
		if err != nil {
			return nil, err
		}
		var probe struct {
			Versions map[string]json.RawMessage `json:"versions"`
		}
		if jerr := json.Unmarshal(body, &probe); jerr != nil {
			return nil, errorf(ErrUpstream, jerr, "upstream %s: not a packument: %v", u.Redacted(), jerr)
		}
		return &npmKept{URL: final.String(), Fetched: time.Now().UTC(), Packument: body}, nil
	})
}

func (k *npmKept) fetchedAt() time.Time { return k.Fetched }

// npmDist is what the cache reads of a version's dist.
type npmDist struct {
	Tarball   string `json:"tarball"`
	Integrity string `json:"integrity"`
	Shasum    string `json:"shasum"`
}

// pickNPMHash chooses the hash to verify a tarball with: the strongest of
// dist.integrity (SRI: "sha512-BASE64", several separated by spaces), else
// dist.shasum (sha1 in hex).
func pickNPMHash(d npmDist) (algo, hexsum string, ok bool) {
	rank := map[string]int{"sha1": 1, "sha256": 2, "sha384": 3, "sha512": 4}
	for _, tok := range strings.Fields(d.Integrity) {
		a, b64, found := strings.Cut(tok, "-")
		if !found || rank[a] <= rank[algo] {
			continue
		}
		b64, _, _ = strings.Cut(b64, "?")
		sum, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(sum)*2 != hexLen[a] {
			continue
		}
		algo, hexsum = a, hex.EncodeToString(sum)
	}
	if algo != "" {
		return algo, hexsum, true
	}
	if s := strings.ToLower(d.Shasum); isHex(s, 40) {
		return "sha1", s, true
	}
	return "", "", false
}

// tarballBase is the file name of a version's upstream tarball, resolved
// against the packument's URL.
func tarballURL(base *url.URL, d npmDist) (*url.URL, string, bool) {
	u, err := base.Parse(d.Tarball)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, "", false
	}
	file, err := url.PathUnescape(path.Base(u.EscapedPath()))
	if err != nil || !validFilename(file) {
		return nil, "", false
	}
	return u, file, true
}

// rewritePackument points every version's dist.tarball at the cache
// (PREFIX ALGO/HEX/NAME/-/FILE) and drops the versions the cache cannot
// verify, and the dist-tags that name them. The rest is passed as it came.
func (c *Cache) rewritePackument(name string, kept *npmKept, prefix string) ([]byte, error) {
	base, err := url.Parse(kept.URL)
	if err != nil {
		return nil, fmt.Errorf("packument of %s: its URL: %w", name, err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(kept.Packument, &doc); err != nil {
		return nil, errorf(ErrUpstream, err, "packument of %s: %v", name, err)
	}
	var versions map[string]map[string]json.RawMessage
	if v := doc["versions"]; v != nil {
		if err := json.Unmarshal(v, &versions); err != nil {
			return nil, errorf(ErrUpstream, err, "packument of %s: versions: %v", name, err)
		}
	}
	var dropped []string
	for ver, v := range versions {
		var dist map[string]json.RawMessage
		var d npmDist
		if json.Unmarshal(v["dist"], &dist) != nil || json.Unmarshal(v["dist"], &d) != nil {
			dropped = append(dropped, ver)
			delete(versions, ver)
			continue
		}
		algo, sum, ok := pickNPMHash(d)
		_, file, fok := tarballURL(base, d)
		if !ok || !fok {
			dropped = append(dropped, ver)
			delete(versions, ver)
			continue
		}
		dist["tarball"], _ = json.Marshal(prefix + algo + "/" + sum + "/" + name + "/-/" + url.PathEscape(file))
		v["dist"], _ = json.Marshal(dist)
	}
	if len(dropped) > 0 {
		c.log.Info("package cache: versions left out, with no integrity or shasum or an unusable tarball URL",
			"package", name, "count", len(dropped), "first", dropped[0])
		var tags map[string]string
		if json.Unmarshal(doc["dist-tags"], &tags) == nil {
			for t, v := range tags {
				if versions[v] == nil {
					delete(tags, t)
				}
			}
			doc["dist-tags"], _ = json.Marshal(tags)
		}
	}
	if versions != nil {
		doc["versions"], _ = json.Marshal(versions)
	}
	return json.Marshal(doc)
}

func (h *handler) npmTarball(w http.ResponseWriter, r *http.Request, rest string) {
	bad := func() {
		h.fail(w, r, errorf(ErrInvalidName, nil, "expected /npm/-/blob/ALGO/HEX/NAME/-/FILE"))
	}
	algo, rest, ok1 := strings.Cut(rest, "/")
	sum, rest, ok2 := strings.Cut(rest, "/")
	i := strings.LastIndex(rest, "/-/")
	if !ok1 || !ok2 || i < 0 || hexLen[algo] == 0 || !isHex(sum, hexLen[algo]) {
		bad()
		return
	}
	name, err := url.PathUnescape(rest[:i])
	file, ok := unescapeSegment(rest[i+3:])
	if err != nil || !ok || !validNPMName(name) || !validFilename(file) {
		bad()
		return
	}
	h.serveBlob(w, r, "npm", "blobs/"+algo+"/"+sum, file, func() (*blobRef, error) {
		return h.c.locateNPM(name, algo, sum, file)
	})
}

// locateNPM finds where the kept packument of name says the tarball is.
func (c *Cache) locateNPM(name, algo, sum, file string) (*blobRef, error) {
	var kept npmKept
	if err := c.readKept(npmKeptPath(name), &kept); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			c.log.Warn("package cache: read a kept packument", "package", name, "err", err)
		}
		return nil, errorf(ErrNotFound, nil, "the cache has no packument for %s; ask for it first", name)
	}
	base, err := url.Parse(kept.URL)
	if err != nil {
		return nil, fmt.Errorf("packument of %s: its URL: %w", name, err)
	}
	var doc struct {
		Versions map[string]struct {
			Dist npmDist `json:"dist"`
		} `json:"versions"`
	}
	if err := json.Unmarshal(kept.Packument, &doc); err != nil {
		return nil, fmt.Errorf("packument of %s: %w", name, err)
	}
	for _, v := range doc.Versions {
		a, s, ok := pickNPMHash(v.Dist)
		if !ok || a != algo || s != sum {
			continue
		}
		if u, f, ok := tarballURL(base, v.Dist); ok && f == file {
			return &blobRef{algo: algo, hex: sum, name: file, url: u, publisher: "the registry"}, nil
		}
	}
	return nil, errorf(ErrNotFound, nil, "%s (%s %s) is in no version of %s's packument", file, algo, sum, name)
}
