// The page served by the real `cellbox serve --listen`, driven in Debian's
// chromium (headless) with playwright-core. Screenshots go to
// $CELLBOX_ARTIFACTS (run.sh: artifacts/browser/ at the repository root).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { artifacts, collectErrors, launchChromium } from "./chromium.mjs";
import { startDaemon, waitFor } from "./daemon.mjs";

let d, browser, context, page, jupyterPath;
let consoleErrors = [];
// Console messages the page may log: a dropped or refused connection on purpose, and
// html outputs' scripts that their sandboxed iframes block.
const expectedConsole = /WebSocket|ERR_|connection to cellbox lost|status of 401|Blocked script execution in 'about:srcdoc'/;

before(async () => {
  // Besides the host's kernelspecs, one whose program no sandbox can run: the daemon
  // lists it as jupyter:cellbox-test-missing, unavailable, with the reason.
  jupyterPath = mkdtempSync(join(tmpdir(), "cellbox-jupyter-path-"));
  mkdirSync(join(jupyterPath, "kernels", "cellbox-test-missing"), { recursive: true });
  writeFileSync(
    join(jupyterPath, "kernels", "cellbox-test-missing", "kernel.json"),
    JSON.stringify({ argv: ["cellbox-test-no-such-kernel", "-f", "{connection_file}"], display_name: "Missing Kernel", language: "python" }),
  );
  d = await startDaemon({ files: { "README.txt": "a project\n", "src/app.py": "print('app')\n" }, env: { JUPYTER_PATH: jupyterPath } });
  browser = await launchChromium({ viewport: { width: 1400, height: 900 } });
  ({ context, page, consoleErrors } = browser);
});

after(async () => {
  await browser?.close();
  await d?.stop();
  if (jupyterPath) rmSync(jupyterPath, { recursive: true, force: true });
});

const shot = (name) => page.screenshot({ path: join(artifacts, `${name}.png`) });
const lastCell = () => page.locator(".cell").last();
const cellOut = (cell) => cell.locator(".outputs");

/**
 * Puts code in a cell's editor as a person does (select all, then the text), and checks that it
 * took. A DOM fill sets the browser's selection behind CodeMirror's back, and CodeMirror's own
 * redraw (its highlighter, after the notebook's language changed) can put its selection back
 * first: the text then went in before the old one.
 */
async function setSource(cell, code) {
  const content = cell.locator(".cm-content");
  await content.click();
  await page.keyboard.press("Control+a");
  await page.keyboard.insertText(code);
  const got = await content.evaluate((el) => [...el.querySelectorAll(".cm-line")].map((l) => l.textContent).join("\n"));
  assert.equal(got, code, "the cell's editor holds the code put in");
}

async function runCell(code, { newCell = true } = {}) {
  // The notebook's tab in front (a diff or a file may have opened in a tab over it).
  await page.locator('.docs .tab[data-tab="nb:Untitled.ipynb"]').click();
  if (newCell) await page.click("button.add-cell");
  const cell = lastCell();
  await setSource(cell, code);
  await cell.locator("button.run").click();
  return cell;
}

test("a page opened without the token gets nothing", async () => {
  const res = await fetch(d.origin + "/");
  assert.equal(res.status, 401);
  const body = await res.text();
  assert.ok(!body.includes('id="app"') && body.length < 2000, "no IDE without the token, only the reload page");
  // A new tab has no token in its sessionStorage: the reload page says what to do.
  const p2 = await context.newPage();
  const r2 = await p2.goto(d.origin + "/");
  assert.equal(r2.status(), 401);
  assert.equal(await p2.locator("#app").count(), 0);
  assert.match(await p2.locator("#m").innerText(), /open the URL cellbox printed/);
  await p2.close();
});

