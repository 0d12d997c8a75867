package export

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// What the app is and how it runs: a command given, or one found in the
// top-level files of the tree (README.md, "How the command is found").

// App kinds, as WorkspaceExportResult.App names them.
const (
	KindFlask     = "flask"
	KindFastAPI   = "fastapi"
	KindStreamlit = "streamlit"
	KindNPM       = "npm"
	KindPython    = "python"
	KindNode      = "node"
	KindCustom    = "custom"
)

// Languages: which base image, and which package list, an app takes.
const (
	LangPython = "python"
	LangNode   = "node"
)

// App is how the bundle runs.
type App struct {
	Kind    string
	Lang    string
	Command []string
	// Port is the TCP port the app serves on (0: none known).
	Port int
	// Needs are the Python packages the command itself needs (flask for
	// `python -m flask`), added to requirements.txt when /env and the
	// project's own requirements do not name them.
	Needs []string
}

// Default ports of the frameworks.
const (
	flaskPort     = 5000
	fastAPIPort   = 8000
	streamlitPort = 8501
	nodePort      = 3000
)

// maxCommandArgs and maxCommandBytes bound a command given.
const (
	maxCommandArgs  = 256
	maxCommandBytes = 64 << 10
)

var (
	reFlaskVar   = regexp.MustCompile(`(?m)^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?:flask\.)?Flask\(`)
	reFastAPIVar = regexp.MustCompile(`(?m)^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?:fastapi\.)?FastAPI\(`)
	reStreamlit  = regexp.MustCompile(`(?m)^\s*(?:import\s+streamlit\b|from\s+streamlit\b)`)
	reRunCall    = regexp.MustCompile(`\.run\(([^)]*)\)`)
	reRunHost    = regexp.MustCompile(`host\s*=\s*["'](?:0\.0\.0\.0|::)["']`)
	rePortKw     = regexp.MustCompile(`\bport\s*=\s*(\d{2,5})\b`)
	rePortEnv    = regexp.MustCompile(`["']PORT["']\s*(?:,|\]\s*or|\)\s*or)\s*["']?(\d{2,5})`)
	reTupleAddr  = regexp.MustCompile(`\(\s*["'][^"']*["']\s*,\s*(\d{2,5})\s*\)`)
	reListen     = regexp.MustCompile(`\.listen\(\s*(\d{2,5})\b`)
	reNodePort   = regexp.MustCompile(`PORT\s*(?:\|\||\?\?)\s*["']?(\d{2,5})`)
)

// pyMains and nodeMains are the main scripts looked for, in this order.
var (
	pyMains   = []string{"app.py", "main.py", "server.py", "streamlit_app.py", "wsgi.py", "__main__.py"}
	nodeMains = []string{"server.js", "index.js", "app.js", "main.js", "server.mjs", "index.mjs", "app.mjs", "main.mjs"}
)

// Detect finds how the app in files (the tree's top-level files: name to
// content, read up to a bound) runs. command, when given, is used as is;
// port, when not 0, is the port the app serves on.
func Detect(files map[string][]byte, command []string, port int) (App, error) {
	if port < 0 || port > 65535 {
		return App{}, fmt.Errorf("%w: port %d: want 1 to 65535", ErrInvalid, port)
	}
	pkg := parsePackageJSON(files["package.json"])
	if len(command) > 0 {
		if err := checkCommand(command); err != nil {
			return App{}, err
		}
		app := App{Kind: KindCustom, Lang: LangPython, Command: slices.Clone(command), Port: port}
		if files["package.json"] != nil || (len(pyFiles(files)) == 0 && len(jsFiles(files)) > 0) {
			app.Lang = LangNode
		}
		if app.Port == 0 {
			app.Port = detectPort(files, app.Lang)
		}
		return app, nil
	}
	if pkg.Scripts["start"] != "" {
		p := port
		if p == 0 {
			if p = detectPort(files, LangNode); p == 0 {
				p = nodePort
			}
		}
		return App{Kind: KindNPM, Lang: LangNode, Command: []string{"npm", "start"}, Port: p}, nil
	}
	py := pyFiles(files)
	for _, f := range py {
		src := string(files[f])
		mod := strings.TrimSuffix(f, ".py")
		switch {
		case reStreamlit.MatchString(src):
			p := orDefault(port, streamlitPort)
			return App{Kind: KindStreamlit, Lang: LangPython, Port: p, Needs: []string{"streamlit"},
				Command: []string{"python", "-m", "streamlit", "run", f, "--server.address", "0.0.0.0", "--server.port", strconv.Itoa(p), "--server.headless", "true"}}, nil
		case reFastAPIVar.MatchString(src):
			v := reFastAPIVar.FindStringSubmatch(src)[1]
			p := orDefault(port, fastAPIPort)
			return App{Kind: KindFastAPI, Lang: LangPython, Port: p, Needs: []string{"fastapi", "uvicorn"},
				Command: []string{"python", "-m", "uvicorn", mod + ":" + v, "--host", "0.0.0.0", "--port", strconv.Itoa(p)}}, nil
		case reFlaskVar.MatchString(src):
			return flaskApp(f, src, port), nil
		}
	}
	if f := pick(py, pyMains); f != "" {
		return App{Kind: KindPython, Lang: LangPython, Command: []string{"python", f}, Port: orDefault(port, filePort(files[f], LangPython))}, nil
	}
	f := pick(jsFiles(files), nodeMains)
	if m := path.Clean(pkg.Main); pkg.Main != "" && files[m] != nil && isPlainName(m) {
		f = m
	}
	if f != "" {
		return App{Kind: KindNode, Lang: LangNode, Command: []string{"node", f}, Port: orDefault(port, filePort(files[f], LangNode))}, nil
	}
	return App{}, fmt.Errorf("%w: no command found to run the app (no Flask, FastAPI or Streamlit app, no package.json with scripts.start, no main script such as app.py or server.js at the top level): give one (command, --command)", ErrInvalid)
}

