// Notebooks in the page served by the real `cellbox serve --listen`, in
// Debian's chromium (headless) with playwright-core: a notebook Jupyter's
// own nbformat wrote is opened, edited, run and saved, and what is saved is
// what nbformat writes, validates and runs with nbclient; reloads keep the
// notebooks and their kernels. Screenshots go to $CELLBOX_ARTIFACTS as
// notebook-*.png.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { artifacts, launchChromium } from "./chromium.mjs";
import { startDaemon, waitFor } from "./daemon.mjs";

const python = "/usr/bin/python3";

// A notebook as Jupyter writes it: a markdown cell with an attached image, code cells with
// a stream, a result and a png, a raw cell, and metadata of its own at both levels.
const makeNotebook = `
import base64, sys, nbformat
from nbformat.v4 import new_notebook, new_markdown_cell, new_code_cell, new_raw_cell, new_output
gen = sys.argv[2]
scope = {"display": lambda *a, **k: None}
exec(gen, scope)
png = scope["png"]
b64 = base64.b64encode(png).decode()
nb = new_notebook(metadata={
    "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
    "language_info": {"name": "python", "version": "3.11.2", "file_extension": ".py", "mimetype": "text/x-python"},
    "custom": {"team": "data", "tags": [1, 2]},
})
md = new_markdown_cell("# Sales report\\n\\nSome **bold** text and a picture:\\n\\n![dot](attachment:dot.png)\\n\\n<script>parent.document.title='pwned'</script>\\n\\n<style>.tree-item{display:none}</style><div class='cover' style='position:fixed;inset:0;z-index:99999;background:red'>a look-alike</div>")
md.attachments = {"dot.png": {"image/png": b64}}
md.metadata["tags"] = ["intro"]
c1 = new_code_cell("x = 21\\nprint('x is', x)\\nx * 2", execution_count=1, outputs=[
    new_output("stream", name="stdout", text="x is 21\\n"),
    new_output("execute_result", data={"text/plain": "42"}, execution_count=1),
])
c1.metadata["custom_cell"] = {"keep": True}
c2 = new_code_cell(gen, execution_count=2, outputs=[
    new_output("display_data", data={"image/png": b64, "text/plain": "a gradient"}),
])
raw = new_raw_cell("raw text, shown as it is")
nb.cells = [md, c1, c2, raw]
nbformat.validate(nb)
nbformat.write(nb, sys.argv[1])
`;

// A code cell that makes a png (a gradient) and displays it, in cellbox's python and ipykernel alike.
const gradient = String.raw`import base64, struct, zlib
def chunk(t, b):
    return struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b) & 0xffffffff)
w, h = 120, 40
rows = b"".join(b"\0" + bytes(v for x in range(w) for v in (40 + x, 90 + y * 3, 200)) for y in range(h))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
display({"image/png": base64.b64encode(png).decode(), "text/plain": "a gradient"}, raw=True)`;

// An nbformat 4.2 notebook without cell ids, its source a string, as older Jupyter wrote them.
const oldNotebook = JSON.stringify({
  nbformat: 4,
  nbformat_minor: 2,
  metadata: { kernelspec: { name: "python3", display_name: "Python 3", language: "python" } },
  cells: [
    { cell_type: "code", execution_count: null, metadata: {}, outputs: [], source: "print('old')" },
    { cell_type: "markdown", metadata: {}, source: ["## Old\n", "notebook"] },
  ],
});

// A notebook whose kernel this host has neither natively nor as a kernelspec.
const juliaNotebook = JSON.stringify({
  nbformat: 4,
  nbformat_minor: 5,
  metadata: { kernelspec: { name: "julia-1.9", display_name: "Julia 1.9.3", language: "julia" }, language_info: { name: "julia", version: "1.9.3" } },
  cells: [{ id: "c1", cell_type: "code", execution_count: null, metadata: {}, outputs: [], source: "print(6 * 7)" }],
});

let d, browser, page, work;
let consoleErrors = [];
// html outputs' scripts are blocked by their sandbox; a dropped connection logs; a reload's
// favicon request has no token.
const expectedConsole = /WebSocket|ERR_|connection to cellbox lost|status of 401|Blocked script execution in 'about:srcdoc'/;

before(async () => {
  work = mkdtempSync(join(tmpdir(), "cellbox-nb-test-"));
  d = await startDaemon({
    files: { "old.ipynb": oldNotebook, "julia.ipynb": juliaNotebook },
    setup: (project) => execFileSync(python, ["-c", makeNotebook, join(project, "analysis.ipynb"), gradient]),
  });
  browser = await launchChromium({ viewport: { width: 1400, height: 950 } });
  ({ page, consoleErrors } = browser);
});