test("the page loads, drops the token from the address bar, runs a python cell", async () => {
  const res = await page.goto(d.url);
  assert.equal(res.status(), 200);
  const csp = res.headers()["content-security-policy"];
  assert.match(csp, /script-src 'sha256-/);
  assert.doesNotMatch(csp, /unsafe-eval|script-src[^;]*unsafe-inline/);
  await page.waitForSelector("body[data-ready=true]", { timeout: 30_000 });
  assert.ok(!page.url().includes("token"), `address bar: ${page.url()}`);
  assert.equal(await page.locator(".conn").getAttribute("data-state"), "open");
  // A new notebook (Untitled.ipynb) with one cell; its kernel starts with the first run.
  await page.click("button.new-notebook");
  await page.locator('section.notebook[data-path="Untitled.ipynb"] .cell').waitFor();
  const cell = await runCell("x = 6 * 7\nprint('the answer is', x)\nx", { newCell: false });
  await waitFor(async () => (await cellOut(cell).innerText()).includes("the answer is 42"), { what: "cell output" });
  await waitFor(async () => (await cell.locator(".prompt").innerText()) === "[1]:", { what: "execution count 1" });
  assert.match(await cell.locator(".out-result").innerText(), /42/);
  // An error shows its traceback.
  const bad = await runCell("1/0");
  await waitFor(async () => (await cellOut(bad).innerText()).includes("ZeroDivisionError"), { what: "traceback" });
  await shot("1-python-cell");
});

test("rich outputs: matplotlib png, svg, html in a sandboxed iframe, markdown, display updates", async () => {
  const plot = await runCell("import matplotlib\nimport matplotlib.pyplot as plt\nplt.plot([1, 4, 2, 8])\nplt.title('cellbox')\nplt.show()");
  const img = plot.locator("img.out-image");
  await img.waitFor({ timeout: 60_000 });
  await waitFor(() => img.evaluate((i) => i.complete && i.naturalWidth > 100), { what: "png decoded" });
  assert.match(await img.getAttribute("src"), /^data:image\/png;base64,/);

  const rich = await runCell(
    [
      "display({'text/html': '<table><tr><th>a</th></tr><tr><td>1</td></tr></table><script>parent.document.title=\"pwned\"</script><div class=\"cover\" style=\"position:fixed;inset:0;z-index:99999;background:red\">x</div>'}, raw=True)",
      "display({'text/markdown': '# Title\\n\\nsome **bold** and <b>not html</b>'}, raw=True)",
      "display({'image/svg+xml': '<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"40\" height=\"40\"><circle cx=\"20\" cy=\"20\" r=\"15\" fill=\"red\"/></svg>'}, raw=True)",
      "h = display({'text/plain': 'step 0'}, raw=True, display_id=True)",
      "for i in range(1, 4): h.update({'text/plain': f'step {i}'}, raw=True)",
    ].join("\n"),
  );
  const frame = rich.locator("iframe.out-html");
  await frame.waitFor();
  assert.equal(await frame.getAttribute("sandbox"), "");
  assert.equal(await frame.contentFrame().locator("td").innerText(), "1");
  // The html and its fixed-position cover stay inside the iframe: nothing of it is in the
  // page (the copy that measures its height is laid out in an iframe too, then removed).
  await waitFor(async () => (await page.locator(".out-html-measure").count()) === 0, { what: "the measuring copy removed" });
  assert.equal(await page.locator(".cover").count(), 0);
  assert.equal(await frame.contentFrame().locator(".cover").count(), 1);
  const md = rich.locator(".out-markdown");
  await md.waitFor();
  assert.equal(await md.locator("h1").innerText(), "Title");
  assert.equal(await md.locator("strong").innerText(), "bold");
  assert.match(await md.innerText(), /<b>not html<\/b>/);
  await waitFor(() => rich.locator('img[src^="data:image/svg+xml"]').evaluate((i) => i.complete && i.naturalWidth === 40), { what: "svg" });
  await waitFor(async () => (await cellOut(rich).innerText()).includes("step 3"), { what: "display update" });
  assert.ok(!(await cellOut(rich).innerText()).includes("step 0"), "update replaced the display");
  assert.notEqual(await page.title(), "pwned", "html output ran no script in the page");
  await shot("2-rich-outputs");
});

test("the terminal echoes what is typed and follows a resize", async () => {
  await page.locator(".xterm").click();
  await page.keyboard.type("echo hello-$((6*7))\n");
  const rows = page.locator(".xterm-rows");
  await waitFor(async () => (await rows.innerText()).includes("hello-42"), { what: "terminal echo" });
  const before = await page.evaluate(() => window.cellbox.terminal.term.cols);
  await page.setViewportSize({ width: 1000, height: 900 });
  await waitFor(() => page.evaluate((b) => window.cellbox.terminal.term.cols < b, before), { what: "xterm refit" });
  const cols = await page.evaluate(() => window.cellbox.terminal.term.cols);
  await page.locator(".xterm").click();
  await page.keyboard.type("stty size\n");
  const sized = new RegExp(`\\d+ ${cols}\\b`);
  await waitFor(async () => sized.test(await rows.innerText()), { what: `stty size with ${cols} columns` }).catch(async (e) => {
    throw new Error(`${e.message}; terminal shows: ${await rows.innerText()}`);
  });
  await shot("3-terminal");
  await page.setViewportSize({ width: 1400, height: 900 });
});

test("a file written by a cell shows in the tree and changes; diff, commit puts it on disk", async () => {
  const target = join(d.project, "made_by_cell.txt");
  await runCell("with open('made_by_cell.txt', 'w') as f:\n    f.write('written in the sandbox\\n')");
  const item = page.locator('.tree-item[data-path="made_by_cell.txt"]');
  await item.waitFor({ timeout: 20_000 });
  await waitFor(() => item.evaluate((e) => e.classList.contains("changed") && e.classList.contains("added")), { what: "tree mark" });
  const change = page.locator('.change[data-path="made_by_cell.txt"]');
  await change.waitFor();
  assert.ok(!existsSync(target), "overlay: the project is untouched before commit");
  await change.locator("button.diff").click();
  await waitFor(async () => (await page.locator(".docs .tab-pane:not([hidden]) .diff").innerText()).includes("+written in the sandbox"), { what: "diff" });
  await shot("4-changes-diff");
  await change.locator("button.commit").click();
  // Commit asks first, naming what it writes.
  const ask = page.locator("dialog.confirm[open]");
  assert.match(await ask.locator("p").innerText(), /^Commit made_by_cell\.txt to the project/);
  await ask.locator("button.confirm-ok").click();
  await waitFor(() => existsSync(target), { what: "committed file on disk" });
  assert.equal(readFileSync(target, "utf8"), "written in the sandbox\n");
  await waitFor(async () => (await page.locator('.change[data-path="made_by_cell.txt"]').count()) === 0, { what: "change gone after commit" });
  assert.match(await page.locator(".changes-message").innerText(), /committed 1 file/);
  await page.click(".docs .tab.active .tab-close");
  await shot("5-committed");
});

test("dropping the websocket reconnects with the output intact and nothing lost", async () => {
  const first = page.locator(".cell").first();
  const cell = await runCell("import time\nfor i in range(10):\n    print('line', i, flush=True)\n    time.sleep(0.2)");
  await waitFor(async () => (await cellOut(cell).innerText()).includes("line 1"), { what: "first lines" });
  await page.evaluate(() => window.cellbox.client.drop());
  await waitFor(async () => (await page.locator(".conn").getAttribute("data-state")) !== "open", { what: "connection lost", timeoutMs: 5000 });
  await waitFor(async () => (await page.locator(".conn").getAttribute("data-state")) === "open", { what: "reconnected" });
  await waitFor(async () => (await cellOut(cell).innerText()).includes("line 9"), { what: "all lines" });
  const text = await cell.locator(".out-stream").innerText();
  assert.deepEqual(text.trim().split("\n"), Array.from({ length: 10 }, (_, i) => `line ${i}`));
  assert.ok((await cellOut(first).innerText()).includes("the answer is 42"), "earlier output intact");
  // Its result was lost with the connection; its count comes from kernel/history.
  await waitFor(async () => /^\[\d+\]:$/.test(await cell.locator(".prompt").innerText()), { what: "execution count recovered" });
  // The kernel keeps its state; the terminal and the file watch work again.
  const again = await runCell("print('x is still', x)");
  await waitFor(async () => (await cellOut(again).innerText()).includes("x is still 42"), { what: "kernel state after reconnect" });
  await page.locator(".xterm").click();
  await page.keyboard.type("echo back-$((50+5))\n");
  await waitFor(async () => (await page.locator(".xterm-rows").innerText()).includes("back-55"), { what: "terminal after reconnect" });
  await runCell("open('after_reconnect.txt', 'w').write('x')");
  await page.locator('.tree-item[data-path="after_reconnect.txt"]').waitFor({ timeout: 20_000 });
  await shot("6-after-reconnect");
  assert.deepEqual(consoleErrors.filter((e) => !expectedConsole.test(e)), []);
});

test("run all, interrupt, restart, and another language for the notebook", async () => {
  // Interrupt a long cell; the queue behind it is aborted (stopOnError).
  const slow = await runCell("import time\ntime.sleep(60)");
  await waitFor(async () => (await page.locator(".kernel-status").getAttribute("data-state")) === "busy", { what: "busy" });
  await page.click("button.interrupt");
  await waitFor(async () => (await slow.getAttribute("data-status")) === "interrupted", { what: "interrupted" });
  // Restart resets the state and the execution count; run all runs every cell in order.
  await page.click("button.restart");
  await page.click("dialog.confirm .confirm-ok");
  await waitFor(async () => (await page.locator(".kernel-status").getAttribute("data-state")) === "idle", { what: "idle after restart" });
  await page.evaluate(() => document.querySelectorAll(".cell").forEach((c, i) => i > 0 && c.querySelector("button.delete").click()));
  await setSource(page.locator(".cell").first(), "y = 1\nprint('first', y)");
  await page.click("button.add-cell");
  await setSource(lastCell(), "print('second', y + 1)");
  await page.click("button.run-all");
  const cells = page.locator(".cell");
  await waitFor(async () => (await cells.nth(1).locator(".outputs").innerText()).includes("second 2"), { what: "run all" });
  // The count comes with the execution's response, after its output.
  await waitFor(async () => (await cells.nth(1).locator(".prompt").innerText()) !== "[*]:", { what: "the second cell's response" });
  assert.equal(await cells.nth(0).locator(".prompt").innerText(), "[1]:");
  assert.equal(await cells.nth(1).locator(".prompt").innerText(), "[2]:");
  // Another notebook in another language: a bash kernel in the same workspace sees the committed file.
  const langs = await page.evaluate(() => window.cellbox.client.initializeResult.capabilities.languages.filter((l) => l.available).map((l) => l.id));
  if (langs.includes("bash")) {
    await page.click("button.new-notebook");
    const other = page.locator('section.notebook[data-path="Untitled1.ipynb"]');
    await other.waitFor();
    await other.locator("select.language").selectOption("bash");
    await waitFor(async () => /^bash: idle/.test(await other.locator(".kernel-status").innerText()), { what: "bash kernel" });
    const sh = other.locator(".cell").last();
    await setSource(sh, "echo $((20+22)); cat made_by_cell.txt");
    await sh.locator("button.run").click();
    await waitFor(async () => /42\s+written in the sandbox/.test(await cellOut(sh).innerText()), { what: "bash output" });
    await waitFor(async () => (await sh.locator(".prompt").innerText()) !== "[*]:", { what: "the bash cell's response" });
    assert.equal(await sh.locator(".prompt").innerText(), "[1]:");
    await shot("7-run-all-language");
    // Saved, closed: its kernel goes with it; the python notebook is in front again.
    await page.keyboard.press("Control+s");
    await waitFor(async () => !(await page.locator('.tab[data-tab="nb:Untitled1.ipynb"]').evaluate((t) => t.classList.contains("dirty"))), { what: "saved" });
    await page.locator('.tab[data-tab="nb:Untitled1.ipynb"] .tab-close').click();
    await waitFor(async () => (await other.count()) === 0, { what: "the bash notebook closed" });
  } else await shot("7-run-all-language");
});

test("a reload works without the token in the address, and no cookie carries it", async () => {
  assert.ok(!page.url().includes("token"));
  await page.reload();
  await page.waitForSelector("body[data-ready=true]", { timeout: 30_000 });
  assert.equal(await page.locator(".conn").getAttribute("data-state"), "open");
  assert.ok(!page.url().includes("token"), `the address after a reload: ${page.url()}`);
  // Cookies ignore ports: no cookie may carry the token to other local servers.
  const cookies = await page.context().cookies();
  assert.deepEqual(cookies.filter((c) => c.value.includes(d.token) || c.name.startsWith("cellbox")), []);
  const cell = await runCell("print('after reload')", { newCell: false });
  await waitFor(async () => (await cellOut(cell).innerText()).includes("after reload"), { what: "output after a reload" });
});

const fetchCode = (host) =>
  ["import urllib.request", "try:", `    urllib.request.urlopen('http://${host}/', timeout=20)`, "except Exception as e:", "    print('refused:', type(e).__name__)"].join("\n");

test("a blocked connection asks once, in a bar over the notebook; Allow once sends workspace/setNetwork", async () => {
  // Every request the page sends, from here on.
  await page.evaluate(() => {
    const c = window.cellbox.client;
    const request = c.request.bind(c);
    window.sentRequests = [];
    c.request = (method, params, opts) => {
      window.sentRequests.push([method, params]);
      return request(method, params, opts);
    };
  });
  const blockedOf = (host) => page.evaluate((h) => window.cellbox.network.blocked.filter((b) => b.host === h).length, host);
  assert.equal(await page.locator(".network-toggle").innerText(), "network: none");
  const cell = await runCell(fetchCode("blocked.example"));
  await waitFor(async () => (await cellOut(cell).innerText()).includes("refused:"), { what: "the cell's refused connection" });
  await waitFor(async () => (await page.locator(".network-bar").count()) === 1, { what: "the bar" });
  // The cell runs again while the bar shows: the daemon reports it again, no second bar.
  await cell.locator("button.run").click();
  await waitFor(async () => (await blockedOf("blocked.example")) >= 2, { what: "the second network/blocked" });
  // The page records a network/blocked and decides on its bar in one step: no second bar now means none.
  assert.equal(await page.locator(".network-bar").count(), 1);
  const bar = page.locator(".network-bar");
  assert.equal(await bar.getAttribute("data-rule"), "blocked.example:80");
  assert.match(await bar.locator(".message").innerText(), /^cellbox blocked blocked\.example:80 \(.+\) from the python kernel of Untitled\.ipynb\. Allow\?$/);
  await shot("9-network-blocked");
  await bar.locator("button.allow-once").click();
  const set = await waitFor(() => page.evaluate(() => window.sentRequests.find(([m]) => m === "workspace/setNetwork")?.[1]), { what: "workspace/setNetwork" });
  const workspaceId = await page.evaluate(() => window.cellbox.workspace.workspaceId);
  assert.deepEqual(set, { workspaceId, network: "allowlist", allow: ["blocked.example:80"] });
  assert.equal(await page.locator(".network-bar").count(), 0);
  assert.equal(await page.locator(".network-toggle").innerText(), "network: allowlist (1)");
  // Allow once is for this session: nothing kept in localStorage.
  assert.equal(await page.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith("cellbox.network:")).length), 0);
  // A dismissed rule gets no bar again.
  const other = await runCell(fetchCode("other.example"));
  await waitFor(async () => (await page.locator(".network-bar").count()) === 1, { what: "the other bar" });
  await page.locator(".network-bar button.dismiss").click();
  await other.locator("button.run").click();
  await waitFor(async () => (await blockedOf("other.example")) >= 2, { what: "other.example blocked again" });
  assert.equal(await page.locator(".network-bar").count(), 0);
  // The network control lists the rule.
  await page.click("button.network-toggle");
  assert.deepEqual(await page.locator(".network-rules li").evaluateAll((ls) => ls.map((l) => l.dataset.rule)), ["blocked.example:80"]);
  await shot("10-network-control");
  await page.click("button.network-toggle");
});

