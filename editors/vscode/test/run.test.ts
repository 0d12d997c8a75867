// Running code from a file against the real daemon: `# %%` cells, outputs collected into the
// output view's model and rendered, errors mapped to a diagnostic range, input() answered.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { CellboxClient } from "../src/client";
import { Session } from "../src/session";
import { findCells, cellCode } from "../src/cells";
import { renderPage, renderExecution, OutputItem } from "../src/outputs";
import { tempEnv, connectStdio, Env } from "./helpers";

let e: Env;
let c: CellboxClient;
let s: Session;

before(async () => {
  e = tempEnv();
  c = await connectStdio(e);
  s = new Session(c, { root: e.project });
});
after(async () => {
  await c.dispose();
  e.cleanup();
});

const doc = [
  "import json", // 1
  "# %% first cell", // 2
  "x = 40", // 3
  "print('hello')", // 4
  "x + 2", // 5
  "", // 6
  "# %% [markdown]", // 7
  "# a title", // 8
  "# %% rich", // 9
  "from IPython.display import display, HTML, Markdown, SVG, update_display", // 10
].join("\n");

test("cells: markers, the text before the first marker, markdown cells skipped", () => {
  const lines = doc.split("\n");
  const cells = findCells(lines);
  assert.deepEqual(
    cells.map((x) => [x.start, x.end, x.marker]),
    [
      [0, 0, false],
      [1, 5, true],
      [6, 7, true],
      [8, 9, true],
    ],
  );
  assert.deepEqual(cellCode(lines, cells[1]), { code: "x = 40\nprint('hello')\nx + 2", line: 3 });
  assert.equal(cellCode(lines, cells[2]), undefined);
  assert.deepEqual(findCells(["// %% js", "let a = 1"]).length, 1);
});

test("run a cell: stream and result with the execution count, in the model and the rendered view", async () => {
  const lines = doc.split("\n");
  const cell = findCells(lines)[1];
  const cc = cellCode(lines, cell)!;
  const path = join(e.project, "analysis.py");
  const r = await s.run({ path, language: "python", code: cc.code, firstLine: cc.line - 1, lastLine: cell.end, docLines: lines, label: "analysis.py:3" });
  const ex = r.execution;
  assert.equal(ex.status, "ok");
  assert.ok(ex.executionCount && ex.executionCount >= 1);
  assert.deepEqual(ex.outputs[0], { kind: "stream", name: "stdout", text: "hello\n" });
  const res = ex.outputs.find((o) => o.kind === "result") as Extract<OutputItem, { data: unknown }>;
  assert.equal(res.data["text/plain"], "42");
  assert.equal(r.diagnostic, undefined);
  const html = renderPage(s.model);
  assert.match(html, new RegExp(`In \\[${ex.executionCount}\\]:`));
  assert.match(html, /<pre class="stream stdout">hello\n<\/pre>/);
  assert.match(html, new RegExp(`<div class="result"><span class="count">Out\\[${ex.executionCount}\\]:</span><pre class="text">42</pre>`));
  assert.match(html, /analysis\.py:3/);
  assert.match(html, /Content-Security-Policy/);
});

