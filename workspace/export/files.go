package export

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The generated files of a bundle. Each is small and says what wrote it.

// AppDir is the bundle's directory holding the app (the workspace's files
// with requirements.txt / package.json), ImageDir the OCI image layout's.
const (
	AppDir   = "app"
	ImageDir = "image"
)

// Bundle is what the generated files are written from.
type Bundle struct {
	// Name names the app (the image, the compose service's image).
	Name string
	App  App
	// BaseImage is the official image the Dockerfile builds on
	// ("python:3.11-slim").
	BaseImage string
	// Requirements: app/requirements.txt was written; PackageJSON: so was
	// app/package.json.
	Requirements, PackageJSON bool
	// Image is the OCI layout's reference ("NAME:latest"), "" without one.
	Image string
}

// BaseImage is the official image of lang at version ("3.11", "20"):
// python:3.11-slim, node:20-slim.
func BaseImage(lang, version string) string {
	if lang == LangNode {
		return "node:" + version + "-slim"
	}
	return "python:" + version + "-slim"
}

// Dockerfile builds the app on its base image: the packages first (a
// layer that changes less often), then the app at /app.
func Dockerfile(b Bundle) []byte {
	var s strings.Builder
	fmt.Fprintf(&s, "# Written by cellbox export: %s on the official %s image.\n", b.Name, b.BaseImage)
	fmt.Fprintf(&s, "FROM %s\nWORKDIR /app\n", b.BaseImage)
	if b.App.Lang == LangNode {
		s.WriteString("ENV NODE_ENV=production\n")
		if b.PackageJSON {
			s.WriteString("COPY " + AppDir + "/package*.json ./\nRUN npm install --omit=dev --no-audit --no-fund\n")
		}
	} else {
		s.WriteString("ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1\n")
		if b.Requirements {
			s.WriteString("COPY " + AppDir + "/requirements.txt ./\nRUN pip install --no-cache-dir -r requirements.txt\n")
		}
		if b.PackageJSON {
			s.WriteString("# The app's npm packages (app/package.json) need node: install it here if the app runs it.\n")
		}
	}
	s.WriteString("COPY " + AppDir + "/ ./\n")
	if b.App.Port > 0 {
		fmt.Fprintf(&s, "ENV PORT=%d\nEXPOSE %d\n", b.App.Port, b.App.Port)
	}
	fmt.Fprintf(&s, "CMD %s\n", jsonArray(b.App.Command))
	return []byte(s.String())
}

// DockerIgnore keeps the image layout and what installs make out of the
// build context.
func DockerIgnore() []byte {
	return []byte(`# Written by cellbox export: not part of the image's build context.
` + ImageDir + `/
**/__pycache__
**/*.pyc
` + AppDir + `/node_modules
` + AppDir + `/.venv
.git
`)
}

// Compose is compose.yaml: one service built from the Dockerfile.
func Compose(b Bundle) []byte {
	var s strings.Builder
	s.WriteString("# Written by cellbox export: docker compose up (or podman compose up).\nservices:\n")
	fmt.Fprintf(&s, "  %s:\n    build: .\n    image: %s:latest\n", b.Name, b.Name)
	if b.App.Port > 0 {
		fmt.Fprintf(&s, "    ports:\n      - \"%d:%d\"\n", b.App.Port, b.App.Port)
	}
	s.WriteString("    restart: unless-stopped\n")
	return []byte(s.String())
}

// Readme is the bundle's README.md: what it holds and three ways to run
// it.
func Readme(b Bundle) []byte {
	var s strings.Builder
	cmd := shellJoin(b.App.Command)
	fmt.Fprintf(&s, "# %s\n\nExported by `cellbox export` from a cellbox workspace: the app (a %s app) in `%s/`,\n", b.Name, b.App.Kind, AppDir)
	s.WriteString("its packages ")
	switch {
	case b.Requirements && b.PackageJSON:
		fmt.Fprintf(&s, "in `%s/requirements.txt` and `%s/package.json`", AppDir, AppDir)
	case b.PackageJSON:
		fmt.Fprintf(&s, "in `%s/package.json`", AppDir)
	default:
		fmt.Fprintf(&s, "in `%s/requirements.txt`", AppDir)
	}
	fmt.Fprintf(&s, ", a `Dockerfile` (on `%s`) and a `compose.yaml`.\n", b.BaseImage)
	fmt.Fprintf(&s, "It runs, in `%s/`, with:\n\n```sh\n%s\n```\n\n", AppDir, cmd)
	url := ""
	if b.App.Port > 0 {
		url = fmt.Sprintf("http://localhost:%d/", b.App.Port)
		fmt.Fprintf(&s, "and serves on port %d (%s).\n\n", b.App.Port, url)
	}
	publish := ""
	if b.App.Port > 0 {
		publish = fmt.Sprintf(" -p %d:%d", b.App.Port, b.App.Port)
	}
	s.WriteString("## 1. With Docker or Podman\n\n```sh\n")
	fmt.Fprintf(&s, "docker build -t %s .\ndocker run --rm%s %s\n```\n\n(`podman` takes the same two commands.)\n\n", b.Name, publish, b.Name)
	s.WriteString("## 2. With Compose\n\n```sh\ndocker compose up --build\n```\n\n")
	s.WriteString("## 3. Locally\n\n```sh\ncd " + AppDir + "\n")
	if b.App.Lang == LangNode {
		s.WriteString("npm install\n")
	} else {
		s.WriteString("python3 -m venv .venv\n. .venv/bin/activate\npip install -r requirements.txt\n")
	}
	s.WriteString(cmd + "\n```\n")
	if b.Image != "" {
		fmt.Fprintf(&s, "\n## The OCI image\n\n`%s/` is an OCI image layout of the same app on `%s`, built without Docker, tagged `latest`:\n\n", ImageDir, b.BaseImage)
		fmt.Fprintf(&s, "```sh\ntar -C %s -cf - . | docker load      # or: | podman load (both name it %s)\n", ImageDir, b.Image)
		fmt.Fprintf(&s, "docker run --rm%s %s\n```\n", publish, b.Image)
	}
	return []byte(s.String())
}

// jsonArray is the exec form of a Dockerfile instruction.
func jsonArray(a []string) string {
	b, _ := json.Marshal(a)
	return string(b)
}

// shellJoin quotes args for a POSIX shell where needed.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,:/=@+%") == "" {
			out[i] = a
		} else {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}
