// Previews of servers in the sandbox (PROTOCOL.md §11) against the real daemon: a server
// started in a kernel brings workspace/ports, and the extension offers it as a forwarded port
// (an information message with "Open in Browser" / "Preview in Editor", faked in
// test/fake-vscode.ts, which answers it); Open in Browser sends workspace/exposePort and opens
// the URL through asExternalUri and openExternal, and the URL serves the server's page; Preview
// in Editor opens it in the Simple Browser; a dismissed port is not offered again while it
// listens; cellbox.previewPort exposes a typed port (the same preview again), and
// cellbox.stopPreview ends one (workspace/unexposePort).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import * as vscode from "vscode";
import { CellboxClient } from "../src/client";
import { Session } from "../src/session";
import { previewUI, previewPortCommand, stopPreviewCommand, OPEN_IN_BROWSER, PREVIEW_IN_EDITOR } from "../src/previewCommands";
import { offerMessage, parsePort } from "../src/previews";
import { Methods, type WorkspacePortsParams } from "../../protocol/protocol";
import { tempEnv, connectStdio, until, Env } from "./helpers";

const fake = vscode as any;
let e: Env;
let c: CellboxClient;
let s: Session;
/** Every request the client sent: [method, params]. */
const sent: [string, any][] = [];
const portsSeen: WorkspacePortsParams[] = [];
/** What simpleBrowser.show was given. */
const simple: string[] = [];
/** The information messages with actions: [message, actions]. */
const offers: [string, string[]][] = [];
/** The answer the fake user gives to an offer, by port. */
const answers = new Map<number, string | undefined>();

const page = "<!doctype html><title>sandbox app</title><h1>hello from the sandbox</h1>\n";
const serverCode = (port: number) =>
  [
    "import http.server, threading",
    `s${port} = http.server.ThreadingHTTPServer(("127.0.0.1", ${port}), http.server.SimpleHTTPRequestHandler)`,
    `threading.Thread(target=s${port}.serve_forever, daemon=True).start()`,
  ].join("\n");

before(async () => {
  e = tempEnv({ "index.html": page });
  c = await connectStdio(e);
  const request = c.request.bind(c) as (...a: unknown[]) => Promise<unknown>;
  (c as any).request = (method: string, ...rest: unknown[]) => {
    sent.push([method, rest[0]]);
    return request(method, ...rest);
  };
  c.onPorts((p) => portsSeen.push(p));
  fake.commands.registerCommand("simpleBrowser.show", (url: string) => simple.push(url));
  fake.setInfoAnswer((msg: string, actions: string[]) => {
    offers.push([msg, actions]);
    const m = /port (\d+) is available/.exec(msg);
    return m ? answers.get(Number(m[1])) : undefined;
  });
  s = new Session(c, { root: e.project }, {}, previewUI());
});
after(async () => {
  fake.setInfoAnswer(() => undefined);
  await c.dispose();
  e.cleanup();
});

async function serve(port: number) {
  const r = await s.run({ path: `${e.project}/server.py`, language: "python", code: serverCode(port), firstLine: 0, lastLine: 2 });
  assert.equal(r.execution.status, "ok", JSON.stringify(r.execution.outputs));
}
const sentOf = (method: string) => sent.filter(([m]) => m === method).map(([, p]) => p);

/** GETs a preview's URL as a browser would: its token, then the cookie it sets for the redirect. */
async function get(url: string): Promise<{ status: number; text: string }> {
  let cookie = "";
  let at = url;
  for (let i = 0; i < 5; i++) {
    const res = await fetch(at, { redirect: "manual", headers: cookie ? { cookie } : {} });
    const set = res.headers.getSetCookie?.() ?? [];
    if (set.length) cookie = set.map((x) => x.split(";")[0]).join("; ");
    const loc = res.headers.get("location");
    if (res.status >= 300 && res.status < 400 && loc) {
      at = new URL(loc, at).toString();
      continue;
    }
    return { status: res.status, text: await res.text() };
  }
  throw new Error(`too many redirects from ${url}`);
}

test("the offer's words and a typed port", () => {
  assert.equal(offerMessage(8000), "Your application running on port 8000 is available.");
  assert.equal(parsePort(" 8000 "), 8000);
  for (const bad of ["", "0", "65536", "80a", "-1", undefined]) assert.equal(parsePort(bad), undefined, String(bad));
});

