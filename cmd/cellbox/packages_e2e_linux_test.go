package main

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// End-to-end tests of PROTOCOL.md §9's packages: pip and npm install into
// a workspace's /env through the daemon's verified cache, as root and as
// CELLBOX_TEST_USER. pip's index is a PEP 503 index the test serves on
// the host's loopback, with wheels it builds; npm's is the npm registry
// (which CI reaches).

// wheel builds a pure-Python wheel of name at version whose module has
// VALUE = value.
func wheel(t testing.TB, name, version string, value int) (file string, data []byte) {
	t.Helper()
	files := map[string]string{
		name + "/__init__.py":                        fmt.Sprintf("VALUE = %d\n", value),
		name + "-" + version + ".dist-info/METADATA": fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", name, version),
		name + "-" + version + ".dist-info/WHEEL":    "Wheel-Version: 1.0\nGenerator: cellbox-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, p := range []string{name + "/__init__.py", name + "-" + version + ".dist-info/METADATA", name + "-" + version + ".dist-info/WHEEL"} {
		w, err := zw.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(files[p]))
		sum := sha256.Sum256([]byte(files[p]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", p, base64.RawURLEncoding.EncodeToString(sum[:]), len(files[p]))
	}
	rec := name + "-" + version + ".dist-info/RECORD"
	fmt.Fprintf(&record, "%s,,\n", rec)
	w, err := zw.Create(rec)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return name + "-" + version + "-py3-none-any.whl", buf.Bytes()
}

// pep503Index serves /simple/NAME/ pages and /files/FILE; published
// overrides the sha256 a page gives for a file (a file that does not
// match its hash).
func pep503Index(t *testing.T, files map[string][]byte, published map[string]string) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/{project}/", func(w http.ResponseWriter, r *http.Request) {
		project := r.PathValue("project")
		var b strings.Builder
		fmt.Fprintf(&b, "<!DOCTYPE html><html><body><h1>Links for %s</h1>\n", project)
		n := 0
		for f, data := range files {
			if !strings.HasPrefix(f, project+"-") {
				continue
			}
			sum := sha256.Sum256(data)
			h := hex.EncodeToString(sum[:])
			if p, ok := published[f]; ok {
				h = p
			}
			fmt.Fprintf(&b, "<a href=\"../../files/%s#sha256=%s\">%s</a><br/>\n", f, h, f)
			n++
		}
		if n == 0 {
			http.NotFound(w, r)
			return
		}
		b.WriteString("</body></html>\n")
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(b.String()))
	})
	mux.HandleFunc("/files/{file}", func(w http.ResponseWriter, r *http.Request) {
		data, ok := files[r.PathValue("file")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(data)
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// userWritableDir is a fresh directory the daemon can write as root or as
// the test user.
func userWritableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cellbox-pkgcache-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "cache")
}

// install calls workspace/install with a long timeout.
func install(t testing.TB, c *client, ws string, manager protocol.PackageManager, token string, pkgs ...string) (protocol.WorkspaceInstallResult, error) {
	t.Helper()
	var res protocol.WorkspaceInstallResult
	p := protocol.WorkspaceInstallParams{WorkspaceID: ws, Manager: manager, Packages: pkgs}
	if token != "" {
		p.WorkDoneToken = token
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := c.conn.Call(ctx, protocol.MethodWorkspaceInstall, p, &res)
	return res, err
}

func hasPackage(res protocol.WorkspaceInstallResult, name, version string) bool {
	for _, p := range res.Installed {
		if strings.EqualFold(p.Name, name) && p.Version == version {
			return true
		}
	}
	return false
}

// cached reports whether a file named hexSum is anywhere under dir.
func cached(t testing.TB, dir, hexSum string) bool {
	found := false
	_ = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Name() == hexSum {
			found = true
		}
		return nil
	})
	return found
}

func TestPackagesPip(t *testing.T) {
	asUsers(t, testPackagesPip)
}