after(async () => {
  await browser?.close();
  await d?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

const shot = (name) => page.screenshot({ path: join(artifacts, `notebook-${name}.png`) });
const nbOf = (path) => page.locator(`section.notebook[data-path="${path}"]`);
const cellsOf = (path) => nbOf(path).locator(".cell");
const rpc = (method, params) => page.evaluate(([m, p]) => window.cellbox.client.request(m, p), [method, params]);
const workspaceId = () => page.evaluate(() => window.cellbox.workspace.workspaceId);
const stats = () => rpc("daemon/stats", {});
const tab = (path) => page.locator(`.docs .tab[data-tab="nb:${path}"]`);
const dirty = (path) => tab(path).evaluate((t) => t.classList.contains("dirty"));

/** The saved file, as the workspace (its overlay) has it. */
async function savedFile(path) {
  const r = await rpc("fs/read", { workspaceId: await workspaceId(), path });
  return r.content;
}

/** Runs python on a file's content: validate, compare with what nbformat writes, execute. */
function checkWithNbformat(content, { execute = false } = {}) {
  const file = join(work, `check-${Date.now()}.ipynb`);
  writeFileSync(file, content);
  const code = `
import json, sys, nbformat
p = sys.argv[1]
s = open(p, encoding="utf-8").read()
nb = nbformat.read(p, 4)
nbformat.validate(nb)
same = nbformat.writes(nb) + "\\n" == s
out = {"same": same, "minor": nb.nbformat_minor}
if ${execute ? "True" : "False"}:
    import nbclient
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=120).execute()
    out["outputs"] = [[o.get("text", "") if o.output_type == "stream" else o.get("data", {}).get("text/plain", "") for o in c.get("outputs", [])] for c in nb.cells]
print(json.dumps(out))
`;
  // ipykernel's debugger warns about frozen modules on stderr otherwise.
  const env = { ...process.env, PYDEVD_DISABLE_FILE_VALIDATION: "1", PYTHONWARNINGS: "ignore" };
  return JSON.parse(execFileSync(python, ["-c", code, file], { encoding: "utf8", timeout: 180_000, env }));
}

/** Types into a cell's CodeMirror editor (a click puts the cursor at the end of its text). */
async function typeInto(cell, text) {
  await cell.locator(".cm-content").click();
  await page.keyboard.press("Control+End");
  await page.keyboard.type(text);
}

test("a notebook Jupyter wrote opens: markdown rendered with its attachment, outputs, prompts, its kernel", async () => {
  const res = await page.goto(d.url);
  assert.equal(res.status(), 200);
  await page.waitForSelector("body[data-ready=true]", { timeout: 30_000 });
  await page.evaluate(() => window.cellbox.workbench.openPath("analysis.ipynb"));
  const nb = nbOf("analysis.ipynb");
  await nb.waitFor();
  assert.equal(await tab("analysis.ipynb").locator(".tab-title").innerText(), "analysis.ipynb");
  const cells = cellsOf("analysis.ipynb");
  assert.equal(await cells.count(), 4);
  assert.deepEqual(await cells.evaluateAll((cs) => cs.map((c) => c.dataset.type)), ["markdown", "code", "code", "raw"]);
  // Markdown: rendered (marked), sanitized (DOMPurify), the attachment as a data: URL.
  const md = cells.nth(0).locator(".md-view");
  assert.equal(await md.locator("h1").innerText(), "Sales report");
  assert.equal(await md.locator("strong").innerText(), "bold");
  assert.equal(await md.locator("script").count(), 0);
  // HTML in markdown goes into the page itself: no <style> restyles the IDE, no style lays
  // something over it.
  assert.equal(await md.locator("style").count(), 0);
  assert.equal(await md.locator("div.cover").getAttribute("style"), null);
  assert.equal(await page.evaluate(() => getComputedStyle(document.querySelector(".md-view div.cover")).position), "static");
  const att = md.locator("img");
  assert.match(await att.getAttribute("src"), /^data:image\/png;base64,iVBORw0KGgo/);
  await waitFor(() => att.evaluate((i) => i.complete && i.naturalWidth === 120), { what: "the attachment decoded" });
  assert.ok(await cells.nth(0).evaluate((c) => c.classList.contains("rendered")));
  // Outputs as saved: the stream, Out[1] for the result, the png; prompts.
  const c1 = cells.nth(1);
  assert.equal(await c1.locator(".prompt").innerText(), "[1]:");
  assert.equal((await c1.locator(".out-stream").innerText()).trim(), "x is 21");
  assert.equal(await c1.locator(".output.execute_result .out-prompt").innerText(), "Out[1]:");
  assert.equal((await c1.locator(".out-result").innerText()).trim(), "42");
  assert.equal(await c1.locator(".output.stream .out-prompt").innerText(), "");
  const img = cells.nth(2).locator("img.out-image");
  await waitFor(() => img.evaluate((i) => i.complete && i.naturalWidth === 120), { what: "the png output" });
  assert.equal(await cells.nth(3).locator(".cm-content").innerText(), "raw text, shown as it is");
  // The kernelspec python3 runs on cellbox's own python; no kernel until a cell runs.
  assert.equal(await nb.locator("select.language").inputValue(), "python");
  assert.match(await nb.locator(".kernel-status").innerText(), /^python: no kernel/);
  assert.equal((await stats()).kernels, 0);
  assert.notEqual(await page.title(), "pwned");
  assert.equal(await dirty("analysis.ipynb"), false);
  await shot("1-opened");
});

test("an nbformat 4.2 notebook (no ids, source as a string) opens and saves as 4.5", async () => {
  await page.evaluate(() => window.cellbox.workbench.openPath("old.ipynb"));
  const cells = cellsOf("old.ipynb");
  await waitFor(async () => (await cells.count()) === 2, { what: "the old notebook's cells" });
  assert.equal(await cells.nth(0).locator(".cm-content").innerText(), "print('old')");
  assert.equal(await cells.nth(1).locator(".md-view h2").innerText(), "Old");
  await page.keyboard.press("Control+s");
  await waitFor(async () => (await savedFile("old.ipynb")).includes('"nbformat_minor": 5'), { what: "saved as 4.5" });
  const saved = JSON.parse(await savedFile("old.ipynb"));
  assert.ok(saved.cells.every((c) => /^[a-zA-Z0-9-_]{1,64}$/.test(c.id)), "cell ids generated");
  assert.deepEqual(saved.cells[1].source, ["## Old\n", "notebook"]);
  const check = checkWithNbformat(await savedFile("old.ipynb"));
  assert.equal(check.same, true, "byte for byte what nbformat writes");
  await page.locator('.docs .tab[data-tab="nb:old.ipynb"] .tab-close').click();
  await waitFor(async () => (await nbOf("old.ipynb").count()) === 0, { what: "closed" });
});

test("a notebook whose kernel is not here asks for one; a kernel picked gets saved as its kernelspec", async () => {
  await page.evaluate(() => window.cellbox.workbench.openPath("julia.ipynb"));
  const nb = nbOf("julia.ipynb");
  await nb.waitFor();
  assert.equal(await nb.locator("select.language").inputValue(), "");
  assert.match(await nb.locator("select.language option.choose").innerText(), /Julia 1\.9\.3 is not here/);
  assert.match(await nb.locator(".nb-message").innerText(), /kernel \(Julia 1\.9\.3\) is not available here: choose one/);
  const cell = nb.locator(".cell").first();
  await cell.locator(".cm-content").click();
  await page.keyboard.press("Control+Enter");
  await waitFor(async () => /choose a kernel/.test(await cell.locator(".notes").innerText()), { what: "the note" });
  assert.equal((await stats()).kernels, 0, "nothing started");
  await shot("1b-choose-kernel");
  // No kernel yet: no question; python runs the cell (print is python's too).
  await nb.locator("select.language").selectOption("python");
  await waitFor(async () => /^python: idle/.test(await nb.locator(".kernel-status").innerText()), { what: "python kernel", timeoutMs: 60_000 });
  await cell.locator("button.run").click();
  await waitFor(async () => (await cell.locator(".outputs").innerText()).trim() === "42", { what: "the output" });
  await page.keyboard.press("Control+s");
  await waitFor(async () => !(await dirty("julia.ipynb")), { what: "saved" });
  const saved = JSON.parse(await savedFile("julia.ipynb"));
  assert.deepEqual(saved.metadata.kernelspec, { name: "python3", display_name: "Python 3 (ipykernel)", language: "python" });
  assert.equal(saved.metadata.language_info.name, "python");
  assert.equal(saved.metadata.cellbox.language, "python");
  await tab("julia.ipynb").locator(".tab-close").click();
  await waitFor(async () => (await stats()).kernels === 0, { what: "its kernel shut down" });
});

test("edit with the kernel's completion, run all, save: nbformat validates it, writes it the same, nbclient runs it", async () => {
  const nb = nbOf("analysis.ipynb");
  const cells = cellsOf("analysis.ipynb");
  await nb.locator("button.run-all").click();
  await waitFor(async () => /^python: idle/.test(await nb.locator(".kernel-status").innerText()) && (await cells.nth(2).locator(".prompt").innerText()) === "[2]:", { what: "run all", timeoutMs: 60_000 });
  assert.equal(await cells.nth(1).locator(".prompt").innerText(), "[1]:");
  assert.equal((await cells.nth(1).locator(".out-result").innerText()).trim(), "42");
  assert.match(await cells.nth(1).locator(".cell-timing").innerText(), /\d+(\.\d)? m?s/);
  // A new cell below the raw one (B in command mode), then completion from the kernel.
  await cells.nth(3).locator(".cm-content").click();
  await page.keyboard.press("Escape");
  await page.keyboard.press("b");
  await waitFor(async () => (await cells.count()) === 5, { what: "a cell below" });
  const cell = cells.nth(4);
  await typeInto(cell, "import os\nos.pa");
  await page.keyboard.press("Tab");
  const option = page.locator('.cm-tooltip-autocomplete li:has-text("path")').first();
  await option.waitFor({ timeout: 20_000 });
  await shot("2-completion");
  await option.click();
  await waitFor(async () => /os\.path\b/.test(await cell.locator(".cm-content").innerText()), { what: "the completion inserted" });
  await page.keyboard.type(".sep");
  await page.keyboard.press("Control+Enter");
  await waitFor(async () => (await cell.locator(".out-result").count()) === 1, { what: "os.path.sep" });
  assert.equal((await cell.locator(".out-result").innerText()).trim(), "'/'");
  assert.equal(await cell.locator(".prompt").innerText(), "[3]:");
  // Shift+Tab: the kernel's help on what is at the cursor (os.path.sep, now defined) in a box under the cell; Escape closes it.
  await page.keyboard.press("Shift+Tab");
  const help = cell.locator(".inspect pre");
  await help.waitFor({ timeout: 20_000 }).catch(async (e) => {
    throw new Error(`${e.message}; inspect: ${await cell.locator(".inspect").innerHTML()}; cell: ${await cell.locator(".cm-content").innerText()}`);
  });
  assert.match(await help.innerText(), /str/);
  // eslint-disable-next-line no-control-regex -- no ANSI escape left
  assert.doesNotMatch(await help.innerText(), /\x1b\[/);
  await shot("3-inspect");
  await page.keyboard.press("Escape");
  await waitFor(() => cell.locator(".inspect").isHidden(), { what: "help closed" });
  assert.ok(await cell.locator(".cm-content").evaluate((e) => e.contains(document.activeElement)), "Escape closed the help only: still editing");
  // Saved: Ctrl+S (and autosave): no longer dirty, the file in the workspace.
  await page.keyboard.press("Escape");
  await page.keyboard.press("Control+s");
  await waitFor(async () => !(await dirty("analysis.ipynb")), { what: "saved" });
  const content = await savedFile("analysis.ipynb");
  const saved = JSON.parse(content);
  assert.equal(saved.nbformat, 4);
  assert.equal(saved.nbformat_minor, 5);
  assert.deepEqual(saved.metadata.custom, { team: "data", tags: [1, 2] }, "unknown notebook metadata kept");
  assert.equal(saved.metadata.kernelspec.name, "python3");
  assert.equal(saved.metadata.language_info.name, "python");
  assert.match(saved.metadata.language_info.version, /^3\./);
  assert.equal(saved.metadata.cellbox.language, "python");
  assert.deepEqual(saved.cells[0].metadata.tags, ["intro"], "cell metadata kept");
  assert.deepEqual(Object.keys(saved.cells[0].attachments), ["dot.png"]);
  assert.deepEqual(saved.cells[1].metadata.custom_cell, { keep: true });
  assert.ok(saved.cells[1].metadata.execution["shell.execute_reply"], "timing metadata");
  assert.equal(saved.cells[1].execution_count, 1);
  assert.deepEqual(saved.cells[1].source, ["x = 21\n", "print('x is', x)\n", "x * 2"]);
  assert.deepEqual(
    saved.cells[1].outputs.map((o) => o.output_type),
    ["stream", "execute_result"],
  );
  assert.equal(saved.cells[1].outputs[1].execution_count, 1);
  assert.deepEqual(saved.cells[4].source, ["import os\n", "os.path.sep"]);
  assert.equal(saved.cells[4].outputs[0].data["text/plain"][0], "'/'");
  // The workspace shows the save as a change to review.
  const changes = await rpc("workspace/changes", { workspaceId: await workspaceId() });
  assert.ok(changes.changes.some((c) => c.path === "analysis.ipynb" && c.kind === "modified"));
  const check = checkWithNbformat(content, { execute: true });
  assert.equal(check.same, true, "the file is byte for byte what nbformat.writes gives");
  assert.equal(check.minor, 5);
  assert.deepEqual(check.outputs[1], ["x is 21\n", "42"], "nbclient ran it");
  await shot("4-saved");
});

test("a reload finds the notebook, its outputs and the same kernel; a run going on meanwhile is replayed", async () => {
  const nb = nbOf("analysis.ipynb");
  const cells = cellsOf("analysis.ipynb");
  const kernelBefore = await page.evaluate(() => window.cellbox.notebooks.list.find((n) => n.path === "analysis.ipynb").kernelId);
  assert.ok(kernelBefore);
  // A variable, and a run that goes on over the reload.
  await cells.nth(4).locator(".cm-content").click();
  await page.keyboard.press("Control+a");
  await page.keyboard.type("secret = 1234\nimport time\nfor i in range(8):\n    print('tick', i, flush=True)\n    time.sleep(0.4)\n");
  await page.keyboard.press("Control+Enter");
  await waitFor(async () => (await cells.nth(4).locator(".outputs").innerText()).includes("tick 1"), { what: "the first ticks" });
  await page.reload();
  await page.waitForSelector("body[data-ready=true]", { timeout: 30_000 });
  await nb.waitFor();
  assert.equal(await page.evaluate(() => window.cellbox.notebooks.list.find((n) => n.path === "analysis.ipynb").kernelId), kernelBefore, "the same kernel");
  await waitFor(async () => (await cells.nth(4).locator(".outputs").innerText()).includes("tick 7"), { what: "the run's output after the reload" });
  const ticks = (await cells.nth(4).locator(".out-stream").innerText()).trim().split("\n");
  assert.deepEqual(ticks, Array.from({ length: 8 }, (_, i) => `tick ${i}`), "nothing lost, nothing twice");
  await waitFor(async () => /^\[\d+\]:$/.test(await cells.nth(4).locator(".prompt").innerText()), { what: "the run's count after the reload" });
  assert.equal((await cells.nth(1).locator(".out-result").innerText()).trim(), "42", "outputs of before");
  const c = cells.nth(4);
  await c.locator(".cm-content").click();
  await page.keyboard.press("Control+a");
  await page.keyboard.type("print('still', secret)");
  await page.keyboard.press("Control+Enter");
  await waitFor(async () => (await c.locator(".outputs").innerText()).includes("still 1234"), { what: "the variable set before the reload" });
  assert.equal((await stats()).kernels, 1, "daemon/stats: one kernel, the open notebook's");
  await shot("5-after-reload");
});

test("input() asks inline in the cell's output, a password hidden", async () => {
  const cells = cellsOf("analysis.ipynb");
  const c = cells.nth(4);
  const run = async (code) => {
    await c.locator(".cm-content").click();
    await page.keyboard.press("Control+a");
    await page.keyboard.type(code);
    await page.keyboard.press("Control+Enter");
  };
  // One read per run: a second read in the same execution can hang in the daemon today.
  await run("name = input('who? ')\nprint('hi', name)");
  const field = c.locator("input.stdin-input");
  await field.waitFor({ timeout: 20_000 });
  assert.equal(await field.getAttribute("type"), "text");
  assert.equal(await c.locator(".stdin-prompt").innerText(), "who?");
  await shot("6-input");
  await field.fill("Ada");
  await field.press("Enter");
  await waitFor(async () => (await c.locator(".outputs").innerText()).includes("hi Ada"), { what: "the answer" });
  // The kernel writes the answered line itself: it shows once, and no field is left.
  assert.equal((await c.locator(".outputs").innerText()).match(/who\? Ada/g)?.length, 1);
  assert.equal(await c.locator("input.stdin-input").count(), 0);
  await run("import getpass\npw = getpass.getpass('pw: ')\nprint('got', len(pw))");
  const pw = c.locator('input.stdin-input[type="password"]');
  await pw.waitFor({ timeout: 20_000 });
  await pw.fill("sesame");
  await pw.press("Enter");
  await waitFor(async () => (await c.locator(".outputs").innerText()).includes("got 6"), { what: "the password's length" });
  assert.doesNotMatch(await c.locator(".outputs").innerText(), /sesame/);
});

test("an html output's iframe is as tall as its content; Up and Down move between cells", async () => {
  const cells = cellsOf("analysis.ipynb");
  const c = cells.nth(4);
  await c.locator(".cm-content").click();
  await page.keyboard.press("Control+a");
  await page.keyboard.type("rows = ''.join(f'<tr><td>{i}</td><td>{i * i}</td></tr>' for i in range(15))\ndisplay({'text/html': f'<h3>Squares</h3><table>{rows}</table>'}, raw=True)");
  await page.keyboard.press("Control+Enter");
  const frame = c.locator("iframe.out-html");
  await frame.waitFor({ timeout: 20_000 });
  assert.equal(await frame.getAttribute("sandbox"), "");
  const inner = frame.contentFrame();
  await inner.locator("td").last().waitFor();
  const contentHeight = await inner.locator("html").evaluate((h) => h.scrollHeight);
  assert.ok(contentHeight > 300, `15 rows and a heading: ${contentHeight}px`);
  await waitFor(async () => {
    const h = await frame.evaluate((f) => f.clientHeight);
    return h >= contentHeight && h <= contentHeight + 24;
  }, { what: "the iframe sized to its content" }).catch(async (e) => {
    throw new Error(`${e.message}: iframe ${await frame.evaluate((f) => f.clientHeight)}px, content ${contentHeight}px`);
  });
  await frame.scrollIntoViewIfNeeded();
  await shot("6b-html-output");
  // Up on the first line goes to the cell above (the raw one), Down on its last line back.
  await c.locator(".cm-content").click();
  await page.keyboard.press("Control+Home");
  await page.keyboard.press("ArrowUp");
  await waitFor(() => cells.nth(3).locator(".cm-content").evaluate((e) => e.contains(document.activeElement)), { what: "the cell above edited" });
  await page.keyboard.press("ArrowDown");
  await waitFor(() => c.locator(".cm-content").evaluate((e) => e.contains(document.activeElement)), { what: "back in the cell below" });
});

test("command mode: A, B, D D, Z, M, Y, R, C V, Shift+M, moves; Enter edits a markdown cell, Shift+Enter renders it; split, clear, collapse", async () => {
  const nb = nbOf("analysis.ipynb");
  const cells = cellsOf("analysis.ipynb");
  const types = () => cells.evaluateAll((cs) => cs.map((c) => c.dataset.type));
  const selected = () => cells.evaluateAll((cs) => cs.findIndex((c) => c.classList.contains("selected")));
  const n0 = await cells.count();
  // Scrolled up past the html output's iframe: chromium routes a click by the last frame it
  // composited, so a click right after the scroll can land in the iframe where it was. Two
  // frames later the click goes where the page is.
  await cells.nth(1).scrollIntoViewIfNeeded();
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  await cells.nth(1).locator(".cm-content").click();
  await page.keyboard.press("Escape");
  await waitFor(() => nb.evaluate((n) => n.classList.contains("command-mode")), { what: "command mode" }).catch(async (e) => {
    await shot("debug");
    throw new Error(`${e.message}; the focus is on ${await page.evaluate(() => document.activeElement?.outerHTML.slice(0, 200))}`);
  });
  assert.equal(await selected(), 1);
  await page.keyboard.press("a");
  assert.equal(await cells.count(), n0 + 1);
  assert.equal(await selected(), 1, "the new cell above is selected");
  await page.keyboard.press("m");
  assert.equal((await types())[1], "markdown");
  await page.keyboard.press("y");
  assert.equal((await types())[1], "code");
  await page.keyboard.press("r");
  assert.equal((await types())[1], "raw");
  await page.keyboard.press("d");
  await page.keyboard.press("d");
  assert.equal(await cells.count(), n0);
  assert.equal((await cells.nth(1).locator(".prompt").innerText()), "[1]:", "the code cell is back at 1");
  await page.keyboard.press("b");
  assert.equal(await cells.count(), n0 + 1);
  assert.equal(await selected(), 2);
  await page.keyboard.press("d");
  await page.keyboard.press("d");
  await page.keyboard.press("z");
  assert.equal(await cells.count(), n0 + 1, "Z brings the deleted cell back");
  await page.keyboard.press("d");
  await page.keyboard.press("d");
  // Up, Down, J, K select; C then V pastes a copy below.
  await page.keyboard.press("ArrowUp");
  assert.equal(await selected(), 1);
  await page.keyboard.press("j");
  assert.equal(await selected(), 2);
  await page.keyboard.press("k");
  await page.keyboard.press("c");
  await page.keyboard.press("v");
  assert.equal(await cells.count(), n0 + 1);
  assert.equal(await cells.nth(2).locator(".cm-content").innerText(), await cells.nth(1).locator(".cm-content").innerText());
  const ids = await cells.evaluateAll((cs) => cs.map((c) => c.dataset.cellId));
  assert.equal(new Set(ids).size, ids.length, "a pasted cell gets an id of its own");
  // Shift+M merges the copy into its original... after moving it up and down with the buttons.
  await cells.nth(2).locator("button.move-up").click();
  assert.equal(await selected(), 1);
  await cells.nth(1).locator("button.move-down").click();
  assert.equal(await selected(), 2);
  await page.keyboard.press("k");
  await page.keyboard.press("Shift+M");
  assert.equal(await cells.count(), n0);
  assert.match(await cells.nth(1).locator(".cm-content").innerText(), /x \* 2\s*x = 21/);
  // The markdown cell: Enter edits it, Shift+Enter renders it again.
  await page.keyboard.press("k");
  assert.equal(await selected(), 0);
  await page.keyboard.press("Enter");
  await waitFor(async () => !(await cells.nth(0).evaluate((c) => c.classList.contains("rendered"))), { what: "markdown editor" });
  await page.keyboard.press("Control+End");
  await page.keyboard.type("\n\nA *new* line.");
  await page.keyboard.press("Shift+Enter");
  await waitFor(() => cells.nth(0).evaluate((c) => c.classList.contains("rendered")), { what: "rendered again" });
  assert.equal(await cells.nth(0).locator(".md-view em").innerText(), "new");
  // Ctrl+Shift+Minus splits the last cell at the cursor (the start of its second line); Shift+M joins it again.
  const last = cells.nth(n0 - 1);
  const before = await last.locator(".cm-content").innerText();
  const [line1, line2] = before.split("\n");
  await last.locator(".cm-content").click();
  await page.keyboard.press("Control+Home");
  await page.keyboard.press("ArrowDown");
  await page.keyboard.press("Home");
  await page.keyboard.press("Control+Shift+Minus");
  await waitFor(async () => (await cells.count()) === n0 + 1, { what: "split" });
  assert.equal(await cells.nth(n0 - 1).locator(".cm-content").innerText(), line1);
  assert.equal(await cells.nth(n0).locator(".cm-content").innerText(), line2);
  await page.keyboard.press("Escape");
  await page.keyboard.press("k");
  await page.keyboard.press("Shift+M");
  assert.equal(await cells.count(), n0);
  assert.equal(await cells.nth(n0 - 1).locator(".cm-content").innerText(), before);
  // A cell's toolbar (shown on hover): ⌫ clears its outputs.
  assert.ok((await cells.nth(2).locator(".outputs .output").count()) > 0);
  await cells.nth(2).hover();
  await cells.nth(2).locator("button.clear-outputs").click();
  assert.equal(await cells.nth(2).locator(".outputs .output").count(), 0);
  assert.equal(await selected(), 2, "a click in its toolbar selects the cell");
  await cells.nth(2).locator("button.run").click();
  await waitFor(async () => (await cells.nth(2).locator(".outputs img.out-image").count()) === 1, { what: "the image again" });
  // Collapse the outputs by their prompt; the metadata says so.
  await cells.nth(2).locator(".out-collapser").click();
  await waitFor(() => cells.nth(2).locator(".outputs-hidden").isVisible(), { what: "collapsed" });
  await shot("7-command-mode");
  await nb.locator("button.save").click();
  await waitFor(async () => !(await dirty("analysis.ipynb")), { what: "saved" });
  const saved = JSON.parse(await savedFile("analysis.ipynb"));
  assert.equal(saved.cells[2].metadata.jupyter.outputs_hidden, true);
  assert.match(saved.cells[0].source.join(""), /A \*new\* line\.$/);
  assert.equal(checkWithNbformat(await savedFile("analysis.ipynb")).same, true);
  await cells.nth(2).locator(".outputs-hidden").click();
});

test("two notebooks in two languages: each its own kernel; closing one shuts its kernel down", async () => {
  const langs = await page.evaluate(() => window.cellbox.workbench.languages.filter((l) => l.available).map((l) => l.id));
  assert.ok(langs.includes("bash"), `bash is available here: ${langs}`);
  await page.click("button.new-notebook");
  const nb = nbOf("Untitled.ipynb");
  await nb.waitFor();
  assert.equal(await nb.locator("select.language").inputValue(), "python");
  // No kernel yet: the change needs no confirmation.
  await nb.locator("select.language").selectOption("bash");
  await waitFor(async () => /^bash: idle/.test(await nb.locator(".kernel-status").innerText()), { what: "bash kernel", timeoutMs: 60_000 });
  const cell = nb.locator(".cell").first();
  await typeInto(cell, "echo $((20+22)); echo $BASH_VERSION | cut -c1");
  await page.keyboard.press("Control+Enter");
  await waitFor(async () => /42\s+\d/.test(await cell.locator(".outputs").innerText()), { what: "bash output" });
  const kernels = await page.evaluate(() => window.cellbox.notebooks.list.map((n) => [n.path, n.language, n.kernelId]));
  assert.equal(kernels.length, 2);
  assert.notEqual(kernels[0][2], kernels[1][2], "never the same kernel");
  assert.deepEqual(kernels.map((k) => k[1]).sort(), ["bash", "python"]);
  const reg = await page.evaluate(() => window.cellbox.workbench.kernels.all.map((k) => [k.title, k.language]));
  assert.deepEqual(reg.sort(), [["Untitled.ipynb", "bash"], ["analysis.ipynb", "python"]]);
  assert.equal(await page.evaluate(() => window.cellbox.workbench.kernels.active?.title), "Untitled.ipynb");
  assert.equal((await stats()).kernels, 2);
  // python's variables are not bash's, and the python notebook still has its own.
  await tab("analysis.ipynb").click();
  assert.equal(await page.evaluate(() => window.cellbox.workbench.kernels.active?.title), "analysis.ipynb");
  await shot("8-two-notebooks");
  // The bash notebook saved itself (autosave) as a bash notebook.
  await tab("Untitled.ipynb").click();
  await waitFor(async () => !(await dirty("Untitled.ipynb")), { what: "autosaved" });
  const saved = JSON.parse(await savedFile("Untitled.ipynb"));
  assert.equal(saved.metadata.cellbox.language, "bash");
  assert.equal(saved.metadata.kernelspec.name, "cellbox-bash");
  assert.equal(checkWithNbformat(await savedFile("Untitled.ipynb")).same, true);
  // A reload: both back, kernels re-attached, none started, none left over.
  await page.reload();
  await page.waitForSelector("body[data-ready=true]", { timeout: 30_000 });
  await nbOf("Untitled.ipynb").waitFor();
  assert.deepEqual(await page.evaluate(() => window.cellbox.notebooks.list.map((n) => [n.path, n.language, n.kernelId])), kernels);
  assert.equal((await stats()).kernels, 2);
  // Changing the kernel asks, then replaces it.
  await nbOf("Untitled.ipynb").locator("select.language").selectOption("python");
  await page.locator("dialog.confirm .confirm-ok").click();
  await waitFor(async () => /^python: idle/.test(await nbOf("Untitled.ipynb").locator(".kernel-status").innerText()), { what: "python kernel", timeoutMs: 60_000 });
  assert.equal((await stats()).kernels, 2, "the bash kernel was shut down");
  // Closing the tab (nothing unsaved: no question) shuts its kernel down.
  await waitFor(async () => !(await dirty("Untitled.ipynb")), { what: "saved after the change" });
  await tab("Untitled.ipynb").locator(".tab-close").click();
  await waitFor(async () => (await stats()).kernels === 1, { what: "the closed notebook's kernel gone" });
  assert.equal(await page.evaluate(() => window.cellbox.workbench.kernels.all.length), 1);
});

test("another interpreter of the host (pyenv's) in the kernel list: kernel/start gets it, the notebook remembers it", async (t) => {
  const others = await page.evaluate(() => (window.cellbox.client.initializeResult.capabilities.interpreters ?? []).filter((i) => i.language === "python" && i.source !== "system"));
  if (!others.length) {
    t.skip("no python interpreter besides the system's on this host (pyenv, uv)");
    return;
  }
  const want = others.at(-1);
  const count = await page.evaluate(() => window.cellbox.notebooks.list.length);
  await page.click("button.new-notebook");
  const path = await waitFor(() => page.evaluate((n) => window.cellbox.notebooks.list.length > n && window.cellbox.notebooks.list.at(-1).path, count), { what: "the new notebook" });
  const nb = nbOf(path);
  await nb.waitFor();
  const group = await nb.locator('select.language optgroup[label="Interpreters"] option').evaluateAll((os) => os.map((o) => [o.value, o.textContent]));
  assert.ok(group.some(([v, text]) => v === `python@${want.path}` && text.includes(want.version) && text.includes(want.source)), JSON.stringify(group));
  // Every kernel/start the page sends, from here on.
  await page.evaluate(() => {
    const c = window.cellbox.client;
    const request = c.request.bind(c);
    window.starts = [];
    c.request = (method, params, opts) => {
      if (method === "kernel/start") window.starts.push(params);
      return request(method, params, opts);
    };
  });
  await nb.locator("select.language").selectOption(`python@${want.path}`);
  const start = await waitFor(() => page.evaluate(() => window.starts[0]), { what: "kernel/start" });
  assert.equal(start.language, "python");
  assert.equal(start.interpreter, want.path);
  // The workspace's sandbox runs already (the terminal, the other notebook) without that
  // interpreter's directory: the daemon says so, and the status shows it; or it runs it.
  const status = new RegExp(`^python ${want.version.replace(/\./g, "\\.")}: (idle|cannot start)$`);
  await waitFor(async () => status.test(await nb.locator(".kernel-status").innerText()), { what: `python ${want.version}`, timeoutMs: 60_000 }).catch(async (e) => {
    throw new Error(`${e.message}; status: ${await nb.locator(".kernel-status").innerText()}`);
  });
  if (/cannot start/.test(await nb.locator(".kernel-status").innerText())) {
    assert.match(await nb.locator(".nb-message").innerText(), new RegExp(`^The python ${want.version.replace(/\./g, "\\.")} kernel cannot start: .*does not bind`));
  }
  await shot("8b-interpreter");
  await nb.locator("button.save").click();
  await waitFor(async () => !(await dirty(path)), { what: "saved" });
  const saved = JSON.parse(await savedFile(path));
  assert.deepEqual(saved.metadata.cellbox, { language: "python", interpreter: want.path });
  assert.equal(saved.metadata.kernelspec.name, "python3");
  await tab(path).locator(".tab-close").click();
  await waitFor(async () => (await nbOf(path).count()) === 0, { what: "closed" });
  // Opened again: the same interpreter.
  await page.evaluate((p) => window.cellbox.workbench.openPath(p), path);
  await waitFor(async () => (await nbOf(path).locator("select.language").inputValue()) === `python@${want.path}`, { what: "the interpreter remembered" });
  await tab(path).locator(".tab-close").click();
  await waitFor(async () => (await nbOf(path).count()) === 0, { what: "closed again" });
  await page.evaluate(() => delete window.cellbox.client.request);
  assert.equal((await stats()).kernels, 1, "only the analysis notebook's kernel");
});

test("a change on disk reloads a clean notebook; unsaved edits survive a reload as a draft and close asks", async () => {
  const ws = await workspaceId();
  const nb = nbOf("analysis.ipynb");
  const cells = cellsOf("analysis.ipynb");
  // Another program rewrites the file (here: fs/write, as an agent's write_file does).
  const doc = JSON.parse(await savedFile("analysis.ipynb"));
  doc.cells[0].source = ["# Rewritten elsewhere\n"];
  await rpc("fs/write", { workspaceId: ws, path: "analysis.ipynb", content: JSON.stringify(doc, null, 1) + "\n" });
  // The tree's fs/watch reports it: the notebook reloads.
  await waitFor(async () => (await cells.nth(0).locator(".md-view h1").innerText()) === "Rewritten elsewhere", { what: "reloaded from disk" });
  // An unsaved edit comes back from the session's draft (no autosave for this part).
  await page.evaluate(() => (window.cellbox.notebooks.autosaveMs = 600_000));
  await cells.nth(1).locator(".cm-content").click();
  await page.keyboard.press("Control+End");
  await page.keyboard.type("\n# draft only");
  await page.reload();
  await page.waitForSelector("body[data-ready=true]", { timeout: 30_000 });
  await nb.waitFor();
  await waitFor(async () => (await cells.nth(1).locator(".cm-content").innerText()).includes("# draft only"), { what: "the draft" });
  // The draft is newer than the file: it saves itself.
  await waitFor(async () => (await savedFile("analysis.ipynb")).includes("# draft only"), { what: "the draft saved" });
  await page.evaluate(() => (window.cellbox.notebooks.autosaveMs = 600_000));
  // Close asks when dirty: Cancel keeps it open.
  await cells.nth(1).locator(".cm-content").click();
  await page.keyboard.press("Control+End");
  await page.keyboard.type("\n# more");
  await tab("analysis.ipynb").locator(".tab-close").click();
  const dialog = page.locator("dialog.nb-choose");
  await dialog.waitFor();
  assert.match(await dialog.innerText(), /analysis\.ipynb has unsaved changes/);
  await shot("9-close-asks");
  await dialog.locator("button.confirm-cancel").click();
  assert.equal(await nb.count(), 1);
  await tab("analysis.ipynb").locator(".tab-close").click();
  await page.locator("dialog.nb-choose button.confirm-ok").click();
  await waitFor(async () => (await nb.count()) === 0, { what: "closed" });
  assert.match(await savedFile("analysis.ipynb"), /# more/);
  await waitFor(async () => (await stats()).kernels === 0, { what: "no kernel left" });
  assert.deepEqual(consoleErrors.filter((e) => !expectedConsole.test(e)), []);
});
