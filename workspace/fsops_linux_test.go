package workspace

import (
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
	"github.com/cellbox-dev/cellbox/workspace/sandbox/sandboxtest"
)

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got %v, want %v", what, err, want)
	}
}

// TestFsOps: each file operation through the live mount, as the sandbox's
// code sees and owns the result; run as root and as the test user.
func TestFsOps(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "fsops")

	// write: a new file, then through createParents; code in the sandbox
	// reads it, appends to it and owns it.
	res, err := w.FsWrite(protocol.FsWriteParams{Path: "new.txt", Content: "héllo\n"})
	if err != nil || res.Size != 7 || time.Since(res.Mtime) > time.Minute {
		t.Fatalf("fs/write new.txt = %+v, %v", res, err)
	}
	if _, err := w.FsWrite(protocol.FsWriteParams{Path: "a/b/c.txt", Content: "deep"}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("fs/write a/b/c.txt without createParents: %v, want not exist", err)
	}
	if _, err := w.FsWrite(protocol.FsWriteParams{Path: "a/b/c.txt", Content: "deep", CreateParents: true}); err != nil {
		t.Fatal(err)
	}
	if out := sh(t, w, "cat new.txt a/b/c.txt; echo more >> new.txt; stat -c '%U %a' new.txt a/b a/b/c.txt"); out != "héllo\ndeepcellbox 644\ncellbox 755\ncellbox 644\n" {
		t.Fatalf("the sandbox sees %q", out)
	}
	uid, gid := sandbox.SandboxRootHostIDs()
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(w.UpperDir(), "a/b/c.txt"), &st); err != nil || int(st.Uid) != uid || int(st.Gid) != gid {
		t.Fatalf("upper a/b/c.txt: %v, owner %d:%d, want %d:%d", err, st.Uid, st.Gid, uid, gid)
	}
	// A project file rewritten: in the upper layer, the project untouched.
	if _, err := w.FsWrite(protocol.FsWriteParams{Path: "hello.txt", Content: base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 0xff}), Encoding: protocol.EncodingBase64}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(e.project, "hello.txt")); string(b) != "hello\n" {
		t.Fatalf("the project changed: %q", b)
	}

	// read: utf8, base64, the default, invalid UTF-8.
	r, err := w.FsRead(protocol.FsReadParams{Path: "new.txt"})
	if err != nil || r.Content != "héllo\nmore\n" || r.Encoding != protocol.EncodingUTF8 || r.Size != 12 {
		t.Fatalf("fs/read new.txt = %+v, %v", r, err)
	}
	r, err = w.FsRead(protocol.FsReadParams{Path: "new.txt", Encoding: protocol.EncodingBase64})
	if err != nil || r.Content != base64.StdEncoding.EncodeToString([]byte("héllo\nmore\n")) {
		t.Fatalf("fs/read new.txt base64 = %+v, %v", r, err)
	}
	r, err = w.FsRead(protocol.FsReadParams{Path: "hello.txt"})
	if err != nil || r.Encoding != protocol.EncodingBase64 || r.Content != "AAEC/w==" {
		t.Fatalf("fs/read of binary content without an encoding = %+v, %v", r, err)
	}
	_, err = w.FsRead(protocol.FsReadParams{Path: "hello.txt", Encoding: protocol.EncodingUTF8})
	wantErr(t, "fs/read of binary content as utf8", err, ErrInvalid)
	if !strings.Contains(err.Error(), "base64") {
		t.Fatalf("the error does not say to use base64: %v", err)
	}
	_, err = w.FsRead(protocol.FsReadParams{Path: "missing.txt"})
	wantErr(t, "fs/read missing.txt", err, fs.ErrNotExist)
	_, err = w.FsRead(protocol.FsReadParams{Path: "sub"})
	wantErr(t, "fs/read of a directory", err, ErrInvalid)
	_, err = w.FsRead(protocol.FsReadParams{Path: "new.txt", Encoding: "latin1"})
	wantErr(t, "fs/read with a bad encoding", err, ErrInvalid)

	// stat and list.
	sh(t, w, "ln -s sub/data.txt link; mkdir -p x/y; echo z > x/y/z")
	ent, err := w.FsStat(protocol.FsStatParams{Path: "link"})
	if err != nil || ent.Type != protocol.FileTypeSymlink || ent.Path != "link" || ent.Size != int64(len("sub/data.txt")) {
		t.Fatalf("fs/stat link = %+v, %v", ent, err)
	}
	ent, err = w.FsStat(protocol.FsStatParams{Path: "x"})
	if err != nil || ent.Type != protocol.FileTypeDir || ent.Size != 0 || ent.Mode != 0o755 {
		t.Fatalf("fs/stat x = %+v, %v", ent, err)
	}
	list, err := w.FsList(protocol.FsListParams{Path: "x", Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := paths(list.Entries); !slices.Equal(got, []string{"x/y", "x/y/z"}) {
		t.Fatalf("fs/list x recursive = %v", got)
	}
	list, err = w.FsList(protocol.FsListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got := paths(list.Entries); !slices.Equal(got, []string{"a", "gone.txt", "hello.txt", "link", "new.txt", "sub", "x"}) {
		t.Fatalf("fs/list = %v", got)
	}
	_, err = w.FsList(protocol.FsListParams{Path: "new.txt"})
	wantErr(t, "fs/list of a file", err, ErrInvalid)

	// delete: a project file (the project keeps it), a directory.
	if err := w.FsDelete(protocol.FsDeleteParams{Path: "gone.txt"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(e.project, "gone.txt")); err != nil {
		t.Fatalf("the project lost gone.txt: %v", err)
	}
	wantErr(t, "fs/delete of a non-empty directory", w.FsDelete(protocol.FsDeleteParams{Path: "x"}), ErrInvalid)
	if err := w.FsDelete(protocol.FsDeleteParams{Path: "x", Recursive: true}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "fs/delete of the workspace", w.FsDelete(protocol.FsDeleteParams{Path: "."}), ErrInvalid)
	wantErr(t, "fs/delete missing", w.FsDelete(protocol.FsDeleteParams{Path: "x"}), fs.ErrNotExist)
	if out := sh(t, w, "ls"); out != "a\nhello.txt\nlink\nnew.txt\nsub\n" {
		t.Fatalf("after the deletes the sandbox lists %q", out)
	}

	// rename: a file, refusing to overwrite, overwriting; a project
	// directory (overlayfs says EXDEV: moved by copy).
	if err := w.FsRename(protocol.FsRenameParams{From: "new.txt", To: "a/renamed.txt"}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "fs/rename onto an existing file", w.FsRename(protocol.FsRenameParams{From: "a/renamed.txt", To: "hello.txt"}), ErrInvalid)
	if err := w.FsRename(protocol.FsRenameParams{From: "a/renamed.txt", To: "hello.txt", Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	if err := w.FsRename(protocol.FsRenameParams{From: "sub", To: "moved"}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "fs/rename into itself", w.FsRename(protocol.FsRenameParams{From: "moved", To: "moved/in"}), ErrInvalid)
	if out := sh(t, w, "ls; cat hello.txt moved/data.txt"); out != "a\nhello.txt\nlink\nmoved\nhéllo\nmore\ndata\n" {
		t.Fatalf("after the renames the sandbox sees %q", out)
	}

	// mkdir.
	if err := w.FsMkdir(protocol.FsMkdirParams{Path: "m"}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "fs/mkdir of an existing directory", w.FsMkdir(protocol.FsMkdirParams{Path: "m"}), ErrInvalid)
	wantErr(t, "fs/mkdir without its parent", w.FsMkdir(protocol.FsMkdirParams{Path: "p/q"}), fs.ErrNotExist)
	if err := w.FsMkdir(protocol.FsMkdirParams{Path: "p/q", Parents: true}); err != nil {
		t.Fatal(err)
	}
	if err := w.FsMkdir(protocol.FsMkdirParams{Path: "p/q", Parents: true}); err != nil {
		t.Fatalf("fs/mkdir parents of an existing directory: %v", err)
	}
	if out := sh(t, w, "rmdir p/q m && echo ok"); out != "ok\n" {
		t.Fatal(out)
	}
}

// TestFsOpsAsTestUser runs TestFsOps and TestFsConfinement as the
// unprivileged user, where the sandbox's root is that user.
func TestFsOpsAsTestUser(t *testing.T) {
	if sandboxtest.AsTestUser() {
		t.Skip("already the test user")
	}
	sandboxtest.RunAsTestUser(t, "^(TestFsOps|TestFsConfinement|TestWatch.*)$")
}

func paths(es []protocol.FileEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Path)
	}
	return out
}

// TestFsConfinement: absolute paths, ".." and symlinks planted by code in
// the sandbox that lead out are ErrPathOutside; links that stay inside
// work; FIFOs never block; the size cap holds.
func TestFsConfinement(t *testing.T) {
	e := newAttackEnv(t)
	w := e.open(t, "confine")
	sh(t, w, `ln -s /etc/passwd etc-link; ln -s ../../../../etc abs-dir; ln -s /tmp tmp-link;
		ln -s /workspace/sub/data.txt abs-in; ln -s sub/../hello.txt rel-in; ln -s /proc/self/root/etc/passwd magic;
		ln -s missing dangling; ln -s loop loop; mkfifo fifo; truncate -s 17M big; echo secret > /tmp/secret`)
	outside := []string{"/etc/passwd", "/workspace/hello.txt", "..", "../x", "sub/../../etc/passwd", "etc-link", "abs-dir/passwd", "tmp-link/secret"}
	for _, p := range outside {
		_, err := w.FsRead(protocol.FsReadParams{Path: p})
		wantErr(t, "fs/read "+p, err, ErrPathOutside)
		_, err = w.FsWrite(protocol.FsWriteParams{Path: p, Content: "x"})
		wantErr(t, "fs/write "+p, err, ErrPathOutside)
		_, err = w.FsList(protocol.FsListParams{Path: p})
		wantErr(t, "fs/list "+p, err, ErrPathOutside)
	}
	for _, p := range []string{"tmp-link/secret", "abs-dir/passwd", "/etc/x", "../x"} {
		wantErr(t, "fs/delete "+p, w.FsDelete(protocol.FsDeleteParams{Path: p}), ErrPathOutside)
		wantErr(t, "fs/mkdir "+p, w.FsMkdir(protocol.FsMkdirParams{Path: p + "d", Parents: true}), ErrPathOutside)
		wantErr(t, "fs/rename from "+p, w.FsRename(protocol.FsRenameParams{From: p, To: "here"}), ErrPathOutside)
		wantErr(t, "fs/rename to "+p, w.FsRename(protocol.FsRenameParams{From: "hello.txt", To: p}), ErrPathOutside)
	}
	// A magic link is refused; a dangling link is not followed to create.
	_, err := w.FsRead(protocol.FsReadParams{Path: "magic"})
	if err == nil {
		t.Fatal("fs/read through a /proc magic link succeeded")
	}
	_, err = w.FsWrite(protocol.FsWriteParams{Path: "dangling", Content: "x"})
	wantErr(t, "fs/write through a dangling link", err, ErrInvalid)
	_, err = w.FsRead(protocol.FsReadParams{Path: "loop"})
	wantErr(t, "fs/read of a symlink loop", err, ErrInvalid)
	// Links that stay inside: relative, and absolute to /workspace.
	for _, p := range []string{"abs-in", "rel-in"} {
		if r, err := w.FsRead(protocol.FsReadParams{Path: p}); err != nil || (r.Content != "data\n" && r.Content != "hello\n") {
			t.Fatalf("fs/read %s = %+v, %v", p, r, err)
		}
	}
	if _, err := w.FsWrite(protocol.FsWriteParams{Path: "abs-in", Content: "through\n"}); err != nil {
		t.Fatal(err)
	}
	if out := sh(t, w, "cat sub/data.txt; cat /tmp/secret; cat /etc/passwd | head -1"); !strings.HasPrefix(out, "through\nsecret\nroot:") {
		t.Fatalf("the sandbox sees %q", out)
	}
	// Deleting or renaming a link acts on the link, not its target.
	if err := w.FsDelete(protocol.FsDeleteParams{Path: "etc-link"}); err != nil {
		t.Fatal(err)
	}
	if err := w.FsRename(protocol.FsRenameParams{From: "tmp-link", To: "tmp-link2"}); err != nil {
		t.Fatal(err)
	}
	// A FIFO: refused at once, never opened.
	done := make(chan error, 1)
	go func() {
		_, err := w.FsRead(protocol.FsReadParams{Path: "fifo"})
		done <- err
	}()
	select {
	case err := <-done:
		wantErr(t, "fs/read of a FIFO", err, ErrInvalid)
	case <-time.After(10 * time.Second):
		t.Fatal("fs/read of a FIFO blocked")
	}
	_, err = w.FsWrite(protocol.FsWriteParams{Path: "fifo", Content: "x"})
	wantErr(t, "fs/write of a FIFO", err, ErrInvalid)
	// The size cap.
	_, err = w.FsRead(protocol.FsReadParams{Path: "big"})
	wantErr(t, "fs/read of 17 MiB", err, ErrLimit)
	_, err = w.FsWrite(protocol.FsWriteParams{Path: "big2", Content: strings.Repeat("x", MaxFileBytes+1)})
	wantErr(t, "fs/write of 16 MiB + 1", err, ErrLimit)
	if _, err := w.FsWrite(protocol.FsWriteParams{Path: "max", Content: strings.Repeat("x", MaxFileBytes)}); err != nil {
		t.Fatalf("fs/write of exactly the cap: %v", err)
	}
	if r, err := w.FsRead(protocol.FsReadParams{Path: "max"}); err != nil || r.Size != MaxFileBytes {
		t.Fatalf("fs/read of exactly the cap: %v", err)
	}
}
