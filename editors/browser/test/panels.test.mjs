// Terminals in tabs and the side panels (variables, kernels) of the page
// served by the real `cellbox serve --listen`, in Debian's chromium
// (headless) with playwright-core. Screenshots go to $CELLBOX_ARTIFACTS
// (terminals-*.png, panels-*.png).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { artifacts, launchChromium } from "./chromium.mjs";
import { startDaemon, waitFor } from "./daemon.mjs";

let d, browser, page;
let consoleErrors = [];
// A reload asks for the page without the token (the address bar has none): the 401 page re-asks with it.
const expectedConsole = /WebSocket|ERR_|connection to cellbox lost|status of 401/;

before(async () => {
  d = await startDaemon({ files: { "README.txt": "a project\n" } });
  browser = await launchChromium({ viewport: { width: 1400, height: 900 } });
  ({ page, consoleErrors } = browser);
});

after(async () => {
  await browser?.close();
  await d?.stop();
});

const shot = (name) => page.screenshot({ path: join(artifacts, `${name}.png`) });
const ready = () => page.waitForSelector("body[data-ready=true]", { timeout: 60_000 });
const termTabs = () => page.locator(".terms .tab");
const stats = () => page.evaluate(() => window.cellbox.client.request("daemon/stats", {}));
/** The whole xterm buffer (scrollback too) of the i-th terminal tab, a line each. */
const termText = (i) =>
  page.evaluate((i) => {
    const b = window.cellbox.terminals.panels[i].term.buffer.active;
    const lines = [];
    for (let y = 0; y < b.length; y++) lines.push(b.getLine(y)?.translateToString(true) ?? "");
    return lines.join("\n");
  }, i);
const count = (text, s) => text.split(s).length - 1;
/** Types a line into the terminal in front (its xterm has the focus once clicked). */
async function typeLine(line) {
  await page.locator(".terms .tab-pane:not([hidden]) .xterm").click();
  await page.keyboard.type(line + "\n");
}
async function waitText(i, s, what) {
  try {
    await waitFor(async () => (await termText(i)).includes(s), { what, timeoutMs: 30_000 });
  } catch (e) {
    throw new Error(`${e.message}; terminal ${i + 1} shows:\n${await termText(i)}`, { cause: e });
  }
}

test("two terminal tabs, each with its own shell; + never replaces one", async () => {
  await page.goto(d.url);
  await ready();
  await waitFor(async () => (await termTabs().count()) === 1, { what: "the first terminal tab" });
  assert.equal(await termTabs().first().locator(".tab-title").innerText(), "Terminal 1");
  await waitFor(() => page.evaluate(() => !!window.cellbox.terminals.panels[0]?.ptyId), { what: "terminal 1's pty" });
  const first = await page.evaluate(() => window.cellbox.terminals.panels[0].ptyId);

  await page.click(".terms button.new-terminal");
  await waitFor(async () => (await termTabs().count()) === 2, { what: "a second terminal tab" });
  assert.equal(await termTabs().nth(1).locator(".tab-title").innerText(), "Terminal 2");
  assert.match(await termTabs().nth(1).getAttribute("class"), /active/);
  await waitFor(() => page.evaluate(() => !!window.cellbox.terminals.panels[1]?.ptyId), { what: "terminal 2's pty" });
  const ids = await page.evaluate(() => window.cellbox.terminals.panels.map((p) => p.ptyId));
  assert.equal(ids[0], first, "the first terminal keeps its pty");
  assert.notEqual(ids[1], first, "the second has a pty of its own");

  // $((..)) makes the output differ from the command line typed.
  await typeLine("echo MARK-B-$((40+2)) PID-$$");
  await waitText(1, "MARK-B-42", "terminal 2's echo");
  await termTabs().nth(0).click();
  await typeLine("echo MARK-A-$((40+1)) PID-$$");
  await waitText(0, "MARK-A-41", "terminal 1's echo");
  const [t1, t2] = [await termText(0), await termText(1)];
  assert.ok(!t1.includes("MARK-B-42") && !t2.includes("MARK-A-41"), "each tab shows its own shell's output");
  const pid = (t, m) => t.match(new RegExp(`${m}-4\\d PID-(\\d+)`))?.[1];
  assert.ok(pid(t1, "MARK-A") && pid(t2, "MARK-B") && pid(t1, "MARK-A") !== pid(t2, "MARK-B"), `two shells: ${pid(t1, "MARK-A")} and ${pid(t2, "MARK-B")}`);
  const exited = await page.evaluate(() => window.cellbox.terminals.panels.map((p) => !!p.exited));
  assert.deepEqual(exited, [false, false], "neither shell ended");
  assert.equal((await stats()).ptys, 2);
  await shot("terminals-two-tabs");
});

