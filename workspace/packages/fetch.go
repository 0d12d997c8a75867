package packages

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"time"
)

// getPage fetches an index page or packument from u, at most MaxPageBytes.
// It returns the body, the URL it came from after redirects (relative links
// resolve against it) and its media type. A 404 or 410 is ErrNotFound; any
// other failure is ErrUpstream (or ErrTooLarge), for which a kept page may
// stand in.
func (c *Cache) getPage(ctx context.Context, u *url.URL, accept string) ([]byte, *url.URL, string, error) {
	ctx, cancel := context.WithTimeout(ctx, pageTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, nil, "", errorf(ErrUpstream, err, "upstream %s: %v", u.Redacted(), err)
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "cellbox-package-cache")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, nil, "", errorf(ErrUpstream, err, "upstream %s: %v", u.Redacted(), err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return nil, nil, "", errorf(ErrNotFound, nil, "upstream %s: %s", u.Redacted(), resp.Status)
	case resp.StatusCode != http.StatusOK:
		return nil, nil, "", errorf(ErrUpstream, nil, "upstream %s: %s", u.Redacted(), resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxPageBytes+1))
	if err != nil {
		return nil, nil, "", errorf(ErrUpstream, err, "upstream %s: read: %v", u.Redacted(), err)
	}
	if len(body) > MaxPageBytes {
		return nil, nil, "", errorf(ErrTooLarge, nil, "upstream %s: the page is over %d bytes", u.Redacted(), MaxPageBytes)
	}
	return body, resp.Request.URL, resp.Header.Get("Content-Type"), nil
}

// keptPage answers a page kept at rel (a project page, a packument): the
// kept one while it is younger than Options.Fresh; else fetch's, kept for
// next time; and when the upstream fails (not with a 404, and not because
// the request was cancelled), the kept one again, so that a cached package
// installs with the upstream away. what names it in logs and errors.
func keptPage[T any, P interface {
	*T
	fetchedAt() time.Time
}](ctx context.Context, c *Cache, rel, what string, fetch func() (P, error)) (P, error) {
	var fresh T
	if c.fresh > 0 && c.readKept(rel, &fresh) == nil && time.Since(P(&fresh).fetchedAt()) < c.fresh {
		return &fresh, nil
	}
	page, err := fetch()
	if err == nil {
		if err := c.writeKept(rel, page); err != nil {
			c.log.Warn("package cache: keep a "+what, "err", err)
		}
		return page, nil
	}
	if errors.Is(err, ErrNotFound) || ctx.Err() != nil {
		return nil, err
	}
	var kept T
	if kerr := c.readKept(rel, &kept); kerr != nil {
		if !errors.Is(kerr, fs.ErrNotExist) {
			c.log.Warn("package cache: read a kept "+what, "err", kerr)
		}
		return nil, errorf(ErrUpstream, err, "no %s: %v, and the cache kept none", what, err)
	}
	c.log.Info("package cache: the upstream failed; serving the kept "+what, "fetched", P(&kept).fetchedAt(), "err", err)
	return &kept, nil
}

// writeKept stores v as JSON at rel (a page kept for when the upstream is
// away).
func (c *Cache) writeKept(rel string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", rel, err)
	}
	f, err := c.store.tempFile()
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", rel, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", rel, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	return c.store.put(f.Name(), rel)
}

// readKept reads the page kept at rel into v; fs.ErrNotExist when there is
// none.
func (c *Cache) readKept(rel string, v any) error {
	f, err := c.store.open(rel)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 2*MaxPageBytes))
	if err != nil {
		return fmt.Errorf("read %s: %w", rel, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", rel, err)
	}
	return nil
}

// blobRef is a file to fetch: its content address, where the upstream index
// said it is, and how to name it in messages.
type blobRef struct {
	algo, hex string
	name      string   // file name
	url       *url.URL // upstream
	publisher string   // "the index" or "the registry", for messages
}

func (b *blobRef) rel() string { return "blobs/" + b.algo + "/" + b.hex }

