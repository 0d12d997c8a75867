// Previews of servers that run in the sandbox (PROTOCOL.md §11), in the page
// served by the real `cellbox serve --listen`, in Debian's chromium
// (headless) with playwright-core: a server started in a kernel brings the
// offer (workspace/ports); Preview shows the server's page in a pane, framed
// from a loopback origin of its own; Open in new tab opens it without an
// opener; Stop ends the preview (workspace/unexposePort); a dismissed offer
// stays away; a reload brings an open pane back. Screenshots go to $CELLBOX_ARTIFACTS (previews-*.png).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { artifacts, launchChromium } from "./chromium.mjs";
import { startDaemon, waitFor } from "./daemon.mjs";

const here = dirname(fileURLToPath(import.meta.url));
let d, browser, page;
let consoleErrors = [];
const expectedConsole = /WebSocket|ERR_|connection to cellbox lost|status of 401|status of 502/;
const page1 = `<!doctype html><title>sandbox app</title><h1 id="h">hello from the sandbox</h1><script>document.getElementById("h").dataset.js = "ran"</script>\n`;

before(async () => {
  d = await startDaemon({ files: { "index.html": page1 } });
  browser = await launchChromium({ viewport: { width: 1400, height: 900 } });
  ({ page, consoleErrors } = browser);
});

after(async () => {
  await browser?.close();
  await d?.stop();
});

const shot = (name) => page.screenshot({ path: join(artifacts, `${name}.png`) });
const ready = () => page.waitForSelector("body[data-ready=true]", { timeout: 60_000 });
const request = (method, params) => page.evaluate(({ method, params }) => window.cellbox.client.request(method, params), { method, params });
const workspaceId = () => page.evaluate(() => window.cellbox.workbench.workspaceId);
const serverCode = (port) =>
  [
    "import http.server, threading",
    `s${port} = http.server.ThreadingHTTPServer(("127.0.0.1", ${port}), http.server.SimpleHTTPRequestHandler)`,
    `threading.Thread(target=s${port}.serve_forever, daemon=True).start()`,
  ].join("\n");
let kernelId;
/** Starts an HTTP server on port in the page's python kernel (started by the first call). */
async function serve(port) {
  kernelId ??= (await request("kernel/start", { language: "python", workspaceId: await workspaceId() })).kernelId;
  const r = await request("kernel/execute", { kernelId, code: serverCode(port) });
  assert.equal(r.status, "ok", JSON.stringify(r));
}
const offer = (port) => page.locator(`.preview-offer[data-port="${port}"]`);
const portRow = (port) => page.locator(`.ports .port-row[data-port="${port}"]`);
const previewFrame = (origin) => page.frames().find((f) => f !== page.mainFrame() && f.url().startsWith(origin));

test("the page's CSP frames loopback origins only, and is never framed", async () => {
  const csp = readFileSync(join(here, "../dist/csp"), "utf8");
  assert.match(csp, /frame-src http:\/\/127\.0\.0\.1:\* http:\/\/localhost:\* http:\/\/\*\.localhost:\*;/);
  assert.match(csp, /frame-ancestors 'none'/);
  const res = await fetch(d.url);
  const served = res.headers.get("content-security-policy");
  assert.equal(served, csp.trim(), "the daemon sends the built policy");
  const frameSrc = served.split(";").map((s) => s.trim()).find((s) => s.startsWith("frame-src"));
  assert.deepEqual(frameSrc.split(/\s+/).slice(1), ["http://127.0.0.1:*", "http://localhost:*", "http://*.localhost:*"]);
});

