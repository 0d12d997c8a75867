// The notebook kernel picker (VS Code's NotebookControllers) against the real daemon: one
// controller per language initialize lists (cellbox's own, the host's Jupyter kernels) and per
// interpreter of the host the language's own would not run (a pyenv version, made here under a
// PYENV_ROOT of the test), unavailable languages left out with a log line; the controller of a
// notebook's kernelspec is preferred; a notebook's cells run on the controller picked for it, a
// kernel started for another controller is shut down. `vscode` is faked (test/fake-vscode.ts).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, symlinkSync, realpathSync } from "node:fs";
import { join } from "node:path";
import * as vscode from "vscode";
import { CellboxClient } from "../src/client";
import { Session } from "../src/session";
import { CellboxNotebookController } from "../src/notebook";
import { notebookKernelSpecs, kernelChoices } from "../src/languages";
import { Methods, type InterpreterInfo, type LanguageCapability } from "../../protocol/protocol";
import { tempEnv, connectStdio, Env } from "./helpers";

const fake = vscode as any;
let e: Env;
let c: CellboxClient;
let s: Session;
let nbc: CellboxNotebookController;
const logs: string[] = [];
/** Every request the client sent: [method, params]. */
const sent: [string, any][] = [];
let pyenvPython: string;

function notebook(name: string, sources: string[], kernelspec: { name?: string; language?: string }, languageId = "python") {
  const uri = fake.Uri.file(`/nb/${name}.ipynb`);
  const nb: any = { uri, notebookType: "jupyter-notebook", metadata: { metadata: { kernelspec } } };
  nb.cells = sources.map((src, index) => ({
    index,
    kind: 2,
    notebook: nb,
    document: { languageId, getText: () => src, uri: { toString: () => `vscode-notebook-cell:/nb/${name}.ipynb#${index}` } },
  }));
  nb.getCells = () => nb.cells;
  return nb;
}

const stdout = (exec: any): string =>
  exec.outputs
    .flatMap((o: any) => o.items)
    .filter((i: any) => i.mime === "application/vnd.code.notebook.stdout")
    .map((i: any) => i.text)
    .join("");

const byKey = (key: string) => nbc.controllers.find((x: any) => x.id === `cellbox-jupyter-notebook:${key}`) as any;

before(async () => {
  e = tempEnv();
  // A pyenv version of the host's python (its interpreter a link to it): initialize lists it.
  const pyenv = join(e.base, "pyenv");
  mkdirSync(join(pyenv, "versions", "3.11.99", "bin"), { recursive: true });
  pyenvPython = join(pyenv, "versions", "3.11.99", "bin", "python3");
  symlinkSync(realpathSync("/usr/bin/python3"), pyenvPython);
  e.env.PYENV_ROOT = pyenv;
  c = await connectStdio(e);
  const request = c.request.bind(c) as (...a: unknown[]) => Promise<unknown>;
  (c as any).request = (method: string, ...rest: unknown[]) => {
    sent.push([method, rest[0]]);
    return request(method, ...rest);
  };
  s = new Session(c, { root: e.project });
  nbc = new CellboxNotebookController(
    async () => s,
    (f) => {
      const d = c.onOutput(f);
      return new fake.Disposable(() => d.dispose());
    },
    (l) => logs.push(l),
  );
});
after(async () => {
  fake.workspace.notebookDocuments.length = 0;
  nbc.dispose();
  await c.dispose();
  e.cleanup();
});