test("a reload re-attaches both terminals with their scrollback, once; no orphan pty", async () => {
  const before = await page.evaluate(() => window.cellbox.terminals.panels.map((p) => p.ptyId));
  const front = await page.locator(".terms .tab.active .tab-title").innerText();
  await page.reload();
  await ready();
  await waitFor(async () => (await termTabs().count()) === 2, { what: "two terminal tabs after the reload" });
  assert.deepEqual(await termTabs().locator(".tab-title").allInnerTexts(), ["Terminal 1", "Terminal 2"]);
  assert.equal(await page.locator(".terms .tab.active .tab-title").innerText(), front, "the same terminal in front");
  assert.deepEqual(await page.evaluate(() => window.cellbox.terminals.panels.map((p) => p.ptyId)), before, "the same ptys, re-attached");
  await waitText(0, "MARK-A-41", "terminal 1's scrollback");
  await waitText(1, "MARK-B-42", "terminal 2's scrollback");
  assert.equal(count(await termText(0), "MARK-A-41"), 1, "terminal 1's marker once");
  assert.equal(count(await termText(1), "MARK-B-42"), 1, "terminal 2's marker once");
  assert.equal((await stats()).ptys, 2, "no terminal opened by the reload");
  // Still live shells: both answer.
  await termTabs().nth(1).click();
  await typeLine("echo AFTER-$((1+1))");
  await waitText(1, "AFTER-2", "terminal 2 after the reload");
  await shot("terminals-reloaded");
  // The session holds each terminal's pty and the last seq rendered.
  const saved = await page.evaluate(() => window.cellbox.workbench.session.get("terminals", []));
  assert.deepEqual(
    saved.map((s) => s.ptyId),
    before,
  );
  assert.ok(saved.every((s) => s.seq > 0), `seqs: ${JSON.stringify(saved)}`);
});

test("a dropped connection re-attaches every terminal: what came meanwhile shows, nothing twice", async () => {
  // Terminal 2 is in front: its output comes while the connection is down.
  await typeLine("sleep 1; echo LATE-$((5+5))");
  // The whole line reached the shell (keystrokes typed while offline are lost).
  await waitText(1, "sleep 1; echo LATE-$((5+5))", "the command line echoed");
  await page.evaluate(() => window.cellbox.client.drop());
  await waitFor(() => page.evaluate(() => window.cellbox.client.state === "open"), { what: "the connection back" });
  await waitText(1, "LATE-10", "the output made while the connection was down");
  await termTabs().nth(0).click();
  await typeLine("echo DROP-$((3*3))");
  await waitText(0, "DROP-9", "terminal 1 after the reconnect");
  const [t1, t2] = [await termText(0), await termText(1)];
  assert.equal(count(t1, "MARK-A-41"), 1);
  assert.equal(count(t2, "MARK-B-42"), 1);
  assert.equal(count(t2, "LATE-10"), 1);
  assert.equal((await stats()).ptys, 2);
});

test("closing a tab closes its pty", async () => {
  const gone = await page.evaluate(() => window.cellbox.terminals.panels[1].ptyId);
  await termTabs().nth(1).locator(".tab-close").click();
  await waitFor(async () => (await termTabs().count()) === 1, { what: "one terminal tab" });
  await waitFor(async () => (await stats()).ptys === 1, { what: "daemon/stats ptys 1" });
  const err = await page.evaluate((ptyId) => window.cellbox.client.request("pty/attach", { ptyId }).then(() => "attached", (e) => e.code), gone);
  assert.equal(err, -32001, "the closed terminal's pty is gone (NotFound)");
  const saved = await page.evaluate(() => window.cellbox.workbench.session.get("terminals", []));
  assert.equal(saved.length, 1);
});

test("a shell that exits says so in its tab and restarts", async () => {
  const old = await page.evaluate(() => window.cellbox.terminals.panels[0].ptyId);
  await typeLine("exit 3");
  await waitFor(async () => (await termTabs().first().locator(".tab-title").innerText()) === "Terminal 1 (exited)", { what: "the exited tab title" });
  const bar = page.locator(".terms .tab-pane:not([hidden]) .term-exit");
  await bar.waitFor({ state: "visible" });
  assert.match(await bar.innerText(), /exited with code 3/);
  await waitText(0, "[exited with code 3]", "the exit line");
  await shot("terminals-exited");
  await bar.locator("button.term-restart").click();
  await waitFor(async () => (await termTabs().first().locator(".tab-title").innerText()) === "Terminal 1", { what: "the title after restart" });
  assert.ok(await bar.isHidden());
  const now = await page.evaluate(() => window.cellbox.terminals.panels[0].ptyId);
  assert.ok(now && now !== old, "a new pty");
  await waitText(0, "/workspace$", "the new shell's prompt");
  await typeLine("echo AGAIN-$((2+3))");
  await waitText(0, "AGAIN-5", "the restarted shell");
  assert.equal((await stats()).ptys, 1);
});

