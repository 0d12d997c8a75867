package export

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
)

// envFS is a /env as pip and npm leave it.
func envFS() fstest.MapFS {
	sp := "lib/python3.11/site-packages/"
	return fstest.MapFS{
		"pyvenv.cfg":                               {Data: []byte("home = /usr/bin\ninclude-system-site-packages = true\nversion = 3.11.2\n")},
		sp + "cbdemo-1.0.dist-info/METADATA":       {Data: []byte("Metadata-Version: 2.1\nName: cbdemo\nVersion: 1.0\n\nName: not-a-header\n")},
		sp + "Flask_Cors-4.0.1.dist-info/METADATA": {Data: []byte("Metadata-Version: 2.1\nName: Flask-Cors\nVersion: 4.0.1\n")},
		sp + "pip-23.0.dist-info/METADATA":         {Data: []byte("Name: pip\nVersion: 23.0\n")},
		sp + "evil-1.dist-info/METADATA":           {Data: []byte("Name: evil\nnewline\nVersion: 1 --index-url http://x\n")},
		sp + "cbdemo/__init__.py":                  {Data: []byte("VALUE = 42\n")},
		"npm/package.json":                         {Data: []byte(`{"dependencies":{"left-pad":"^1.3.0","bad name":"1"}}`)},
		"npm/node_modules/left-pad/package.json":   {Data: []byte(`{"name":"left-pad","version":"1.3.0"}`)},
	}
}

