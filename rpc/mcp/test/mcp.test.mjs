// End-to-end test of `cellbox mcp` with the official MCP TypeScript SDK
// client, over stdio (the client spawns `cellbox mcp`) or Streamable HTTP
// (/mcp of a running `cellbox serve --listen`). cmd/cellbox/mcp_e2e_test.go
// runs it with node --test and sets:
//
//   CELLBOX_BIN            the cellbox binary
//   CELLBOX_MCP_TRANSPORT  stdio or http
//   CELLBOX_MCP_PROJECT    the project directory (stdio: the server's --root)
//   CELLBOX_MCP_URL        http: the daemon's base URL; CELLBOX_MCP_TOKEN its token
//
// and the daemon's environment (CELLBOX_STATE_DIR, XDG_RUNTIME_DIR), which
// the spawned server inherits. Steps run in order on one workspace; each is
// its own subtest, so one failing leaves the others to say what works.

import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, lstatSync, readlinkSync, existsSync, rmSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const bin = process.env.CELLBOX_BIN;
const transportKind = process.env.CELLBOX_MCP_TRANSPORT;
const project = process.env.CELLBOX_MCP_PROJECT;
assert.ok(bin && transportKind && project, "CELLBOX_BIN, CELLBOX_MCP_TRANSPORT and CELLBOX_MCP_PROJECT are set by mcp_e2e_test.go");

const TOOLS = ["changes", "checkpoint", "commit", "discard", "install", "poll", "read_file", "restore", "run", "stop", "write_file"];

