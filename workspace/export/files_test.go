package export

import (
	"strings"
	"testing"
)

func TestDockerfile(t *testing.T) {
	flask := Bundle{Name: "shop", BaseImage: "python:3.11-slim", Requirements: true,
		App: App{Kind: KindFlask, Lang: LangPython, Port: 5000, Command: []string{"python", "-m", "flask", "--app", "app", "run", "--host", "0.0.0.0", "--port", "5000"}}}
	want := `# Written by cellbox export: shop on the official python:3.11-slim image.
FROM python:3.11-slim
WORKDIR /app
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
COPY app/requirements.txt ./
RUN pip install --no-cache-dir -r requirements.txt
COPY app/ ./
ENV PORT=5000
EXPOSE 5000
CMD ["python","-m","flask","--app","app","run","--host","0.0.0.0","--port","5000"]
`
	if got := string(Dockerfile(flask)); got != want {
		t.Fatalf("Dockerfile:\n%s\nwant:\n%s", got, want)
	}
	node := Bundle{Name: "api", BaseImage: BaseImage(LangNode, "20"), PackageJSON: true,
		App: App{Kind: KindNPM, Lang: LangNode, Port: 3000, Command: []string{"npm", "start"}}}
	want = `# Written by cellbox export: api on the official node:20-slim image.
FROM node:20-slim
WORKDIR /app
ENV NODE_ENV=production
COPY app/package*.json ./
RUN npm install --omit=dev --no-audit --no-fund
COPY app/ ./
ENV PORT=3000
EXPOSE 3000
CMD ["npm","start"]
`
	if got := string(Dockerfile(node)); got != want {
		t.Fatalf("Dockerfile:\n%s\nwant:\n%s", got, want)
	}
	job := Bundle{Name: "job", BaseImage: "python:3.12-slim", Requirements: true, App: App{Kind: KindPython, Lang: LangPython, Command: []string{"python", "job.py"}}}
	if got := string(Dockerfile(job)); strings.Contains(got, "EXPOSE") || !strings.HasSuffix(got, "CMD [\"python\",\"job.py\"]\n") {
		t.Fatalf("a script without a port:\n%s", got)
	}
}

func TestCompose(t *testing.T) {
	b := Bundle{Name: "shop", App: App{Port: 5000}}
	want := `# Written by cellbox export: docker compose up (or podman compose up).
services:
  shop:
    build: .
    image: shop:latest
    ports:
      - "5000:5000"
    restart: unless-stopped
`
	if got := string(Compose(b)); got != want {
		t.Fatalf("compose.yaml:\n%s\nwant:\n%s", got, want)
	}
	if got := string(Compose(Bundle{Name: "job"})); strings.Contains(got, "ports") {
		t.Fatalf("compose.yaml without a port:\n%s", got)
	}
}

func TestReadme(t *testing.T) {
	b := Bundle{Name: "shop", BaseImage: "python:3.11-slim", Requirements: true, Image: "shop:latest",
		App: App{Kind: KindFlask, Lang: LangPython, Port: 5000, Command: []string{"python", "-m", "flask", "--app", "it's", "run"}}}
	got := string(Readme(b))
	for _, want := range []string{
		"docker build -t shop .\ndocker run --rm -p 5000:5000 shop\n",
		"docker compose up --build\n",
		"cd app\npython3 -m venv .venv\n. .venv/bin/activate\npip install -r requirements.txt\npython -m flask --app 'it'\\''s' run\n",
		"tar -C image -cf - . | docker load",
		"http://localhost:5000/",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("README.md lacks %q:\n%s", want, got)
		}
	}
	node := string(Readme(Bundle{Name: "api", BaseImage: "node:20-slim", PackageJSON: true, App: App{Kind: KindNPM, Lang: LangNode, Command: []string{"npm", "start"}}}))
	if !strings.Contains(node, "cd app\nnpm install\nnpm start\n") || strings.Contains(node, "OCI") {
		t.Errorf("README.md of a node app:\n%s", node)
	}
}

func TestDockerIgnore(t *testing.T) {
	if got := string(DockerIgnore()); !strings.Contains(got, "\nimage/\n") || !strings.Contains(got, "app/node_modules") {
		t.Fatalf(".dockerignore:\n%s", got)
	}
}
