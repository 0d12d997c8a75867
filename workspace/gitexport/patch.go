package gitexport

import (
	"bytes"
	"compress/zlib"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Patch is changes as one patch in git's format with binary patches (git
// diff-tree -p --binary -M --full-index), against HEAD plus the project's
// uncommitted work: `git apply` in the project directory (or anywhere in
// the repository) takes it onto the working tree as it is now. Its paths
// are relative to the repository's top level, as every git patch's are:
// git apply reads a git patch so wherever it runs in the repository, and
// skips, without an error, the files of a patch made relative to a
// subdirectory (diff --relative) when it runs there. Nothing is written to the repository: the trees and blobs go to a
// temporary object directory that has the repository's as an alternate.
// It returns the patch and how many files it changes ("" and 0 when the
// changes make no difference).
//
// A patch is text carried in JSON, so it must be UTF-8: a file whose
// content is not (Latin-1 text git would diff line by line) is given as a
// binary patch instead.
func (p *Repo) Patch(ctx context.Context, changes []Change) (string, int, error) {
	head, err := p.head(ctx)
	if err != nil {
		return "", 0, err
	}
	tmp, err := p.r.privateDir()
	if err != nil {
		return "", 0, err
	}
	defer os.RemoveAll(tmp)
	objects := filepath.Join(tmp, "objects")
	if err := p.r.ownedDir(objects); err != nil {
		return "", 0, err
	}
	env := []string{
		"GIT_INDEX_FILE=" + indexFile(tmp),
		"GIT_OBJECT_DIRECTORY=" + objects,
		"GIT_ALTERNATE_OBJECT_DIRECTORIES=" + p.objects,
	}
	t, err := p.build(ctx, tmp, env, head, changes)
	if err != nil {
		return "", 0, err
	}
	if t.next == t.base {
		return "", 0, nil
	}
	args := []string{"diff-tree", "-p", "--binary", "-M", "--full-index", "--no-ext-diff", "--no-textconv", t.base, t.next}
	out, err := p.r.run(ctx, cmd{dir: p.top, args: args, env: env})
	if err != nil {
		return "", 0, fmt.Errorf("diff the changes: %w", err)
	}
	sections := splitSections(out)
	var b strings.Builder
	for _, s := range sections {
		if !utf8.Valid(s) {
			if s, err = p.binarySection(ctx, env, s, MaxPatch-b.Len()); err != nil {
				return "", 0, err
			}
		}
		if b.Len()+len(s) > MaxPatch {
			return "", 0, errPatchLimit()
		}
		b.Write(s)
	}
	return b.String(), len(sections), nil
}

// MaxPatch bounds a patch: it travels whole in one JSON string.
const MaxPatch = 64 << 20

func errPatchLimit() error {
	return fmt.Errorf("%w: the patch is over %d MiB; ask for fewer paths", ErrLimit, MaxPatch>>20)
}

// splitSections cuts a patch at each "diff --git " line.
func splitSections(patch []byte) [][]byte {
	var out [][]byte
	for len(patch) > 0 {
		i := bytes.Index(patch[1:], []byte("\ndiff --git "))
		if i < 0 {
			out = append(out, patch)
			break
		}
		out = append(out, patch[:i+2])
		patch = patch[i+2:]
	}
	return out
}

// binarySection turns a file's text patch into a binary one: its header
// (the diff --git line, mode and rename lines, the full index line), then
// git's binary literals of the new content and the old.
func (p *Repo) binarySection(ctx context.Context, env []string, s []byte, budget int) ([]byte, error) {
	var head bytes.Buffer
	var oldID, newID string
	for line := range bytes.Lines(s) {
		if bytes.HasPrefix(line, []byte("--- ")) || bytes.HasPrefix(line, []byte("Binary files ")) || bytes.HasPrefix(line, []byte("GIT binary patch")) {
			break
		}
		if ids, ok := bytes.CutPrefix(line, []byte("index ")); ok {
			if f := strings.Fields(string(ids)); len(f) > 0 {
				if a, b, ok := strings.Cut(f[0], ".."); ok {
					oldID, newID = a, b
				}
			}
		}
		head.Write(line)
	}
	if oldID == "" || !utf8.Valid(head.Bytes()) {
		return nil, fmt.Errorf("a section of the patch that is not UTF-8 and has no index line: %.200q", s)
	}
	// Both sides go whole into the patch (deflated): sides over the budget
	// are refused before they are read.
	for _, id := range []string{oldID, newID} {
		if strings.Trim(id, "0") == "" {
			continue
		}
		out, err := p.r.run(ctx, cmd{dir: p.top, env: env, args: []string{"cat-file", "-s", id}})
		if err != nil {
			return nil, fmt.Errorf("size of blob %s: %w", id, err)
		}
		size := strings.TrimSpace(string(out))
		n, err := strconv.Atoi(size)
		if err != nil {
			return nil, fmt.Errorf("size of blob %s: %q", id, size)
		}
		if budget -= n; budget < 0 {
			return nil, errPatchLimit()
		}
	}
	old, err := p.blob(ctx, env, oldID)
	if err != nil {
		return nil, err
	}
	new, err := p.blob(ctx, env, newID)
	if err != nil {
		return nil, err
	}
	head.WriteString("GIT binary patch\n")
	writeLiteral(&head, new)
	writeLiteral(&head, old)
	return head.Bytes(), nil
}

// blob is the content of a blob ("" for the null id of a side that does
// not exist).
func (p *Repo) blob(ctx context.Context, env []string, id string) ([]byte, error) {
	if strings.Trim(id, "0") == "" {
		return nil, nil
	}
	b, err := p.r.run(ctx, cmd{dir: p.top, env: env, args: []string{"cat-file", "blob", id}})
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", id, err)
	}
	return b, nil
}

// writeLiteral writes a hunk of git's binary patch: "literal SIZE", the
// zlib-deflated data in base-85 lines of up to 52 bytes (a length letter,
// A-Z for 1-26, a-z for 27-52, then the bytes in groups of four as five
// characters), and an empty line.
func writeLiteral(b *bytes.Buffer, data []byte) {
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
	zw.Write(data)
	zw.Close()
	b.WriteString("literal " + strconv.Itoa(len(data)) + "\n")
	d := z.Bytes()
	for len(d) > 0 {
		n := min(len(d), 52)
		if n <= 26 {
			b.WriteByte(byte('A' + n - 1))
		} else {
			b.WriteByte(byte('a' + n - 27))
		}
		encode85(b, d[:n])
		b.WriteByte('\n')
		d = d[n:]
	}
	b.WriteByte('\n')
}

const en85 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"

// encode85 is git's base-85 (base85.c encode_85): each group of four bytes,
// the last padded with zeros, as five characters.
func encode85(b *bytes.Buffer, data []byte) {
	for len(data) > 0 {
		var acc uint32
		for i := range 4 {
			acc <<= 8
			if i < len(data) {
				acc |= uint32(data[i])
			}
		}
		data = data[min(4, len(data)):]
		var group [5]byte
		for i := 4; i >= 0; i-- {
			group[i] = en85[acc%85]
			acc /= 85
		}
		b.Write(group[:])
	}
}
