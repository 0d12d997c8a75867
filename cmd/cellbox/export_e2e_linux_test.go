package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/export/exporttest"
)

// End-to-end tests of PROTOCOL.md §11's workspace/export, as root and as
// CELLBOX_TEST_USER: a Flask app and a Node server, with packages
// installed into /env through the daemon's cache from indexes the tests
// serve on the host's loopback (offline), exported as a bundle and run
// again from it in a fresh workspace (its packages installed from the
// bundle's requirements.txt / package.json, then the bundle's own command,
// answered by an HTTP request from another process of the sandbox); an
// OCI layout unpacked with umoci and its command run in a sandbox on the
// unpacked root, read by skopeo and loaded by podman; and bad input.

// exportDest is a directory the daemon can create (as root or as the test
// user) that does not exist yet.
func exportDest(t *testing.T, name string) string {
	t.Helper()
	return filepath.Join(filepath.Dir(userWritableDir(t)), name)
}

func exportWorkspace(t testing.TB, c *client, p protocol.WorkspaceExportParams) (protocol.WorkspaceExportResult, error) {
	t.Helper()
	var res protocol.WorkspaceExportResult
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err := c.conn.Call(ctx, protocol.MethodWorkspaceExport, p, &res)
	return res, err
}

// dockerCmd is the exec form of the CMD line of a bundle's Dockerfile.
func dockerCmd(t *testing.T, bundle string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(bundle, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "CMD "); ok {
			var cmd []string
			if err := json.Unmarshal([]byte(rest), &cmd); err != nil {
				t.Fatalf("the Dockerfile's CMD %q: %v", rest, err)
			}
			return cmd
		}
	}
	t.Fatalf("no CMD in the Dockerfile:\n%s", b)
	return nil
}

// serveAndGet is python code for a kernel: it starts argv (the bundle's
// command) in /workspace as a process of its own, waits until
// http://127.0.0.1:PORT/ answers (or the server ends, or a minute
// passes), prints the answer, and stops the server.
func serveAndGet(argv []string, port int) string {
	a, _ := json.Marshal(argv)
	return fmt.Sprintf(`import json, os, subprocess, sys, time, urllib.request
argv = json.loads(%q)
if argv[0] == "python":
    argv[0] = "/env/bin/python" if os.path.exists("/env/bin/python") else sys.executable
env = dict(os.environ, PATH="/env/bin:/env/npm/node_modules/.bin:" + os.environ["PATH"], NODE_PATH="/env/npm/node_modules", PORT="%d",
           npm_config_update_notifier="false")
log = open("/tmp/server.log", "w+")
p = subprocess.Popen(argv, cwd="/workspace", env=env, stdout=log, stderr=log)
direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
deadline = time.time() + 60
while True:
    try:
        print(direct.open("http://127.0.0.1:%d/", timeout=5).read().decode())
        break
    except Exception as e:
        if p.poll() is not None or time.time() > deadline:
            log.seek(0)
            print("FAILED", repr(e), p.poll(), log.read())
            break
        time.sleep(0.05)
p.terminate()
p.wait()
`, a, port, port)
}

// requirementLines are the requirements of a requirements.txt.
func requirementLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

func TestExportFlask(t *testing.T) {
	if err := exec.Command("python3", "-c", "import flask").Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI must have Flask (apt package python3-flask)")
		}
		t.Skip("Flask is not installed for python3 (apt-get install python3-flask)")
	}
	asUsers(t, testExportFlask)
}