test("Install packages: the progress line, then what was installed", async () => {
  // The daemon's reply as PROTOCOL.md §9 gives it: $/progress on the workDoneToken, then the result.
  await page.evaluate(() => {
    const c = window.cellbox.client;
    const request = c.request.bind(c);
    let finish;
    window.finishInstall = () => finish();
    c.request = async (method, params, opts) => {
      if (method !== "workspace/install") return request(method, params, opts);
      window.installParams = params;
      c.dispatch("$/progress", { token: params.workDoneToken, value: { kind: "begin", title: "pip install" } });
      c.dispatch("$/progress", { token: params.workDoneToken, value: { kind: "report", message: "1.2 MB, 4 files" } });
      await new Promise((r) => (finish = r));
      c.dispatch("$/progress", { token: params.workDoneToken, value: { kind: "end" } });
      return { installed: [{ name: "requests", version: "2.31.0" }, { name: "urllib3", version: "2.0.7" }], cacheHits: 3, downloadedBytes: 1234567, durationMs: 2100 };
    };
  });
  await page.click("button.install-toggle");
  await page.selectOption("select.install-manager", "pip");
  await page.fill("input.install-packages", "requests urllib3");
  await page.click("button.install-go");
  const line = page.locator(".install-line");
  await waitFor(async () => (await line.innerText()) === "1.2 MB, 4 files", { what: "the progress line" });
  const params = await page.evaluate(() => window.installParams);
  assert.equal(params.manager, "pip");
  assert.deepEqual(params.packages, ["requests", "urllib3"]);
  assert.equal(params.workspaceId, await page.evaluate(() => window.cellbox.workspace.workspaceId));
  await page.evaluate(() => window.finishInstall());
  await waitFor(async () => (await line.getAttribute("data-state")) === "done", { what: "the result" });
  assert.equal(await line.innerText(), "installed requests 2.31.0, urllib3 2.0.7 (3 from cache, 1.2 MB downloaded, 2.1 s)");
  await shot("11-install");
  await page.click("button.install-toggle");
});

