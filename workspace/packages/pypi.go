package packages

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	xhtml "golang.org/x/net/html"
)

// Media types of the simple API (PEP 691).
const (
	pypiJSON   = "application/vnd.pypi.simple.v1+json"
	pypiHTML   = "application/vnd.pypi.simple.v1+html"
	pypiAccept = pypiJSON + ", text/html;q=0.1"
)

// pypiPage is a project's page as the cache keeps it (Dir/pypi/projects/
// NAME.json) and serves it: only the files it can verify, at their upstream
// URLs.
type pypiPage struct {
	Name    string     `json:"name"`
	URL     string     `json:"url"` // the upstream page it came from
	Fetched time.Time  `json:"fetched"`
	Files   []pypiFile `json:"files"`
}

type pypiFile struct {
	Filename       string            `json:"filename"`
	URL            string            `json:"url"`    // absolute, upstream, no fragment
	Hashes         map[string]string `json:"hashes"` // sha256 always, lowercase hex
	RequiresPython string            `json:"requiresPython,omitempty"`
	Yanked         bool              `json:"yanked,omitempty"`
	YankedReason   string            `json:"yankedReason,omitempty"`
}

// normalizePyPI checks a project name and normalizes it as PEP 503 does:
// lower case, each run of "-", "_" and "." one "-".
func normalizePyPI(name string) (string, error) {
	if len(name) == 0 || len(name) > 200 {
		return "", errorf(ErrInvalidName, nil, "project name of %d bytes: 1 to 200 expected", len(name))
	}
	var b strings.Builder
	sep := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z' || '0' <= c && c <= '9':
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case c == '-' || c == '_' || c == '.':
			if i == 0 || i == len(name)-1 {
				return "", errorf(ErrInvalidName, nil, "project name %q: must begin and end with a letter or digit", name)
			}
			sep = true
			continue
		default:
			return "", errorf(ErrInvalidName, nil, "project name %q: only letters, digits, '-', '_' and '.'", name)
		}
		if sep {
			b.WriteByte('-')
			sep = false
		}
		b.WriteByte(c)
	}
	return b.String(), nil
}

func (h *handler) pypiRoot(w http.ResponseWriter, r *http.Request) {
	// The cache lists no projects: pip never asks, and the list is the
	// upstream's to give.
	if negotiatePyPI(r.Header.Get("Accept")) == pypiJSON {
		h.writePage(w, r, pypiJSON, []byte(`{"meta":{"api-version":"1.0"},"projects":[]}`))
		return
	}
	h.writePage(w, r, "text/html; charset=utf-8", []byte("<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.0\"><title>Simple index</title></head><body></body></html>\n"))
}