test("rich outputs: HTML, Markdown, SVG, PNG, and a display update replacing its display", async () => {
  const code = [
    "from IPython.display import display, HTML, Markdown, SVG, Image",
    "display(HTML('<b>bold</b>'))",
    "display(Markdown('# Title\\n\\n*em*'))",
    "display(SVG('<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\"><rect width=\"10\" height=\"10\"/></svg>'))",
    "import base64",
    "png = base64.b64decode('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==')",
    "display(Image(data=png, format='png'))",
    "h = display(HTML('step 1'), display_id='prog')",
    "h.update(HTML('step 2'))",
  ].join("\n");
  const r = await s.run({ path: join(e.project, "rich.py"), language: "python", code, firstLine: 0, lastLine: 8 });
  const ex = r.execution;
  assert.equal(ex.status, "ok", JSON.stringify(ex.outputs));
  const displays = ex.outputs.filter((o) => o.kind === "display") as Extract<OutputItem, { data: unknown }>[];
  const mimes = displays.map((d) => Object.keys(d.data).filter((m) => m !== "text/plain")[0]);
  assert.deepEqual(mimes, ["text/html", "text/markdown", "image/svg+xml", "image/png", "text/html"]);
  // The update replaced the display in place: one display with id prog, showing step 2.
  const prog = displays.filter((d) => d.displayId === "prog");
  assert.equal(prog.length, 1);
  assert.equal(prog[0].data["text/html"], "step 2");
  const html = renderExecution(ex);
  assert.match(html, /<div class="html"><b>bold<\/b><\/div>/);
  assert.match(html, /<h1>Title<\/h1>/);
  assert.match(html, /<em>em<\/em>/);
  assert.match(html, /src="data:image\/svg\+xml;base64,/);
  assert.match(html, /src="data:image\/png;base64,iVBOR/);
  assert.match(html, /step 2/);
  assert.doesNotMatch(html, /<div class="html">step 1/);
});

test("clear_output(wait=True) clears when the next output arrives", async () => {
  const code = "from IPython.display import clear_output\nprint('a')\nclear_output(wait=True)\nprint('b')";
  const r = await s.run({ path: join(e.project, "c.py"), language: "python", code, firstLine: 0, lastLine: 3 });
  assert.deepEqual(r.execution.outputs, [{ kind: "stream", name: "stdout", text: "b\n" }]);
});

test("an error maps to a diagnostic on the file's line that raised it", async () => {
  const lines = ["# %%", "a = 1", "# %% broken", "y = 2", "  ", "undefined_name + 1", "z = 3"];
  const path = join(e.project, "broken.py");
  const r = await s.run({ path, language: "python", code: lines.slice(3).join("\n"), firstLine: 3, lastLine: 6, docLines: lines });
  assert.equal(r.execution.status, "error");
  const err = r.execution.outputs.find((o) => o.kind === "error") as Extract<OutputItem, { kind: "error" }>;
  assert.equal(err.ename, "NameError");
  assert.deepEqual(r.diagnostic, { line: 5, startCol: 0, endCol: 18, message: "NameError: name 'undefined_name' is not defined" });
  assert.match(renderExecution(r.execution), /<pre class="error"><b>NameError/);
  // JavaScript errors map too (Node.js names the first frame first).
  const js = ["const a = 1;", "", "null.foo;"];
  const rj = await s.run({ path: join(e.project, "x.js"), language: "javascript", code: js.join("\n"), firstLine: 0, lastLine: 2, docLines: js });
  assert.equal(rj.execution.status, "error");
  assert.equal(rj.diagnostic?.line, 2, JSON.stringify(rj.execution.result?.error));
});

test("input(): the kernel's inputRequest is answered by the client's input handler", async () => {
  const asked: string[] = [];
  c.inputHandler = async (p) => {
    asked.push(p.prompt);
    return "Ada";
  };
  const r = await s.run({ path: join(e.project, "in.py"), language: "python", code: "name = input('your name? ')\nprint('hi', name)", firstLine: 0, lastLine: 1 });
  c.inputHandler = undefined;
  assert.equal(r.execution.status, "ok");
  assert.deepEqual(asked, ["your name? "]);
  const out = r.execution.outputs.filter((o) => o.kind === "stream").map((o) => (o as any).text).join("");
  assert.match(out, /hi Ada/);
});

test("interrupt: a cancelled run ends interrupted, and the kernel keeps its state", async () => {
  const { CancellationTokenSource } = await import("vscode-jsonrpc/node");
  const cts = new CancellationTokenSource();
  const p = s.run({ path: join(e.project, "loop.py"), language: "python", code: "import time\nprint('start', flush=True)\ntime.sleep(60)", firstLine: 0, lastLine: 2 }, cts.token);
  await new Promise((r) => setTimeout(r, 800));
  cts.cancel();
  const r = await p;
  assert.equal(r.execution.status, "interrupted");
  const again = await s.run({ path: join(e.project, "a.py"), language: "python", code: "x", firstLine: 0, lastLine: 0 });
  assert.equal((again.execution.outputs.find((o) => o.kind === "result") as any)?.data["text/plain"], "40");
});
