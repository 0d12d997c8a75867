// Unit tests of the client library against the real daemon binary
// (CELLBOX_BIN). run.sh bundles this file with esbuild and runs it with
// node --test.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { CellboxClient, ConnectionLostError, RPCError, Methods, ErrorCodes, type KernelOutputParams, type PtyOutputParams, type ConnectionState } from "../client/client";
// @ts-expect-error: a plain JS helper, without types
import { startDaemon, waitFor } from "./daemon.mjs";

let d: any;
before(async () => {
  d = await startDaemon({ files: { "hello.txt": "hello\n" } });
});
after(async () => {
  await d?.stop();
});

function connect(extra: object = {}) {
  return CellboxClient.connect({ url: d.wsURL, token: d.token, clientInfo: { name: "client.test" }, backoff: { initialMs: 50, maxMs: 400 }, ...extra });
}

test("a wrong token is refused before initialize", async () => {
  await assert.rejects(CellboxClient.connect({ url: d.wsURL, token: "wrong", reconnect: false }), ConnectionLostError);
});

test("initialize, requests, errors and notifications", async () => {
  const c = await connect();
  try {
    assert.equal(c.state, "open");
    assert.equal(c.initializeResult!.protocolVersion, 1);
    assert.ok(c.initializeResult!.capabilities.languages.some((l) => l.id === "python" && l.available));
    await assert.rejects(c.request("no/such"), (e: any) => e instanceof RPCError && e.code === -32601);
    const ws = await c.request(Methods.WorkspaceOpen, {});
    assert.equal(ws.root, d.project);
    const list = await c.request(Methods.FsList, { workspaceId: ws.workspaceId });
    assert.ok(list.entries.some((e) => e.path === "hello.txt"));
    const out: KernelOutputParams[] = [];
    c.on(Methods.KernelOutput, (p) => out.push(p));
    const k = await c.request(Methods.KernelStart, { language: "python", workspaceId: ws.workspaceId });
    await c.followKernel(k.kernelId, false);
    const r = await c.request(Methods.KernelExecute, { kernelId: k.kernelId, code: "print('hi there')\n6*7" });
    assert.equal(r.status, "ok");
    assert.equal(r.executionCount, 1);
    assert.deepEqual(out.map((o) => o.kind), ["stream", "result"]);
    assert.equal(out[0].text, "hi there\n");
    assert.equal((out[1].data as any)["text/plain"], "42");
    assert.equal(c.lastSeq(k.kernelId), out[1].seq);
    // A cancelled request ends with -32800 and interrupts the code.
    const ac = new AbortController();
    const p = c.request(Methods.KernelExecute, { kernelId: k.kernelId, code: "import time\ntime.sleep(30)" }, { signal: ac.signal });
    await waitFor(() => out.length >= 2, { what: "nothing" });
    setTimeout(() => ac.abort(), 300);
    await assert.rejects(p, (e: any) => e instanceof RPCError && e.code === ErrorCodes.RequestCancelled);
    await c.request(Methods.KernelShutdown, { kernelId: k.kernelId });
  } finally {
    await c.close({ shutdown: true });
  }
  assert.equal(c.state, "closed");
  await assert.rejects(c.request(Methods.KernelList), ConnectionLostError);
});

test("reconnect re-attaches a kernel from fromSeq: every output once, in order", async () => {
  const c = await connect();
  const states: ConnectionState[] = [];
  c.onState((s) => states.push(s));
  let reconnected = 0;
  c.onReconnected(() => {
    reconnected++;
  });
  try {
    const k = await c.request(Methods.KernelStart, { language: "python" });
    await c.followKernel(k.kernelId, false);
    const lines: string[] = [];
    c.on(Methods.KernelOutput, (p: KernelOutputParams) => {
      if (p.kind === "stream") lines.push(...p.text!.split("\n").filter(Boolean));
    });
    const code = "import time, sys\nfor i in range(12):\n    print(i, flush=True)\n    time.sleep(0.15)\n";
    const exec = c.request(Methods.KernelExecute, { kernelId: k.kernelId, code });
    await waitFor(() => lines.length >= 2, { what: "first lines" });
    c.drop();
    await assert.rejects(exec, ConnectionLostError); // its result is lost with the connection
    await waitFor(() => reconnected === 1, { what: "reconnect" });
    assert.ok(states.includes("reconnecting"), `states: ${states}`);
    assert.equal(c.state, "open");
    await waitFor(() => lines.length >= 12, { what: "all 12 lines" });
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(lines, Array.from({ length: 12 }, (_, i) => String(i)));
    // The kernel and its state are there on the new connection.
    const r = await c.request(Methods.KernelExecute, { kernelId: k.kernelId, code: "print(i)" });
    assert.equal(r.status, "ok");
    assert.equal(lines.at(-1), "11");
    await c.request(Methods.KernelShutdown, { kernelId: k.kernelId });
  } finally {
    await c.close();
  }
});

