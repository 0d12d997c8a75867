package export

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The OCI image layout of a bundle (format "oci"), built without Docker:
// a base image layout, plus one layer holding the app at /app, and a
// config that runs the app's command there (README.md, "The image").

// Annotations of the image in the layout's index.json: the tag (what
// skopeo, umoci and podman read as DIR:TAG) and the full name docker load
// gives the image.
const (
	annotationRef        = "org.opencontainers.image.ref.name"
	annotationContainerd = "io.containerd.image.name"
	imageTag             = "latest"
)

// DefaultImagesDir is where base image layouts are looked for:
// $XDG_DATA_HOME/cellbox/images (~/.local/share/cellbox/images), holding
// one layout a language (python/, node/) with the tags of its base images
// (3.11-slim, 20-slim), as `skopeo copy docker://python:3.11-slim
// oci:DIR/python:3.11-slim` writes them.
func DefaultImagesDir() string {
	data := os.Getenv("XDG_DATA_HOME")
	if data == "" || !filepath.IsAbs(data) {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		data = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(data, "cellbox", "images")
}

// writeImage writes the image layout at DEST/image and returns it, with
// the bytes and files it wrote.
func writeImage(ctx context.Context, o Options, b Bundle) (*Image, int64, int, error) {
	base, baseName, err := openBase(o, b.BaseImage)
	if err != nil {
		return nil, 0, 0, err
	}
	app := filepath.Join(o.Dest, AppDir)
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return appTar(ctx, app) },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, 0, 0, fmt.Errorf("build the app's layer: %w", err)
	}
	now := time.Now().UTC()
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
		History: v1.History{Created: v1.Time{Time: now}, CreatedBy: "cellbox export: COPY app/ /app/", Comment: "the app"}})
	if err != nil {
		return nil, 0, 0, fmt.Errorf("add the app's layer to %s: %w", baseName, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("read the config of %s: %w", baseName, err)
	}
	cfg := cf.Config
	cfg.WorkingDir = "/app"
	cfg.Entrypoint = nil // the command is the whole command (the Dockerfile's CMD)
	cfg.Cmd = slices.Clone(b.App.Command)
	cfg.Env = setEnv(cfg.Env, "PORT", b.App.Port)
	if b.App.Lang == LangPython {
		cfg.Env = setEnvString(cfg.Env, "PYTHONUNBUFFERED", "1")
	}
	if b.App.Port > 0 {
		if cfg.ExposedPorts == nil {
			cfg.ExposedPorts = map[string]struct{}{}
		}
		cfg.ExposedPorts[strconv.Itoa(b.App.Port)+"/tcp"] = struct{}{}
	}
	if cfg.Labels == nil {
		cfg.Labels = map[string]string{}
	}
	cfg.Labels["org.opencontainers.image.title"] = o.Name
	cfg.Labels["org.opencontainers.image.base.name"] = b.BaseImage
	if img, err = mutate.Config(img, cfg); err != nil {
		return nil, 0, 0, fmt.Errorf("set the image's config: %w", err)
	}
	if img, err = mutate.CreatedAt(img, v1.Time{Time: now}); err != nil {
		return nil, 0, 0, fmt.Errorf("set the image's creation time: %w", err)
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	dir := filepath.Join(o.Dest, ImageDir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("write the image layout %s: %w", dir, err)
	}
	ref := o.Name + ":" + imageTag
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		annotationRef:        imageTag,
		annotationContainerd: "docker.io/library/" + ref,
	})); err != nil {
		return nil, 0, 0, fmt.Errorf("write the image to %s: %w", dir, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("the image's digest: %w", err)
	}
	var n int64
	files := 0
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
				files++
			}
		}
		return nil
	})
	return &Image{Digest: digest.String(), Layout: dir, Ref: ref, Base: baseName}, n, files, nil
}

