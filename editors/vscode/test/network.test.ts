// The network (PROTOCOL.md §9) against the real daemon: a cell's blocked connection is asked
// about once per host (a warning message with "Allow once" / "Allow always" / "Ignore", faked in
// test/fake-vscode.ts: VS Code's notifications cannot be clicked from here, so the fake answers
// them and the test checks what each answer sends) however often the cell runs while the
// notification shows, an ignored host is not asked about again, "Allow once" sends
// workspace/setNetwork with the workspace's whole allowlist, and in an allowlist workspace the
// allowed connection then goes through.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import * as vscode from "vscode";
import { CellboxClient } from "../src/client";
import { Session } from "../src/session";
import { createServer, type Server } from "node:http";
import { mkdirSync, chmodSync } from "node:fs";
import { networkUI, installCommand, ALLOW_ONCE, ALWAYS_ALLOW, IGNORE } from "../src/networkCommands";
import { blockedMessage, installMessage, formatBytes, ruleFor, ruleHost } from "../src/network";
import { CellboxNotebookController } from "../src/notebook";
import { Methods, type NetworkBlockedParams, type WorkspaceInstallResult } from "../../protocol/protocol";
import { tempEnv, connectStdio, until, Env } from "./helpers";

const fake = vscode as any;
let e: Env;
let c: CellboxClient;
let s: Session;
/** Every request the client sent: [method, params]. */
const sent: [string, any][] = [];
const blocked: NetworkBlockedParams[] = [];

before(async () => {
  e = tempEnv();
  c = await connectStdio(e);
  const request = c.request.bind(c) as (...a: unknown[]) => Promise<unknown>;
  (c as any).request = (method: string, ...rest: unknown[]) => {
    sent.push([method, rest[0]]);
    return request(method, ...rest);
  };
  c.onBlocked((p) => blocked.push(p));
  s = new Session(c, { root: e.project, network: "none" }, networkUI());
});
after(async () => {
  fake.setWarningAnswer(() => undefined);
  await c.dispose();
  e.cleanup();
});

const fetchCode = (host: string) =>
  ["import urllib.request", "try:", `    urllib.request.urlopen('http://${host}/', timeout=20)`, "except Exception as e:", "    print('refused:', type(e).__name__)"].join("\n");

test("the notification's text: the kernel, the rule and the reason", () => {
  const p = { workspaceId: "w", host: "pypi.org", port: 443, reason: "pypi.org is not in the allowlist", kernelId: "k1", rule: "pypi.org:443" };
  assert.equal(blockedMessage(p, "the python kernel of x.ipynb"), "The python kernel of x.ipynb tried to reach pypi.org:443 (pypi.org is not in the allowlist).");
  assert.equal(blockedMessage({ ...p, kernelId: undefined, reason: "" }), "A program in the sandbox tried to reach pypi.org:443.");
  assert.equal(ruleHost("PyPI.org:443"), "pypi.org");
  assert.equal(ruleHost("[::1]:8080"), "::1");
  assert.equal(ruleHost("::1"), "::1");
  assert.equal(ruleHost("*.example.com"), "*.example.com");
  assert.equal(ruleFor({ host: "example.com", port: 80 }), "example.com:80");
  assert.equal(ruleFor({ host: "::1", port: 8080 }), "[::1]:8080");
});

