package main

import (
	"strings"
	"testing"

	"github.com/cellbox-dev/cellbox/protocol"
)

// TestKernelJavaScriptImports: static imports in a javascript cell become
// dynamic ones whose names later cells use, export is taken out of a cell,
// line numbers stay those of the cell, and node's ExperimentalWarning for
// the loader never reaches stderr.
func TestKernelJavaScriptImports(t *testing.T) {
	p := startStdio(t)
	c := p.client()
	c.initialize(t)
	kid := startKernel(t, c, protocol.KernelStartParams{Language: "javascript"}).KernelID

	var stderr strings.Builder
	run := func(code string, opts ...func(*protocol.KernelExecuteParams)) (protocol.ExecuteResult, []protocol.KernelOutputParams) {
		t.Helper()
		res, outs := execute(t, c, kid, code, opts...)
		stderr.WriteString(streamText(outs, protocol.StreamStderr))
		return res, outs
	}
	res, outs := run(`const fs = require('fs')
fs.mkdirSync('node_modules/esm-greet', { recursive: true })
fs.writeFileSync('node_modules/esm-greet/package.json', '{"name": "esm-greet", "type": "module", "exports": "./index.js"}')
fs.writeFileSync('node_modules/esm-greet/index.js', "export const greet = (n) => 'hi ' + n; export default 'dflt'; globalThis.loaded = (globalThis.loaded || 0) + 1")
fs.writeFileSync('data.json', '{"k": [1, 2]}')`)
	wantOK(t, res, outs)
	for _, step := range []struct{ code, want string }{
		{"import { join as pjoin, sep } from 'node:path'\nimport * as os from 'os'\nimport dflt, { greet } from 'esm-greet'\nimport every, * as ns from 'esm-greet'", ""},
		{"[pjoin('a', 'b'), sep, typeof os.cpus, greet('you'), dflt, every, ns.default]", "[ 'a/b', '/', 'function', 'hi you', 'dflt', 'dflt', 'dflt' ]"},
		{"import 'esm-greet'\nloaded", "1"}, // a module loads once
		{"import data from './data.json' with { type: 'json' }\ndata.k", "[ 1, 2 ]"},
		{"import {\n  greet as g2,\n} from 'esm-greet';\ng2('multi')", "'hi multi'"},
		{"export const e1 = 1\nexport function e2() { return 2 }\nexport class E3 {}\nexport { e1 as e4 }\nexport default e1 + e2()", "3"},
		{"[e1, e2(), typeof E3]", "[ 1, 2, 'function' ]"},
		{"const later = await Promise.resolve(9)\nimport { basename } from 'path'\nbasename('/x/y') + later", "'y9'"},
	} {
		res, outs := run(step.code)
		wantOK(t, res, outs)
		if got := resultText(t, outs); got != step.want {
			t.Fatalf("%q: result %q, want %q (outputs %+v)", step.code, got, step.want, outs)
		}
	}
	// Line numbers after a multi-line import stay the cell's.
	res, _ = run("import {\n  readFileSync,\n} from 'fs'\nnull.x", withSource("/home/me/imp.js", 10))
	if tb := strings.Join(res.Error.Traceback, "\n"); res.Status != protocol.ExecutionStatusError || !strings.Contains(tb, "/home/me/imp.js:13:") {
		t.Fatalf("traceback after a multi-line import: %+v\n%s", res.Error, tb)
	}
	// A module that is not there is the cell's error; the kernel goes on.
	if res, _ = run("import nothing from 'no-such-package'"); res.Status != protocol.ExecutionStatusError || !strings.Contains(res.Error.Evalue, "no-such-package") {
		t.Fatalf("missing module: %+v", res.Error)
	}
	if _, outs = run("typeof nothing + ' ' + greet('again')"); resultText(t, outs) != "'undefined hi again'" {
		t.Fatalf("after a failed import: %+v", outs)
	}
	for code, want := range map[string]protocol.IsCompleteStatus{
		"import fs from 'fs'":                 protocol.IsCompleteStatusComplete,
		"import {\n  a,":                      protocol.IsCompleteStatusIncomplete,
		"import fs from 'fs'\nfunction f() {": protocol.IsCompleteStatusIncomplete,
		"export const x = 1":                  protocol.IsCompleteStatusComplete,
		"import fs from 'fs'\nlet = = 2":      protocol.IsCompleteStatusInvalid,
	} {
		var ic protocol.KernelIsCompleteResult
		c.mustCall(t, protocol.MethodKernelIsComplete, protocol.KernelIsCompleteParams{KernelID: kid, Code: code}, &ic)
		if ic.Status != want {
			t.Fatalf("isComplete %q = %+v, want %s", code, ic, want)
		}
	}
	// Other warnings still show.
	if _, outs = run("process.emitWarning('mine', 'ExperimentalWarning')\n1"); !strings.Contains(streamText(outs, protocol.StreamStderr), "ExperimentalWarning: mine") {
		t.Fatalf("a warning of the code was dropped: %+v", outs)
	}
	if s := stderr.String(); strings.Contains(s, "USE_MAIN_CONTEXT_DEFAULT_LOADER") {
		t.Fatalf("node's loader warning reached stderr: %q", s)
	}
}
