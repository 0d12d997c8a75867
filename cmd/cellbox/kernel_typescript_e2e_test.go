package main

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// TypeScript takes TestKernelEveryLanguage's steps too (output, state,
// errors, stdin both ways, interrupts, restart, exit).
func init() {
	allLanguages = append(allLanguages, "typescript")
	snippets["typescript"] = langCode{
		print: "console.log('héllo 🌍' as string)", slowLoop: "while (true as boolean) {}", sleep: "await new Promise<void>(r => setTimeout(r, 60000))",
		setVar: "var marker: string = 'kept'", getVar: "console.log(marker)", fail: "(null as any).x", exit3: "process.exit(3)",
		readLine: "const n: string = await input('name? ')\nconsole.log('got', n)", started: "console.log('started')",
	}
}

// TestKernelTypeScript: what a user of the typescript kernel expects:
// types erased (never checked), results and output, errors whose stack
// and source mapping point at TypeScript lines, a syntax error as the
// cell's error, state and redeclaration across cells, top-level await,
// static imports that later cells use, stdin, interrupt, restart,
// completion, isComplete, variables, and no ExperimentalWarning on
// stderr.
func TestKernelTypeScript(t *testing.T) {
	p := startStdio(t)
	c := p.client()
	init := c.initialize(t)
	ts := slices.IndexFunc(init.Capabilities.Languages, func(l protocol.LanguageCapability) bool { return l.ID == "typescript" })
	if ts < 0 || !init.Capabilities.Languages[ts].Available || !slices.Contains(init.Capabilities.Languages[ts].FileExtensions, ".ts") {
		t.Fatalf("initialize languages = %+v", init.Capabilities.Languages)
	}
	k := startKernel(t, c, protocol.KernelStartParams{Language: "typescript"})
	kid := k.KernelID
	if k.LanguageInfo.Version == "" || k.LanguageInfo.FileExtension != ".ts" {
		t.Fatalf("kernel/start = %+v", k)
	}

	var stderr strings.Builder
	for _, step := range []struct{ code, want, stdout string }{
		{"interface Point {\n  x: number\n  y: number\n}\nconst p: Point = { x: 1, y: 2 }\nlet n: number = 40", "", ""},
		{"n + 2", "42", ""},
		{"let n: string = 'again'\nn", "'again'", ""}, // declared again
		{"type Fn = (a: number) => number\nconst dbl: Fn = (a) => a * 2\ndbl(p.x + p.y)", "6", ""}, // state
		{"enum Color { Red, Green }\nColor.Green", "1", ""},
		{"Color[1]", "'Green'", ""},
		{"class Box<T> {\n  constructor(private v: T) {}\n  get(): T { return this.v }\n}\nnew Box<string>('in').get()", "'in'", ""},
		{"new Box(3).get() satisfies number", "3", ""},
		{"const later: number = await new Promise<number>((r) => setTimeout(() => r(5), 10))\nlater", "5", ""},
		{"console.log(`later=${later}` as string)", "", "later=5\n"},
		{"'ünï ✓' as const", "'ünï ✓'", ""},
		// a last expression that esbuild folds to a primitive keeps its value
		{"'a' + ('b' as string)", "'ab'", ""},
		{"let t = 1\nif (t)\n  1 === 1", "true", ""},
		// types are erased, not checked
		{"const wrong: number = 'not a number' as any as number\nwrong", "'not a number'", ""},
		// static imports of a builtin; later cells use the names
		{"import { join as pjoin } from 'node:path'\nimport * as os from 'os'\nimport fs from 'fs'", "", ""},
		{"pjoin('a', 'b') + ' ' + typeof os.cpus + ' ' + typeof fs.readFileSync", "'a/b function function'", ""},
		{"export const exported: number = 9\nexported", "9", ""},
	} {
		res, outs := execute(t, c, kid, step.code)
		wantOK(t, res, outs)
		if got := resultText(t, outs); got != step.want {
			t.Fatalf("%q: result %q, want %q (outputs %+v)", step.code, got, step.want, outs)
		}
		if got := streamText(outs, protocol.StreamStdout); got != step.stdout {
			t.Fatalf("%q: stdout %q, want %q", step.code, got, step.stdout)
		}
		stderr.WriteString(streamText(outs, protocol.StreamStderr))
	}

	// A package of the workspace's node_modules, imported statically and
	// used in a later cell.
	res, outs := execute(t, c, kid, `import * as fsp from 'node:fs'
fsp.mkdirSync('node_modules/tsgreet', { recursive: true })
fsp.writeFileSync('node_modules/tsgreet/package.json', '{"name": "tsgreet", "type": "module", "exports": "./index.js"}')
fsp.writeFileSync('node_modules/tsgreet/index.js', "export const greet = (n) => 'hi ' + n; export default 'dflt'")`)
	wantOK(t, res, outs)
	res, outs = execute(t, c, kid, "import dflt, { greet } from 'tsgreet'")
	wantOK(t, res, outs)
	stderr.WriteString(streamText(outs, protocol.StreamStderr))
	if _, outs = execute(t, c, kid, "const who: string = 'you'\ngreet(who) + ' ' + dflt"); resultText(t, outs) != "'hi you dflt'" {
		t.Fatalf("import from node_modules, used later: %+v", outs)
	}
	if s := stderr.String(); strings.Contains(s, "ExperimentalWarning") {
		t.Fatalf("node's ExperimentalWarning reached stderr: %q", s)
	}
	if s := stderr.String(); s != "" {
		t.Fatalf("stderr = %q", s)
	}

	// Errors point at the TypeScript: line 7 is after a type alias and an
	// interface of three lines, which the JavaScript no longer has.
	code := "type Id = string\ninterface User {\n  id: Id\n  name: string\n}\nconst u: User | null = null as User | null\nconst nm: string = (u as any).name\n"
	res, outs = execute(t, c, kid, code)
	if res.Status != protocol.ExecutionStatusError || res.Error == nil || res.Error.Ename != "TypeError" {
		t.Fatalf("error = %+v", res.Error)
	}
	tb := strings.Join(res.Error.Traceback, "\n")
	if !strings.Contains(tb, "<cell ") || !strings.Contains(tb, ">:7:") || strings.Contains(tb, "driver") {
		t.Fatalf("traceback does not point at line 7 of the cell: %s", tb)
	}
	if len(ofKind(outs, protocol.OutputKindError)) != 1 {
		t.Fatalf("error outputs = %+v", outs)
	}
	// ... and with source mapping, at the line of the file; a function of
	// an earlier cell maps through that cell's own source map.
	res, _ = execute(t, c, kid, "interface Opts {\n  deep: boolean\n}\nfunction boom(o: Opts): never {\n  throw new Error('boom ' + o.deep)\n}", withSource("/home/me/app.ts", 20))
	if res.Status != protocol.ExecutionStatusOK {
		t.Fatalf("defining boom: %+v", res)
	}
	res, _ = execute(t, c, kid, "const o: Opts = { deep: true }\n\nboom(o)", withSource("/home/me/main.ts", 100))
	tb = strings.Join(res.Error.Traceback, "\n")
	if res.Status != protocol.ExecutionStatusError || !strings.Contains(tb, "Error: boom true") ||
		!strings.Contains(tb, "/home/me/app.ts:24:") || !strings.Contains(tb, "/home/me/main.ts:102:") {
		t.Fatalf("source-mapped traceback: %+v\n%s", res.Error, tb)
	}

	// A syntax error is the cell's error, at its TypeScript line; the
	// kernel goes on.
	res, outs = execute(t, c, kid, "let ok: number = 1\nlet bad: = 2\n")
	if res.Status != protocol.ExecutionStatusError || res.Error.Ename != "SyntaxError" {
		t.Fatalf("syntax error = %+v", res.Error)
	}
	tb = strings.Join(res.Error.Traceback, "\n")
	if !strings.Contains(tb, ">:2\nlet bad: = 2\n") || len(ofKind(outs, protocol.OutputKindError)) != 1 {
		t.Fatalf("syntax error traceback: %q", tb)
	}
	// Syntax that TypeScript has and this node may lack (decorators): if
	// node rejects the JavaScript, its SyntaxError names the TypeScript line.
	res, _ = execute(t, c, kid, "\n\ninterface I {\n  a: number\n}\nclass Dec { @((v: any) => v) m() {} }")
	if res.Error != nil && !strings.Contains(strings.Join(res.Error.Traceback, "\n"), ">:6\n") {
		t.Fatalf("a SyntaxError of node on a transpiled cell: %q", res.Error.Traceback)
	}
	res, _ = execute(t, c, kid, "let bad2: = 2", withSource("/home/me/x.ts", 7))
	if tb = strings.Join(res.Error.Traceback, "\n"); !strings.HasPrefix(tb, "/home/me/x.ts:7\n") {
		t.Fatalf("syntax error with source: %q", tb)
	}
	if _, outs = execute(t, c, kid, "n"); resultText(t, outs) != "'again'" {
		t.Fatalf("after a syntax error: %+v", outs)
	}

	// stdin: fed from the request, then asked of the client.
	res, outs = execute(t, c, kid, "const name: string | null = await input('name? ')\nconsole.log('got', name)", withStdin("alice\n", false))
	if wantOK(t, res, outs); !strings.Contains(streamText(outs, protocol.StreamStdout), "got alice") {
		t.Fatalf("stdin from the request: %+v", outs)
	}
	var asked []string
	var mu sync.Mutex
	c.mu.Lock()
	c.answer = func(method string, params json.RawMessage) (any, error) {
		var ip protocol.KernelInputRequestParams
		_ = json.Unmarshal(params, &ip)
		mu.Lock()
		asked = append(asked, ip.Prompt)
		mu.Unlock()
		return protocol.KernelInputReply{Value: "bob"}, nil
	}
	c.mu.Unlock()
	res, outs = execute(t, c, kid, "console.log('got', (await input('who? ')) as string)", withStdin("", true))
	wantOK(t, res, outs)
	mu.Lock()
	if len(asked) != 1 || !strings.Contains(asked[0], "who?") || !strings.Contains(streamText(outs, protocol.StreamStdout), "got bob") {
		t.Fatalf("stdin from the client: asked %q, outputs %+v", asked, outs)
	}
	mu.Unlock()

	// Completion, inspect, isComplete and variables.
	var comp protocol.KernelCompleteResult
	c.mustCall(t, protocol.MethodKernelComplete, protocol.KernelCompleteParams{KernelID: kid, Code: "const q: number = p.", CursorPos: 20}, &comp)
	if !slices.Contains(comp.Matches, "x") || !slices.Contains(comp.Matches, "y") {
		t.Fatalf("complete p. = %+v", comp)
	}
	c.mustCall(t, protocol.MethodKernelComplete, protocol.KernelCompleteParams{KernelID: kid, Code: "dbl", CursorPos: 2}, &comp)
	if !slices.Contains(comp.Matches, "dbl") {
		t.Fatalf("complete db = %+v", comp)
	}
	var insp protocol.KernelInspectResult
	c.mustCall(t, protocol.MethodKernelInspect, protocol.KernelInspectParams{KernelID: kid, Code: "greet", CursorPos: 5}, &insp)
	if !insp.Found || !strings.Contains(insp.Data["text/plain"].(string), "function") {
		t.Fatalf("inspect greet = %+v", insp)
	}
	for code, want := range map[string]protocol.IsCompleteStatus{
		"let x: number = 1":             protocol.IsCompleteStatusComplete,
		"function f<T>(a: T): T {":      protocol.IsCompleteStatusIncomplete,
		"interface A {\n  x: number":    protocol.IsCompleteStatusIncomplete,
		"const v = await Promise.all([": protocol.IsCompleteStatusIncomplete,
		"let x: = 1":                    protocol.IsCompleteStatusInvalid,
	} {
		var ic protocol.KernelIsCompleteResult
		c.mustCall(t, protocol.MethodKernelIsComplete, protocol.KernelIsCompleteParams{KernelID: kid, Code: code}, &ic)
		if ic.Status != want {
			t.Fatalf("isComplete %q = %+v, want %s", code, ic, want)
		}
	}
	var vars protocol.KernelVariablesResult
	c.mustCall(t, protocol.MethodKernelVariables, protocol.KernelIDParams{KernelID: kid}, &vars)
	got := map[string]string{}
	for _, v := range vars.Variables {
		got[v.Name] = v.Type
	}
	if got["p"] != "Object" || got["dbl"] != "function" || got["Box"] != "class" || got["greet"] != "function" || got["later"] != "number" {
		t.Fatalf("variables = %+v", vars.Variables)
	}

	// Interrupt a busy loop; the kernel lives on.
	done := make(chan protocol.ExecuteResult, 1)
	go func() {
		r, _, err := tryRun(t, c, kid, "console.log('started')\nlet spins: number = 0\nwhile (true as boolean) { spins++ }", withID("ts-busy"))
		if err != nil {
			t.Errorf("busy loop: %v", err)
		}
		done <- r
	}()
	waitOutput(t, c, "ts-busy", "started\n")
	c.mustCall(t, protocol.MethodKernelInterrupt, protocol.KernelIDParams{KernelID: kid}, nil)
	select {
	case r := <-done:
		if r.Status != protocol.ExecutionStatusInterrupted {
			t.Fatalf("interrupted loop: %+v", r)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the interrupt did not stop the loop")
	}
	if _, outs = execute(t, c, kid, "n"); resultText(t, outs) != "'again'" {
		t.Fatalf("after the interrupt: %+v", outs)
	}

	// Restart clears state and the count.
	c.mustCall(t, protocol.MethodKernelRestart, protocol.KernelIDParams{KernelID: kid}, nil)
	res, _ = execute(t, c, kid, "n")
	if res.Status != protocol.ExecutionStatusError || res.ExecutionCount != 1 {
		t.Fatalf("after restart: %+v", res)
	}
	if _, outs = execute(t, c, kid, "const again: number = 1 + 1\nagain"); resultText(t, outs) != "2" {
		t.Fatalf("after restart: %+v", outs)
	}
}

// TestKernelTypeScriptTooDeep: a cell nested deeper than esbuild's parser
// can go (a fatal stack overflow in a Go program) is the cell's error; the
// daemon, which runs esbuild in a helper of its own, and the kernel go on.
func TestKernelTypeScriptTooDeep(t *testing.T) {
	p := startStdio(t)
	c := p.client()
	c.initialize(t)
	kid := startKernel(t, c, protocol.KernelStartParams{Language: "typescript"}).KernelID
	const depth = 400_000
	res, _ := execute(t, c, kid, strings.Repeat("(", depth)+"1"+strings.Repeat(")", depth))
	if res.Status != protocol.ExecutionStatusError || res.Error == nil || !strings.Contains(res.Error.Evalue, "typescript transpiler") {
		t.Fatalf("a cell nested %d deep: %+v", depth, res)
	}
	res, outs := execute(t, c, kid, "const n: number = 6 * 7\nn")
	wantOK(t, res, outs)
	if got := resultText(t, outs); got != "42" {
		t.Fatalf("after it: %q", got)
	}
}