test("a terminal the daemon no longer has is dropped from the session at load", async () => {
  await page.evaluate(() => {
    const s = window.cellbox.workbench.session;
    s.set("terminals", [...s.get("terminals", []), { ptyId: "pty-not-there", n: 7, seq: 12 }]);
  });
  await page.reload();
  await ready();
  await waitFor(async () => (await page.evaluate(() => window.cellbox.workbench.session.get("terminals", []).length)) === 1, { what: "the session without the lost terminal" });
  assert.deepEqual(await termTabs().locator(".tab-title").allInnerTexts(), ["Terminal 1"]);
  await waitText(0, "AGAIN-5", "the scrollback of the restarted terminal");
  assert.equal((await stats()).ptys, 1);
});

test("the terminal follows the light and dark theme", async () => {
  await page.emulateMedia({ colorScheme: "dark" });
  await waitFor(() => page.evaluate(() => window.cellbox.terminal.term.options.theme.background === "#15171a"), { what: "the dark terminal" });
  await shot("terminals-dark");
  await page.emulateMedia({ colorScheme: "light" });
  await waitFor(() => page.evaluate(() => window.cellbox.terminal.term.options.theme.background === "#fbfbfb"), { what: "the light terminal" });
  const theme = await page.evaluate(() => window.cellbox.terminal.term.options.theme);
  assert.equal(theme.foreground, "#1f2328");
  assert.equal(theme.yellow, "#949800", "a light palette");
});

// Starts a kernel on the page's connection; register: a notebook holds it (wb.kernels).
async function startKernel(language, title) {
  return page.evaluate(
    async ({ language, title }) => {
      const { client, workbench: wb } = window.cellbox;
      const r = await client.request("kernel/start", { language, workspaceId: wb.workspaceId });
      await client.followKernel(r.kernelId, false);
      if (title) {
        wb.kernels.set({ kernelId: r.kernelId, language, title });
        wb.kernels.setActive(r.kernelId);
      }
      return r.kernelId;
    },
    { language, title },
  );
}
const execute = (kernelId, code) => page.evaluate(({ kernelId, code }) => window.cellbox.client.request("kernel/execute", { kernelId, code }), { kernelId, code });
const variable = (name) => page.locator(`.variables tr.variable[data-name="${name}"]`);

let py;

test("the variables panel shows the active kernel's variables, after each run", async () => {
  py = await startKernel("python", "vars-test.ipynb");
  await execute(py, "panel_marker = [1, 2, 3]");
  await variable("panel_marker").waitFor();
  assert.equal(await variable("panel_marker").locator(".var-type").innerText(), "list");
  assert.match(await variable("panel_marker").locator(".var-summary").innerText(), /\[1, 2, 3\]/);
  assert.equal(await variable("panel_marker").locator(".var-size").innerText(), "3");
  assert.match(await page.locator(".variables .variables-kernel").innerText(), /vars-test\.ipynb/);
  // Asked again when the kernel goes idle after the next run: no click.
  await execute(py, "second_one = 'abc' * 2");
  await variable("second_one").waitFor();
  assert.match(await variable("second_one").locator(".var-summary").innerText(), /abcabc/);
  await page.locator(".variables").scrollIntoViewIfNeeded();
  await shot("panels-variables");
});

test("the variables panel says why for a language without kernel/variables, and follows the active kernel", async () => {
  const lang = await page.evaluate(() => window.cellbox.workbench.languages.find((l) => l.available && l.unsupported?.includes("kernel/variables"))?.id);
  assert.ok(lang, "a language without kernel/variables on this host (a Jupyter kernel: jupyter:python3)");
  const jk = await startKernel(lang, "jupyter.ipynb");
  await waitFor(async () => (await page.locator(".variables").getAttribute("data-state")) === "unsupported", { what: "the unsupported note" });
  assert.match(await page.locator(".variables-message").innerText(), /cannot list its variables/);
  assert.ok(await page.locator(".variables-table").isHidden());
  await shot("panels-variables-unsupported");
  // Back to the python notebook: its variables again.
  await page.evaluate((id) => window.cellbox.workbench.kernels.setActive(id), py);
  await variable("panel_marker").waitFor();
  await page.evaluate((id) => {
    window.cellbox.workbench.kernels.delete(id);
    return window.cellbox.client.request("kernel/shutdown", { kernelId: id });
  }, jk);
});