test("the picker's kernels: languages, Jupyter kernels, other interpreters; unavailable ones left out", () => {
  const lang = (id: string, displayName: string, version: string, fileExtensions: string[], more: Partial<LanguageCapability> = {}): LanguageCapability => ({ id, displayName, version, fileExtensions, available: true, ...more });
  const langs = [
    lang("python", "Python", "3.11.2", [".py"]),
    lang("bash", "Bash", "5.2", [".sh"]),
    lang("jupyter:ir", "R", "", [".r", ".R"], { unsupported: ["kernel/variables"] }),
    lang("jupyter:julia-1.10", "Julia 1.10", "", [".jl"], { available: false, reason: "julia not found on the sandbox's PATH" }),
  ];
  const interp = (path: string, source: string, version: string, language = "python"): InterpreterInfo => ({ language, path, source, version });
  const found = [interp("/usr/bin/python3", "system", "3.11.2"), interp("/home/u/.pyenv/versions/3.12.1/bin/python3", "pyenv", "3.12.1"), interp("/usr/bin/bash", "system", "5.2", "bash")];
  const { specs, leftOut } = notebookKernelSpecs(langs, found);
  assert.deepEqual(
    specs.map((x) => [x.key, x.label, x.interpreter, x.cellLanguages]),
    [
      ["python", "Python 3.11.2", undefined, ["python"]],
      ["bash", "Bash 5.2", undefined, ["shellscript"]],
      ["jupyter:ir", "R", undefined, ["r"]],
      ["python@/home/u/.pyenv/versions/3.12.1/bin/python3", "Python 3.12.1", "/home/u/.pyenv/versions/3.12.1/bin/python3", ["python"]],
    ],
  );
  assert.equal(specs[2].description, "Jupyter kernel in cellbox's sandbox · jupyter:ir");
  assert.equal(specs[2].detail, "cannot list variables");
  assert.equal(specs[3].description, "cellbox (sandboxed) · pyenv · /home/u/.pyenv/versions/3.12.1/bin/python3");
  const go = notebookKernelSpecs([lang("go", "Go", "1.26", [".go"], { unsupported: ["kernel/inputRequest"] })]).specs[0];
  assert.equal(go.detail, "cannot read input");
  assert.deepEqual(go.cellLanguages, ["go"]);
  assert.deepEqual(leftOut, ["notebook kernels: jupyter:julia-1.10 (Julia 1.10) is not offered: julia not found on the sandbox's PATH"]);
  // Pick Kernel (files) lists the same interpreters in a group of their own, after the languages.
  const choices = kernelChoices(langs, found);
  assert.deepEqual(
    choices.map((x) => [x.group, x.language, x.interpreter, x.label]),
    [
      ["cellbox", "python", undefined, "New Python kernel"],
      ["cellbox", "bash", undefined, "New Bash kernel"],
      ["jupyter", "jupyter:ir", undefined, "New R kernel"],
      ["interpreter", "python", "/home/u/.pyenv/versions/3.12.1/bin/python3", "New Python 3.12.1 kernel"],
    ],
  );
  assert.equal(choices[3].description, "pyenv · /home/u/.pyenv/versions/3.12.1/bin/python3");
  // A project with a .venv: python's own entry runs it, and the host's python gets an entry of its own.
  const venv: InterpreterInfo = { language: "python", path: "/p/.venv/bin/python", source: "venv" };
  const withVenv = notebookKernelSpecs(langs, found, [venv]).specs;
  assert.equal(withVenv[0].description, "cellbox (sandboxed) · the project's virtual environment");
  assert.deepEqual(
    withVenv.filter((x) => x.interpreter).map((x) => [x.key, x.description]),
    [
      ["python@/usr/bin/python3", "cellbox (sandboxed) · the host's · /usr/bin/python3"],
      ["python@/home/u/.pyenv/versions/3.12.1/bin/python3", "cellbox (sandboxed) · pyenv · /home/u/.pyenv/versions/3.12.1/bin/python3"],
    ],
  );
});