func newHash(algo string) hash.Hash {
	switch algo {
	case "sha1":
		return sha1.New()
	case "sha256":
		return sha256.New()
	case "sha384":
		return sha512.New384()
	case "sha512":
		return sha512.New()
	}
	return nil
}

// hexLen is the length of each algorithm's digest in hex.
var hexLen = map[string]int{"sha1": 40, "sha256": 64, "sha384": 96, "sha512": 128}

// flight is one download that concurrent requests for its file share.
type flight struct {
	done    chan struct{}
	err     error // set before done is closed
	waiters int   // requests waiting on it; guarded by Cache.mu (tests read it)
}

// fetchBlob downloads, verifies and stores ref, once for all the requests
// that want it at the same time. The download runs on the cache's own
// goroutine, so a client that goes away does not end it for the others;
// Close does.
func (c *Cache) fetchBlob(ctx context.Context, ref *blobRef) error {
	key := ref.rel()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	f := c.flights[key]
	if f == nil {
		f = &flight{done: make(chan struct{})}
		c.flights[key] = f
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			f.err = c.download(c.ctx, ref)
			c.mu.Lock()
			delete(c.flights, key)
			c.mu.Unlock()
			close(f.done)
		}()
	}
	f.waiters++
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// download streams ref from upstream into a temporary file while hashing it,
// and stores it only when the hash is the one published.
func (c *Cache) download(ctx context.Context, ref *blobRef) error {
	start := time.Now()
	up := ref.url.Redacted()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.withAuth(ref.url).String(), nil)
	if err != nil {
		return errorf(ErrUpstream, err, "fetch %s from %s: %v", ref.name, up, err)
	}
	req.Header.Set("User-Agent", "cellbox-package-cache")
	stall := time.AfterFunc(stallTimeout, cancel)
	defer stall.Stop()
	resp, err := c.client.Do(req)
	if err != nil {
		return errorf(ErrUpstream, err, "fetch %s from %s: %v", ref.name, up, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errorf(ErrUpstream, nil, "fetch %s from %s: %s", ref.name, up, resp.Status)
	}
	if resp.ContentLength > c.maxFile {
		return errorf(ErrTooLarge, nil, "refused %s: %d bytes, over the cache's limit of %d bytes for one file; nothing was cached", ref.name, resp.ContentLength, c.maxFile)
	}
	tmp, err := c.store.tempFile()
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	h := newHash(ref.algo)
	body := &stallReader{r: io.LimitReader(resp.Body, c.maxFile+1), t: stall}
	n, err := io.Copy(io.MultiWriter(tmp, h), body)
	if err != nil {
		if ctx.Err() != nil && c.ctx.Err() == nil {
			err = fmt.Errorf("nothing received for %v", stallTimeout)
		}
		return errorf(ErrUpstream, err, "fetch %s from %s: %v", ref.name, up, err)
	}
	if n > c.maxFile {
		return errorf(ErrTooLarge, nil, "refused %s: over the cache's limit of %d bytes for one file; nothing was cached", ref.name, c.maxFile)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != ref.hex {
		c.log.Warn("package cache: refused a file whose hash is not the one published",
			"file", ref.name, "url", up, "algo", ref.algo, "got", got, "want", ref.hex)
		return errorf(ErrHashMismatch, nil, "refused %s: its %s is %s, %s published %s; nothing was cached",
			ref.name, ref.algo, got, ref.publisher, ref.hex)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", ref.name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", ref.name, err)
	}
	if err := c.store.put(tmp.Name(), ref.rel()); err != nil {
		return err
	}
	c.log.Info("package cache: stored", "file", ref.name, "bytes", n, "algo", ref.algo,
		"duration_ms", time.Since(start).Milliseconds())
	return nil
}

// stallReader pushes back its timer on every read that brings bytes.
type stallReader struct {
	r io.Reader
	t *time.Timer
}

func (s *stallReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.t.Reset(stallTimeout)
	}
	return n, err
}

var errEvicted = errors.New("evicted before it could be served")
