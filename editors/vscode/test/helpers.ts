// Test helpers: a temp project and state dir, and a CellboxClient connected to the REAL cellbox
// binary ($CELLBOX_BIN, built by test/run.sh) as `cellbox serve --stdio`.
import { mkdtempSync, mkdirSync, writeFileSync, chmodSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { CellboxClient } from "../src/client";

export function bin(): string {
  const b = process.env.CELLBOX_BIN;
  if (!b) throw new Error("CELLBOX_BIN is not set: run the tests with editors/vscode/test/run.sh");
  return b;
}

export interface Env {
  base: string;
  project: string;
  env: NodeJS.ProcessEnv;
  logs: string[];
  cleanup(): void;
}

export function tempEnv(files: Record<string, string> = {}): Env {
  const base = mkdtempSync(join(tmpdir(), "cellbox-vscode-test-"));
  const project = join(base, "project");
  const state = join(base, "state");
  const run = join(base, "run");
  for (const d of [project, state, run]) mkdirSync(d, { recursive: true, mode: 0o700 });
  chmodSync(base, 0o755);
  chmodSync(project, 0o777);
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(dirname(join(project, name)), { recursive: true });
    writeFileSync(join(project, name), content);
  }
  const env = { ...process.env, CELLBOX_STATE_DIR: state, XDG_RUNTIME_DIR: run, CELLBOX_LOG_LEVEL: "warn" };
  return { base, project, env, logs: [], cleanup: () => rmSync(base, { recursive: true, force: true }) };
}

/** A client on `cellbox serve --stdio` (the daemon ends with the client). */
export async function connectStdio(e: Env): Promise<CellboxClient> {
  return CellboxClient.connect({ path: bin(), args: ["serve", "--stdio"], env: e.env, cwd: e.project, log: (l) => e.logs.push(l) });
}

export function until<T>(f: () => T | undefined | false, ms = 20000, what = "condition"): Promise<T> {
  const start = Date.now();
  return new Promise((resolve, reject) => {
    const tick = () => {
      let v: T | undefined | false;
      try {
        v = f();
      } catch (e) {
        return reject(e);
      }
      if (v) return resolve(v);
      if (Date.now() - start > ms) return reject(new Error(`timed out after ${ms} ms waiting for ${what}`));
      setTimeout(tick, 25);
    };
    tick();
  });
}