// flaskApp runs f's Flask app: `python f` when f runs it itself on every
// address (app.run(host="0.0.0.0") under __main__), else Flask's own
// command, which serves on every address, as a container needs.
func flaskApp(f, src string, port int) App {
	v := reFlaskVar.FindStringSubmatch(src)[1]
	mod := strings.TrimSuffix(f, ".py")
	run := ""
	if m := reRunCall.FindStringSubmatch(src); m != nil && strings.Contains(src, "__main__") {
		run = m[1]
	}
	p := port
	if p == 0 {
		if m := rePortKw.FindStringSubmatch(run); m != nil {
			p = atoiPort(m[1])
		}
	}
	if run != "" && reRunHost.MatchString(run) && (port == 0 || p == port) {
		return App{Kind: KindFlask, Lang: LangPython, Port: orDefault(p, flaskPort), Needs: []string{"flask"}, Command: []string{"python", f}}
	}
	p = orDefault(p, flaskPort)
	target := mod
	if v != "app" && v != "application" {
		target += ":" + v
	}
	return App{Kind: KindFlask, Lang: LangPython, Port: p, Needs: []string{"flask"},
		Command: []string{"python", "-m", "flask", "--app", target, "run", "--host", "0.0.0.0", "--port", strconv.Itoa(p)}}
}

// checkCommand checks a command given.
func checkCommand(cmd []string) error {
	if len(cmd) > maxCommandArgs {
		return fmt.Errorf("%w: command: %d arguments; at most %d", ErrInvalid, len(cmd), maxCommandArgs)
	}
	n := 0
	for i, a := range cmd {
		n += len(a)
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("%w: command: argument %d holds a NUL byte", ErrInvalid, i)
		}
	}
	if cmd[0] == "" {
		return fmt.Errorf("%w: command: the program is empty", ErrInvalid)
	}
	if n > maxCommandBytes {
		return fmt.Errorf("%w: command: %d bytes; at most %d", ErrInvalid, n, maxCommandBytes)
	}
	return nil
}

// detectPort is the port a file of lang's main scripts names, 0 if none.
func detectPort(files map[string][]byte, lang string) int {
	mains, names := pyMains, pyFiles(files)
	if lang == LangNode {
		mains, names = nodeMains, jsFiles(files)
	}
	if f := pick(names, mains); f != "" {
		return filePort(files[f], lang)
	}
	return 0
}

// filePort is the port a script listens on, as far as its text says.
func filePort(src []byte, lang string) int {
	res := []*regexp.Regexp{rePortKw, rePortEnv, reTupleAddr}
	if lang == LangNode {
		res = []*regexp.Regexp{reListen, reNodePort}
	}
	for _, re := range res {
		if m := re.FindSubmatch(src); m != nil {
			if p := atoiPort(string(m[1])); p > 0 {
				return p
			}
		}
	}
	return 0
}

func atoiPort(s string) int {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0
	}
	return p
}

func orDefault(p, def int) int {
	if p != 0 {
		return p
	}
	return def
}

// pick is the first of prefer in names, else the only name, else "".
func pick(names, prefer []string) string {
	for _, p := range prefer {
		if slices.Contains(names, p) {
			return p
		}
	}
	if len(names) == 1 {
		return names[0]
	}
	return ""
}

// pyFiles are the Python files of files, the main scripts first, then by
// name.
func pyFiles(files map[string][]byte) []string {
	return byPreference(files, pyMains, ".py")
}

func jsFiles(files map[string][]byte) []string {
	var out []string
	for _, ext := range []string{".js", ".mjs"} {
		out = append(out, byPreference(files, nodeMains, ext)...)
	}
	return out
}

func byPreference(files map[string][]byte, prefer []string, ext string) []string {
	var first, rest []string
	for _, p := range prefer {
		if _, ok := files[p]; ok && strings.HasSuffix(p, ext) {
			first = append(first, p)
		}
	}
	for name := range files {
		if strings.HasSuffix(name, ext) && !slices.Contains(prefer, name) && isPlainName(name) {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	return append(first, rest...)
}

// isPlainName: a module name Python or a shell word takes as it is.
func isPlainName(name string) bool {
	for _, r := range name {
		if !(r == '_' || r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return name != "" && name[0] != '-'
}

// packageJSON is what detection reads of a package.json.
type packageJSON struct {
	Main    string            `json:"main"`
	Scripts map[string]string `json:"scripts"`
}

func parsePackageJSON(b []byte) packageJSON {
	var p packageJSON
	if b != nil {
		_ = json.Unmarshal(b, &p) // a package.json that does not parse has no start script
	}
	return p
}
