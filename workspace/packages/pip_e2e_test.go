package packages

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// tinyWheel builds NAME-VERSION-py3-none-any.whl: a module, METADATA, WHEEL
// and RECORD.
func tinyWheel(t *testing.T, name, version string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	info := name + "-" + version + ".dist-info/"
	files := [][2]string{
		{name + "/__init__.py", "VALUE = 42\n"},
		{info + "METADATA", "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"},
		{info + "WHEEL", "Wheel-Version: 1.0\nGenerator: cellbox-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var record bytes.Buffer
	for _, f := range files {
		w, err := zw.Create(f[0])
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f[1]))
		sum := sha256.Sum256([]byte(f[1]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f[0], base64.RawURLEncoding.EncodeToString(sum[:]), len(f[1]))
	}
	fmt.Fprintf(&record, "%sRECORD,,\n", info)
	w, _ := zw.Create(info + "RECORD")
	w.Write(record.Bytes())
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestPipDownloadEndToEnd runs the host's pip against the handler: once with
// the upstream there, once with it gone.
func TestPipDownloadEndToEnd(t *testing.T) {
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-m", "pip", "--version").Run(); err != nil {
		t.Skipf("no pip at %s -m pip: %v", python, err)
	}
	up := newUpstream(t)
	wheel := tinyWheel(t, "cellbox_tiny", "1.0")
	const file = "cellbox_tiny-1.0-py3-none-any.whl"
	up.set("/files/"+file, "application/octet-stream", wheel)
	doc, _ := json.Marshal(map[string]any{
		"meta":  map[string]string{"api-version": "1.0"},
		"name":  "cellbox-tiny",
		"files": []map[string]any{{"filename": file, "url": "/files/" + file, "hashes": map[string]string{"sha256": sha256hex(wheel)}}},
	})
	up.set("/simple/cellbox-tiny/", pypiJSON, doc)
	_, srv, fetched := setup(t, Options{PyPI: up.URL + "/simple/"})

	download := func(hit bool) {
		t.Helper()
		dest, home := t.TempDir(), t.TempDir()
		cmd := exec.Command(python, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--disable-pip-version-check",
			"--index-url", srv.URL+"/pypi/simple/", "--dest", dest, "cellbox-tiny")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "PIP_CONFIG_FILE=" + os.DevNull, "NO_PROXY=*"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("pip download: %v\n%s", err, out)
		}
		got, err := os.ReadFile(filepath.Join(dest, file))
		if err != nil || !bytes.Equal(got, wheel) {
			t.Fatalf("downloaded: %v\n%s", err, out)
		}
		if f := fetched.last(t); f.Name != file || f.CacheHit != hit {
			t.Errorf("reported %+v, want a hit: %v", f, hit)
		}
	}
	download(false)
	up.Close()
	download(true)
}