test("a server in a kernel is offered; Open in Browser exposes it and opens its URL", async () => {
  answers.set(8000, OPEN_IN_BROWSER);
  await serve(8000);
  await until(() => fake.openedExternal.length > 0, 30000, "openExternal");
  const ws = s.workspace!.workspaceId;
  assert.ok(portsSeen.some((p) => p.workspaceId === ws && p.ports.includes(8000)), JSON.stringify(portsSeen));
  const offer = offers.find(([m]) => m === "Your application running on port 8000 is available.");
  assert.ok(offer, JSON.stringify(offers));
  assert.deepEqual(offer[1], [OPEN_IN_BROWSER, PREVIEW_IN_EDITOR]);
  assert.deepEqual(sentOf(Methods.WorkspaceExposePort), [{ workspaceId: ws, port: 8000, protocol: "http" }]);
  const [preview] = await s.previews.list(ws);
  assert.equal(preview.port, 8000);
  assert.match(preview.url, /^http:\/\/(127\.0\.0\.1|localhost|\[::1\]):\d+\/\?cellbox-preview=/);
  // A local window opens the preview at its own name (a site of its own).
  const named = new URL(preview.browserUrl!);
  assert.equal(named.hostname, `${preview.previewId}.localhost`);
  assert.equal(named.port, new URL(preview.url).port);
  assert.deepEqual(fake.externalUris, [preview.browserUrl]);
  assert.deepEqual(fake.openedExternal, [preview.browserUrl]);
  // The same server at the loopback address (node resolves no .localhost name).
  const res = await get(preview.url);
  assert.equal(res.status, 200, res.text);
  assert.match(res.text, /hello from the sandbox/);
});

test("Preview in Editor opens the Simple Browser; a dismissed port is not offered again", async () => {
  answers.set(8001, PREVIEW_IN_EDITOR);
  answers.set(8002, undefined);
  await serve(8001);
  await until(() => simple.length > 0, 30000, "simpleBrowser.show");
  const ws = s.workspace!.workspaceId;
  const p8001 = (await s.previews.list(ws)).find((p) => p.port === 8001)!;
  assert.deepEqual(simple, [p8001.browserUrl]);
  await serve(8002);
  await until(() => offers.some(([m]) => m.includes("port 8002")), 30000, "the offer of 8002");
  await s.previews.lastOffers;
  // Another port starts: 8002, dismissed, is not offered again (nor 8000 and 8001).
  answers.set(8003, undefined);
  await serve(8003);
  await until(() => offers.some(([m]) => m.includes("port 8003")), 30000, "the offer of 8003");
  await s.previews.lastOffers;
  const counts = [8000, 8001, 8002, 8003].map((port) => offers.filter(([m]) => m.includes(`port ${port} `)).length);
  assert.deepEqual(counts, [1, 1, 1, 1]);
  assert.deepEqual(
    sentOf(Methods.WorkspaceExposePort).map((p) => p.port),
    [8000, 8001],
    "a dismissed offer exposes nothing",
  );
  assert.deepEqual(s.previews.ports(ws), [8000, 8001, 8002, 8003]);
});

test("cellbox.previewPort exposes a typed port (the same preview again); cellbox.stopPreview ends one", async () => {
  const ws = s.workspace!.workspaceId;
  const before = await s.previews.list(ws);
  assert.deepEqual(
    before.map((p) => p.port),
    [8000, 8001],
  );
  let asked: any;
  fake.setInputBox((opts: any) => ((asked = opts), "8000"));
  const opened = fake.openedExternal.length;
  const p = await previewPortCommand(s, undefined, "browser");
  assert.match(asked.prompt, /listening: 8000, 8001, 8002, 8003/);
  assert.equal(asked.validateInput("x"), "a port: 1 to 65535");
  assert.equal(p?.previewId, before[0].previewId, "the same preview");
  assert.equal(fake.openedExternal.length, opened + 1);
  assert.equal(fake.openedExternal.at(-1), before[0].browserUrl);
  // A remote window opens the loopback url, which asExternalUri forwards.
  fake.env.remoteName = "ssh-remote";
  try {
    await previewPortCommand(s, 8000, "browser");
    assert.equal(fake.externalUris.at(-1), before[0].url);
    assert.equal(fake.openedExternal.at(-1), before[0].url);
  } finally {
    fake.env.remoteName = undefined;
  }

  // Nothing listens on 8009 yet: it is previewed anyway (502 until a server does).
  const later = await previewPortCommand(s, 8009, "browser");
  assert.equal(later?.port, 8009);
  assert.equal((await get(later!.url)).status, 502);

  fake.setQuickPick((items: any[]) => items.find((i) => i.label === "Port 8000"));
  const stopped = await stopPreviewCommand(s);
  assert.equal(stopped?.port, 8000);
  assert.deepEqual(fake.created.quickPicks.at(-1).map((i: any) => i.label), ["Port 8000", "Port 8001", "Port 8009"]);
  assert.deepEqual(sentOf(Methods.WorkspaceUnexposePort), [{ previewId: before[0].previewId }]);
  assert.deepEqual(
    (await s.previews.list(ws)).map((x) => x.port),
    [8001, 8009],
  );
  assert.match(fake.created.infos.at(-1), /stopped the preview of port 8000/);
});
