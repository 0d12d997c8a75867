package packages

import (
	"errors"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxPathBytes bounds a request's path.
const maxPathBytes = 2048

// handler serves one sandbox. Everything it reads from the request is
// untrusted: the path is parsed by hand (no ServeMux cleaning or redirects),
// every name is checked before it is used, and nothing a request carries is
// ever written to the cache; only verified downloads are.
type handler struct {
	c       *Cache
	onFetch func(Fetch)
}

var _ http.Handler = (*handler)(nil)

// Handler serves one sandbox: /pypi/simple/..., /pypi/files/..., /npm/... .
// onFetch may be nil; it is called after each package file (wheel, sdist,
// tarball) was served to a GET, not for index pages.
func (c *Cache) Handler(onFetch func(Fetch)) http.Handler {
	return &handler{c: c, onFetch: onFetch}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		// Publishing, logging in, audits: none of it goes anywhere. npm
		// warns when its audit fails and goes on.
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the package cache only reads (GET, HEAD)", http.StatusMethodNotAllowed)
		return
	}
	if h.c.isClosed() {
		http.Error(w, ErrClosed.Error(), http.StatusServiceUnavailable)
		return
	}
	p := r.URL.EscapedPath()
	if len(p) > maxPathBytes {
		http.Error(w, "path too long", http.StatusRequestURITooLong)
		return
	}
	switch {
	case p == "/pypi/simple" || p == "/pypi/simple/":
		h.pypiRoot(w, r)
	case strings.HasPrefix(p, "/pypi/simple/"):
		h.pypiProject(w, r, strings.TrimPrefix(p, "/pypi/simple/"))
	case strings.HasPrefix(p, "/pypi/files/"):
		h.pypiFile(w, r, strings.TrimPrefix(p, "/pypi/files/"))
	case strings.HasPrefix(p, "/npm/-/blob/"):
		h.npmTarball(w, r, strings.TrimPrefix(p, "/npm/-/blob/"))
	case strings.HasPrefix(p, "/npm/-/"):
		http.Error(w, "not served by the package cache", http.StatusNotFound)
	case strings.HasPrefix(p, "/npm/"):
		h.npmPackument(w, r, strings.TrimPrefix(p, "/npm/"))
	default:
		http.NotFound(w, r)
	}
}

// fail answers err with its status and its message.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := statusOf(err)
	if status >= 500 {
		h.c.log.Warn("package cache", "path", r.URL.EscapedPath(), "status", status, "err", err)
	} else {
		h.c.log.Debug("package cache", "path", r.URL.EscapedPath(), "status", status, "err", err)
	}
	http.Error(w, err.Error(), status)
}

func statusOf(err error) int {
	switch {
	case errors.Is(err, ErrInvalidName):
		return http.StatusBadRequest
	case errors.Is(err, ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return http.StatusNotFound
	case errors.Is(err, ErrClosed):
		return http.StatusServiceUnavailable
	default:
		// ErrHashMismatch, ErrTooLarge, ErrUpstream, and our own failures.
		return http.StatusBadGateway
	}
}

// serveBlob serves the stored file rel, fetching it first (from where
// locate says) when the store lacks it.
func (h *handler) serveBlob(w http.ResponseWriter, r *http.Request, manager, rel, name string, locate func() (*blobRef, error)) {
	for attempt := 0; attempt < 2; attempt++ {
		f, err := h.c.store.open(rel)
		if err == nil {
			defer f.Close()
			info, err := f.Stat()
			if err != nil {
				h.fail(w, r, err)
				return
			}
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Cache-Control", "max-age=31536000, immutable")
			// No modtime: a stored file is immutable, named by its hash.
			http.ServeContent(w, r, name, time.Time{}, f)
			if r.Method == http.MethodGet && h.onFetch != nil {
				h.onFetch(Fetch{Manager: manager, Name: name, Bytes: info.Size(), CacheHit: attempt == 0})
			}
			return
		}
		if attempt > 0 {
			// Stored, then evicted by another file under a tiny cap.
			h.fail(w, r, errorf(ErrUpstream, errEvicted, "%s: %v", name, errEvicted))
			return
		}
		ref, err := locate()
		if err != nil {
			h.fail(w, r, err)
			return
		}
		if err := h.c.fetchBlob(r.Context(), ref); err != nil {
			h.fail(w, r, err)
			return
		}
	}
}

// validFilename accepts a package file's name: a plain base name of the
// characters wheels, sdists and tarballs use.
func validFilename(s string) bool {
	if len(s) == 0 || len(s) > 255 || s[0] == '.' || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '.' || c == '_' || c == '-' || c == '+' || c == '~' || c == '!') {
			return false
		}
	}
	return true
}

// unescapeSegment decodes one path segment; a "/" it decodes to is refused.
func unescapeSegment(s string) (string, bool) {
	v, err := url.PathUnescape(s)
	if err != nil || strings.ContainsAny(v, "/\x00") {
		return "", false
	}
	return v, true
}
