// Starts the real cellbox binary for the browser tests: a fresh project
// dir, state dir and runtime dir; `cellbox serve --listen 127.0.0.1:0`;
// resolves with the URL it prints (with ?token=).
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export async function startDaemon({ files = {}, args = [], listen = "127.0.0.1:0", env: extraEnv = {}, setup } = {}) {
  const bin = process.env.CELLBOX_BIN;
  if (!bin) throw new Error("CELLBOX_BIN is not set: run the tests with editors/browser/test/run.sh");
  const base = mkdtempSync(join(tmpdir(), "cellbox-browser-test-"));
  const project = join(base, "project");
  const state = join(base, "state");
  const run = join(base, "run");
  for (const d of [project, state, run]) mkdirSync(d, { recursive: true, mode: 0o700 });
  const { writeFileSync, chmodSync } = await import("node:fs");
  const { dirname } = await import("node:path");
  chmodSync(base, 0o755);
  chmodSync(project, 0o777);
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(dirname(join(project, name)), { recursive: true });
    writeFileSync(join(project, name), content);
  }
  // setup(project): makes the project what a test needs (a git repository) before the daemon starts.
  if (setup) await setup(project);
  const env = { ...process.env, ...extraEnv, CELLBOX_STATE_DIR: state, XDG_RUNTIME_DIR: run, CELLBOX_LOG_LEVEL: process.env.CELLBOX_LOG_LEVEL ?? "warn" };
  const proc = spawn(bin, ["serve", "--listen", listen, ...args], { cwd: project, env, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  proc.stderr.on("data", (b) => {
    stderr += b;
    if (process.env.CELLBOX_TEST_VERBOSE) process.stderr.write(b);
  });
  const url = await new Promise((resolve, reject) => {
    let out = "";
    const t = setTimeout(() => reject(new Error(`cellbox printed no URL in 20 s; stderr:\n${stderr}`)), 20_000);
    proc.stdout.on("data", (b) => {
      out += b;
      const m = out.match(/http:\/\/\S+\?token=\S+/);
      if (m) {
        clearTimeout(t);
        resolve(m[0]);
      }
    });
    proc.on("exit", (code) => {
      clearTimeout(t);
      reject(new Error(`cellbox exited with ${code}; stderr:\n${stderr}`));
    });
  });
  const u = new URL(url);
  return {
    url,
    token: u.searchParams.get("token"),
    origin: u.origin,
    wsURL: `ws://${u.host}/rpc`,
    project,
    stderr: () => stderr,
    async stop() {
      if (proc.exitCode === null) {
        const exited = new Promise((r) => proc.once("exit", r));
        proc.kill("SIGTERM");
        const t = setTimeout(() => proc.kill("SIGKILL"), 10_000);
        await exited;
        clearTimeout(t);
      }
      rmSync(base, { recursive: true, force: true, maxRetries: 3 });
    },
  };
}

/** waitFor polls fn until it returns a truthy value. */
export async function waitFor(fn, { timeoutMs = 20_000, what = "condition" } = {}) {
  const end = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} (last: ${last})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
