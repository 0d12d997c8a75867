// The client against the real daemon: connect + initialize over stdio (`cellbox connect` and
// `serve --stdio`) and over a websocket with a token; completion offsets in UTF-16.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { CellboxClient } from "../src/client";
import { Methods } from "../../protocol/protocol";
import { Session } from "../src/session";
import { bin, tempEnv, connectStdio } from "./helpers";

test("initialize over serve --stdio: protocol 1, utf-16 positions, languages", async () => {
  const e = tempEnv();
  const c = await connectStdio(e);
  try {
    assert.equal(c.info?.protocolVersion, 1);
    assert.equal(c.info?.serverInfo.name, "cellbox");
    assert.equal(c.info?.capabilities.positionEncoding, "utf-16");
    const ids = c.info!.capabilities.languages.map((l) => l.id);
    for (const l of ["python", "javascript", "bash"]) assert.ok(ids.includes(l), `language ${l} in ${ids}`);
    const s = new Session(c);
    assert.equal(s.languageFor("python"), "python");
    assert.equal(s.languageFor("shellscript"), "bash");
    assert.equal(s.languageFor("plaintext", "/x/script.mjs"), "javascript");
    assert.equal(s.languageFor("plaintext", "/x/notes.txt"), undefined);
  } finally {
    await c.dispose();
    e.cleanup();
  }
});

test("`cellbox connect` (the default spawn) bridges to a long-lived daemon that a second client reaches", async () => {
  const e = tempEnv();
  const started: number[] = [];
  try {
    const a = await CellboxClient.connect({ path: bin(), env: e.env, cwd: e.project, log: (l) => e.logs.push(l) });
    const s = new Session(a);
    const k = await s.kernel("python");
    const r = await s.run({ path: join(e.project, "a.py"), language: "python", code: "kept = 41", firstLine: 0, lastLine: 0 });
    assert.equal(r.execution.status, "ok");
    // The editor goes away without shutting the kernel down (deactivate): the kernel outlives it.
    a.close();
    await new Promise((r) => setTimeout(r, 100));
    const b = await CellboxClient.connect({ path: bin(), env: e.env, cwd: e.project });
    const list = await b.request(Methods.KernelList, {});
    assert.ok(list.kernels.some((x) => x.kernelId === k.kernelId), "kernel still listed after reconnect");
    const s2 = new Session(b);
    await s2.useKernel(k.kernelId, "python");
    const r2 = await s2.run({ path: join(e.project, "a.py"), language: "python", code: "kept + 1", firstLine: 0, lastLine: 0 });
    const res = r2.execution.outputs.find((o) => o.kind === "result");
    assert.equal(res && res.kind === "result" ? res.data["text/plain"] : undefined, "42");
    await b.request(Methods.KernelShutdown, { kernelId: k.kernelId });
    await b.dispose();
  } finally {
    // Stop the daemon `cellbox connect` started (its runtime file holds the pid).
    const dir = join(e.base, "run", "cellbox");
    let files: string[] = [];
    try {
      files = readdirSync(dir).filter((f) => /^server-\d+\.json$/.test(f));
    } catch {
      // no daemon was started
    }
    for (const f of files) {
      try {
        const pid = JSON.parse(readFileSync(join(dir, f), "utf8")).pid;
        if (pid) {
          started.push(pid);
          process.kill(pid, "SIGTERM");
        }
      } catch (err) {
        console.error("cleanup:", err);
      }
    }
    assert.ok(started.length >= 1, "the daemon that connect started was found");
    await new Promise((r) => setTimeout(r, 200));
    e.cleanup();
  }
});

test("websocket with a token (cellbox.connection), and a wrong token is refused", async () => {
  const e = tempEnv();
  const proc = spawn(bin(), ["serve", "--listen", "127.0.0.1:0"], { cwd: e.project, env: e.env, stdio: ["ignore", "pipe", "pipe"] });
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let out = "";
      const t = setTimeout(() => reject(new Error("no URL printed")), 20000);
      proc.stdout!.on("data", (b) => {
        out += b;
        const m = out.match(/http:\/\/\S+\?token=\S+/);
        if (m) {
          clearTimeout(t);
          resolve(m[0]);
        }
      });
    });
    const u = new URL(url);
    const wsURL = `ws://${u.host}/rpc`;
    await assert.rejects(CellboxClient.connect({ url: wsURL, token: "wrong" }), /401/);
    const c = await CellboxClient.connect({ url: wsURL, token: u.searchParams.get("token")! });
    assert.equal(c.info?.capabilities.positionEncoding, "utf-16");
    const s = new Session(c);
    const k = await s.kernel("python");
    // UTF-16 offsets: an astral character before the cursor counts as 2 units, as in VS Code.
    const code = "s = '😀'; import os\nos.pa";
    const cr = await c.request(Methods.KernelComplete, { kernelId: k.kernelId, code, cursorPos: code.length });
    assert.equal(cr.cursorEnd, code.length);
    assert.ok(cr.matches.some((m) => m === "path" || m === "os.path"), `matches ${cr.matches}`);
    const hv = await c.request(Methods.KernelInspect, { kernelId: k.kernelId, code: "len", cursorPos: 3, detailLevel: 0 });
    assert.ok(hv.found && String(hv.data?.["text/plain"]).includes("len("));
    await c.dispose();
  } finally {
    proc.kill("SIGTERM");
    await new Promise((r) => proc.once("exit", r));
    e.cleanup();
  }
});