func (h *handler) pypiProject(w http.ResponseWriter, r *http.Request, rest string) {
	raw, ok := strings.CutSuffix(rest, "/")
	if !ok {
		raw = rest
	}
	seg, ok := unescapeSegment(raw)
	if !ok {
		h.fail(w, r, errorf(ErrInvalidName, nil, "project name %q", raw))
		return
	}
	name, err := normalizePyPI(seg)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	page, err := h.c.pypiProject(r.Context(), name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if negotiatePyPI(r.Header.Get("Accept")) == pypiJSON {
		h.writePage(w, r, pypiJSON, renderPyPIJSON(page))
		return
	}
	h.writePage(w, r, "text/html; charset=utf-8", renderPyPIHTML(page))
}

func (h *handler) writePage(w http.ResponseWriter, r *http.Request, ctype string, body []byte) {
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Cache-Control", "max-age=0")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// pypiProject fetches a project's page from the upstream and keeps it; when
// the upstream cannot answer, the page kept last time serves.
func (c *Cache) pypiProject(ctx context.Context, name string) (*pypiPage, error) {
	rel := "pypi/projects/" + name + ".json"
	u := c.pypi.JoinPath(name + "/")
	return keptPage(ctx, c, rel, "page for "+name, func() (*pypiPage, error) { return c.fetchPyPIProject(ctx, name, u) })
}

func (p *pypiPage) fetchedAt() time.Time { return p.Fetched }

func (c *Cache) fetchPyPIProject(ctx context.Context, name string, u *url.URL) (*pypiPage, error) {
	body, final, ctype, err := c.getPage(ctx, u, pypiAccept)
	if err != nil {
		return nil, err
	}
	mt, _, _ := mime.ParseMediaType(ctype)
	var page *pypiPage
	var skipped []string
	if mt == pypiJSON || mt == "application/vnd.pypi.simple.latest+json" {
		page, skipped, err = parsePyPIJSON(body, final)
	} else {
		page, skipped, err = parsePyPIHTML(body, final)
	}
	if err != nil {
		return nil, errorf(ErrUpstream, err, "upstream %s: %v", final.Redacted(), err)
	}
	if len(skipped) > 0 {
		c.log.Info("package cache: files left out, with no sha256 or an unusable name or URL",
			"project", name, "count", len(skipped), "first", skipped[0])
	}
	page.Name = name
	page.URL = final.String()
	page.Fetched = time.Now().UTC()
	return page, nil
}

// hashLens are the hashes a page's files may carry: what hashlib names, in
// hex.
var hashLens = map[string]int{"md5": 32, "sha1": 40, "sha224": 56, "sha256": 64, "sha384": 96, "sha512": 128}

// addFile checks one file of an upstream page and adds it, or names it in
// skipped.
func (p *pypiPage) addFile(base *url.URL, filename, href string, hashes map[string]string, f pypiFile, skipped *[]string) {
	u, err := base.Parse(href)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		*skipped = append(*skipped, filename+" (url)")
		return
	}
	u.Fragment, u.RawFragment = "", ""
	if filename == "" {
		filename, _ = url.PathUnescape(path.Base(u.EscapedPath()))
	}
	if !validFilename(filename) {
		*skipped = append(*skipped, fmt.Sprintf("%q (name)", filename))
		return
	}
	f.Filename, f.URL, f.Hashes = filename, u.String(), map[string]string{}
	for k, v := range hashes {
		v = strings.ToLower(v)
		if n, ok := hashLens[k]; ok && isHex(v, n) {
			f.Hashes[k] = v
		}
	}
	if f.Hashes["sha256"] == "" {
		*skipped = append(*skipped, filename+" (no sha256)")
		return
	}
	p.Files = append(p.Files, f)
}

func parsePyPIJSON(body []byte, base *url.URL) (*pypiPage, []string, error) {
	var doc struct {
		Files []struct {
			Filename       string            `json:"filename"`
			URL            string            `json:"url"`
			Hashes         map[string]string `json:"hashes"`
			RequiresPython *string           `json:"requires-python"`
			Yanked         json.RawMessage   `json:"yanked"`
		} `json:"files"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, nil, fmt.Errorf("parse the PEP 691 page: %w", err)
	}
	page := &pypiPage{Files: []pypiFile{}}
	var skipped []string
	for _, f := range doc.Files {
		pf := pypiFile{}
		if f.RequiresPython != nil {
			pf.RequiresPython = *f.RequiresPython
		}
		var reason string
		var yanked bool
		if json.Unmarshal(f.Yanked, &reason) == nil {
			pf.Yanked, pf.YankedReason = true, reason
		} else if json.Unmarshal(f.Yanked, &yanked) == nil {
			pf.Yanked = yanked
		}
		if f.Filename == "" {
			skipped = append(skipped, "(no filename)")
			continue
		}
		page.addFile(base, f.Filename, f.URL, f.Hashes, pf, &skipped)
	}
	return page, skipped, nil
}

func parsePyPIHTML(body []byte, base *url.URL) (*pypiPage, []string, error) {
	page := &pypiPage{Files: []pypiFile{}}
	var skipped []string
	z := xhtml.NewTokenizer(bytes.NewReader(body))
	var (
		in   bool // inside an anchor
		href string
		pf   pypiFile
		text strings.Builder
	)
	for {
		tt := z.Next()
		switch tt {
		case xhtml.ErrorToken:
			if z.Err() == io.EOF {
				return page, skipped, nil
			}
			return nil, nil, fmt.Errorf("parse the PEP 503 page: %w", z.Err())
		case xhtml.StartTagToken, xhtml.SelfClosingTagToken:
			tok := z.Token()
			switch tok.Data {
			case "base":
				for _, a := range tok.Attr {
					if a.Key == "href" {
						if b, err := base.Parse(a.Val); err == nil {
							base = b
						}
					}
				}
			case "a":
				in, href, pf = true, "", pypiFile{}
				text.Reset()
				for _, a := range tok.Attr {
					switch a.Key {
					case "href":
						href = a.Val
					case "data-requires-python":
						pf.RequiresPython = a.Val
					case "data-yanked":
						pf.Yanked, pf.YankedReason = true, a.Val
					}
				}
			}
		case xhtml.TextToken:
			if in && text.Len() < 1024 {
				text.Write(z.Text())
			}
		case xhtml.EndTagToken:
			if name, _ := z.TagName(); string(name) == "a" && in {
				in = false
				if href == "" {
					continue
				}
				hashes := map[string]string{}
				if _, frag, ok := strings.Cut(href, "#"); ok {
					if k, v, ok := strings.Cut(frag, "="); ok {
						hashes[k] = v
					}
				}
				page.addFile(base, strings.TrimSpace(text.String()), href, hashes, pf, &skipped)
			}
		}
	}
}

// negotiatePyPI picks the answer's format from the client's Accept header
// (PEP 691): pypiJSON, or "" for HTML (also the default).
func negotiatePyPI(accept string) string {
	var qJSON, qHTML float64
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				q = f
			}
		}
		switch mt {
		case pypiJSON, "application/vnd.pypi.simple.latest+json":
			qJSON = max(qJSON, q)
		case pypiHTML, "application/vnd.pypi.simple.latest+html", "text/html", "*/*":
			qHTML = max(qHTML, q)
		}
	}
	if qJSON > 0 && qJSON >= qHTML {
		return pypiJSON
	}
	return ""
}

// fileURL is where the cache serves a file of a page.
func (f *pypiFile) fileURL() string {
	return "/pypi/files/" + f.Hashes["sha256"] + "/" + url.PathEscape(f.Filename)
}

func renderPyPIJSON(p *pypiPage) []byte {
	type file struct {
		Filename       string            `json:"filename"`
		URL            string            `json:"url"`
		Hashes         map[string]string `json:"hashes"`
		RequiresPython string            `json:"requires-python,omitempty"`
		Yanked         any               `json:"yanked"`
	}
	doc := struct {
		Meta  map[string]string `json:"meta"`
		Name  string            `json:"name"`
		Files []file            `json:"files"`
	}{Meta: map[string]string{"api-version": "1.0"}, Name: p.Name, Files: make([]file, 0, len(p.Files))}
	for i := range p.Files {
		f := &p.Files[i]
		var yanked any = f.Yanked
		if f.Yanked && f.YankedReason != "" {
			yanked = f.YankedReason
		}
		doc.Files = append(doc.Files, file{f.Filename, f.fileURL(), f.Hashes, f.RequiresPython, yanked})
	}
	b, _ := json.Marshal(doc)
	return b
}

func renderPyPIHTML(p *pypiPage) []byte {
	var b bytes.Buffer
	name := html.EscapeString(p.Name)
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.0\"><title>Links for %s</title></head>\n<body><h1>Links for %s</h1>\n", name, name)
	for i := range p.Files {
		f := &p.Files[i]
		fmt.Fprintf(&b, `<a href="%s#sha256=%s"`, html.EscapeString(f.fileURL()), f.Hashes["sha256"])
		if f.RequiresPython != "" {
			fmt.Fprintf(&b, ` data-requires-python="%s"`, html.EscapeString(f.RequiresPython))
		}
		if f.Yanked {
			fmt.Fprintf(&b, ` data-yanked="%s"`, html.EscapeString(f.YankedReason))
		}
		fmt.Fprintf(&b, ">%s</a><br>\n", html.EscapeString(f.Filename))
	}
	b.WriteString("</body></html>\n")
	return b.Bytes()
}

func (h *handler) pypiFile(w http.ResponseWriter, r *http.Request, rest string) {
	sha, rawName, ok := strings.Cut(rest, "/")
	if !ok || !isHex(sha, 64) {
		h.fail(w, r, errorf(ErrInvalidName, nil, "expected /pypi/files/SHA256/FILENAME, SHA256 in lowercase hex"))
		return
	}
	name, ok := unescapeSegment(rawName)
	if !ok || !validFilename(name) {
		h.fail(w, r, errorf(ErrInvalidName, nil, "file name %q", rawName))
		return
	}
	h.serveBlob(w, r, "pip", "blobs/sha256/"+sha, name, func() (*blobRef, error) {
		return h.c.locatePyPI(sha, name)
	})
}

// locatePyPI finds where the upstream index said the file is, on the kept
// pages of the projects its name can belong to.
func (c *Cache) locatePyPI(sha, filename string) (*blobRef, error) {
	for _, project := range projectCandidates(filename) {
		var page pypiPage
		if err := c.readKept("pypi/projects/"+project+".json", &page); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				c.log.Warn("package cache: read a kept project page", "project", project, "err", err)
			}
			continue
		}
		for _, f := range page.Files {
			if f.Hashes["sha256"] != sha || f.Filename != filename {
				continue
			}
			u, err := url.Parse(f.URL)
			if err != nil {
				break
			}
			return &blobRef{algo: "sha256", hex: sha, name: filename, url: u, publisher: "the index"}, nil
		}
	}
	return nil, errorf(ErrNotFound, nil, "%s (sha256 %s) is on no project page the cache has; ask for its project's page first", filename, sha)
}

// projectCandidates are the normalized project names a file name can
// belong to: each prefix before a "-" (a wheel's name has none of its own;
// an sdist's may).
func projectCandidates(filename string) []string {
	var out []string
	seen := map[string]bool{}
	for i := 1; i < len(filename) && len(out) < 16; i++ {
		if filename[i] != '-' {
			continue
		}
		if n, err := normalizePyPI(filename[:i]); err == nil && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}