test("a blocked connection is asked about once per host; Allow once sends setNetwork with the rule", async () => {
  const path = join(e.project, "fetch.py");
  const warnings = fake.created.warnings.length;
  let answer!: (v: string | undefined) => void;
  const asked: string[][] = [];
  fake.setWarningAnswer((_m: string, actions: string[]) => {
    asked.push(actions);
    return new Promise((r) => (answer = r));
  });
  const first = await s.run({ path, language: "python", code: fetchCode("blocked.example"), firstLine: 0, lastLine: 4 });
  assert.equal(first.execution.status, "ok", JSON.stringify(first.execution.outputs));
  await until(() => fake.created.warnings.length > warnings, 20000, "the prompt");
  // The cell runs again while the notification shows, and the same host on another port: the
  // daemon reports both, nobody is asked again.
  const seen = blocked.length;
  await s.run({ path, language: "python", code: fetchCode("blocked.example"), firstLine: 0, lastLine: 4 });
  await s.run({ path, language: "python", code: fetchCode("blocked.example:8080"), firstLine: 0, lastLine: 4 });
  await until(() => blocked.length >= seen + 2 && blocked.some((x) => x.port === 8080), 20000, "the second and third network/blocked");
  await new Promise((r) => setImmediate(r));
  const prompts = fake.created.warnings.slice(warnings);
  assert.equal(prompts.length, 1, JSON.stringify(prompts));
  assert.match(prompts[0], /^The python kernel tried to reach blocked\.example:80 \(.+\)\.$/);
  const b = blocked.find((x) => x.host === "blocked.example")!;
  assert.equal(b.port, 80);
  assert.ok(b.reason, "a reason");
  assert.equal(b.kernelId, s.kernels.get("python")?.kernelId);
  assert.deepEqual(asked, [[ALLOW_ONCE, ALWAYS_ALLOW, IGNORE]]);
  const setsBefore = sent.filter(([m]) => m === Methods.WorkspaceSetNetwork).length;
  answer(ALLOW_ONCE);
  await until(() => sent.filter(([m]) => m === Methods.WorkspaceSetNetwork).length > setsBefore, 20000, "workspace/setNetwork");
  const set = sent.filter(([m]) => m === Methods.WorkspaceSetNetwork).at(-1)![1];
  assert.deepEqual(set, { workspaceId: s.workspace!.workspaceId, network: "allowlist", allow: ["blocked.example:80"] });
  assert.deepEqual(s.network.state(s.workspace!.workspaceId).allow, ["blocked.example:80"]);
  // Allow once is for this session: nothing went to the settings.
  assert.deepEqual(fake.configUpdates, []);
});

test("Ignore: nothing is allowed, and the host is not asked about again in this session", async () => {
  const path = join(e.project, "other.py");
  const warnings = fake.created.warnings.length;
  const sets = sent.filter(([m]) => m === Methods.WorkspaceSetNetwork).length;
  fake.setWarningAnswer(() => IGNORE);
  const seen = blocked.length;
  await s.run({ path, language: "python", code: fetchCode("other.example"), firstLine: 0, lastLine: 4 });
  await until(() => fake.created.warnings.length > warnings, 20000, "the prompt");
  await s.run({ path, language: "python", code: fetchCode("other.example"), firstLine: 0, lastLine: 4 });
  await until(() => blocked.filter((x) => x.host === "other.example").length >= 2 && blocked.length > seen, 20000, "the second network/blocked");
  // The policy decides on a prompt as the notification arrives, before any await: once the
  // test's own listener has it, the decision is made (a turn of the event loop for the order
  // of listeners).
  await new Promise((r) => setImmediate(r));
  assert.equal(fake.created.warnings.length - warnings, 1);
  assert.ok(s.network.state(s.workspace!.workspaceId).dismissed.has("other.example"));
  assert.deepEqual(s.network.state(s.workspace!.workspaceId).allow, ["blocked.example:80"]);
  assert.equal(sent.filter(([m]) => m === Methods.WorkspaceSetNetwork).length, sets, "Ignore sends nothing");
});