const row = (kernelId) => page.locator(`.kernels li.kernel-row[data-kernel-id="${kernelId}"]`);

test("the kernels panel shows live CPU and memory of a busy kernel", async () => {
  await row(py).waitFor();
  assert.match(await row(py).locator(".kernel-holder").innerText(), /vars-test\.ipynb/);
  assert.equal(await row(py).locator("button.kernel-shutdown").count(), 0, "no shut down for a kernel a notebook holds");
  const busy = page.evaluate((kernelId) => window.cellbox.client.request("kernel/execute", { kernelId, code: "import time\nt = time.time()\nwhile time.time() - t < 90:\n    pass" }).catch(() => {}), py);
  const cpu = async () => Number((await row(py).locator(".kernel-cpu").innerText()).match(/CPU ([\d.]+)%/)?.[1] ?? 0);
  await waitFor(async () => (await row(py).locator(".kernel-state").innerText()) === "busy" && (await cpu()) > 1, { what: "the busy kernel's CPU above 1%", timeoutMs: 30_000 });
  const mem = await row(py).locator(".kernel-memory").innerText();
  assert.match(mem, /^\d+(\.\d)? MiB$/, `memory ${mem}`);
  assert.ok(parseFloat(mem) > 1, `memory ${mem} > 1 MiB`);
  await page.locator(".kernels").scrollIntoViewIfNeeded();
  await shot("panels-kernels-busy");
  await page.evaluate((kernelId) => window.cellbox.client.request("kernel/interrupt", { kernelId }), py);
  await busy;
  await waitFor(async () => (await row(py).locator(".kernel-state").innerText()) === "idle", { what: "idle after the interrupt" });
});

test("the kernels panel polls only while it can be seen", async () => {
  const k = "window.cellbox.kernels";
  // Folded: no timer, no poll.
  await page.click(".kernels .panel-fold");
  await waitFor(() => page.evaluate(() => !window.cellbox.kernels.inFlight && window.cellbox.kernels.timer === undefined), { what: "polling stopped when folded" });
  const folded = await page.evaluate(() => window.cellbox.kernels.polls);
  await page.click(".kernels .panel-fold");
  await waitFor(() => page.evaluate((n) => window.cellbox.kernels.polls > n, folded), { what: `${k} polls again when unfolded` });
  // A page that is not visible: no timer either.
  await page.evaluate(() => {
    Object.defineProperty(document, "visibilityState", { configurable: true, get: () => "hidden" });
    document.dispatchEvent(new Event("visibilitychange"));
  });
  await waitFor(() => page.evaluate(() => !window.cellbox.kernels.inFlight && window.cellbox.kernels.timer === undefined), { what: "polling stopped while hidden" });
  await page.evaluate(() => {
    delete document.visibilityState;
    document.dispatchEvent(new Event("visibilitychange"));
  });
  const hidden = await page.evaluate(() => window.cellbox.kernels.polls);
  await waitFor(() => page.evaluate((n) => window.cellbox.kernels.polls > n, hidden), { what: "polls again when visible" });
});

test("a kernel no notebook of the page holds can be shut down from the kernels panel", async () => {
  const orphan = await startKernel("python");
  await row(orphan).waitFor();
  assert.equal(await row(orphan).locator(".kernel-holder").innerText(), "not open in this page");
  await row(orphan).locator("button.kernel-shutdown").click();
  const dialog = page.locator("dialog.confirm");
  await dialog.waitFor();
  assert.match(await dialog.innerText(), new RegExp(`Shut down the Python kernel ${orphan}`));
  await shot("panels-kernels-shutdown");
  await dialog.locator("button.confirm-ok").click();
  await row(orphan).waitFor({ state: "detached" });
  const left = await page.evaluate(() => window.cellbox.client.request("kernel/list", {}));
  assert.ok(!left.kernels.some((k) => k.kernelId === orphan), "the kernel is gone from kernel/list");
  assert.ok(left.kernels.some((k) => k.kernelId === py), "the notebook's kernel runs on");
  assert.deepEqual(
    consoleErrors.filter((e) => !expectedConsole.test(e)),
    [],
  );
});