// connect starts a client over the transport under test.
async function connect(extraArgs = [], toolsets = "") {
  let transport;
  if (toolsets && transportKind === "stdio") extraArgs = [...extraArgs, "--toolsets", toolsets];
  if (transportKind === "stdio") {
    transport = new StdioClientTransport({
      command: bin,
      args: ["mcp", "--root", project, ...extraArgs],
      cwd: project,
      env: process.env, // the daemon's state dir and runtime dir
      stderr: "inherit",
    });
  } else {
    // Over HTTP the daemon's --mcp-toolsets decides (mcp_e2e_test.go starts it with apps).
    const url = new URL("/mcp", process.env.CELLBOX_MCP_URL);
    transport = new StreamableHTTPClientTransport(url, {
      requestInit: { headers: { Authorization: `Bearer ${process.env.CELLBOX_MCP_TOKEN}` } },
    });
  }
  const client = new Client({ name: "cellbox-e2e", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

// call calls a tool and returns its result (options: onprogress...).
async function call(client, name, args, options = {}) {
  return client.callTool({ name, arguments: args }, undefined, { timeout: 120_000, ...options });
}

// ok calls a tool that must succeed and returns its structured output.
async function ok(client, name, args, options) {
  const res = await call(client, name, args, options);
  assert.ok(!res.isError, `${name} failed: ${JSON.stringify(res.content)}`);
  assert.ok(res.structuredContent, `${name} has no structured content`);
  return { out: res.structuredContent, res };
}

// toolError calls a tool that must fail and returns its text.
async function toolError(client, name, args) {
  const res = await call(client, name, args);
  assert.equal(res.isError, true, `${name} succeeded: ${JSON.stringify(res.structuredContent)}`);
  return res.content.map((c) => c.text ?? "").join("\n");
}

// treeHash hashes a directory tree: names, modes, contents, link targets.
function treeHash(dir) {
  const h = createHash("sha256");
  const walk = (d, rel) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      const st = lstatSync(p);
      h.update(`${rel}${name}\0${st.mode}\0`);
      if (st.isDirectory()) walk(p, `${rel}${name}/`);
      else if (st.isSymbolicLink()) h.update(readlinkSync(p));
      else h.update(readFileSync(p));
    }
  };
  walk(dir, "");
  return h.digest("hex");
}

function pngSize(buf) {
  assert.equal(buf.subarray(1, 4).toString(), "PNG", "not a PNG");
  return { width: buf.readUInt32BE(16), height: buf.readUInt32BE(20) };
}

const projectHash = treeHash(project);

test(`cellbox mcp over ${transportKind}`, { timeout: 600_000 }, async (t) => {
  const client = await connect();
  t.after(() => client.close());

  await t.test("eleven tools, each with an input and an output schema", async () => {
    const { tools } = await client.listTools();
    // Over HTTP the daemon runs with --mcp-toolsets apps (the apps toolset's own test below).
    const want = transportKind === "stdio" ? TOOLS : [...TOOLS, "expose_port", "export_app"].sort();
    assert.deepEqual(tools.map((x) => x.name).sort(), want);
    for (const tool of tools) {
      assert.equal(tool.inputSchema?.type, "object", `${tool.name} inputSchema`);
      assert.equal(tool.outputSchema?.type, "object", `${tool.name} outputSchema`);
      assert.ok(tool.description && tool.description.length < 300, `${tool.name}: a short description`);
    }
    const run = tools.find((x) => x.name === "run");
    assert.deepEqual(run.inputSchema.required, ["code"]);
    assert.ok(run.outputSchema.properties.filesChanged, "run's output has filesChanged");
    const instructions = client.getInstructions();
    assert.match(instructions, /write_file/);
    assert.match(instructions, /overlay/);
  });

  let firstRun;
  await t.test("test before write: a failing test points at file:line, an edit fixes it", async () => {
    await ok(client, "write_file", { path: "src/calc.py", content: "def add(a, b):\n    return a - b\n" });
    const test = [
      "import sys",
      "sys.path.insert(0, 'src')",
      "from calc import add",
      "",
      "def test_add():",
      "    assert add(2, 3) == 5, 'add(2, 3) should be 5'",
      "",
    ].join("\n");
    await ok(client, "write_file", { path: "tests/test_calc.py", content: test });
    const runTests = [
      "import importlib, sys",
      "sys.path[:0] = [p for p in ('src', 'tests') if p not in sys.path]",
      "import calc, test_calc",
      "importlib.reload(calc); importlib.reload(test_calc)",
      "test_calc.test_add()",
      "print('tests passed')",
    ].join("\n");
    const failed = (await ok(client, "run", { code: runTests })).out;
    firstRun = failed;
    assert.equal(failed.status, "error");
    assert.equal(failed.error.ename, "AssertionError");
    assert.match(failed.error.evalue, /add\(2, 3\) should be 5/);
    assert.equal(failed.error.location, "tests/test_calc.py:6");
    assert.match(failed.error.traceback, /File "tests\/test_calc.py", line 6, in test_add/);
    assert.doesNotMatch(failed.error.traceback, /\x1b\[/);

    const fixed = await ok(client, "write_file", { path: "src/calc.py", edits: [{ search: "return a - b", replace: "return a + b" }] });
    assert.equal(fixed.out.size, "def add(a, b):\n    return a + b\n".length);
    const passed = (await ok(client, "run", { code: runTests })).out;
    assert.equal(passed.status, "ok", JSON.stringify(passed.error));
    assert.equal(passed.stdout, "tests passed\n");

    const read = await ok(client, "read_file", { path: "src/calc.py", startLine: 2, endLine: 2 });
    assert.equal(read.res.content[0].text, "    return a + b\n");
    assert.equal(read.out.totalLines, 2);
  });

  await t.test("a run names the automatic checkpoint taken before it", async () => {
    assert.ok(firstRun, "the first run ran");
    assert.ok(firstRun.checkpoint, `run reported no checkpoint: ${JSON.stringify(firstRun)}`);
  });

  await t.test("a run reports the files it changed, even through a shell", async () => {
    const { out } = await ok(client, "run", {
      code: "import subprocess\nsubprocess.run('mkdir -p out && echo hello > out/gen.txt', shell=True, check=True)\nNone",
    });
    assert.equal(out.status, "ok", JSON.stringify(out));
    assert.deepEqual(out.filesChanged, [{ path: "out/gen.txt", kind: "added" }]);
    const { out: ch } = await ok(client, "changes", { paths: ["out"], diff: true });
    assert.deepEqual(ch.changes.map((c) => [c.path, c.kind]), [["out/gen.txt", "added"]]);
    assert.match(ch.diff, /\+hello/);
  });

  await t.test("a long run answers running, sends progress, and poll gets every line", async () => {
    const progress = [];
    const onprogress = (p) => progress.push(p);
    const code = "import time\nfor i in range(12):\n    print(f'tick {i}', flush=True)\n    time.sleep(0.5)\n";
    const started = Date.now();
    const { out: first } = await ok(client, "run", { code, waitS: 1 }, { onprogress });
    assert.equal(first.status, "running", JSON.stringify(first));
    assert.ok(Date.now() - started < 5000, "run waited about waitS");
    assert.ok(first.executionId);
    let stdout = first.stdout;
    let last = first;
    for (let i = 0; i < 30 && last.status === "running"; i++) {
      last = (await ok(client, "poll", { executionId: first.executionId, waitS: 2 }, { onprogress })).out;
      stdout += last.stdout;
    }
    assert.equal(last.status, "ok", JSON.stringify(last));
    const want = Array.from({ length: 12 }, (_, i) => `tick ${i}\n`).join("");
    assert.equal(stdout, want, "every line once, in order, across run and polls");
    assert.ok(progress.length >= 2, `${progress.length} progress notifications`);
    for (const p of progress) assert.match(p.message ?? "", /^(tick \d+|running for \d+ s)$/);
    assert.ok(progress.filter((p) => /^tick \d+$/.test(p.message)).length >= 2, "progress carries the last line printed");
    for (let i = 1; i < progress.length; i++) assert.ok(progress[i].progress > progress[i - 1].progress || progress[i].progress >= 1);
  });

  let saved;
  await t.test("checkpoint, rm -rf src in a run, restore brings it back", async () => {
    saved = (await ok(client, "checkpoint", { name: "before rm" })).out;
    assert.ok(saved.checkpointId);
    assert.equal(saved.checkpoints.at(-1).checkpointId, saved.checkpointId);
    assert.equal(saved.checkpoints.at(-1).name, "before rm");
    const { out: rm } = await ok(client, "run", { code: "import subprocess\nsubprocess.run('rm -rf src', shell=True, check=True)\nNone" });
    assert.equal(rm.status, "ok");
    const gone = await toolError(client, "read_file", { path: "src/calc.py" });
    assert.match(gone, /NotFound/);
    const { out: restored } = await ok(client, "restore", { checkpointId: saved.checkpointId });
    assert.ok(restored.restored.includes("src/calc.py"), JSON.stringify(restored));
    assert.match(restored.note, /not rolled back/);
    const { res } = await ok(client, "read_file", { path: "src/calc.py" });
    assert.equal(res.content[0].text, "def add(a, b):\n    return a + b\n");
  });

  await t.test("the rm -rf run reported its deletions", async () => {
    const { out } = await ok(client, "run", { code: "import subprocess\nsubprocess.run('rm -rf out', shell=True, check=True)\nNone" });
    assert.ok(out.filesChanged.some((f) => f.path === "out/gen.txt" && f.kind === "deleted"), JSON.stringify(out.filesChanged));
    assert.ok(out.filesChanged.every((f) => f.kind === "deleted" && (f.path === "out" || f.path.startsWith("out/"))), JSON.stringify(out.filesChanged));
    // Restoring the run's own checkpoint undoes it.
    assert.ok(out.checkpoint, "the run names its checkpoint");
    await ok(client, "restore", { checkpointId: out.checkpoint });
    const { res } = await ok(client, "read_file", { path: "out/gen.txt" });
    assert.equal(res.content[0].text, "hello\n");
  });

  await t.test("an image comes back as image content, fitted, with the full size as a resource", async () => {
    const code = [
      "import struct, zlib",
      "def png(w, h):",
      "    rows = b''.join(b'\\x00' + bytes(v for x in range(w) for v in (x * 255 // w, y * 255 // h, 128)) for y in range(h))",
      "    chunk = lambda t, d: struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))",
      "    return b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0)) + chunk(b'IDAT', zlib.compress(rows)) + chunk(b'IEND', b'')",
      "display({'image/png': png(1500, 300), 'text/plain': '<gradient 1500x300>'}, raw=True)",
    ].join("\n");
    const { out, res } = await ok(client, "run", { code });
    assert.equal(out.status, "ok", JSON.stringify(out.error));
    assert.equal(out.images.length, 1);
    const img = out.images[0];
    assert.deepEqual([img.width, img.height, img.originalWidth, img.originalHeight], [1024, 204, 1500, 300]);
    assert.deepEqual(out.displays, ["<gradient 1500x300>"]);
    const content = res.content.find((c) => c.type === "image");
    assert.ok(content, "image content");
    const data = Buffer.from(content.data, "base64");
    assert.ok(data.length <= 256 * 1024);
    assert.deepEqual(pngSize(data), { width: 1024, height: 204 });
    const link = res.content.find((c) => c.type === "resource_link" && c.uri === img.uri);
    assert.ok(link, "a resource link to the full size");
    const full = await client.readResource({ uri: img.uri });
    assert.deepEqual(pngSize(Buffer.from(full.contents[0].blob, "base64")), { width: 1500, height: 300 });
  });

  await t.test("long output is bounded, the whole is a resource", async () => {
    const { out } = await ok(client, "run", { code: "for i in range(5000):\n    print(f'line {i:04d}')" });
    assert.ok(out.stdout.length < 9000, `${out.stdout.length} bytes of stdout in the result`);
    assert.ok(out.stdout.startsWith("line 0000\n") && out.stdout.endsWith("line 4999\n"));
    const m = out.stdout.match(/… (\d+) lines omitted \(\d+ bytes\); full output: (cellbox:\/\/executions\/[^/]+\/stdout)/);
    assert.ok(m, out.stdout.slice(3000, 5000));
    const whole = await client.readResource({ uri: m[2] });
    assert.equal(whole.contents[0].text.split("\n").length, 5001);
  });

  await t.test("stop interrupts a run, restart clears the kernel; timeoutS and stdin", async () => {
    await ok(client, "run", { code: "before_stop = 1" });
    const { out: running } = await ok(client, "run", { code: "import time\nprint('looping', flush=True)\nwhile True:\n    time.sleep(0.05)", waitS: 1 });
    assert.equal(running.status, "running");
    const { out: stopped } = await ok(client, "stop", {});
    assert.equal(stopped.executionId, running.executionId);
    assert.equal(stopped.status, "interrupted", JSON.stringify(stopped));
    const { out: after } = await ok(client, "poll", { executionId: running.executionId });
    assert.equal(after.status, "interrupted");
    assert.equal(after.error?.ename, "KeyboardInterrupt");
    assert.equal((await ok(client, "run", { code: "before_stop" })).out.result, "1", "an interrupt keeps the kernel's state");
    const { out: restarted } = await ok(client, "stop", { restart: true });
    assert.equal(restarted.status, "restarted");
    assert.match(restarted.note, /in-memory state .* is lost/);
    const { out: gone } = await ok(client, "run", { code: "before_stop" });
    assert.equal(gone.status, "error");
    assert.equal(gone.error.ename, "NameError");
    const { out: late } = await ok(client, "run", { code: "import time\ntime.sleep(30)", timeoutS: 1 });
    assert.equal(late.status, "timeout", JSON.stringify(late));
    const { out: fed } = await ok(client, "run", { code: "input() + '/' + input()", stdin: "one\ntwo\n" });
    assert.equal(fed.result, "'one/two'");
  });

  await t.test("errors: bad input is a tool error that names it", async () => {
    assert.match(await toolError(client, "poll", { executionId: "mcp-nope" }), /unknown executionId "mcp-nope"/);
    assert.match(await toolError(client, "write_file", { path: "src/calc.py", edits: [{ search: "nope", replace: "x" }] }), /edit 1: search text not found/);
    assert.match(await toolError(client, "write_file", { path: "../outside.txt", content: "x" }), /^PathOutsideWorkspace: /);
    assert.match(await toolError(client, "run", { code: "1", language: "cobol" }), /^InvalidParams: start a cobol kernel: .*python/);
  });

  await t.test("commit is refused without --allow-commit", async () => {
    assert.match(await toolError(client, "commit", {}), /commit is off: the human reviews and commits from an editor \(start cellbox mcp with --allow-commit to allow it\)/);
  });

  await t.test("the project is untouched", () => {
    assert.equal(treeHash(project), projectHash);
  });

  if (transportKind !== "stdio") return;

  await t.test("a new server finds the workspace and its kernel; with --allow-commit it commits", async () => {
    await ok(client, "run", { code: "kept = 'state of the kernel'" });
    await client.close();
    const again = await connect(["--allow-commit"]);
    try {
      const { out } = await ok(again, "run", { code: "kept" });
      assert.equal(out.result, "'state of the kernel'", "the new server attached to the same kernel");
      const { out: ch } = await ok(again, "changes", {});
      assert.ok(ch.changes.some((c) => c.path === "src/calc.py"), "the same workspace, with its changes");
      const { out: done } = await ok(again, "commit", { paths: ["src/calc.py", "tests/test_calc.py"], message: "add: fix the sign" });
      assert.deepEqual(done.applied.sort(), ["src/calc.py", "tests/test_calc.py"]);
      assert.deepEqual(done.conflicts, []);
      assert.equal(readFileSync(join(project, "src/calc.py"), "utf8"), "def add(a, b):\n    return a + b\n");
      assert.notEqual(treeHash(project), projectHash);
    } finally {
      await again.close();
    }
  });
});

// The opt-in apps toolset (PROTOCOL.md §11 for agents): a server the agent
// starts in the sandbox gets a preview URL the human's browser (here,
// node's fetch) opens, and the workspace is exported as a bundle.
test(`cellbox mcp's apps toolset over ${transportKind}`, { timeout: 600_000 }, async (t) => {
  if (transportKind === "stdio") {
    const plain = await connect();
    const { tools: plainTools } = await plain.listTools();
    await plain.close();
    assert.ok(!plainTools.some((x) => x.name === "expose_port"), "expose_port is opt-in");
  }

  const client = await connect([], "apps");
  t.after(() => client.close());

  await t.test("expose_port and export_app are listed, and the instructions say how to use them", async () => {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((x) => x.name).sort(), [...TOOLS, "expose_port", "export_app"].sort());
    assert.match(client.getInstructions(), /expose_port/);
  });

  await t.test("a server started by run is reached through expose_port's URL", async () => {
    const start = [
      "import http.server, threading",
      "class H(http.server.BaseHTTPRequestHandler):",
      "    def do_GET(self):",
      "        body = b'hello from the agent app'",
      "        self.send_response(200); self.send_header('Content-Length', str(len(body))); self.end_headers(); self.wfile.write(body)",
      "    def log_message(self, *a): pass",
      "app_srv = http.server.ThreadingHTTPServer(('0.0.0.0', 8010), H)",
      "threading.Thread(target=app_srv.serve_forever, daemon=True).start()",
      "print('serving')",
    ].join("\n");
    const started = (await ok(client, "run", { code: start })).out;
    assert.equal(started.status, "ok", JSON.stringify(started));
    const { out } = await ok(client, "expose_port", { port: 8010 });
    assert.equal(out.port, 8010);
    assert.match(out.url, /^http:\/\/127\.0\.0\.1:\d+\/\?cellbox-preview=/);
    const named = new URL(out.browserUrl);
    assert.equal(named.hostname, `${out.previewId}.localhost`, "the human's URL: a name of its own");
    assert.equal(named.port, new URL(out.url).port, "the same server");
    assert.notEqual(named.searchParams.get("cellbox-preview"), new URL(out.url).searchParams.get("cellbox-preview"), "a token of its own");
    const resp = await fetch(out.url);
    assert.equal(resp.status, 200);
    assert.equal(await resp.text(), "hello from the agent app");
    const again = (await ok(client, "expose_port", { port: 8010 })).out;
    assert.equal(again.previewId, out.previewId, "the same port is the same preview");
    assert.match(await toolError(client, "expose_port", { port: 0 }), /not a TCP port/);
  });

  await t.test("export_app writes a runnable bundle into the exports directory, by name", async () => {
    const name = `bundle-${transportKind}-${process.pid}-${Date.now()}`;
    const dest = join(process.env.XDG_DATA_HOME || join(homedir(), ".local", "share"), "cellbox", "exports", name);
    const { out } = await ok(client, "export_app", { name, command: ["python3", "-m", "http.server", "8000"] });
    assert.equal(out.path, dest);
    assert.ok(out.files > 0 && out.bytes > 0, JSON.stringify(out));
    for (const f of ["Dockerfile", "compose.yaml", "README.md"]) {
      assert.ok(existsSync(join(dest, f)), `the bundle has ${f}`);
    }
    assert.match(readFileSync(join(dest, "Dockerfile"), "utf8"), /http\.server/);
    rmSync(dest, { recursive: true, force: true });
    // An agent names a bundle, never a host path.
    for (const bad of ["../escape", "/etc/cron.d", ".hidden", "a/b", ""]) {
      assert.match(await toolError(client, "export_app", { name: bad }), /a bundle's name/, bad);
    }
  });
});