func testPackagesPip(t *testing.T, asUser bool) {
	good, goodData := wheel(t, "cbdemo", "1.0", 42)
	bad, badData := wheel(t, "cbbad", "1.0", 666)
	badSum := sha256.Sum256(badData)
	idx := pep503Index(t, map[string][]byte{good: goodData, bad: badData},
		map[string]string{bad: strings.Repeat("ab", 32)})
	cache := userWritableDir(t)
	d := newFilesDaemon(t, asUser, map[string]string{"data.txt": "project\n"},
		"--package-cache", cache, "--pypi-index", idx.URL+"/simple/")
	ws := openWorkspace(t, d.c, d.project, "pkgs")
	// A kernel started before the install imports what it installed.
	k := startKernel(t, d.c, protocol.KernelStartParams{Language: "python", WorkspaceID: ws})

	res, err := install(t, d.c, ws, protocol.PackageManagerPip, "install-1", "cbdemo")
	if err != nil {
		t.Fatalf("workspace/install pip cbdemo: %v", err)
	}
	if !hasPackage(res, "cbdemo", "1.0") || res.CacheHits != 0 || res.DownloadedBytes != int64(len(goodData)) {
		t.Fatalf("workspace/install: %+v (the wheel is %d bytes)", res, len(goodData))
	}
	d.c.waitProgress(t, "install-1")
	if got := printed(t, d.c, k.KernelID, "import cbdemo\nprint(cbdemo.VALUE, cbdemo.__file__)"); got != "42 /env/lib/python3.11/site-packages/cbdemo/__init__.py\n" &&
		!strings.HasPrefix(got, "42 /env/lib/python3.") {
		t.Fatalf("import of the installed package: %q", got)
	}

	t.Run("/env is no change", func(t *testing.T) {
		var ch protocol.WorkspaceChangesResult
		d.c.mustCall(t, protocol.MethodWorkspaceChanges, protocol.WorkspaceChangesParams{WorkspaceID: ws}, &ch)
		if len(ch.Changes) != 0 {
			t.Fatalf("the install shows as changes: %+v", ch.Changes)
		}
	})

	t.Run("a file whose hash does not match", func(t *testing.T) {
		_, err := install(t, d.c, ws, protocol.PackageManagerPip, "", "cbbad")
		msg := wantCode(t, err, protocol.CodeInvalidParams)
		if !strings.Contains(msg, "sha256") || !strings.Contains(msg, "cbbad") {
			t.Fatalf("the refusal does not say why: %s", msg)
		}
		if cached(t, cache, hex.EncodeToString(badSum[:])) {
			t.Fatal("the file that did not match its hash is in the cache")
		}
		if got := printed(t, d.c, k.KernelID, "import importlib.util\nprint(importlib.util.find_spec('cbbad'))"); got != "None\n" {
			t.Fatalf("cbbad was installed: %q", got)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		for _, p := range []protocol.WorkspaceInstallParams{
			{WorkspaceID: ws, Manager: "apt", Packages: []string{"x"}},
			{WorkspaceID: ws, Manager: protocol.PackageManagerPip},
			{WorkspaceID: ws, Manager: protocol.PackageManagerPip, Packages: []string{"--index-url=http://evil/"}},
			{WorkspaceID: ws, Manager: protocol.PackageManagerPip, Packages: []string{"x\ny"}},
		} {
			wantCode(t, d.c.call(t, protocol.MethodWorkspaceInstall, p, nil), protocol.CodeInvalidParams)
		}
	})

	t.Run("the host's network has no package index", func(t *testing.T) {
		wsHost := openWorkspace(t, d.c, d.project, "pkgs-host")
		startKernel(t, d.c, protocol.KernelStartParams{Language: "python", WorkspaceID: wsHost, Network: protocol.NetworkModeHost})
		_, err := install(t, d.c, wsHost, protocol.PackageManagerPip, "", "cbdemo")
		if msg := wantCode(t, err, protocol.CodeInvalidParams); !strings.Contains(msg, "host's network") {
			t.Fatalf("an install on the host's network: %s", msg)
		}
	})

	// The index goes away: what the cache holds installs with no network.
	idx.Close()
	t.Run("from the cache, offline", func(t *testing.T) {
		ws2 := openWorkspace(t, d.c, d.project, "pkgs-2")
		res, err := install(t, d.c, ws2, protocol.PackageManagerPip, "", "cbdemo==1.0")
		if err != nil {
			t.Fatalf("an install from the cache: %v", err)
		}
		if !hasPackage(res, "cbdemo", "1.0") || res.CacheHits != 1 || res.DownloadedBytes != 0 {
			t.Fatalf("an install from the cache: %+v", res)
		}
	})

	t.Run("%pip", func(t *testing.T) {
		ws3 := openWorkspace(t, d.c, d.project, "pkgs-3")
		k3 := startKernel(t, d.c, protocol.KernelStartParams{Language: "python", WorkspaceID: ws3})
		res, outs := execute(t, d.c, k3.KernelID, "%pip install cbdemo\nimport cbdemo\nprint('value', cbdemo.VALUE)")
		wantOK(t, res, outs)
		if out := streamText(outs, protocol.StreamStdout); !strings.Contains(out, "Successfully installed cbdemo-1.0") || !strings.HasSuffix(out, "value 42\n") {
			t.Fatalf("%%pip install: %q", out)
		}
	})
}

func TestPackagesNpm(t *testing.T) {
	asUsers(t, func(t *testing.T, asUser bool) {
		cache := userWritableDir(t)
		d := newFilesDaemon(t, asUser, map[string]string{"data.txt": "project\n"}, "--package-cache", cache)
		ws := openWorkspace(t, d.c, d.project, "npm")
		res, err := install(t, d.c, ws, protocol.PackageManagerNpm, "npm-1", "left-pad@1.3.0")
		if err != nil {
			t.Fatalf("workspace/install npm left-pad: %v", err)
		}
		if !hasPackage(res, "left-pad", "1.3.0") || res.CacheHits != 0 || res.DownloadedBytes == 0 {
			t.Fatalf("workspace/install npm: %+v", res)
		}
		k := startKernel(t, d.c, protocol.KernelStartParams{Language: "javascript", WorkspaceID: ws})
		if got := printed(t, d.c, k.KernelID, "console.log(require('left-pad')('7', 3, '0'), (await import('left-pad')).default('8', 3, '0'))"); got != "007 008\n" {
			t.Fatalf("require and import of the installed package: %q", got)
		}
		// Another workspace gets the tarball from the cache.
		ws2 := openWorkspace(t, d.c, d.project, "npm-2")
		res, err = install(t, d.c, ws2, protocol.PackageManagerNpm, "", "left-pad@1.3.0")
		if err != nil {
			t.Fatalf("a second install: %v", err)
		}
		if !hasPackage(res, "left-pad", "1.3.0") || res.CacheHits != 1 || res.DownloadedBytes != 0 {
			t.Fatalf("a second install: %+v", res)
		}
		// install() in a javascript kernel.
		k2 := startKernel(t, d.c, protocol.KernelStartParams{Language: "javascript", WorkspaceID: openWorkspace(t, d.c, d.project, "npm-3")})
		r, outs := execute(t, d.c, k2.KernelID, "await install('left-pad@1.3.0')\nrequire('left-pad')('9', 3, '0')")
		wantOK(t, r, outs)
		if got := resultText(t, outs); got != "'009'" {
			t.Fatalf("install() then require: %q (%+v)", got, outs)
		}
	})
}

// TestPackagesNoCache: a package cache that cannot be opened does not stop
// the daemon: kernels run, and an install says why it cannot.
func TestPackagesNoCache(t *testing.T) {
	d := newFilesDaemon(t, false, map[string]string{"data.txt": "project\n"}, "--package-cache", "/dev/null/cache")
	ws := openWorkspace(t, d.c, d.project, "nocache")
	k := startKernel(t, d.c, protocol.KernelStartParams{Language: "python", WorkspaceID: ws})
	if got := printed(t, d.c, k.KernelID, "print(open('data.txt').read(), end='')"); got != "project\n" {
		t.Fatalf("a kernel without the package cache: %q", got)
	}
	_, err := install(t, d.c, ws, protocol.PackageManagerPip, "", "cbdemo")
	if msg := wantCode(t, err, protocol.CodeInvalidParams); !strings.Contains(msg, "no package cache") {
		t.Fatalf("an install without the package cache: %s", msg)
	}
}