func testExportFlask(t *testing.T, asUser bool) {
	whl, data := wheel(t, "cbdemo", "1.0", 42)
	idx := pep503Index(t, map[string][]byte{whl: data}, nil)
	app := `from flask import Flask
import cbdemo

app = Flask(__name__)


@app.get("/")
def index():
    return f"hello from flask {cbdemo.VALUE}"
`
	d := newFilesDaemon(t, asUser, map[string]string{"app.py": app, "templates/base.html": "<p>{{ x }}</p>\n"},
		"--package-cache", userWritableDir(t), "--pypi-index", idx.URL+"/simple/")
	ws := openWorkspace(t, d.c, d.project, "flask")
	if _, err := install(t, d.c, ws, protocol.PackageManagerPip, "", "cbdemo"); err != nil {
		t.Fatalf("install cbdemo: %v", err)
	}
	// Changes the sandbox made are exported; a symlink to the sandbox's
	// /etc/shadow is written as a symlink, never followed.
	k := startKernel(t, d.c, protocol.KernelStartParams{Language: "python", WorkspaceID: ws})
	printed(t, d.c, k.KernelID, "import os\nopen('notes.txt', 'w').write('made in the sandbox\\n')\nos.symlink('/etc/shadow', 'secret')\nos.mkfifo('pipe')")

	dest := exportDest(t, "flask-bundle")
	start := time.Now()
	res, err := exportWorkspace(t, d.c, protocol.WorkspaceExportParams{WorkspaceID: ws, Dest: dest, Format: protocol.ExportDir, WorkDoneToken: "export-1"})
	if err != nil {
		t.Fatalf("workspace/export: %v", err)
	}
	t.Logf("exported %d files, %d bytes in %v", res.Files, res.Bytes, time.Since(start))
	// $/progress begins only for an export slower than rpc's progressDelay;
	// the token is taken either way.
	wantCmd := []string{"python", "-m", "flask", "--app", "app", "run", "--host", "0.0.0.0", "--port", "5000"}
	if res.Path != dest || res.App != "flask" || !slices.Equal(res.Command, wantCmd) || res.Image != nil || res.Files < 8 {
		t.Fatalf("workspace/export: %+v", res)
	}
	for _, f := range []string{"README.md", "Dockerfile", ".dockerignore", "compose.yaml", "app/app.py", "app/templates/base.html", "app/notes.txt", "app/requirements.txt"} {
		if _, err := os.Stat(filepath.Join(dest, f)); err != nil {
			t.Errorf("the bundle lacks %s: %v", f, err)
		}
	}
	if l, err := os.Readlink(filepath.Join(dest, "app/secret")); err != nil || l != "/etc/shadow" {
		t.Errorf("the symlink to /etc/shadow: %q %v", l, err)
	}
	if _, err := os.Lstat(filepath.Join(dest, "app/pipe")); err == nil {
		t.Error("a FIFO was exported")
	}
	if df, _ := os.ReadFile(filepath.Join(dest, "Dockerfile")); !strings.Contains(string(df), "FROM python:3.") || !strings.Contains(string(df), "EXPOSE 5000") {
		t.Errorf("Dockerfile:\n%s", df)
	}
	reqs := requirementLines(t, filepath.Join(dest, "app/requirements.txt"))
	if !slices.Equal(reqs, []string{"cbdemo==1.0", "flask"}) {
		t.Fatalf("requirements.txt: %q", reqs)
	}

	// Run again from the bundle, in a fresh workspace of its own.
	ws2 := openWorkspace(t, d.c, filepath.Join(dest, "app"), "from-bundle")
	if _, err := install(t, d.c, ws2, protocol.PackageManagerPip, "", reqs...); err != nil {
		t.Fatalf("install the bundle's requirements: %v", err)
	}
	k2 := startKernel(t, d.c, protocol.KernelStartParams{Language: "python", WorkspaceID: ws2})
	if got := printed(t, d.c, k2.KernelID, serveAndGet(dockerCmd(t, dest), 5000)); got != "hello from flask 42\n" {
		t.Fatalf("the bundle's command answered %q", got)
	}

	t.Run("bad input", func(t *testing.T) {
		full := exportDest(t, "full")
		if err := os.MkdirAll(full, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(full, "keep.txt"), []byte("mine\n"), 0o644)
		for name, c := range map[string]struct {
			p    protocol.WorkspaceExportParams
			want string
		}{
			"relative dest":  {protocol.WorkspaceExportParams{WorkspaceID: ws, Dest: "bundle", Format: protocol.ExportDir}, `"dest" must be an absolute host path`},
			"no dest":        {protocol.WorkspaceExportParams{WorkspaceID: ws, Format: protocol.ExportDir}, `"dest" is required`},
			"non-empty dest": {protocol.WorkspaceExportParams{WorkspaceID: ws, Dest: full, Format: protocol.ExportDir}, "is not empty"},
			"unknown format": {protocol.WorkspaceExportParams{WorkspaceID: ws, Dest: exportDest(t, "b"), Format: "zip"}, `"format" must be "dir" or "oci"`},
			"huge dest":      {protocol.WorkspaceExportParams{WorkspaceID: ws, Dest: "/" + strings.Repeat("x", 1<<16), Format: protocol.ExportDir}, "longer than"},
			"bad port":       {protocol.WorkspaceExportParams{WorkspaceID: ws, Dest: exportDest(t, "b"), Format: protocol.ExportDir, Port: 1 << 20}, `"port"`},
			"no base image":  {protocol.WorkspaceExportParams{WorkspaceID: ws, Dest: exportDest(t, "b"), Format: protocol.ExportOCI, Base: "/nonexistent:1"}, "not an OCI image layout"},
		} {
			t.Run(name, func(t *testing.T) {
				_, err := exportWorkspace(t, d.c, c.p)
				if msg := wantCode(t, err, protocol.CodeInvalidParams); !strings.Contains(msg, c.want) || len(msg) > 2000 {
					t.Fatalf("%s: %.300s; want it to say %q", name, msg, c.want)
				}
			})
		}
		if b, _ := os.ReadFile(filepath.Join(full, "keep.txt")); string(b) != "mine\n" {
			t.Fatal("the refused export touched the non-empty dest")
		}
		// A path over the export's bound, made in the sandbox.
		printed(t, d.c, k.KernelID, "import os\np = '/'.join(['d' * 250] * 6)\nos.makedirs(p)\nopen(p + '/f', 'w').write('x')")
		_, err := exportWorkspace(t, d.c, protocol.WorkspaceExportParams{WorkspaceID: ws, Dest: exportDest(t, "deep"), Format: protocol.ExportDir})
		if msg := wantCode(t, err, protocol.CodeLimitExceeded); !strings.Contains(msg, "longer than 1024 bytes") || len(msg) > 1000 {
			t.Fatalf("a huge path: %.300s", msg)
		}
		// The daemon is up.
		if got := printed(t, d.c, k.KernelID, "print('up')"); got != "up\n" {
			t.Fatalf("after bad input: %q", got)
		}
	})
}

