package main

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// End-to-end tests of the hand-off to git (PROTOCOL.md §10
// workspace/exportGit, and workspace/exportPatch), with renames and
// ignored paths in workspace/changes, over the real binary, as root and as
// CELLBOX_TEST_USER: a python kernel changes a git project that has
// uncommitted work of the user's.

// gitAs runs git in dir as the project's owner (the test user, or root),
// with no config but the identity, and returns its stdout.
func (d *filesDaemon) gitAs(t *testing.T, dir string, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=User", "-c", "user.email=user@example.com"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Dir(d.project), "LC_ALL=C", "GIT_CONFIG_NOSYSTEM=1"}
	if d.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: d.cred}
	}
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return string(out)
}

// writeAs writes a file of the project as its owner would.
func (d *filesDaemon) writeAs(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if d.cred != nil {
		if err := os.Chown(p, int(d.cred.Uid), int(d.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
}

// userState is everything of the project the user works with: the working
// tree's files (bytes, modes, link targets), the index's and HEAD's bytes,
// git status and the current branch.
func (d *filesDaemon) userState(t *testing.T) map[string]string {
	t.Helper()
	s := map[string]string{}
	err := filepath.WalkDir(d.project, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(d.project, p)
		if rel == ".git" {
			return filepath.SkipDir
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			s["tree "+rel] = "-> " + l
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s["tree "+rel] = info.Mode().String() + " " + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"index", "HEAD"} {
		b, err := os.ReadFile(filepath.Join(d.project, ".git", f))
		if err != nil {
			t.Fatal(err)
		}
		s[".git/"+f] = string(b)
		if f == "index" {
			s[".git/"+f] = fmt.Sprintf("%d bytes, sha256 %x", len(b), sha256.Sum256(b))
		}
	}
	s["status"] = d.gitAs(t, d.project, "", "--no-optional-locks", "status", "--porcelain", "--untracked-files=all")
	s["branch"] = d.gitAs(t, d.project, "", "symbolic-ref", "HEAD")
	return s
}

func sameState(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed the user's %s: %.300q, was %.300q", what, k, after[k], v)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s added %s to the user's project: %q", what, k, after[k])
		}
	}
}

// view is the workspace's files as its sandbox sees them (fs/list, fs/read),
// without .git and build/: "mode content", or "-> " for a symlink.
func (d *filesDaemon) view(t *testing.T, ws string) map[string]string {
	t.Helper()
	var list protocol.FsListResult
	d.c.mustCall(t, protocol.MethodFsList, protocol.FsListParams{WorkspaceID: ws, Recursive: true}, &list)
	out := map[string]string{}
	for _, e := range list.Entries {
		if e.Path == ".git" || strings.HasPrefix(e.Path, ".git/") || strings.HasPrefix(e.Path, "build") {
			continue
		}
		switch e.Type {
		case protocol.FileTypeSymlink:
			out[e.Path] = "->"
		case protocol.FileTypeFile:
			var r protocol.FsReadResult
			d.c.mustCall(t, protocol.MethodFsRead, protocol.FsReadParams{WorkspaceID: ws, Path: e.Path}, &r)
			c := r.Content
			if r.Encoding == protocol.EncodingBase64 {
				b, _ := base64.StdEncoding.DecodeString(c)
				c = string(b)
			}
			out[e.Path] = fs.FileMode(e.Mode&0o111).String() + " " + c
		}
	}
	return out
}

// treeOf is a directory's files as view shows a workspace's.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == ".git" {
			return filepath.SkipDir
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			out[rel] = "->"
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = (info.Mode() & 0o111).String() + " " + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func nameStatusLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func TestExportGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	for _, asUser := range []bool{false, true} {
		name := map[bool]string{false: "root", true: "user"}[asUser]
		t.Run(name, func(t *testing.T) { exportGit(t, asUser) })
	}
}

func exportGit(t *testing.T, asUser bool) {
	d := newFilesDaemon(t, asUser, map[string]string{
		".gitignore":       "build/\n",
		"tracked.txt":      "one\n",
		"edit-me.txt":      "v1\n",
		"user-deletes.txt": "the user deletes this\n",
		"moveme.txt":       "a file the kernel moves\nwhole\n",
		"remove-me.txt":    "the kernel removes this\n",
	})
	p := d.project
	d.gitAs(t, p, "", "init", "-q", "-b", "main")
	d.gitAs(t, p, "", "add", "-A")
	d.gitAs(t, p, "", "commit", "-q", "-m", "the user's commit")
	head := strings.TrimSpace(d.gitAs(t, p, "", "rev-parse", "HEAD"))
	// The user's uncommitted work: a modified tracked file, an untracked
	// file, a deleted file.
	d.writeAs(t, filepath.Join(p, "edit-me.txt"), "v2, not committed\n")
	d.writeAs(t, filepath.Join(p, "notes.txt"), "untracked notes\n")
	if err := os.Remove(filepath.Join(p, "user-deletes.txt")); err != nil {
		t.Fatal(err)
	}
	// .gitignore is touched, not changed: a git status that may write the
	// index would refresh its entry.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(p, ".gitignore"), later, later); err != nil {
		t.Fatal(err)
	}

	ws := openWorkspace(t, d.c, p, "agent")
	k := startKernel(t, d.c, protocol.KernelStartParams{Language: "python", WorkspaceID: ws})
	res0, outs := execute(t, d.c, k.KernelID, `import os, subprocess
open("new.txt", "w").write("from the kernel\n")
with open("tracked.txt", "a") as f:
    f.write("two\n")
os.remove("remove-me.txt")
os.makedirs("pkg", exist_ok=True)
os.rename("moveme.txt", "pkg/moved.txt")
os.makedirs("build", exist_ok=True)
open("build/out.o", "wb").write(b"\x00object")
subprocess.run(["sh", "-c", "printf '#!/bin/sh\\necho hi\\n' > tool.sh && chmod +x tool.sh && ln -s new.txt link"], check=True)
print("done")`)
	wantOK(t, res0, outs)
	if out := streamText(outs, protocol.StreamStdout); out != "done\n" {
		t.Fatalf("kernel printed %q", out)
	}

	// workspace/changes: the rename paired, build/ left out and counted.
	var ch protocol.WorkspaceChangesResult
	d.c.mustCall(t, protocol.MethodWorkspaceChanges, protocol.WorkspaceChangesParams{WorkspaceID: ws}, &ch)
	var got []string
	for _, c := range ch.Changes {
		l := string(c.Kind) + " " + c.Path
		if c.RenamedFrom != "" {
			l += " <- " + c.RenamedFrom
		}
		if c.RenamedTo != "" {
			l += " -> " + c.RenamedTo
		}
		got = append(got, l)
	}
	want := []string{"added link", "deleted moveme.txt -> pkg/moved.txt", "added new.txt", "added pkg/moved.txt <- moveme.txt",
		"deleted remove-me.txt", "added tool.sh", "modified tracked.txt"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || ch.Ignored != 1 {
		t.Fatalf("workspace/changes:\n%s\nignored %d; want:\n%s\nignored 1", strings.Join(got, "\n"), ch.Ignored, strings.Join(want, "\n"))
	}
	var all protocol.WorkspaceChangesResult
	d.c.mustCall(t, protocol.MethodWorkspaceChanges, protocol.WorkspaceChangesParams{WorkspaceID: ws, Ignored: true}, &all)
	if len(all.Changes) != 8 || all.Changes[0].Path != "build/out.o" || all.Ignored != 0 {
		t.Fatalf("workspace/changes with ignored: %+v", all)
	}

	// workspace/exportGit: a baseline of the user's work, then exactly the
	// kernel's changes; the user's project untouched.
	before := d.userState(t)
	var res protocol.WorkspaceExportGitResult
	d.c.mustCall(t, protocol.MethodWorkspaceExportGit, protocol.WorkspaceExportGitParams{WorkspaceID: ws, Branch: "cellbox/agent", Message: "the agent's work"}, &res)
	sameState(t, "workspace/exportGit", before, d.userState(t))
	if res.Branch != "cellbox/agent" || res.Baseline == "" || res.Files != 7 {
		t.Fatalf("exportGit = %+v; want a baseline and 7 files", res)
	}
	if got := strings.TrimSpace(d.gitAs(t, p, "", "rev-parse", "refs/heads/cellbox/agent", res.Commit+"^", res.Baseline+"^")); got != res.Commit+"\n"+res.Baseline+"\n"+head {
		t.Fatalf("branch, commit's parent, baseline's parent:\n%s\nwant %s, %s, HEAD %s", got, res.Commit, res.Baseline, head)
	}
	if got := nameStatusLines(d.gitAs(t, p, "", "diff-tree", "-r", "--no-renames", "--name-status", head, res.Baseline)); got != "A\tnotes.txt\nD\tuser-deletes.txt\nM\tedit-me.txt" {
		t.Errorf("the baseline's changes:\n%s", got)
	}
	wantCommit := "A\tlink\nA\tnew.txt\nA\tpkg/moved.txt\nA\ttool.sh\nD\tmoveme.txt\nD\tremove-me.txt\nM\ttracked.txt"
	if got := nameStatusLines(d.gitAs(t, p, "", "diff-tree", "-r", "--no-renames", "--name-status", res.Baseline, res.Commit)); got != wantCommit {
		t.Errorf("the commit's changes:\n%s\nwant exactly the kernel's:\n%s", got, wantCommit)
	}
	if got := d.gitAs(t, p, "", "diff-tree", "-r", "-M", "--name-status", res.Baseline, res.Commit); !strings.Contains(got, "R100\tmoveme.txt\tpkg/moved.txt") {
		t.Errorf("git does not see the move as a rename:\n%s", got)
	}
	for rev, want := range map[string]string{
		res.Commit + ":tracked.txt":   "one\ntwo\n",
		res.Commit + ":edit-me.txt":   "v2, not committed\n",
		res.Commit + ":pkg/moved.txt": "a file the kernel moves\nwhole\n",
	} {
		if got := d.gitAs(t, p, "", "show", rev); got != want {
			t.Errorf("git show %s = %q, want %q", rev, got, want)
		}
	}
	if got := d.gitAs(t, p, "", "ls-tree", res.Commit, "tool.sh", "link"); !strings.HasPrefix(got, "120000 blob ") || !strings.Contains(got, "\n100755 blob ") {
		t.Errorf("modes in the commit:\n%s", got)
	}
	if got := d.gitAs(t, p, "", "show", "-s", "--format=%s", res.Commit); got != "the agent's work\n" {
		t.Errorf("message %q", got)
	}
	if got := d.gitAs(t, p, "", "ls-tree", "-r", "--name-only", res.Commit); strings.Contains(got, "build/") {
		t.Errorf("the ignored build/ was committed:\n%s", got)
	}

	// The branch is not moved from elsewhere than HEAD; the checked-out
	// branch is refused.
	err := d.c.call(t, protocol.MethodWorkspaceExportGit, protocol.WorkspaceExportGitParams{WorkspaceID: ws, Branch: "cellbox/agent"}, nil)
	wantCode(t, err, protocol.CodeConflict)
	err = d.c.call(t, protocol.MethodWorkspaceExportGit, protocol.WorkspaceExportGitParams{WorkspaceID: ws, Branch: "main"}, nil)
	wantCode(t, err, protocol.CodeInvalidParams)
	sameState(t, "the refused exports", before, d.userState(t))

	// workspace/exportPatch, applied to a fresh clone in the same state,
	// gives the workspace's view.
	var patch protocol.WorkspaceExportPatchResult
	d.c.mustCall(t, protocol.MethodWorkspaceExportPatch, protocol.WorkspaceExportPatchParams{WorkspaceID: ws}, &patch)
	sameState(t, "workspace/exportPatch", before, d.userState(t))
	if patch.Files != 6 { // the move is one rename
		t.Errorf("exportPatch: %d files, want 6:\n%s", patch.Files, patch.Patch)
	}
	clone, err := os.MkdirTemp(filepath.Dir(p), "clone-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(clone) })
	if d.cred != nil {
		if err := os.Chown(clone, int(d.cred.Uid), int(d.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	d.gitAs(t, clone, "", "clone", "-q", p, ".")
	d.writeAs(t, filepath.Join(clone, "edit-me.txt"), "v2, not committed\n")
	d.writeAs(t, filepath.Join(clone, "notes.txt"), "untracked notes\n")
	if err := os.Remove(filepath.Join(clone, "user-deletes.txt")); err != nil {
		t.Fatal(err)
	}
	d.gitAs(t, clone, patch.Patch, "apply", "--check")
	d.gitAs(t, clone, patch.Patch, "apply")
	view, applied := d.view(t, ws), treeOf(t, clone)
	if len(view) != len(applied) {
		t.Errorf("the workspace has %d files, the patched clone %d", len(view), len(applied))
	}
	for name, v := range view {
		if applied[name] != v {
			t.Errorf("%s: the patched clone has %q, the workspace %q", name, applied[name], v)
		}
	}
	if l, err := os.Readlink(filepath.Join(clone, "link")); err != nil || l != "new.txt" {
		t.Errorf("link in the patched clone: %q, %v", l, err)
	}
}

// TestExportCLI: cellbox export-git and export-patch from the project.
func TestExportCLI(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	d := startReviewDaemon(t)
	project := t.TempDir()
	fd := &filesDaemon{project: project}
	writeFiles(t, project, map[string]string{".gitignore": "*.log\n", "a.txt": "a\n"})
	fd.gitAs(t, project, "", "init", "-q", "-b", "main")
	fd.gitAs(t, project, "", "add", "-A")
	fd.gitAs(t, project, "", "commit", "-q", "-m", "initial")
	var ws protocol.WorkspaceInfo
	d.call(t, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: project}, &ws)
	d.write(t, ws.WorkspaceID, "a.txt", "a\nb\n")
	d.write(t, ws.WorkspaceID, "run.log", "log\n")

	r := d.cellbox(t, project, "changes")
	if r.code != 0 || r.stdout != "M a.txt\n" || !strings.Contains(r.stderr, "1 change of paths the project's git ignores not shown") {
		t.Fatalf("changes: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	d.cellbox(t, project, "changes", "--ignored").want(t, "changes --ignored", 0, "M a.txt\nA run.log\n")

	r = d.cellbox(t, project, "export-patch")
	if r.code != 0 || !strings.Contains(r.stdout, "diff --git a/a.txt b/a.txt\n") || strings.Contains(r.stdout, "run.log") {
		t.Fatalf("export-patch: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = d.cellbox(t, project, "export-git", "review", "-m", "from the CLI")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "branch review: commit ") || !strings.Contains(r.stdout, "(1 file)") {
		t.Fatalf("export-git: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if got := fd.gitAs(t, project, "", "log", "-1", "--format=%s", "review"); got != "from the CLI\n" {
		t.Errorf("the branch's commit: %q", got)
	}
	if r = d.cellbox(t, project, "export-git", "review"); r.code != 1 || !strings.Contains(r.stderr, "(Conflict)") {
		t.Fatalf("export-git again: exit %d, stderr %q", r.code, r.stderr)
	}
	if r = d.cellbox(t, project, "export-git", "review", "--force"); r.code != 0 || !strings.HasPrefix(r.stdout, "branch review: commit ") {
		t.Fatalf("export-git --force: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r = d.cellbox(t, project, "export-git"); r.code != 2 {
		t.Fatalf("export-git without a branch: exit %d, stderr %q", r.code, r.stderr)
	}

	// What was reviewed is what is committed: commit without paths leaves
	// the ignored run.log in the workspace, --ignored commits it too.
	d.cellbox(t, project, "commit").want(t, "commit", 0, "committed a.txt\n")
	if _, ok := readFile(t, filepath.Join(project, "run.log")); ok {
		t.Fatal("commit without paths copied the ignored run.log into the project")
	}
	d.cellbox(t, project, "changes", "--ignored").want(t, "changes --ignored after the commit", 0, "A run.log\n")
	d.cellbox(t, project, "commit", "--ignored").want(t, "commit --ignored", 0, "committed run.log\n")
	if s, _ := readFile(t, filepath.Join(project, "run.log")); s != "log\n" {
		t.Fatalf("run.log after commit --ignored: %q", s)
	}
}