test("reconnect re-attaches a terminal from fromSeq", async () => {
  const c = await connect();
  let reconnected = 0;
  c.onReconnected(() => {
    reconnected++;
  });
  try {
    const ws = await c.request(Methods.WorkspaceOpen, {});
    let text = "";
    const seqs: number[] = [];
    c.on(Methods.PtyOutput, (p: PtyOutputParams) => {
      text += p.data;
      seqs.push(p.seq);
    });
    const { ptyId } = await c.request(Methods.PtyOpen, { workspaceId: ws.workspaceId, cols: 80, rows: 24, command: ["/bin/sh"] });
    await c.followPty(ptyId, false);
    await c.request(Methods.PtyWrite, { ptyId, data: "echo one-$((40+2))\n" });
    await waitFor(() => text.includes("one-42"), { what: "first echo" });
    c.drop();
    await waitFor(() => reconnected === 1 && c.state === "open", { what: "reconnect" });
    await c.request(Methods.PtyWrite, { ptyId, data: "echo two-$((40+3))\n" });
    await waitFor(() => text.includes("two-43"), { what: "second echo" });
    for (let i = 1; i < seqs.length; i++) assert.equal(seqs[i], seqs[i - 1] + 1, `seqs ${seqs}`);
    assert.equal(text.split("one-42").length - 1, 1, "no output delivered twice");
    await c.request(Methods.PtyResize, { ptyId, cols: 100, rows: 30 });
    await c.request(Methods.PtyAck, { ptyId, seq: seqs.at(-1) });
    await c.request(Methods.PtyClose, { ptyId });
  } finally {
    await c.close();
  }
});

test("server-to-client requests are answered by handle()", async () => {
  const c = await connect({ capabilities: { inputRequest: true } });
  try {
    c.handle(Methods.KernelInputRequest, (p) => ({ value: `answer to ${p.prompt.trim()}` }));
    const k = await c.request(Methods.KernelStart, { language: "python" });
    const out: string[] = [];
    c.on(Methods.KernelOutput, (p: KernelOutputParams) => p.text && out.push(p.text));
    const r = await c.request(Methods.KernelExecute, { kernelId: k.kernelId, code: "x = input('q?')\nprint(x.upper())", allowStdin: true });
    assert.equal(r.status, "ok");
    assert.match(out.join(""), /ANSWER TO Q\?/);
    await c.request(Methods.KernelShutdown, { kernelId: k.kernelId });
  } finally {
    await c.close();
  }
});

// A cell that reads twice (input(), then getpass()) is asked twice, run after
// run: the daemon ends one question before the driver can ask the next (it
// once answered first, and a second question that came quickly enough was
// refused as "another is pending", leaving the cell waiting forever).
test("two reads in one execution are both asked, in every run", async () => {
  const c = await connect({ capabilities: { inputRequest: true } });
  try {
    const asked: string[] = [];
    c.handle(Methods.KernelInputRequest, (p) => {
      asked.push(`${p.prompt.trim()}${p.password ? " (password)" : ""}`);
      return { value: `v${asked.length}` };
    });
    const k = await c.request(Methods.KernelStart, { language: "python" });
    for (let i = 0; i < 20; i++) {
      const r = await c.request(Methods.KernelExecute, { kernelId: k.kernelId, code: "import getpass\nprint(input('a?') + getpass.getpass('b?'))", allowStdin: true, timeoutMs: 30_000 });
      assert.equal(r.status, "ok", `run ${i}: ${JSON.stringify(r)}`);
    }
    assert.equal(asked.length, 40);
    assert.deepEqual(asked.slice(0, 2), ["a?", "b? (password)"]);
    await c.request(Methods.KernelShutdown, { kernelId: k.kernelId });
  } finally {
    await c.close();
  }
});

test("backoff: reconnects to a daemon that comes back; kernels it no longer has are dropped", async () => {
  const token = "0123456789abcdef0123456789abcdef";
  let d1: any = await startDaemon({ args: ["--token", token] });
  const listen = new URL(d1.url).host;
  const c = await CellboxClient.connect({ url: d1.wsURL, token, backoff: { initialMs: 50, maxMs: 200 } });
  const states: string[] = [];
  c.onState((s, detail) => states.push(`${s}${detail ? ` ${detail}` : ""}`));
  let reconnected = 0;
  c.onReconnected(() => {
    reconnected++;
  });
  let d2: any;
  try {
    const k = await c.request(Methods.KernelStart, { language: "python" });
    await c.followKernel(k.kernelId, false);
    assert.deepEqual(c.following().kernels, [k.kernelId]);
    await d1.stop();
    d1 = undefined;
    await waitFor(() => states.filter((s) => s.startsWith("reconnecting") && s.includes("retrying")).length >= 3, { what: "several attempts" });
    assert.equal(c.state, "reconnecting");
    await assert.rejects(c.request(Methods.KernelList), ConnectionLostError);
    d2 = await startDaemon({ args: ["--token", token], listen });
    await waitFor(() => reconnected === 1, { what: "reconnect to the new daemon" });
    assert.equal(c.state, "open");
    assert.deepEqual(c.following().kernels, [], "the new daemon does not have the kernel: no longer followed");
    const list = await c.request(Methods.KernelList, {});
    assert.deepEqual(list.kernels, []);
  } finally {
    await c.close();
    await d1?.stop();
    await d2?.stop();
  }
});