test("a controller per kernel of the daemon; the notebook's kernelspec picks the preferred one", async () => {
  await s.ensureWorkspace();
  const py3 = notebook("pref", ["1"], { name: "python3", language: "python" });
  const ir = notebook("pref-r", ["1"], { name: "ir", language: "R" }, "r");
  fake.workspace.notebookDocuments.push(py3, ir);
  nbc.setLanguages(s);
  const ids = nbc.controllers.map((x: any) => x.id);
  // The first is the one that follows the notebook's kernelspec; then every available language.
  assert.equal(ids[0], "cellbox-jupyter-notebook");
  for (const l of s.languages) {
    const ctl = byKey(l.id);
    if (!l.available) {
      assert.equal(ctl, undefined, `${l.id} is not available: no controller`);
      assert.ok(logs.some((x) => x.includes(l.id) && x.includes(l.reason ?? "")), `a log line for ${l.id}`);
      continue;
    }
    assert.ok(ctl, `a controller for ${l.id}: ${ids.join(", ")}`);
    assert.equal(ctl.supportsExecutionOrder, true);
  }
  assert.ok(byKey("jupyter:python3"), "the host's ipykernel is a Jupyter kernel of the picker");
  assert.match(byKey("jupyter:python3").description, /^Jupyter kernel in cellbox's sandbox/);
  const pyenvCtl = byKey(`python@${pyenvPython}`);
  assert.ok(pyenvCtl, `the pyenv version has a controller: ${ids.join(", ")}`);
  assert.equal(pyenvCtl.label, "Python 3.11.99");
  assert.match(pyenvCtl.description, /pyenv/);
  assert.deepEqual(pyenvCtl.supportedLanguages, ["python"]);
  // The host's python is what python's own controller runs: no second one.
  assert.equal(byKey("python@/usr/bin/python3"), undefined);
  assert.equal(byKey("python").affinity.get(py3.uri.toString()), fake.NotebookControllerAffinity.Preferred);
  assert.equal(byKey("r").affinity.get(ir.uri.toString()), fake.NotebookControllerAffinity.Preferred);
  assert.equal(byKey("jupyter:python3").affinity.size, 0);
  // Again (a reconnect): the same controllers, none made twice.
  const n = nbc.controllers.length;
  nbc.setLanguages(s);
  assert.equal(nbc.controllers.length, n);
  assert.ok(!pyenvCtl.disposed);
});

test("a notebook's cells run on the controller picked for it; switching shuts the old kernel down", async () => {
  const nb = notebook("picked", ["import sys\nprint(sys.version_info[0], 'ipykernel' in sys.modules)", "x = 41"], { name: "python3", language: "python" });
  const run = async (ctl: any, cells = nb.cells) => {
    const from = ctl.executions.length;
    await ctl.executeHandler(cells, nb, ctl);
    return ctl.executions.slice(from);
  };
  // The Jupyter kernel: ipykernel is loaded in it (cellbox's python kernel does not load it).
  const jup = byKey("jupyter:python3");
  const [a, b] = await run(jup);
  assert.equal(a.success, true, JSON.stringify(a.outputs));
  assert.equal(b.success, true);
  assert.equal(stdout(a), "3 True\n");
  const first = nbc.kernels.get(nb.uri.toString())!;
  assert.equal(first.language, "jupyter:python3");
  // The same controller again: the same kernel (its state is kept).
  const [again] = await run(jup, [notebook("picked", ["print(x + 1)"], {}).cells[0]]);
  assert.equal(stdout(again), "42\n");
  assert.equal(nbc.kernels.get(nb.uri.toString())!.kernelId, first.kernelId);

  // The pyenv version: a new kernel of that interpreter; the Jupyter one is shut down.
  const shutdowns = sent.filter(([m]) => m === Methods.KernelShutdown).length;
  const [p] = await run(byKey(`python@${pyenvPython}`), [nb.cells[0]]);
  assert.equal(p.success, true, JSON.stringify(p.outputs));
  assert.equal(stdout(p), "3 False\n");
  const second = nbc.kernels.get(nb.uri.toString())!;
  assert.notEqual(second.kernelId, first.kernelId);
  assert.equal(second.language, "python");
  assert.equal(second.interpreter?.source, "explicit");
  assert.equal(second.interpreter?.path, pyenvPython);
  const start = sent.filter(([m]) => m === Methods.KernelStart).at(-1)![1];
  assert.equal(start.interpreter, pyenvPython);
  assert.deepEqual(sent.filter(([m]) => m === Methods.KernelShutdown).slice(shutdowns).map(([, x]) => x), [{ kernelId: first.kernelId }]);
  const listed = await c.request(Methods.KernelList, {});
  assert.ok(!listed.kernels.some((k) => k.kernelId === first.kernelId), "the Jupyter kernel is gone");

  // The controller that follows the kernelspec: cellbox's python, the host's interpreter.
  const [q] = await run(nbc.controllers[0], [nb.cells[0]]);
  assert.equal(stdout(q), "3 False\n");
  const third = nbc.kernels.get(nb.uri.toString())!;
  assert.equal(third.language, "python");
  assert.notEqual(third.kernelId, second.kernelId);
  assert.notEqual(third.interpreter?.source, "explicit");
});