func TestPythonPackages(t *testing.T) {
	got, err := PythonPackages(context.Background(), envFS())
	if err != nil {
		t.Fatal(err)
	}
	want := []Package{{"cbdemo", "1.0"}, {"Flask-Cors", "4.0.1"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("PythonPackages = %+v, want %+v (pip and a version with spaces left out)", got, want)
	}
	if got, _ := PythonPackages(context.Background(), fstest.MapFS{}); len(got) != 0 {
		t.Fatalf("an empty /env: %+v", got)
	}
}

func TestRequirements(t *testing.T) {
	env := []Package{{"cbdemo", "1.0"}, {"Flask-Cors", "4.0.1"}}
	got := string(Requirements([]byte("flask_cors>=4\n# a comment\nrequests\n"), env, []string{"flask", "requests"}))
	want := "# Written by cellbox export: the project's own requirements.txt, if it had one,\n" +
		"# then the packages installed in the workspace's /env (pip freeze's form).\n" +
		"flask_cors>=4\n# a comment\nrequests\n" +
		"cbdemo==1.0\n" +
		"# What the command needs, which the sandbox had from the host's Python:\nflask\n"
	if got != want {
		t.Fatalf("Requirements:\n%s\nwant:\n%s", got, want)
	}
}

func TestNodePackages(t *testing.T) {
	got, err := NodePackages(context.Background(), envFS())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["left-pad"] != "^1.3.0" {
		t.Fatalf("NodePackages from npm/package.json = %v", got)
	}
	env := envFS()
	delete(env, "npm/package.json")
	env["npm/node_modules/@scope/pkg/package.json"] = &fstest.MapFile{Data: []byte(`{"name":"@scope/pkg","version":"2.0.0"}`)}
	got, _ = NodePackages(context.Background(), env)
	if len(got) != 2 || got["left-pad"] != "1.3.0" || got["@scope/pkg"] != "2.0.0" {
		t.Fatalf("NodePackages from node_modules = %v", got)
	}
}

func TestPackageJSON(t *testing.T) {
	project := []byte(`{"name": "mine", "scripts": {"start": "node s.js"}, "dependencies": {"left-pad": "1.1.0"}, "zz": [1, 2]}`)
	b, err := PackageJSON(project, "x", map[string]string{"left-pad": "^1.3.0", "express": "^4.0.0"}, App{Kind: KindNPM})
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.HasPrefix(s, "{\n  \"name\": \"mine\",\n  \"scripts\"") || !strings.Contains(s, `"zz"`) || strings.Index(s, `"dependencies"`) > strings.Index(s, `"zz"`) {
		t.Fatalf("the project's keys are not kept in their order:\n%s", s)
	}
	var p struct{ Dependencies map[string]string }
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	if p.Dependencies["left-pad"] != "1.1.0" || p.Dependencies["express"] != "^4.0.0" {
		t.Fatalf("dependencies: %v (the project's own range wins)", p.Dependencies)
	}
	b, err = PackageJSON(nil, "My App", nil, App{Kind: KindNode, Command: []string{"node", "server.js"}})
	if err != nil {
		t.Fatal(err)
	}
	var q struct {
		Name         string
		Private      bool
		Scripts      map[string]string
		Dependencies map[string]string
	}
	if err := json.Unmarshal(b, &q); err != nil || q.Name != "my-app" || !q.Private || q.Scripts["start"] != "node server.js" || q.Dependencies == nil {
		t.Fatalf("a new package.json: %v %+v\n%s", err, q, b)
	}
	if _, err := PackageJSON([]byte("[1]"), "x", nil, App{}); err == nil {
		t.Fatal("a package.json that is not an object was taken")
	}
}

// TestEnvReadBounded: however many entries /env holds that are not
// packages, what is read of them is bounded, and a cancelled export stops.
func TestEnvReadBounded(t *testing.T) {
	defer func(v int, r int64) { maxEnvVisits, maxEnvRead = v, r }(maxEnvVisits, maxEnvRead)
	maxEnvVisits, maxEnvRead = 50, 64<<10
	bogus := fstest.MapFS{}
	for i := range 60 {
		bogus[fmt.Sprintf("lib/python3.11/site-packages/x%d.dist-info/METADATA", i)] = &fstest.MapFile{Data: []byte("not metadata\n")}
		bogus[fmt.Sprintf("npm/node_modules/m%d/package.json", i)] = &fstest.MapFile{Data: []byte("{not json")}
	}
	if _, err := PythonPackages(context.Background(), bogus); !errors.Is(err, ErrLimit) {
		t.Errorf("60 broken distributions past a bound of 50: %v, want ErrLimit", err)
	}
	if _, err := NodePackages(context.Background(), bogus); !errors.Is(err, ErrLimit) {
		t.Errorf("60 broken node modules past a bound of 50: %v, want ErrLimit", err)
	}
	// Few entries, but big: the bytes are bounded.
	big := fstest.MapFS{}
	for i := range 4 {
		big[fmt.Sprintf("npm/node_modules/m%d/package.json", i)] = &fstest.MapFile{Data: bytes.Repeat([]byte(" "), 30<<10)}
	}
	if _, err := NodePackages(context.Background(), big); !errors.Is(err, ErrLimit) {
		t.Errorf("120 KiB of package.json past a bound of 64 KiB: %v, want ErrLimit", err)
	}
	// Within the bounds, the valid packages still come.
	if got, err := PythonPackages(context.Background(), envFS()); err != nil || len(got) != 2 {
		t.Errorf("envFS within the bounds: %v %v", got, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := PythonPackages(ctx, envFS()); !errors.Is(err, context.Canceled) {
		t.Errorf("PythonPackages cancelled: %v", err)
	}
	env := envFS()
	delete(env, "npm/package.json")
	if _, err := NodePackages(ctx, env); !errors.Is(err, context.Canceled) {
		t.Errorf("NodePackages cancelled: %v", err)
	}
}

// TestNpmName: every directory name gives a name the export takes (one
// separator between letters and digits, at most 100 bytes).
func TestNpmName(t *testing.T) {
	for in, want := range map[string]string{
		"greeter":                             "greeter",
		"My  App":                             "my-app",
		"my--app":                             "my-app",
		"a.-_b":                               "a.b",
		"..hidden":                            "hidden",
		"café_ünï":                            "caf-n",
		"日本":                                  "app",
		"x-" + strings.Repeat("y", 97) + "-z": "x-" + strings.Repeat("y", 97),
	} {
		got := npmName(in)
		if got != want || !reName.MatchString(got) || len(got) > 100 {
			t.Errorf("npmName(%q) = %q, want %q (valid)", in, got, want)
		}
	}
}
