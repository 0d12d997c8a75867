package export

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cellbox-dev/cellbox/workspace/export/exporttest"
)

// needTool finds a program the test needs, or skips (fails under CI,
// which installs it).
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must have %s (apt package %s)", name, name)
		}
		t.Skipf("%s is not installed (apt-get install %s)", name, name)
	}
	return p
}

func TestWriteOCI(t *testing.T) {
	base := filepath.Join(t.TempDir(), "python")
	exporttest.TinyBase(t, base, "3.11-slim")
	src := writeTree(t, map[string]string{
		"app.py":       "from flask import Flask\napp = Flask(__name__)\n",
		"static/a.txt": "a\n",
		"link":         "->/etc/shadow",
	})
	dest := filepath.Join(t.TempDir(), "shop")
	// Found in the images directory, as DefaultImagesDir holds them.
	res, err := Write(context.Background(), Options{Tree: os.DirFS(src).(Tree), Env: envFS(), Dest: dest, Format: FormatOCI, ImagesDir: filepath.Dir(base)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Image == nil || !strings.HasPrefix(res.Image.Digest, "sha256:") || res.Image.Layout != filepath.Join(dest, "image") || res.Image.Ref != "shop:latest" {
		t.Fatalf("image %+v", res.Image)
	}
	var index struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
		}
	}
	b, err := os.ReadFile(filepath.Join(dest, "image", "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &index); err != nil || len(index.Manifests) != 1 || index.Manifests[0].Digest != res.Image.Digest ||
		index.Manifests[0].Annotations[annotationRef] != "latest" || index.Manifests[0].Annotations[annotationContainerd] != "docker.io/library/shop:latest" {
		t.Fatalf("index.json: %v %s", err, b)
	}
	img, err := imageIn(filepath.Join(dest, "image"), "latest")
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	wantCmd := []string{"python", "-m", "flask", "--app", "app", "run", "--host", "0.0.0.0", "--port", "5000"}
	if c.WorkingDir != "/app" || len(c.Entrypoint) != 0 || !slices.Equal(c.Cmd, wantCmd) || !slices.Contains(c.Env, "PORT=5000") ||
		!slices.Contains(c.Env, "PATH=/usr/local/bin:/usr/bin:/bin") || len(c.ExposedPorts) != 1 {
		t.Fatalf("config: %+v", c)
	}
	if layers, _ := img.Layers(); len(layers) != 2 {
		t.Fatalf("%d layers, want the base's and the app's", len(layers))
	}

	t.Run("umoci unpack", func(t *testing.T) {
		umoci := needTool(t, "umoci")
		bundle := filepath.Join(t.TempDir(), "bundle")
		if out, err := exec.Command(umoci, "unpack", "--rootless", "--image", filepath.Join(dest, "image")+":latest", bundle).CombinedOutput(); err != nil {
			t.Fatalf("umoci unpack: %v\n%s", err, out)
		}
		for _, f := range []string{"etc/os-release", "app/app.py", "app/static/a.txt", "app/requirements.txt"} {
			if _, err := os.Stat(filepath.Join(bundle, "rootfs", f)); err != nil {
				t.Errorf("the unpacked root lacks %s: %v", f, err)
			}
		}
		if l, _ := os.Readlink(filepath.Join(bundle, "rootfs/app/link")); l != "/etc/shadow" {
			t.Errorf("the symlink in the image: %q", l)
		}
		var spec struct {
			Process struct {
				Args []string
				Cwd  string
			}
		}
		b, _ := os.ReadFile(filepath.Join(bundle, "config.json"))
		if err := json.Unmarshal(b, &spec); err != nil || !slices.Equal(spec.Process.Args, wantCmd) || spec.Process.Cwd != "/app" {
			t.Fatalf("umoci's runtime config: %v %+v", err, spec.Process)
		}
	})
	t.Run("skopeo inspect", func(t *testing.T) {
		skopeo := needTool(t, "skopeo")
		out, err := exec.Command(skopeo, "inspect", "oci:"+filepath.Join(dest, "image")+":latest").Output()
		if err != nil {
			t.Fatalf("skopeo inspect: %v", err)
		}
		var got struct {
			Digest string
			Env    []string
			Layers []string
		}
		if err := json.Unmarshal(out, &got); err != nil || got.Digest != res.Image.Digest || len(got.Layers) != 2 || !slices.Contains(got.Env, "PORT=5000") {
			t.Fatalf("skopeo inspect: %v %s", err, out)
		}
	})
	t.Run("base given", func(t *testing.T) {
		dest2 := filepath.Join(t.TempDir(), "b")
		res, err := Write(context.Background(), Options{Tree: os.DirFS(src).(Tree), Dest: dest2, Format: FormatOCI, Base: base + ":3.11-slim"})
		if err != nil || res.Image.Base != base+":3.11-slim" {
			t.Fatalf("Write with a base: %v %+v", err, res)
		}
		_, err = Write(context.Background(), Options{Tree: os.DirFS(src).(Tree), Dest: filepath.Join(t.TempDir(), "c"), Format: FormatOCI, Base: base + ":nope"})
		if err == nil || !strings.Contains(err.Error(), `no image tagged "nope"`) {
			t.Fatalf("a tag the base does not have: %v", err)
		}
	})
}