// openBase opens the base image: o.Base ("DIR" or "DIR:TAG"), else the
// layout for want ("python:3.11-slim") in the images directory.
func openBase(o Options, want string) (v1.Image, string, error) {
	if o.Base != "" {
		dir, tag := splitBase(o.Base)
		if !filepath.IsAbs(dir) {
			return nil, "", fmt.Errorf("%w: base %q is not an absolute path", ErrInvalid, o.Base)
		}
		img, err := imageIn(dir, tag)
		if err != nil {
			return nil, "", fmt.Errorf("%w: base %s: %v", ErrInvalid, o.Base, err)
		}
		return img, o.Base, nil
	}
	images := o.ImagesDir
	if images == "" {
		images = DefaultImagesDir()
	}
	repo, tag, _ := strings.Cut(want, ":")
	dir := filepath.Join(images, repo)
	how := fmt.Sprintf("get one with `skopeo copy docker://%s oci:%s:%s`, or give an OCI image layout as base (--base DIR[:TAG])", want, dir, tag)
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
		return nil, "", fmt.Errorf("%w: no base image for the OCI image: %s is not at %s:%s; %s", ErrInvalid, want, dir, tag, how)
	}
	img, err := imageIn(dir, tag)
	if err != nil {
		return nil, "", fmt.Errorf("%w: the base image %s:%s: %v; %s", ErrInvalid, dir, tag, err, how)
	}
	return img, dir + ":" + tag, nil
}

// splitBase splits "DIR:TAG": a path that is a layout as it stands has no
// tag.
func splitBase(s string) (dir, tag string) {
	if _, err := os.Stat(filepath.Join(s, "index.json")); err == nil {
		return s, ""
	}
	if i := strings.LastIndexByte(s, ':'); i > strings.LastIndexByte(s, '/') {
		return s[:i], s[i+1:]
	}
	return s, ""
}

// imageIn is the image tagged tag in the layout at dir (tag "": the only
// one), for this machine's platform when the tag names an index.
func imageIn(dir, tag string) (v1.Image, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("not an OCI image layout: %w", err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("read its index.json: %w", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("read its index.json: %w", err)
	}
	var found []v1.Descriptor
	var tags []string
	for _, d := range im.Manifests {
		ref := d.Annotations[annotationRef]
		tags = append(tags, ref)
		if tag == "" || ref == tag {
			found = append(found, d)
		}
	}
	switch {
	case len(found) == 0 && tag != "":
		return nil, fmt.Errorf("no image tagged %q (it has %q)", tag, tags)
	case len(found) == 0:
		return nil, errors.New("no image in it")
	case len(found) > 1:
		return nil, fmt.Errorf("%d images in it: name one with :TAG (it has %q)", len(found), tags)
	}
	return fromDescriptor(idx, found[0], 0)
}

// fromDescriptor is the image d names in idx, choosing this machine's
// platform in a nested index.
func fromDescriptor(idx v1.ImageIndex, d v1.Descriptor, depth int) (v1.Image, error) {
	if !d.MediaType.IsIndex() {
		return idx.Image(d.Digest)
	}
	if depth > 2 {
		return nil, errors.New("indexes nested too deep")
	}
	child, err := idx.ImageIndex(d.Digest)
	if err != nil {
		return nil, err
	}
	im, err := child.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, c := range im.Manifests {
		if c.Platform == nil || (c.Platform.OS == "linux" && c.Platform.Architecture == runtime.GOARCH) {
			return fromDescriptor(child, c, depth+1)
		}
	}
	return nil, fmt.Errorf("no image for linux/%s in it", runtime.GOARCH)
}

// setEnv sets NAME=port in env (port 0: left as it is).
func setEnv(env []string, name string, port int) []string {
	if port == 0 {
		return env
	}
	return setEnvString(env, name, strconv.Itoa(port))
}

func setEnvString(env []string, name, value string) []string {
	out := slices.DeleteFunc(slices.Clone(env), func(e string) bool { return strings.HasPrefix(e, name+"=") })
	return append(out, name+"="+value)
}

// appTar is the app directory as an uncompressed tar of app/..., owned by
// root, in name order (the same bytes each time: go-containerregistry
// opens it more than once), symlinks as symlinks.
func appTar(ctx context.Context, dir string) (io.ReadCloser, error) {
	pr, pw := io.Pipe()
	go func() {
		// Ends when the tar is written or the reader is closed (a write
		// fails then).
		pw.CloseWithError(writeTar(ctx, pw, dir))
	}()
	return pr, nil
}

func writeTar(ctx context.Context, w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if d.Type()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(filepath.Join(AppDir, rel))
		if d.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		hdr.AccessTime, hdr.ChangeTime = time.Time{}, time.Time{}
		hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.CopyN(tw, f, hdr.Size)
		return err
	})
	if err != nil {
		return fmt.Errorf("tar %s: %w", dir, err)
	}
	return tw.Close()
}
