// activate() as a VS Code host would call it, with the `vscode` module faked (no host runs here):
// every command package.json contributes is registered (and no other), the providers are
// registered, and with a folder open it connects through `cellbox connect` (the real binary) and
// fills the SCM view. Only this wiring is checked here; the parts it wires are tested with the
// real daemon in the other files.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import * as vscode from "vscode";
import { activate, deactivate } from "../src/extension";
import { bin, tempEnv, until } from "./helpers";

test("activate: contributed commands, providers, connect on startup, SCM changes", async () => {
  const fake = vscode as any;
  const pkg = JSON.parse(readFileSync(join(process.cwd(), "package.json"), "utf8"));
  const e = tempEnv({ "a.txt": "a\n" });
  // `cellbox connect` finds (or starts) the daemon by these.
  Object.assign(process.env, { CELLBOX_STATE_DIR: e.env.CELLBOX_STATE_DIR, XDG_RUNTIME_DIR: e.env.XDG_RUNTIME_DIR });
  fake.setConfig({ path: bin() });
  fake.workspace.workspaceFolders = [{ uri: fake.Uri.file(e.project) }];
  const ctx = { subscriptions: [] as { dispose(): unknown }[] };
  try {
    activate(ctx as any);
    const contributed = pkg.contributes.commands.map((c: any) => c.command).sort();
    assert.deepEqual([...fake.registered.commands.keys()].sort(), contributed);
    for (const p of ["codelens", "completion", "hover", "content:cellbox-ws", "tree:cellbox.checkpoints", "terminal:cellbox.terminal"]) {
      assert.ok(fake.registered.providers.includes(p), `provider ${p}`);
    }
    for (const k of pkg.contributes.keybindings) assert.ok(contributed.includes(k.command), k.command);
    const sc = fake.created.sourceControls.find((s: any) => s.id === "cellbox");
    assert.ok(sc, "source control cellbox");
    const status = fake.statusItems.find((s: any) => s.id === "cellbox.status");
    await until(() => /cellbox.*no kernel/.test(status.text), 20000, `connected status, got ${status.text}`);
    // A file written by code in the sandbox shows in the SCM view after cellbox.scm.refresh.
    const { getSession } = await import("../src/extension");
    const s = await getSession();
    await s.run({ path: join(e.project, "w.py"), language: "python", code: "open('b.txt', 'w').write('b')", firstLine: 0, lastLine: 0 });
    await until(() => /python: idle/.test(status.text), 20000, `kernel in status, got ${status.text}`);
    await fake.commands.executeCommand("cellbox.scm.refresh");
    assert.deepEqual(sc.groups[0].resourceStates.map((r: any) => r.change.path), ["b.txt"]);
    assert.equal(sc.count, 1);
  } finally {
    deactivate();
    for (const d of ctx.subscriptions) d.dispose();
    const dir = join(e.base, "run", "cellbox");
    let files: string[] = [];
    try {
      files = readdirSync(dir).filter((f) => /^server-\d+\.json$/.test(f));
    } catch {
      // none started
    }
    for (const f of files) {
      try {
        process.kill(JSON.parse(readFileSync(join(dir, f), "utf8")).pid, "SIGTERM");
      } catch {
        // gone
      }
    }
    await new Promise((r) => setTimeout(r, 300));
    e.cleanup();
  }
});