test("Jupyter kernels in the picker: R's output, plot and error on IRkernel, and ipykernel", async (t) => {
  const langs = await page.evaluate(() => window.cellbox.client.initializeResult.capabilities.languages);
  const missing = ["jupyter:ir", "jupyter:python3"].filter((id) => !langs.some((l) => l.id === id && l.available));
  if (missing.length) {
    const why = `${missing.join(", ")} not available (apt-get install r-cran-irkernel python3-ipykernel)`;
    if (process.env.CI) assert.fail(`CI must install the kernelspecs: ${why}`);
    t.skip(why);
    return;
  }
  // The picker: cellbox's languages first, then the Jupyter kernels in a group of their own,
  // by display name; the one no sandbox can run is disabled and says why.
  const picker = await page.evaluate(() =>
    [...document.querySelector("select.language").children].map((c) =>
      c.tagName === "OPTGROUP" ? { group: c.label, options: [...c.children].map((o) => ({ id: o.value, text: o.textContent, disabled: o.disabled, title: o.title })) } : { id: c.value },
    ),
  );
  const group = picker.at(-1);
  // Between them, the host's other interpreters (pyenv's...), when it has some.
  assert.ok(picker.slice(0, -1).every((o) => !o.group || (o.group === "Interpreters" && o.options.every((x) => /^[a-z]+@\//.test(x.id)))));
  assert.equal(group.group, "Jupyter kernels (sandboxed)");
  assert.deepEqual(
    picker.filter((o) => !o.group).map((o) => o.id),
    langs.filter((l) => !l.id.startsWith("jupyter:")).map((l) => l.id),
    "cellbox's languages come first, outside the group",
  );
  assert.ok(group.options.every((o) => o.id.startsWith("jupyter:")), "only Jupyter kernels in the group");
  const ir = group.options.find((o) => o.id === "jupyter:ir");
  assert.equal(ir.text, langs.find((l) => l.id === "jupyter:ir").displayName);
  assert.equal(ir.disabled, false);
  const broken = group.options.find((o) => o.id === "jupyter:cellbox-test-missing");
  assert.ok(broken, "the kernelspec on JUPYTER_PATH is listed");
  assert.equal(broken.text, "Missing Kernel");
  assert.equal(broken.disabled, true);
  assert.match(broken.title, /cellbox-test-no-such-kernel not found/);
  // A native kernel has no Jupyter mark and nothing it cannot do.
  assert.equal(await page.locator(".kernel-kind").isVisible(), false);
  assert.equal(await page.locator(".kernel-limits").isVisible(), false);

  // A clean notebook of one cell, then IRkernel. Its start takes seconds, more on a busy machine.
  await page.evaluate(() => document.querySelectorAll(".cell").forEach((c, i) => i > 0 && c.querySelector("button.delete").click()));
  await page.selectOption("select.language", "jupyter:ir");
  await page.click("dialog.confirm .confirm-ok");
  await waitFor(async () => /^jupyter:ir: idle/.test(await page.locator(".kernel-status").innerText()), { what: "IRkernel started", timeoutMs: 120_000 }).catch(async (e) => {
    throw new Error(`${e.message}; status: ${await page.locator(".kernel-status").innerText()}; daemon: ${d.stderr().slice(-2000)}`);
  });
  // The kernel is marked as Jupyter's, with what it cannot do, and nothing of that is an error.
  assert.equal(await page.locator(".kernel-kind").innerText(), "Jupyter");
  assert.equal(await page.locator(".kernel-limits").innerText(), "no variables");
  assert.match(await page.locator(".kernel-limits").getAttribute("title"), /kernel\/variables/);
  assert.ok(await page.locator("button.interrupt").isVisible(), "interrupt is supported");
  assert.ok(await page.locator("button.restart").isVisible(), "restart is supported");

  const done = (cell) => waitFor(async () => (await cell.getAttribute("data-status")) !== null, { what: "the cell's response", timeoutMs: 60_000 });
  const cat = await runCell("cat(1+1)", { newCell: false });
  await done(cat);
  assert.equal(await cat.getAttribute("data-status"), "ok", `cat(1+1) on IRkernel: ${await cat.innerText()}; status: ${await page.locator(".kernel-status").innerText()}; daemon: ${d.stderr().slice(-3000)}`);
  assert.equal((await cellOut(cat).innerText()).trim(), "2");
  assert.equal(await cat.locator(".prompt").innerText(), "[1]:");

  const plot = await runCell("plot(1:10)");
  const img = plot.locator("img.out-image");
  await img.waitFor({ timeout: 60_000 });
  await waitFor(() => img.evaluate((i) => i.complete && i.naturalWidth > 100), { what: "R's png decoded" });
  assert.match(await img.getAttribute("src"), /^data:image\/png;base64,iVBORw0KGgo/);
  await done(plot);
  assert.equal(await plot.getAttribute("data-status"), "ok");

  const boom = await runCell('stop("boom")');
  await done(boom);
  assert.equal(await boom.getAttribute("data-status"), "error");
  assert.equal(await boom.locator(".outputs > *").count(), 1, "one output");
  assert.equal(await boom.locator(".out-error").count(), 1, "one error output");
  assert.match(await boom.locator(".out-error").innerText(), /boom/);
  assert.ok(await boom.evaluate((c) => c.classList.contains("failed")));

  // ipykernel in the same workspace: its value is a result.
  await page.selectOption("select.language", "jupyter:python3");
  await page.click("dialog.confirm .confirm-ok");
  await waitFor(async () => /^jupyter:python3: idle/.test(await page.locator(".kernel-status").innerText()), { what: "ipykernel started", timeoutMs: 120_000 }).catch(async (e) => {
    throw new Error(`${e.message}; status: ${await page.locator(".kernel-status").innerText()}; daemon: ${d.stderr().slice(-2000)}`);
  });
  assert.equal(await page.locator(".kernel-limits").innerText(), "no variables");
  const py = await runCell("1+1");
  await done(py);
  assert.equal(await py.getAttribute("data-status"), "ok");
  assert.equal((await py.locator(".out-result").innerText()).trim(), "2");
  assert.equal(await py.locator(".prompt").innerText(), "[1]:");
  await shot("8-jupyter-kernels");
  assert.deepEqual(consoleErrors.filter((e) => !expectedConsole.test(e)), []);
});

test("a cell's changed files under its output; activity with another client's run; undo; renames, ignored; patch download; fork", async () => {
  // A daemon of its own on a git project with an ignore file (the changes of ignored paths are
  // hidden until shown), and a page of its own.
  const { execFileSync } = await import("node:child_process");
  const gitEnv = { ...process.env, GIT_AUTHOR_NAME: "t", GIT_AUTHOR_EMAIL: "t@example.com", GIT_COMMITTER_NAME: "t", GIT_COMMITTER_EMAIL: "t@example.com" };
  let project;
  const git = (...a) => execFileSync("git", ["-C", project, ...a], { env: gitEnv, encoding: "utf8" });
  const d2 = await startDaemon({
    files: { "README.txt": "a project\n", "src/app.py": "print('app')\n", ".gitignore": "*.log\n" },
    setup: (dir) => {
      project = dir;
      git("init", "-q", "-b", "main");
      git("add", "-A");
      git("commit", "-q", "-m", "initial");
    },
  });
  const page = await context.newPage();
  collectErrors(page, consoleErrors);
  const shot = (name) => page.screenshot({ path: join(artifacts, `${name}.png`) });
  const runCell = async (code) => {
    await page.click("button.add-cell");
    const cell = page.locator(".cell").last();
    await cell.locator(".cm-content").fill(code);
    await cell.locator("button.run").click();
    return cell;
  };
  try {
    await page.goto(d2.url);
    await page.waitForSelector("body[data-ready=true]", { timeout: 30_000 });
    await page.click("button.new-notebook");
    await page.locator('section.notebook[data-path="Untitled.ipynb"] .cell').waitFor();
    // The page asks in its own dialogs (wb.confirm, and a text field for names).
    const dialogs = [];
    const answer = async (value) => {
      const dl = page.locator("dialog.confirm[open]");
      await dl.waitFor();
      dialogs.push(await dl.locator("p").innerText());
      if (value !== undefined) await dl.locator("input.ask-input").fill(value);
      await dl.locator("button.confirm-ok").click();
    };

    // The line under the cell's output: the files it wrote and deleted, and undo.
    const cell = await runCell("open('agent_demo.txt', 'w').write('hi\\n')\nimport os\nos.remove('README.txt')");
    const line = cell.locator(".notes .files-changed");
    await line.waitFor({ timeout: 20_000 });
    assert.equal((await line.innerText()).trim(), "wrote agent_demo.txt (new), deleted README.txt undo");
    assert.equal(await line.locator("a.file-link.added").innerText(), "agent_demo.txt (new)");
    assert.equal(await line.locator("a.file-link.deleted").innerText(), "README.txt");
    await line.locator("a.file-link.added").click();
    await waitFor(async () => (await page.locator(".docs .tab-pane:not([hidden]) .diff").innerText()).includes("+hi"), { what: "the diff of the file the cell wrote" });
    assert.match(await page.locator(".docs .tab.active").getAttribute("title"), /agent_demo\.txt/);
    await page.click(".docs .tab.active .tab-close");

    // The activity: this run, then another client's run in the same workspace (as `cellbox mcp`
    // runs an agent's code) shows up without a reload, marked as such.
    const mine = page.locator(".activity").first();
    await waitFor(async () => /execution \d+ \(python\)/.test(await mine.innerText()), { what: "the run in the activity list" });
    assert.match(await mine.locator(".files-line").innerText(), /wrote agent_demo\.txt \(new\), deleted README\.txt/);
    assert.equal(await mine.locator("button.undo").count(), 1);
    await page.evaluate(async () => {
      const { client, workspace } = window.cellbox;
      const k = await client.request("kernel/start", { language: "python", workspaceId: workspace.workspaceId, sandbox: "best-effort" });
      await client.request("kernel/execute", { kernelId: k.kernelId, code: "open('from_agent.txt', 'w').write('agent')", executionId: "agent-1" });
      await client.request("kernel/shutdown", { kernelId: k.kernelId });
    });
    const agent = page.locator('.activity[data-execution="agent-1"]');
    await agent.waitFor({ timeout: 20_000 });
    assert.match(await agent.innerText(), /execution 1 \(python\)[\s\S]*another client[\s\S]*wrote from_agent\.txt \(new\)/);
    assert.equal(await page.locator(".activity").first().getAttribute("data-execution"), "agent-1", "newest first");
    // The automatic checkpoints, apart from the user's.
    const autos = page.locator(".auto-checkpoints summary");
    await autos.waitFor();
    assert.match(await autos.innerText(), /^automatic \(\d+\), taken before runs$/);
    await shot("12-files-changed-activity");

    // Undo the cell: asked first (the kernel's memory is not rolled back); the files are back.
    await line.locator("button.undo").click();
    await answer();
    await waitFor(async () => (await page.locator('.change[data-path="agent_demo.txt"]').count()) === 0 && (await page.locator('.change[data-path="from_agent.txt"]').count()) === 0, { what: "undone" });
    assert.match(dialogs.at(-1), /before execution \d+ \(python\)\?[\s\S]*not rolled back/);
    assert.match(await page.locator(".changes-message").innerText(), /not rolled back/);
    await page.locator('.tree-item[data-path="README.txt"]:not(.deleted)').waitFor();

    // A rename is one entry, old → new; an ignored path is counted, and listed when shown.
    const ren = await runCell("os.rename('src/app.py', 'src/main.py')\nopen('debug.log', 'w').write('noise')");
    await ren.locator(".files-changed").waitFor({ timeout: 20_000 });
    const entry = page.locator('.change.renamed[data-path="src/main.py"]');
    await entry.waitFor({ timeout: 20_000 });
    assert.equal(await entry.locator(".path").innerText(), "src/app.py → src/main.py");
    assert.equal(await page.locator('.change[data-path="src/app.py"]').count(), 0);
    const ignored = page.locator(".ignored-line");
    await waitFor(async () => (await ignored.isVisible()) && /^1 ignored change hidden/.test(await ignored.innerText()), { what: "the ignored count" });
    assert.equal(await page.locator('.change[data-path="debug.log"]').count(), 0);
    await ignored.locator("button").click();
    await page.locator('.change.ignored[data-path="debug.log"]').waitFor();
    await shot("13-rename-ignored");
    await ignored.locator("button").click();
    await waitFor(async () => (await page.locator('.change[data-path="debug.log"]').count()) === 0, { what: "ignored hidden again" });

    // Patch: a .patch download that `git apply` takes.
    const [dl] = await Promise.all([page.waitForEvent("download"), page.click("button.export-patch")]);
    assert.match(dl.suggestedFilename(), /\.patch$/);
    const patch = readFileSync(await dl.path(), "utf8");
    assert.match(patch, /rename from src\/app\.py|\+\+\+ b\/src\/main\.py/);
    // The ignored file is not in it (the notebook's own diff, saved in the workspace, names it in a cell).
    assert.doesNotMatch(patch, /^diff --git a\/debug\.log /m);
    assert.match(patch, /^diff --git a\/Untitled\.ipynb /m);
    const patchFile = join(project, "..", "changes.patch");
    writeFileSync(patchFile, patch);
    git("apply", "--check", patchFile);

    // Fork: a new workspace with the changes, opened by its link in a new tab.
    await page.click("button.fork");
    await answer("try-b");
    const link = page.locator(".changes-message a.fork-link");
    await link.waitFor({ timeout: 20_000 });
    const msg = await page.locator(".changes-message").innerText();
    const m = msg.match(/forked as try-b \((ws-[^)]+)\)/);
    assert.ok(m, msg);
    const tab = await context.newPage();
    await tab.goto(await link.getAttribute("href"));
    await tab.waitForSelector("body[data-ready=true]", { timeout: 30_000 });
    assert.equal(await tab.evaluate(() => window.cellbox.workspace.workspaceId), m[1]);
    assert.match(await tab.locator("header .root").innerText(), /try-b/);
    await tab.locator('.change.renamed[data-path="src/main.py"]').waitFor({ timeout: 20_000 });
    assert.ok(!tab.url().includes("token"));
    await tab.close();
    assert.deepEqual(consoleErrors.filter((e) => !expectedConsole.test(e)), []);
  } finally {
    await page.close();
    await d2.stop();
  }
});
