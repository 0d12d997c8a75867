package main

import (
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cellbox-dev/cellbox/protocol"
)

// fsTransports runs f against a fresh daemon over stdio and over
// websocket. The daemons accept messages of 40 MB, so that the file size
// cap (16 MiB), not the message limit, is what a large fs/write meets.
func fsTransports(t *testing.T, f func(t *testing.T, c *client)) {
	const maxMsg = "40000000"
	t.Run("stdio", func(t *testing.T) {
		p := startStdio(t, "--max-message-bytes", maxMsg)
		c := p.client()
		c.initialize(t)
		f(t, c)
	})
	t.Run("websocket", func(t *testing.T) {
		p := startListen(t, "--max-message-bytes", maxMsg)
		c := wsClientOf(t, p)
		c.initialize(t)
		f(t, c)
	})
}

func wsClientOf(t testing.TB, p *listenProc) *client {
	t.Helper()
	ws, _, err := p.dial(t, http.Header{"Authorization": {"Bearer " + p.token}})
	if err != nil {
		t.Fatal(err)
	}
	return newClient(&wsStream{ws: ws})
}

func fsProject(t *testing.T) string {
	t.Helper()
	project := t.TempDir()
	for name, content := range map[string]string{"hello.txt": "hello\n", "sub/data.txt": "data\n"} {
		p := filepath.Join(project, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return project
}

// sandboxSh runs a shell script in the workspace's sandbox (the test
// hook) and returns its stdout, failing unless it exits 0.
func sandboxSh(t *testing.T, c *client, ws, script string) string {
	t.Helper()
	var r execReply
	c.mustCall(t, "cellboxTest/exec", map[string]any{"workspaceId": ws, "argv": []string{"sh", "-ec", script}}, &r)
	if r.ExitCode != 0 {
		t.Fatalf("sh -ec %q: exit %d: %s", script, r.ExitCode, r.Stderr)
	}
	return r.Stdout
}

// TestFsEndToEnd: every file operation over the wire, with utf8 and
// base64, errors, and what the sandbox's code then sees.
func TestFsEndToEnd(t *testing.T) {
	fsTransports(t, func(t *testing.T, c *client) {
		project := fsProject(t)
		ws := openWorkspace(t, c, project, "fs")

		var wr protocol.FsWriteResult
		c.mustCall(t, protocol.MethodFsWrite, protocol.FsWriteParams{WorkspaceID: ws, Path: "docs/note.md", Content: "# ünïcode\n", CreateParents: true}, &wr)
		if wr.Size != int64(len("# ünïcode\n")) || wr.Mtime.IsZero() {
			t.Fatalf("fs/write = %+v", wr)
		}
		bin := []byte{0, 0xff, 0xfe, 'x', '\n'}
		c.mustCall(t, protocol.MethodFsWrite, protocol.FsWriteParams{WorkspaceID: ws, Path: "bin.dat", Content: base64.StdEncoding.EncodeToString(bin), Encoding: protocol.EncodingBase64}, &wr)
		c.mustCall(t, protocol.MethodFsWrite, protocol.FsWriteParams{WorkspaceID: ws, Path: "hello.txt", Content: "rewritten\n"}, &wr)

		// The sandbox's code sees the files and owns them; the project is
		// untouched (an overlay workspace).
		if out := sandboxSh(t, c, ws, "cat docs/note.md hello.txt; od -An -tx1 bin.dat; stat -c %U docs docs/note.md; echo appended >> docs/note.md"); out != "# ünïcode\nrewritten\n 00 ff fe 78 0a\ncellbox\ncellbox\n" {
			t.Fatalf("the sandbox sees %q", out)
		}
		if b, _ := os.ReadFile(filepath.Join(project, "hello.txt")); string(b) != "hello\n" {
			t.Fatalf("the project changed: %q", b)
		}

		var rd protocol.FsReadResult
		c.mustCall(t, protocol.MethodFsRead, protocol.FsReadParams{WorkspaceID: ws, Path: "docs/note.md"}, &rd)
		if rd.Content != "# ünïcode\nappended\n" || rd.Encoding != protocol.EncodingUTF8 || rd.Size != 21 || rd.Mtime.IsZero() {
			t.Fatalf("fs/read docs/note.md = %+v", rd)
		}
		c.mustCall(t, protocol.MethodFsRead, protocol.FsReadParams{WorkspaceID: ws, Path: "docs/note.md", Encoding: protocol.EncodingBase64}, &rd)
		if b, _ := base64.StdEncoding.DecodeString(rd.Content); string(b) != "# ünïcode\nappended\n" || rd.Encoding != protocol.EncodingBase64 {
			t.Fatalf("fs/read base64 = %+v", rd)
		}
		c.mustCall(t, protocol.MethodFsRead, protocol.FsReadParams{WorkspaceID: ws, Path: "bin.dat"}, &rd)
		if b, _ := base64.StdEncoding.DecodeString(rd.Content); !slices.Equal(b, bin) || rd.Encoding != protocol.EncodingBase64 {
			t.Fatalf("fs/read of binary content without an encoding = %+v", rd)
		}
		msg := wantCode(t, c.call(t, protocol.MethodFsRead, protocol.FsReadParams{WorkspaceID: ws, Path: "bin.dat", Encoding: protocol.EncodingUTF8}, nil), protocol.CodeInvalidParams)
		if !strings.Contains(msg, "base64") {
			t.Fatalf("reading binary content as utf8: %q does not say to use base64", msg)
		}
		wantCode(t, c.call(t, protocol.MethodFsWrite, protocol.FsWriteParams{WorkspaceID: ws, Path: "x", Content: "!!", Encoding: protocol.EncodingBase64}, nil), protocol.CodeInvalidParams)

		// stat, list, mkdir, rename, delete.
		sandboxSh(t, c, ws, "ln -s sub/data.txt link")
		var ent protocol.FileEntry
		c.mustCall(t, protocol.MethodFsStat, protocol.FsStatParams{WorkspaceID: ws, Path: "link"}, &ent)
		if ent.Type != protocol.FileTypeSymlink || ent.Path != "link" {
			t.Fatalf("fs/stat link = %+v", ent)
		}
		c.mustCall(t, protocol.MethodFsStat, protocol.FsStatParams{WorkspaceID: ws, Path: "sub/data.txt"}, &ent)
		if ent.Type != protocol.FileTypeFile || ent.Size != 5 || ent.Mode != 0o644 {
			t.Fatalf("fs/stat sub/data.txt = %+v", ent)
		}
		c.mustCall(t, protocol.MethodFsMkdir, protocol.FsMkdirParams{WorkspaceID: ws, Path: "a/b", Parents: true}, nil)
		c.mustCall(t, protocol.MethodFsRename, protocol.FsRenameParams{WorkspaceID: ws, From: "docs/note.md", To: "a/b/note.md"}, nil)
		c.mustCall(t, protocol.MethodFsRename, protocol.FsRenameParams{WorkspaceID: ws, From: "sub", To: "sub2"}, nil)
		c.mustCall(t, protocol.MethodFsDelete, protocol.FsDeleteParams{WorkspaceID: ws, Path: "docs"}, nil)
		c.mustCall(t, protocol.MethodFsDelete, protocol.FsDeleteParams{WorkspaceID: ws, Path: "bin.dat"}, nil)
		var list protocol.FsListResult
		c.mustCall(t, protocol.MethodFsList, protocol.FsListParams{WorkspaceID: ws, Recursive: true}, &list)
		var got []string
		for _, e := range list.Entries {
			got = append(got, e.Path+":"+string(e.Type))
		}
		want := []string{"a:dir", "a/b:dir", "a/b/note.md:file", "hello.txt:file", "link:symlink", "sub2:dir", "sub2/data.txt:file"}
		if !slices.Equal(got, want) {
			t.Fatalf("fs/list recursive = %v, want %v", got, want)
		}
		if out := sandboxSh(t, c, ws, "cat a/b/note.md sub2/data.txt; ls"); out != "# ünïcode\nappended\ndata\na\nhello.txt\nlink\nsub2\n" {
			t.Fatalf("the sandbox sees %q", out)
		}

		// Errors, with their §7 codes.
		for _, tt := range []struct {
			method string
			params any
			code   protocol.ErrorCode
		}{
			{protocol.MethodFsRead, protocol.FsReadParams{WorkspaceID: ws, Path: "missing"}, protocol.CodeNotFound},
			{protocol.MethodFsRead, protocol.FsReadParams{WorkspaceID: "ws-nope", Path: "hello.txt"}, protocol.CodeNotFound},
			{protocol.MethodFsRead, protocol.FsReadParams{Path: "hello.txt"}, protocol.CodeInvalidParams},
			{protocol.MethodFsRead, protocol.FsReadParams{WorkspaceID: ws, Path: "a"}, protocol.CodeInvalidParams},
			{protocol.MethodFsWrite, protocol.FsWriteParams{WorkspaceID: ws, Path: "no/such/dir/f", Content: "x"}, protocol.CodeNotFound},
			{protocol.MethodFsDelete, protocol.FsDeleteParams{WorkspaceID: ws, Path: "a"}, protocol.CodeInvalidParams},
			{protocol.MethodFsDelete, protocol.FsDeleteParams{WorkspaceID: ws, Path: "missing"}, protocol.CodeNotFound},
			{protocol.MethodFsRename, protocol.FsRenameParams{WorkspaceID: ws, From: "link", To: "hello.txt"}, protocol.CodeInvalidParams},
			{protocol.MethodFsMkdir, protocol.FsMkdirParams{WorkspaceID: ws, Path: "a"}, protocol.CodeInvalidParams},
			{protocol.MethodFsList, protocol.FsListParams{WorkspaceID: ws, Path: "hello.txt"}, protocol.CodeInvalidParams},
			{protocol.MethodFsStat, protocol.FsStatParams{WorkspaceID: ws, Path: "missing"}, protocol.CodeNotFound},
		} {
			wantCode(t, c.call(t, tt.method, tt.params, nil), tt.code)
		}
		c.mustCall(t, protocol.MethodFsDelete, protocol.FsDeleteParams{WorkspaceID: ws, Path: "a", Recursive: true}, nil)
	})
}

// TestFsConfinementEndToEnd: absolute paths, ".." and symlinks planted by
// code in the sandbox that lead out fail with -32011 for every operation;
// a link that stays inside works; the size cap answers -32012.
func TestFsConfinementEndToEnd(t *testing.T) {
	fsTransports(t, func(t *testing.T, c *client) {
		ws := openWorkspace(t, c, fsProject(t), "confine")
		sandboxSh(t, c, ws, `ln -s /etc/passwd passwd; ln -s ../../../../../etc up; ln -s /tmp tmp; echo secret > /tmp/s
			ln -s /workspace/sub/data.txt inside; mkfifo fifo; truncate -s 17M big`)
		for _, p := range []string{"/etc/passwd", "/workspace/hello.txt", "..", "../etc/passwd", "sub/../../x", "passwd", "up/passwd", "tmp/s"} {
			for _, call := range []struct {
				method string
				params any
			}{
				{protocol.MethodFsRead, protocol.FsReadParams{WorkspaceID: ws, Path: p}},
				{protocol.MethodFsWrite, protocol.FsWriteParams{WorkspaceID: ws, Path: p, Content: "x"}},
				{protocol.MethodFsList, protocol.FsListParams{WorkspaceID: ws, Path: p}},
				{protocol.MethodFsStat, protocol.FsStatParams{WorkspaceID: ws, Path: p + "/x"}},
				{protocol.MethodFsDelete, protocol.FsDeleteParams{WorkspaceID: ws, Path: p + "/x"}},
				{protocol.MethodFsMkdir, protocol.FsMkdirParams{WorkspaceID: ws, Path: p + "/x", Parents: true}},
				{protocol.MethodFsRename, protocol.FsRenameParams{WorkspaceID: ws, From: "hello.txt", To: p + "/x"}},
			} {
				if (p == "passwd" || p == "tmp/s") && call.method == protocol.MethodFsList {
					continue // names a file: checked as a read
				}
				err := c.call(t, call.method, call.params, nil)
				if err == nil {
					t.Fatalf("%s %q succeeded", call.method, p)
				}
				wantCode(t, err, protocol.CodePathOutsideWorkspace)
			}
		}
		// Nothing outside changed; the links and the file in /tmp are there.
		if out := sandboxSh(t, c, ws, "cat /tmp/s; ls /tmp; head -c 5 /etc/passwd"); out != "secret\ns\nroot:" {
			t.Fatalf("outside the workspace the sandbox sees %q", out)
		}
		var rd protocol.FsReadResult
		c.mustCall(t, protocol.MethodFsRead, protocol.FsReadParams{WorkspaceID: ws, Path: "inside"}, &rd)
		if rd.Content != "data\n" {
			t.Fatalf("fs/read through a link inside = %+v", rd)
		}
		wantCode(t, c.call(t, protocol.MethodFsRead, protocol.FsReadParams{WorkspaceID: ws, Path: "fifo"}, nil), protocol.CodeInvalidParams)
		wantCode(t, c.call(t, protocol.MethodFsRead, protocol.FsReadParams{WorkspaceID: ws, Path: "big"}, nil), protocol.CodeLimitExceeded)
		wantCode(t, c.call(t, protocol.MethodFsWrite, protocol.FsWriteParams{WorkspaceID: ws, Path: "big2", Content: strings.Repeat("x", 16<<20+1)}, nil), protocol.CodeLimitExceeded)
		var wr protocol.FsWriteResult
		c.mustCall(t, protocol.MethodFsWrite, protocol.FsWriteParams{WorkspaceID: ws, Path: "max", Content: strings.Repeat("y", 16<<20)}, &wr)
		if wr.Size != 16<<20 {
			t.Fatalf("fs/write of 16 MiB = %+v", wr)
		}
	})
}