test("a server started in a kernel: the offer, then Preview shows its page in a pane of its own origin", async () => {
  await page.goto(d.url);
  await ready();
  await serve(8000);
  await offer(8000).waitFor({ timeout: 30_000 });
  assert.equal(await offer(8000).locator(".message").innerText(), "Your application running on port 8000 is available.");
  assert.deepEqual(await offer(8000).locator("button").allInnerTexts(), ["Preview", "Open in new tab", "✕"]);
  await waitFor(async () => (await portRow(8000).locator(".port-state").innerText()) === "listening", { what: "port 8000 listed as listening" });
  await shot("previews-offer");

  await offer(8000).locator(".offer-preview").click();
  await page.locator('.docs .tab[data-tab="preview:8000"]').waitFor();
  assert.equal(await page.locator('.docs .tab[data-tab="preview:8000"] .tab-title').innerText(), "Port 8000");
  await offer(8000).waitFor({ state: "detached" });
  const frame = page.locator(".preview-pane[data-port='8000'] iframe.preview-frame");
  assert.equal(await frame.getAttribute("sandbox"), "allow-scripts allow-forms allow-same-origin allow-popups allow-modals allow-downloads");
  const previews = (await request("workspace/previews", { workspaceId: await workspaceId() })).previews;
  assert.equal(previews.length, 1, JSON.stringify(previews));
  const p = previews[0];
  assert.equal(p.port, 8000);
  // The page opens the preview at its own name (a site of its own), which
  // the browser resolves to the loopback.
  const url = new URL(p.browserUrl);
  assert.equal(await frame.getAttribute("src"), p.browserUrl);
  assert.equal(url.hostname, `${p.previewId}.localhost`, "a name of its own, which the page's frame-src allows");
  assert.equal(url.port, new URL(p.url).port, "the same server as the loopback URL");
  assert.notEqual(url.origin, d.origin, "a preview has an origin of its own, never the IDE's");
  // The server's page, its script run, in the frame.
  const f = await waitFor(() => previewFrame(url.origin), { what: "the preview's frame" });
  await f.waitForSelector("h1[data-js=ran]", { timeout: 30_000 });
  assert.equal(await f.locator("h1").innerText(), "hello from the sandbox");
  // Its script cannot reach into the IDE's page: another origin.
  const reach = await f.evaluate(() => {
    try {
      return String(window.parent.document.title);
    } catch (e) {
      return `blocked: ${e.name}`;
    }
  });
  assert.equal(reach, "blocked: SecurityError");
  assert.equal(await page.locator(".preview-pane[data-port='8000'] .preview-address").innerText(), `${url.origin}/`);
  assert.equal(await portRow(8000).locator(".port-state").innerText(), "previewed");
  await shot("previews-pane");

  // Reload loads the page again.
  const again = page.waitForEvent("framenavigated", { predicate: (fr) => fr.url().startsWith(url.origin), timeout: 20_000 });
  await page.click(".preview-pane[data-port='8000'] .preview-reload");
  await again;
  await previewFrame(url.origin).waitForSelector("h1[data-js=ran]", { timeout: 30_000 });

  // Open in new tab: the same preview, a tab without an opener.
  const popup = browser.context.waitForEvent("page", { timeout: 20_000 });
  await page.click(".preview-pane[data-port='8000'] .preview-open");
  const tab = await popup;
  await tab.waitForLoadState();
  await tab.waitForSelector("h1[data-js=ran]", { timeout: 30_000 });
  assert.equal(new URL(tab.url()).origin, url.origin);
  assert.equal(await tab.evaluate(() => window.opener), null, "no opener");
  await tab.close();
  // Exposing again answers the same preview: still one.
  assert.equal((await request("workspace/previews", { workspaceId: await workspaceId() })).previews.length, 1);
});

test("Stop preview: unexposePort, the pane closes, the port stays listed as listening", async () => {
  const wid = await workspaceId();
  await page.click(".preview-pane[data-port='8000'] .preview-stop");
  await page.locator('.docs .tab[data-tab="preview:8000"]').waitFor({ state: "detached" });
  assert.equal(await page.locator(".preview-pane").count(), 0);
  assert.deepEqual((await request("workspace/previews", { workspaceId: wid })).previews, []);
  await waitFor(async () => (await portRow(8000).locator(".port-state").innerText()) === "listening", { what: "port 8000 back to listening" });
  assert.equal(await portRow(8000).locator(".port-stop").count(), 0);
  // The Ports panel previews it again, in a pane.
  await portRow(8000).locator(".port-preview").click();
  await page.locator('.docs .tab[data-tab="preview:8000"]').waitFor();
  const p = (await request("workspace/previews", { workspaceId: wid })).previews[0];
  const f = await waitFor(() => previewFrame(new URL(p.browserUrl).origin), { what: "the frame again" });
  await f.waitForSelector("h1[data-js=ran]", { timeout: 30_000 });
  await shot("previews-panel");
  await portRow(8000).locator(".port-stop").click();
  await page.locator('.docs .tab[data-tab="preview:8000"]').waitFor({ state: "detached" });
  assert.deepEqual((await request("workspace/previews", { workspaceId: wid })).previews, []);
});

test("a dismissed offer is not made again while its port listens; another port gets its own", async () => {
  await serve(8001);
  await offer(8001).waitFor({ timeout: 30_000 });
  await offer(8001).locator(".offer-dismiss").click();
  await offer(8001).waitFor({ state: "detached" });
  await serve(8002);
  await offer(8002).waitFor({ timeout: 30_000 });
  await waitFor(async () => (await portRow(8002).count()) === 1, { what: "port 8002 in the panel" });
  assert.equal(await offer(8001).count(), 0, "8001 not offered again");
  assert.equal(await offer(8000).count(), 0, "8000 never offered again");
  assert.deepEqual(await page.locator(".ports .port-row").evaluateAll((rows) => rows.map((r) => r.dataset.port)), ["8000", "8001", "8002"]);
  // Nothing was exposed by an offer nobody took.
  assert.deepEqual((await request("workspace/previews", { workspaceId: await workspaceId() })).previews, []);
  await shot("previews-offers");
});

test("a reload brings the open preview pane back, showing the server's page", async () => {
  await portRow(8002).locator(".port-preview").click();
  await page.locator('.docs .tab[data-tab="preview:8002"]').waitFor();
  await offer(8002).waitFor({ state: "detached" });
  const p = (await request("workspace/previews", { workspaceId: await workspaceId() })).previews.find((x) => x.port === 8002);
  await page.reload();
  await ready();
  await page.locator('.docs .tab[data-tab="preview:8002"]').waitFor();
  const f = await waitFor(() => previewFrame(new URL(p.browserUrl).origin), { what: "the frame after the reload" });
  await f.waitForSelector("h1[data-js=ran]", { timeout: 30_000 });
  assert.equal(await portRow(8002).locator(".port-state").innerText(), "previewed");
  assert.equal((await request("workspace/previews", { workspaceId: await workspaceId() })).previews.length, 1, "the same preview, none added");
  assert.deepEqual(consoleErrors.filter((e) => !expectedConsole.test(e)), []);
});
