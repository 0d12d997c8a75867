package packages

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// The store keeps every file of the cache under Dir by a relative path
// (blobs/ALGO/HEX, pypi/projects/NAME.json, npm/packuments/NAME.json), counts
// their sizes against the cap and evicts the least recently used past it.
// Files arrive only by put: written in Dir/tmp, then renamed into place.
type store struct {
	dir string
	max int64
	log *slog.Logger

	mu sync.Mutex
	// guarded by mu
	total   int64
	entries map[string]*storeEntry // by relative path
}

type storeEntry struct {
	size int64
	used time.Time
}

// storeKinds are the directories whose files the store counts, each with a
// check of the names it holds (anything else found there is removed).
var storeKinds = []struct {
	dir   string
	valid func(name string) bool
}{
	{"blobs/sha1", func(n string) bool { return isHex(n, 40) }},
	{"blobs/sha256", func(n string) bool { return isHex(n, 64) }},
	{"blobs/sha384", func(n string) bool { return isHex(n, 96) }},
	{"blobs/sha512", func(n string) bool { return isHex(n, 128) }},
	{"pypi/projects", func(n string) bool { return strings.HasSuffix(n, ".json") }},
	{"npm/packuments", func(n string) bool { return strings.HasSuffix(n, ".json") }},
}

// staleTemp is how old a file in Dir/tmp must be for openStore to remove it:
// one a crashed daemon left, not one another process is writing.
const staleTemp = time.Hour

func openStore(dir string, max int64, log *slog.Logger) (*store, error) {
	s := &store{dir: dir, max: max, log: log, entries: map[string]*storeEntry{}}
	for _, d := range append([]string{"tmp"}, kindDirs()...) {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("create %q: %w", filepath.Join(dir, d), err)
		}
	}
	if tmps, err := os.ReadDir(filepath.Join(dir, "tmp")); err == nil {
		for _, e := range tmps {
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > staleTemp {
				os.Remove(filepath.Join(dir, "tmp", e.Name()))
			}
		}
	}
	for _, k := range storeKinds {
		ents, err := os.ReadDir(filepath.Join(dir, k.dir))
		if err != nil {
			return nil, fmt.Errorf("read %q: %w", filepath.Join(dir, k.dir), err)
		}
		for _, e := range ents {
			rel := k.dir + "/" + e.Name()
			info, err := e.Info()
			if err != nil {
				continue
			}
			if !info.Mode().IsRegular() || !k.valid(e.Name()) {
				log.Warn("package cache: removing a stray file", "path", rel)
				os.RemoveAll(filepath.Join(dir, rel))
				continue
			}
			s.entries[rel] = &storeEntry{size: info.Size(), used: info.ModTime()}
			s.total += info.Size()
		}
	}
	s.mu.Lock()
	s.evictLocked("")
	s.mu.Unlock()
	return s, nil
}

func kindDirs() []string {
	var ds []string
	for _, k := range storeKinds {
		ds = append(ds, k.dir)
	}
	return ds
}

// tempFile creates a file in Dir/tmp for put.
func (s *store) tempFile() (*os.File, error) {
	f, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), "fetch-*")
	if err != nil {
		return nil, fmt.Errorf("create a temporary file: %w", err)
	}
	return f, nil
}

// put moves the complete, synced temporary file tmp to rel and evicts past the
// cap (never rel itself).
func (s *store) put(tmp, rel string) error {
	info, err := os.Stat(tmp)
	if err != nil {
		return fmt.Errorf("stat %q: %w", tmp, err)
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return fmt.Errorf("chmod %q: %w", tmp, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.Rename(tmp, filepath.Join(s.dir, rel)); err != nil {
		return fmt.Errorf("store %s: %w", rel, err)
	}
	if old := s.entries[rel]; old != nil {
		s.total -= old.size
	}
	s.entries[rel] = &storeEntry{size: info.Size(), used: time.Now()}
	s.total += info.Size()
	s.evictLocked(rel)
	return nil
}

// evictLocked removes the least recently used files until the total is
// within the cap, keeping keep.
func (s *store) evictLocked(keep string) {
	if s.total <= s.max {
		return
	}
	type lru struct {
		rel  string
		used time.Time
	}
	all := make([]lru, 0, len(s.entries))
	for rel, e := range s.entries {
		if rel != keep {
			all = append(all, lru{rel, e.used})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].used.Before(all[j].used) })
	for _, v := range all {
		if s.total <= s.max {
			break
		}
		if err := os.Remove(filepath.Join(s.dir, v.rel)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("package cache: evict", "path", v.rel, "err", err)
			continue
		}
		s.total -= s.entries[v.rel].size
		delete(s.entries, v.rel)
		s.log.Debug("package cache: evicted", "path", v.rel)
	}
}

// open opens the stored file rel and marks it used; fs.ErrNotExist when the
// store lacks it.
func (s *store) open(rel string) (*os.File, error) {
	s.mu.Lock()
	e := s.entries[rel]
	if e == nil {
		s.mu.Unlock()
		return nil, fs.ErrNotExist
	}
	now := time.Now()
	e.used = now
	f, err := os.Open(filepath.Join(s.dir, rel))
	if err != nil {
		// Gone behind our back: forget it.
		s.total -= e.size
		delete(s.entries, rel)
		s.mu.Unlock()
		return nil, fmt.Errorf("open %s: %w", rel, err)
	}
	s.mu.Unlock()
	// The mtime is the last use, for the next start's LRU order.
	os.Chtimes(filepath.Join(s.dir, rel), now, now)
	return f, nil
}

// has reports whether rel is stored.
func (s *store) has(rel string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.entries[rel] != nil
}

// usage reports the bytes stored and the number of files.
func (s *store) usage() (int64, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total, len(s.entries)
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