// npmTarball is an npm package tarball (package/ at its top).
func npmTarball(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		tw.WriteHeader(&tar.Header{Name: "package/" + n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg, ModTime: time.Unix(1e9, 0)})
		tw.Write([]byte(files[n]))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// npmRegistry serves one package at one version as the npm registry does
// (a packument with dist.integrity, and the tarball).
func npmRegistry(t *testing.T, name, version string, tgz []byte) *httptest.Server {
	t.Helper()
	sum := sha512.Sum512(tgz)
	var s *httptest.Server
	mux := http.NewServeMux()
	mux.HandleFunc("/"+name, func(w http.ResponseWriter, r *http.Request) {
		doc := map[string]any{
			"name": name, "dist-tags": map[string]string{"latest": version},
			"versions": map[string]any{version: map[string]any{
				"name": name, "version": version,
				"dist": map[string]string{"tarball": s.URL + "/" + name + "/-/" + name + "-" + version + ".tgz",
					"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum[:])},
			}},
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(doc)
	})
	mux.HandleFunc("/"+name+"/-/"+name+"-"+version+".tgz", func(w http.ResponseWriter, r *http.Request) { w.Write(tgz) })
	s = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func TestExportNode(t *testing.T) {
	asUsers(t, func(t *testing.T, asUser bool) {
		tgz := npmTarball(t, map[string]string{
			"package.json": `{"name":"cbgreet","version":"1.0.0","main":"index.js"}`,
			"index.js":     "module.exports = (who) => `hello from ${who}`\n",
		})
		reg := npmRegistry(t, "cbgreet", "1.0.0", tgz)
		server := `const http = require('http')
const greet = require('cbgreet')
http.createServer((req, res) => res.end(greet('node'))).listen(process.env.PORT || 3000)
`
		d := newFilesDaemon(t, asUser, map[string]string{"server.js": server, "package.json": `{"name": "nodeapp", "scripts": {"start": "node server.js"}}`},
			"--package-cache", userWritableDir(t), "--npm-registry", reg.URL+"/")
		ws := openWorkspace(t, d.c, d.project, "node")
		if _, err := install(t, d.c, ws, protocol.PackageManagerNpm, "", "cbgreet@1.0.0"); err != nil {
			t.Fatalf("install cbgreet: %v", err)
		}
		dest := exportDest(t, "node-bundle")
		res, err := exportWorkspace(t, d.c, protocol.WorkspaceExportParams{WorkspaceID: ws, Dest: dest, Format: protocol.ExportDir})
		if err != nil {
			t.Fatalf("workspace/export: %v", err)
		}
		if res.App != "npm" || !slices.Equal(res.Command, []string{"npm", "start"}) {
			t.Fatalf("workspace/export: %+v", res)
		}
		var pkg struct {
			Name         string
			Scripts      map[string]string
			Dependencies map[string]string
		}
		b, _ := os.ReadFile(filepath.Join(dest, "app/package.json"))
		if err := json.Unmarshal(b, &pkg); err != nil || pkg.Name != "nodeapp" || pkg.Scripts["start"] != "node server.js" || len(pkg.Dependencies) != 1 || pkg.Dependencies["cbgreet"] == "" {
			t.Fatalf("package.json: %v\n%s", err, b)
		}
		if df, _ := os.ReadFile(filepath.Join(dest, "Dockerfile")); !strings.Contains(string(df), "FROM node:") || !strings.Contains(string(df), "EXPOSE 3000") {
			t.Errorf("Dockerfile:\n%s", df)
		}

		ws2 := openWorkspace(t, d.c, filepath.Join(dest, "app"), "from-bundle")
		var deps []string
		for n, v := range pkg.Dependencies {
			deps = append(deps, n+"@"+v)
		}
		if _, err := install(t, d.c, ws2, protocol.PackageManagerNpm, "", deps...); err != nil {
			t.Fatalf("install the bundle's dependencies: %v", err)
		}
		k := startKernel(t, d.c, protocol.KernelStartParams{Language: "python", WorkspaceID: ws2})
		if got := printed(t, d.c, k.KernelID, serveAndGet(dockerCmd(t, dest), 3000)); got != "hello from node\n" {
			t.Fatalf("the bundle's command answered %q", got)
		}
	})
}

func TestExportOCI(t *testing.T) {
	umoci, skopeo, podman := needProgram(t, "umoci"), needProgram(t, "skopeo"), needProgram(t, "podman")
	asUsers(t, func(t *testing.T, asUser bool) {
		app := "import os\nprint('hello from the image in', os.getcwd(), os.environ.get('PORT'))\n"
		d := newFilesDaemon(t, asUser, map[string]string{"app.py": app})
		ws := openWorkspace(t, d.c, d.project, "oci")
		base := exportDest(t, "base")
		exporttest.TinyBase(t, base, "3.11-slim")
		if asUser {
			chownTree(t, base)
		}
		dest := exportDest(t, "oci-bundle")
		start := time.Now()
		res, err := exportWorkspace(t, d.c, protocol.WorkspaceExportParams{WorkspaceID: ws, Dest: dest, Format: protocol.ExportOCI, Base: base + ":3.11-slim", Port: 8080})
		if err != nil {
			t.Fatalf("workspace/export oci: %v", err)
		}
		t.Logf("exported %d files, %d bytes with the image in %v", res.Files, res.Bytes, time.Since(start))
		if res.Image == nil || !strings.HasPrefix(res.Image.Digest, "sha256:") || res.Image.Layout != filepath.Join(dest, "image") || res.App != "python" {
			t.Fatalf("workspace/export oci: %+v", res)
		}
		layoutRef := filepath.Join(dest, "image") + ":latest"

		// skopeo reads it: the manifest's digest, and the config.
		out, err := exec.Command(skopeo, "inspect", "oci:"+layoutRef).Output()
		var info struct {
			Digest string
			Layers []string
		}
		if err != nil || json.Unmarshal(out, &info) != nil || info.Digest != res.Image.Digest || len(info.Layers) != 2 {
			t.Fatalf("skopeo inspect: %v %s (want digest %s)", err, out, res.Image.Digest)
		}
		out, err = exec.Command(skopeo, "inspect", "--config", "oci:"+layoutRef).Output()
		var cfg v1.ConfigFile
		if err != nil || json.Unmarshal(out, &cfg) != nil || cfg.Config.WorkingDir != "/app" || !slices.Equal(cfg.Config.Cmd, []string{"python", "app.py"}) ||
			len(cfg.Config.Entrypoint) != 0 || !slices.Contains(cfg.Config.Env, "PORT=8080") {
			t.Fatalf("skopeo inspect --config: %v %s", err, out)
		}

		// podman loads it as the bundle's README says (once, as root:
		// rootless podman needs subordinate IDs the test user lacks; the
		// layout is the same either way), and keeps its config.
		if !asUser {
			podmanLoad(t, podman, filepath.Join(dest, "image"), filepath.Base(dest), res.Image.Digest)
		}

		// umoci validates and unpacks it; its command runs in a sandbox
		// on the unpacked root's /app, with the host's interpreters.
		bundle := filepath.Join(filepath.Dir(dest), "unpacked")
		if out, err := exec.Command(umoci, "unpack", "--rootless", "--image", layoutRef, bundle).CombinedOutput(); err != nil {
			t.Fatalf("umoci unpack: %v\n%s", err, out)
		}
		var spec struct {
			Process struct {
				Args []string
				Env  []string
				Cwd  string
			}
		}
		b, _ := os.ReadFile(filepath.Join(bundle, "config.json"))
		if err := json.Unmarshal(b, &spec); err != nil || spec.Process.Cwd != "/app" {
			t.Fatalf("umoci's runtime config: %v %s", err, b)
		}
		if asUser {
			chownTree(t, bundle)
		}
		ws2 := openWorkspace(t, d.c, filepath.Join(bundle, "rootfs", "app"), "unpacked")
		k := startKernel(t, d.c, protocol.KernelStartParams{Language: "python", WorkspaceID: ws2})
		argv, _ := json.Marshal(spec.Process.Args)
		env, _ := json.Marshal(spec.Process.Env)
		code := fmt.Sprintf(`import json, os, subprocess, sys
argv = json.loads(%q)
if argv[0] in ("python", "python3"):
    argv[0] = sys.executable
env = dict(e.split("=", 1) for e in json.loads(%q))
env["PATH"] = os.environ["PATH"]
print(subprocess.run(argv, cwd="/workspace", env=env, capture_output=True, text=True, timeout=60).stdout, end="")`, argv, env)
		if got := printed(t, d.c, k.KernelID, code); got != "hello from the image in /workspace 8080\n" {
			t.Fatalf("the image's command in a sandbox: %q", got)
		}
	})
}

// podmanLoad loads the layout as the bundle's README says, `tar -C image
// -cf - . | podman load`, in a store of the test's own, and checks the
// image it got: its name (the bundle's), manifest digest, working
// directory, command and port.
func podmanLoad(t *testing.T, podman, layout, name, digest string) {
	t.Helper()
	store := t.TempDir()
	args := []string{"--root", filepath.Join(store, "root"), "--runroot", filepath.Join(store, "run"), "--storage-driver", "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "none"}
	tarCmd := exec.Command("tar", "-C", layout, "-cf", "-", ".")
	load := exec.Command(podman, append(args, "load")...)
	pipe, err := tarCmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	load.Stdin = pipe
	if err := tarCmd.Start(); err != nil {
		t.Fatal(err)
	}
	out, err := load.CombinedOutput()
	if werr := tarCmd.Wait(); err == nil {
		err = werr
	}
	if want := "Loaded image: docker.io/library/" + name + ":latest"; err != nil || !strings.Contains(string(out), want) {
		t.Fatalf("tar | podman load: %v, want %q in\n%s", err, want, out)
	}
	out, err = exec.Command(podman, append(args, "image", "inspect", "--format", "{{.Digest}} {{.Config.WorkingDir}} {{json .Config.Cmd}} {{json .Config.ExposedPorts}}", name+":latest")...).CombinedOutput()
	if want := digest + ` /app ["python","app.py"] {"8080/tcp":{}}`; err != nil || strings.TrimSpace(string(out)) != want {
		t.Fatalf("podman image inspect: %v\n%s\nwant %s", err, out, want)
	}
}

// needProgram finds a program the test needs, or skips (fails under CI,
// which installs it).
func needProgram(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must have %s (.ci/run installs it)", name)
		}
		t.Skipf("%s is not installed (apt-get install %s)", name, name)
	}
	return p
}

// chownTree gives dir to CELLBOX_TEST_USER.
func chownTree(t *testing.T, dir string) {
	t.Helper()
	u, err := user.Lookup(os.Getenv("CELLBOX_TEST_USER"))
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	}); err != nil {
		t.Fatal(err)
	}
}

// TestExportBundleCLI: cellbox export over the user's daemon, with --workspace
// naming the project, a relative DEST, --command split as a shell does,
// and the OCI format on a --base.
func TestExportBundleCLI(t *testing.T) {
	d := startReviewDaemon(t)
	project := t.TempDir()
	writeFiles(t, project, map[string]string{"app.py": "print('hi')\n"})
	base := filepath.Join(t.TempDir(), "python")
	exporttest.TinyBase(t, base, "3.11-slim")
	here := t.TempDir()
	r := d.cellbox(t, here, "export", "--workspace", project, "--format", "oci", "--base", base+":3.11-slim",
		"--command", `python app.py --greeting 'hi there'`, "--port", "8080", "out")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "exported the custom app to "+filepath.Join(here, "out")+" (") ||
		!strings.Contains(r.stdout, "command: python app.py --greeting hi there\n") || !strings.Contains(r.stdout, "image: sha256:") {
		t.Fatalf("cellbox export: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if got := dockerCmd(t, filepath.Join(here, "out")); !slices.Equal(got, []string{"python", "app.py", "--greeting", "hi there"}) {
		t.Fatalf("the Dockerfile's CMD: %q", got)
	}
	r = d.cellbox(t, here, "export", "--workspace", project, "out")
	if r.code != 1 || !strings.Contains(r.stderr, "is not empty") || !strings.Contains(r.stderr, "(InvalidParams)") {
		t.Fatalf("cellbox export to a non-empty DEST: exit %d, stderr %q", r.code, r.stderr)
	}
	r = d.cellbox(t, here, "export", "--workspace", project, "--format", "zip", "out2")
	if r.code != 2 || !strings.Contains(r.stderr, `--format "zip": want dir or oci`) {
		t.Fatalf("cellbox export --format zip: exit %d, stderr %q", r.code, r.stderr)
	}
	r = d.cellbox(t, here, "export", "--workspace", project, "--port", "70000", "out2")
	if r.code != 2 || !strings.Contains(r.stderr, "--port 70000: want a TCP port") {
		t.Fatalf("cellbox export --port 70000: exit %d, stderr %q", r.code, r.stderr)
	}
	r = d.cellbox(t, project, "export", "bundle")
	if r.code != 1 || !strings.Contains(r.stderr, "inside the workspace's project") {
		t.Fatalf("cellbox export into the project: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(project, "bundle")); err == nil {
		t.Fatal("an export into the project wrote there")
	}
	if r = d.cellbox(t, here, "export"); r.code != 2 {
		t.Fatalf("cellbox export without DEST: exit %d, stderr %q", r.code, r.stderr)
	}
}