test("an allowlist kernel of a notebook: Allow always sends the rules and keeps the rule; the connection then goes through", async () => {
  // A server on the host's loopback: reachable from the sandbox only through the daemon's
  // proxy, and only once a rule names it as a literal.
  const server: Server = createServer((_req, res) => res.end("hello from the host"));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  const rule = `127.0.0.1:${port}`;
  const project = join(e.base, "allowlist-project");
  mkdirSync(project);
  chmodSync(project, 0o777);
  const as = new Session(c, { root: project, network: "allowlist", allow: ["pypi.org:443"] }, networkUI());
  const nbc = new CellboxNotebookController(
    async () => as,
    (f) => {
      const d = c.onOutput(f);
      return new fake.Disposable(() => d.dispose());
    },
  );
  const ctrl: any = nbc.controllers[0];
  // The proxy of the sandbox, asked for the host's loopback (NO_PROXY would skip it).
  const code = [
    "import os, urllib.request",
    "for k in ('no_proxy', 'NO_PROXY'): os.environ.pop(k, None)",
    "try:",
    `    print(urllib.request.urlopen('http://${rule}/', timeout=20).read().decode())`,
    "except Exception as e:",
    "    print('refused:', e)",
  ].join("\n");
  const nb: any = { uri: fake.Uri.file("/nb/x.ipynb"), notebookType: "jupyter-notebook", metadata: { metadata: { kernelspec: { name: "python3", language: "python" } } } };
  nb.cells = [{ index: 0, kind: 2, notebook: nb, document: { languageId: "python", getText: () => code, uri: { toString: () => "vscode-notebook-cell:/nb/x.ipynb#0" } } }];
  nb.getCells = () => nb.cells;
  const out = (exec: any) => exec.outputs.flatMap((o: any) => o.items.map((i: any) => i.text)).join("");
  let answer!: (v: string | undefined) => void;
  const warnings = fake.created.warnings.length;
  fake.setWarningAnswer(() => new Promise((r) => (answer = r)));
  const updates = fake.configUpdates.length;
  try {
    await ctrl.executeHandler(nb.cells, nb, ctrl);
    assert.match(out(ctrl.executions.at(-1)), /^refused: /);
    const start = sent.filter(([m]) => m === Methods.KernelStart).at(-1)![1];
    assert.equal(start.network, "allowlist");
    assert.deepEqual(start.allow, ["pypi.org:443"]);
    await until(() => fake.created.warnings.length > warnings, 20000, "the notification");
    const b = blocked.find((x) => x.port === port)!;
    assert.equal(b.kernelId, nbc.kernels.get(nb.uri.toString())!.kernelId);
    assert.equal(ruleFor(b), rule);
    assert.match(fake.created.warnings.at(-1), new RegExp(`^The python kernel of x\\.ipynb tried to reach 127\\.0\\.0\\.1:${port} \\(.+\\)\\.$`));
    const sets = sent.filter(([m]) => m === Methods.WorkspaceSetNetwork).length;
    answer(ALWAYS_ALLOW);
    await until(() => sent.filter(([m]) => m === Methods.WorkspaceSetNetwork).length > sets, 20000, "workspace/setNetwork");
    assert.deepEqual(sent.filter(([m]) => m === Methods.WorkspaceSetNetwork).at(-1)![1], { workspaceId: as.workspace!.workspaceId, network: "allowlist", allow: ["pypi.org:443", rule] });
    await until(() => fake.configUpdates.length > updates, 20000, "the settings");
    assert.deepEqual(fake.configUpdates.slice(updates)[0].slice(0, 2), ["network.allow", [rule]]);
    // The daemon applies it to new connections at once: the same cell now reaches the server.
    await ctrl.executeHandler(nb.cells, nb, ctrl);
    assert.equal(out(ctrl.executions.at(-1)), "hello from the host\n");
  } finally {
    fake.setWarningAnswer(() => undefined);
    nbc.dispose();
    server.close();
  }
});

test("cellbox.install: progress in a notification, then what was installed", async () => {
  await s.ensureWorkspace();
  const workspaceId = s.workspace!.workspaceId;
  const result: WorkspaceInstallResult = {
    installed: [
      { name: "requests", version: "2.31.0" },
      { name: "urllib3", version: "2.0.7" },
    ],
    cacheHits: 3,
    downloadedBytes: 1_234_567,
    durationMs: 2100,
  };
  // The daemon's reply, as PROTOCOL.md §9 gives it: $/progress on the workDoneToken, then the result.
  const request = c.request;
  let params: any;
  (c as any).request = async (method: string, p: any, ...rest: unknown[]) => {
    if (method !== Methods.WorkspaceInstall) return (request as any)(method, p, ...rest);
    params = p;
    const fire = (value: unknown) => (c as any)._onProgress.fire({ token: p.workDoneToken, value });
    fire({ kind: "begin", title: "pip install" });
    fire({ kind: "report", message: "requests 2.31.0: 63 kB, 1 file" });
    fire({ kind: "report", message: "1.2 MB, 4 files" });
    fire({ kind: "end" });
    fire({ kind: "report", message: "after the end" });
    return result;
  };
  fake.setQuickPick((items: any[]) => items.find((i) => i.label === "pip"));
  fake.setInputBox(() => "requests  urllib3");
  const infos = fake.created.infos.length;
  try {
    const message = await installCommand(s);
    assert.deepEqual(params.packages, ["requests", "urllib3"]);
    assert.equal(params.manager, "pip");
    assert.equal(params.workspaceId, workspaceId);
    const shown = fake.progressShown.at(-1);
    assert.equal(shown.title, "cellbox: pip install requests urllib3");
    assert.equal(shown.location, fake.ProgressLocation.Notification);
    assert.deepEqual(shown.messages, ["pip install", "requests 2.31.0: 63 kB, 1 file", "1.2 MB, 4 files"]);
    assert.equal(message, "cellbox: installed requests 2.31.0, urllib3 2.0.7 (3 from cache, 1.2 MB downloaded, 2.1 s)");
    assert.equal(fake.created.infos.at(-1), message);
    assert.ok(fake.created.infos.length > infos);
  } finally {
    (c as any).request = request;
  }
  assert.equal(formatBytes(0), "0 B");
  assert.equal(installMessage({ installed: [], cacheHits: 0, downloadedBytes: 0, durationMs: 40 }), "installed nothing new (0 from cache, 0 B downloaded, 0.0 s)");
});
