// activate() as a VS Code host would call it, with the `vscode` module faked (no host runs here):
// every command package.json contributes is registered (and no other), the providers are
// registered, and with a folder open it connects through `cellbox connect` (the real binary) and
// fills the SCM view; an R file (no cellbox language `r`) gets its keys, picks the Jupyter kernel
// jupyter:ir from the kernel picker, runs there, and the variables view says that kernel cannot
// list variables; a pyenv version of the host has a notebook controller and a Pick Kernel entry
// that starts a kernel of it. Only this wiring is checked here; the parts it wires are tested with the real
// daemon in the other files.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync, mkdirSync, symlinkSync, realpathSync } from "node:fs";
import { join } from "node:path";
import * as vscode from "vscode";
import { activate, deactivate } from "../src/extension";
import { bin, tempEnv, until } from "./helpers";

test("activate: contributed commands, providers, connect on startup, SCM changes", async () => {
  const fake = vscode as any;
  const pkg = JSON.parse(readFileSync(join(process.cwd(), "package.json"), "utf8"));
  const e = tempEnv({ "a.txt": "a\n" });
  // A pyenv version of the host's python (a link to it), for the daemon's interpreters.
  mkdirSync(join(e.base, "pyenv", "versions", "3.11.99", "bin"), { recursive: true });
  const pyenvPython = join(e.base, "pyenv", "versions", "3.11.99", "bin", "python3");
  symlinkSync(realpathSync("/usr/bin/python3"), pyenvPython);
  // `cellbox connect` finds (or starts) the daemon by these.
  Object.assign(process.env, { CELLBOX_STATE_DIR: e.env.CELLBOX_STATE_DIR, XDG_RUNTIME_DIR: e.env.XDG_RUNTIME_DIR, PYENV_ROOT: join(e.base, "pyenv") });
  fake.setConfig({ path: bin(), showOutput: false });
  fake.workspace.workspaceFolders = [{ uri: fake.Uri.file(e.project) }];
  const ctx = { subscriptions: [] as { dispose(): unknown }[] };
  try {
    activate(ctx as any);
    const contributed = pkg.contributes.commands.map((c: any) => c.command).sort();
    assert.deepEqual([...fake.registered.commands.keys()].sort(), contributed);
    for (const p of ["codelens", "completion", "hover", "content:cellbox-ws", "tree:cellbox.checkpoints", "terminal:cellbox.terminal"]) {
      assert.ok(fake.registered.providers.includes(p), `provider ${p}`);
    }
    assert.ok(fake.created.treeViews.some((v: any) => v.id === "cellbox.variables"), "the variables view");
    assert.ok(pkg.contributes.views.explorer.some((v: any) => v.id === "cellbox.variables"));
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
    assert.deepEqual(sc.groups.flatMap((g: any) => g.resourceStates).map((r: any) => r.change.path), ["b.txt"]);
    assert.equal(sc.count, 1);
    // In the group of the execution that wrote it (workspace/executions), which can be undone.
    const g = sc.groups.find((x: any) => x.resourceStates.length);
    assert.match(g.id, /^exec-undo:/);
    assert.match(g.label, /^Execution 1 \(python\)/);

    // The host's other interpreters (a pyenv version): a notebook controller each, and a group
    // of Pick Kernel whose entry starts a kernel of that interpreter for files.
    const pyenvCtl = fake.created.controllers.find((x: any) => x.id === `cellbox-jupyter-notebook:python@${pyenvPython}`);
    assert.ok(pyenvCtl && !pyenvCtl.disposed, JSON.stringify(fake.created.controllers.map((x: any) => x.id)));
    let offered: any[] = [];
    fake.setQuickPick((it: any[]) => {
      offered = it;
      return it.find((i) => i.interpreter === pyenvPython);
    });
    await fake.commands.executeCommand("cellbox.pickKernel");
    const sep = offered.findIndex((i) => i.label === "Other interpreters of this host (sandboxed)");
    assert.ok(sep > 0 && offered[sep].kind === fake.QuickPickItemKind.Separator, JSON.stringify(offered.map((i) => i.label)));
    assert.equal(offered.find((i) => i.interpreter === pyenvPython)?.label, "$(add) New Python 3.11.99 kernel");
    assert.equal(s.kernels.get("python")?.interpreter?.path, pyenvPython);
    // The status bar tags a kernel that does not run the host's default with its version (the
    // link's target's, as the daemon asks it).
    assert.equal(s.kernels.get("python")?.interpreter?.source, "explicit");
    await until(() => /cellbox python \(\d+\.\d+\.\d+\): idle/.test(status.text), 20000, `the interpreter in the status, got ${status.text}`);

    // An R file: besides cellbox's own r, the picker offers the host's IRkernel as jupyter:ir.
    const ir = s.languages.find((l) => l.id === "jupyter:ir");
    if (!ir?.available) {
      if (process.env.CI === "true") throw new Error(`jupyter:ir not available: ${ir?.reason ?? "no IRkernel kernelspec"}`);
      return;
    }
    const rPath = join(e.project, "analysis.R");
    const lines = ["# %% sum", "cat(1+1)"];
    const doc = {
      uri: fake.Uri.file(rPath),
      fileName: rPath,
      languageId: "r",
      lineCount: lines.length,
      lineAt: (i: number) => ({ text: lines[i], firstNonWhitespaceCharacterIndex: 0 }),
      getText: () => lines.join("\n"),
    };
    fake.window.activeTextEditor = { document: doc, selection: new fake.Selection(1, 0, 1, 0) };
    const warnings = fake.created.warnings.length;
    // The kernel picker lists the Jupyter kernels under their display names, in a group of their own.
    let items: any[] = [];
    fake.setQuickPick((it: any[]) => {
      items = it;
      return it.find((i) => i.language === "jupyter:ir" && !i.kernelId);
    });
    await fake.commands.executeCommand("cellbox.pickKernel");
    const labels = items.map((i) => i.label);
    const jupyterAt = labels.indexOf("Jupyter kernels (sandboxed)");
    assert.ok(jupyterAt > labels.indexOf("cellbox kernels (sandboxed)") && labels.indexOf("cellbox kernels (sandboxed)") >= 0, JSON.stringify(labels));
    assert.equal(items[jupyterAt].kind, fake.QuickPickItemKind.Separator);
    const rItem = items.find((i) => i.language === "jupyter:ir" && !i.kernelId);
    assert.ok(rItem, JSON.stringify(labels));
    assert.equal(rItem.label, "$(add) New R kernel");
    assert.equal(rItem.description, "Jupyter kernel (sandboxed) · jupyter:ir");
    assert.ok(items.indexOf(rItem) > jupyterAt);
    const picked = s.kernels.get("jupyter:ir");
    assert.ok(picked, "the picked R kernel");
    assert.match(status.text, /cellbox R \(Jupyter\): idle/);
    assert.equal(fake.contextKeys.get("cellbox.runnable"), true, "Shift+Enter and the run menus apply to the R file");
    // Run File runs it in that kernel; its output is in the output view's model.
    await fake.commands.executeCommand("cellbox.runFile");
    const ex = s.model.executions[s.model.executions.length - 1];
    assert.equal(ex.kernelId, picked.kernelId);
    assert.equal(ex.status, "ok", JSON.stringify(ex));
    assert.deepEqual(ex.outputs, [{ kind: "stream", name: "stdout", text: "2" }]);
    // The variables view of that kernel says it cannot list them; nothing raised an error.
    await fake.commands.executeCommand("cellbox.variables.refresh");
    const vars = fake.created.treeViews.find((v: any) => v.id === "cellbox.variables");
    assert.equal(vars.message, "This kernel (R (Jupyter)) cannot list variables.");
    assert.deepEqual(fake.created.warnings.slice(warnings), []);
  } finally {
    fake.window.activeTextEditor = undefined;
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
