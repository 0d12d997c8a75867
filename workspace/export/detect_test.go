package export

import (
	"errors"
	"slices"
	"testing"
)

func TestDetect(t *testing.T) {
	flaskSrc := "from flask import Flask\napp = Flask(__name__)\n\n@app.get('/')\ndef hi():\n    return 'hi'\n"
	tests := []struct {
		name    string
		files   map[string]string
		command []string
		port    int
		kind    string
		want    []string
		wantP   int
	}{
		{name: "flask", files: map[string]string{"app.py": flaskSrc}, kind: KindFlask,
			want: []string{"python", "-m", "flask", "--app", "app", "run", "--host", "0.0.0.0", "--port", "5000"}, wantP: 5000},
		{name: "flask, another variable and port", files: map[string]string{"web.py": "import flask\nserver = flask.Flask(__name__)\nif __name__ == '__main__':\n    server.run(port=8080)\n"},
			kind: KindFlask, want: []string{"python", "-m", "flask", "--app", "web:server", "run", "--host", "0.0.0.0", "--port", "8080"}, wantP: 8080},
		{name: "flask that runs itself on every address", files: map[string]string{"app.py": flaskSrc + "if __name__ == '__main__':\n    app.run(host='0.0.0.0', port=8000)\n"},
			kind: KindFlask, want: []string{"python", "app.py"}, wantP: 8000},
		{name: "flask, port asked", files: map[string]string{"app.py": flaskSrc}, port: 7000, kind: KindFlask,
			want: []string{"python", "-m", "flask", "--app", "app", "run", "--host", "0.0.0.0", "--port", "7000"}, wantP: 7000},
		{name: "fastapi", files: map[string]string{"main.py": "from fastapi import FastAPI\napi = FastAPI()\n", "util.py": "x = 1\n"}, kind: KindFastAPI,
			want: []string{"python", "-m", "uvicorn", "main:api", "--host", "0.0.0.0", "--port", "8000"}, wantP: 8000},
		{name: "streamlit", files: map[string]string{"dash.py": "import streamlit as st\nst.write('hi')\n"}, kind: KindStreamlit,
			want: []string{"python", "-m", "streamlit", "run", "dash.py", "--server.address", "0.0.0.0", "--server.port", "8501", "--server.headless", "true"}, wantP: 8501},
		{name: "npm start", files: map[string]string{"package.json": `{"scripts":{"start":"node server.js"}}`, "server.js": "require('http').createServer().listen(8081)\n", "tool.py": "print(1)\n"},
			kind: KindNPM, want: []string{"npm", "start"}, wantP: 8081},
		{name: "npm start, default port", files: map[string]string{"package.json": `{"scripts":{"start":"vite"}}`}, kind: KindNPM, want: []string{"npm", "start"}, wantP: 3000},
		{name: "python main script", files: map[string]string{"main.py": "import os\nport = int(os.environ.get('PORT', '9000'))\n", "lib.py": ""},
			kind: KindPython, want: []string{"python", "main.py"}, wantP: 9000},
		{name: "the only python script", files: map[string]string{"job.py": "print('hi')\n", "README.md": "x"}, kind: KindPython, want: []string{"python", "job.py"}},
		{name: "node main script", files: map[string]string{"index.js": "const port = process.env.PORT || 4000\n"}, kind: KindNode, want: []string{"node", "index.js"}, wantP: 4000},
		{name: "package.json main", files: map[string]string{"package.json": `{"main":"srv.js"}`, "srv.js": "x.listen(3500)", "other.js": ""}, kind: KindNode, want: []string{"node", "srv.js"}, wantP: 3500},
		{name: "given", files: map[string]string{"app.py": flaskSrc}, command: []string{"gunicorn", "app:app"}, port: 8000, kind: KindCustom, want: []string{"gunicorn", "app:app"}, wantP: 8000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string][]byte{}
			for k, v := range tt.files {
				files[k] = []byte(v)
			}
			app, err := Detect(files, tt.command, tt.port)
			if err != nil {
				t.Fatal(err)
			}
			if app.Kind != tt.kind || !slices.Equal(app.Command, tt.want) || app.Port != tt.wantP {
				t.Fatalf("Detect = %s %q port %d; want %s %q port %d", app.Kind, app.Command, app.Port, tt.kind, tt.want, tt.wantP)
			}
		})
	}
}

func TestDetectRefuses(t *testing.T) {
	for name, c := range map[string]struct {
		files   map[string][]byte
		command []string
		port    int
	}{
		"nothing to run":    {files: map[string][]byte{"README.md": []byte("hi")}},
		"two scripts":       {files: map[string][]byte{"a.py": nil, "b.py": nil}},
		"empty program":     {command: []string{""}},
		"a NUL":             {command: []string{"python", "a\x00b"}},
		"a port over 65535": {command: []string{"x"}, port: 70000},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Detect(c.files, c.command, c.port); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Detect: %v, want ErrInvalid", err)
			}
		})
	}
}
