// Installed Jupyter kernels (languages jupyter:NAME, PROTOCOL.md §8) in the extension: which
// language a file or notebook runs in (cellbox's own first, then a Jupyter kernel by extension or
// languageId), the kernel picker's entries, and `unsupported` (a Jupyter kernel cannot list
// variables: the variables view says so, without asking the daemon or raising an error). The
// cases that run code use the REAL daemon and the host's IRkernel (jupyter:ir); without it they
// skip, except under CI, where it is installed and a missing one fails.
import { test, before, after, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import * as vscode from "vscode";
import { CellboxClient } from "../src/client";
import { Session } from "../src/session";
import { renderExecution } from "../src/outputs";
import { CellboxNotebookController, notebookLanguage } from "../src/notebook";
import { VariablesProvider } from "../src/variables";
import { resolveLanguage, extensionOf, vscodeLanguageIds, kernelChoices, supports, languageLabel } from "../src/languages";
import type { LanguageCapability } from "../../protocol/protocol";
import { tempEnv, connectStdio, Env } from "./helpers";

const fake = vscode as any;

const lang = (id: string, displayName: string, fileExtensions: string[], more: Partial<LanguageCapability> = {}): LanguageCapability => ({
  id,
  displayName,
  version: "",
  fileExtensions,
  available: true,
  ...more,
});
const LANGS: LanguageCapability[] = [
  lang("python", "Python", [".py"], { version: "3.11.2" }),
  lang("javascript", "JavaScript (Node.js)", [".js", ".mjs", ".cjs"]),
  lang("bash", "Bash", [".sh", ".bash"]),
  lang("jupyter:ir", "R", [".r", ".R"], { unsupported: ["kernel/variables"] }),
  lang("jupyter:python3", "Python 3 (ipykernel)", [".py"], { unsupported: ["kernel/variables"] }),
  lang("jupyter:julia-1.10", "Julia 1.10", [".jl"], { available: false, reason: "kernelspec julia-1.10: julia not found on the sandbox's PATH", unsupported: ["kernel/variables"] }),
];

/** A Session over a client that only carries initialize's languages (no daemon). */
function offlineSession(languages: LanguageCapability[]): Session {
  const none = () => ({ dispose() {} });
  const client = { info: { capabilities: { languages } }, onOutput: none, onStatus: none, onBlocked: none, onPorts: none } as unknown as CellboxClient;
  return new Session(client);
}

test("a document's language: cellbox's own of the same id, else a Jupyter kernel whose extensions fit", () => {
  assert.equal(resolveLanguage(LANGS, "python", "/p/a.py"), "python", "cellbox's python, not jupyter:python3");
  assert.equal(resolveLanguage(LANGS, "shellscript", "/p/a.sh"), "bash");
  assert.equal(resolveLanguage(LANGS, "r", "/p/analysis.R"), "jupyter:ir");
  assert.equal(resolveLanguage(LANGS, "r", "/p/analysis.r"), "jupyter:ir");
  assert.equal(resolveLanguage(LANGS, "r"), "jupyter:ir", "an untitled R document, by its languageId");
  assert.equal(resolveLanguage(LANGS, "plaintext", "/p/x.R"), "jupyter:ir", "by the extension alone");
  assert.equal(resolveLanguage(LANGS, "julia", "/p/a.jl"), "jupyter:julia-1.10", "unavailable but the only fit: starting it says why");
  assert.equal(resolveLanguage(LANGS, "markdown", "/p/README.md"), undefined);
  assert.equal(resolveLanguage(LANGS, "plaintext", "/p.d/Makefile"), undefined);
  // cellbox's python missing (no python3): a .py file runs in the Jupyter kernel that is there.
  const noPython = LANGS.map((l) => (l.id === "python" ? { ...l, available: false, reason: "python3 not found on PATH" } : l));
  assert.equal(resolveLanguage(noPython, "python", "/p/a.py"), "jupyter:python3");
  assert.equal(extensionOf("/a.b/Makefile"), "");
  assert.equal(extensionOf("/p/.bashrc"), "");
  assert.equal(extensionOf("C:\\p\\x.R"), ".R");
  assert.deepEqual(vscodeLanguageIds(LANGS).sort(), ["javascript", "python", "r", "shellscript"]);
  assert.equal(supports(LANGS, "jupyter:ir", "kernel/variables"), false);
  assert.equal(supports(LANGS, "jupyter:ir", "kernel/complete"), true);
  assert.equal(supports(LANGS, "python", "kernel/variables"), true);
  assert.equal(languageLabel(LANGS, "jupyter:ir"), "R (Jupyter)");
  assert.equal(languageLabel(LANGS, "python"), "python");
});

test("the kernel picker: cellbox's kernels, then the Jupyter kernels with their display names", () => {
  const choices = kernelChoices(LANGS);
  assert.deepEqual(
    choices.map((c) => [c.group, c.language, c.label]),
    [
      ["cellbox", "python", "New Python kernel"],
      ["cellbox", "javascript", "New JavaScript (Node.js) kernel"],
      ["cellbox", "bash", "New Bash kernel"],
      ["jupyter", "jupyter:ir", "New R kernel"],
      ["jupyter", "jupyter:python3", "New Python 3 (ipykernel) kernel"],
    ],
    "available languages only",
  );
  const r = choices.find((c) => c.language === "jupyter:ir")!;
  assert.equal(r.description, "Jupyter kernel (sandboxed) · jupyter:ir");
  assert.equal(r.detail, "cannot list variables");
  assert.equal(choices[0].description, "3.11.2 · python");
});

test("picking a kernel for a file: a Jupyter kernel of its language takes its runs; another language does not", () => {
  const s = offlineSession(LANGS);
  assert.equal(s.languageFor("python", "/p/a.py"), "python");
  assert.equal(s.pickFor("python", "/p/a.py", "jupyter:python3"), true);
  assert.equal(s.languageFor("python", "/p/b.py"), "jupyter:python3");
  assert.equal(s.pickFor("python", "/p/a.py", "jupyter:ir"), false, "R does not run .py files");
  assert.equal(s.languageFor("python", "/p/b.py"), "jupyter:python3");
  assert.equal(s.pickFor("python", "/p/a.py", "python"), true);
  assert.equal(s.languageFor("python", "/p/b.py"), "python");
});

test("a notebook's language: cellbox's own for its kernelspec's language, else the Jupyter kernel it names", () => {
  const s = offlineSession(LANGS);
  assert.equal(notebookLanguage(s, { name: "python3", language: "python" }, "python"), "python");
  assert.equal(notebookLanguage(s, { name: "ir", language: "R" }, "r"), "jupyter:ir");
  assert.equal(notebookLanguage(s, undefined, "r"), "jupyter:ir", "no kernelspec: the cells' language");
  assert.equal(notebookLanguage(s, { name: "javascript", language: "javascript" }, "javascript"), "javascript");
});

// Against the real daemon ----------------------------------------------------------------------

let e: Env;
let c: CellboxClient;
let s: Session;

before(async () => {
  e = tempEnv({ "analysis.R": "cat(1+1)\n" });
  c = await connectStdio(e);
  s = new Session(c, { root: e.project });
});
after(async () => {
  await c.dispose();
  e.cleanup();
});

/** Whether the host's IRkernel is there; skips the case if not (fails under CI). */
function needIR(t: TestContext): boolean {
  const ir = c.info?.capabilities.languages.find((l) => l.id === "jupyter:ir");
  if (ir?.available) return true;
  const why = ir ? `jupyter:ir unavailable: ${ir.reason}` : "no jupyter:ir (IRkernel's kernelspec is not installed)";
  if (process.env.CI === "true") throw new Error(why);
  t.skip(why);
  return false;
}

test("initialize lists the host's Jupyter kernels; an R file runs in cellbox's r, and `cat(1+1)` in jupyter:ir shows 2", async (t) => {
  if (!needIR(t)) return;
  const ir = s.languages.find((l) => l.id === "jupyter:ir")!;
  assert.equal(ir.displayName, "R");
  assert.ok(ir.fileExtensions.includes(".R"), JSON.stringify(ir));
  assert.deepEqual(ir.unsupported, ["kernel/variables"]);
  const path = join(e.project, "analysis.R");
  assert.equal(s.languageFor("r", path), "r", "cellbox's own r wins over the Jupyter kernel of the same language");
  assert.equal(s.languageFor("python", join(e.project, "a.py")), "python");
  const r = await s.run({ path, language: "jupyter:ir", code: "cat(1+1)", firstLine: 0, lastLine: 0, label: "analysis.R:1" });
  assert.equal(r.execution.status, "ok", JSON.stringify(r.execution));
  assert.deepEqual(r.execution.outputs, [{ kind: "stream", name: "stdout", text: "2" }]);
  assert.match(renderExecution(r.execution), /<pre class="stream stdout">2<\/pre>/);
  assert.equal(s.kernels.get("jupyter:ir")?.language, "jupyter:ir");
  // An error of R code is an error of the execution (with a diagnostic), not of the request.
  const bad = await s.run({ path, language: "jupyter:ir", code: "x <- 1\nstop('boom')", firstLine: 3, lastLine: 4, docLines: ["", "", "", "x <- 1", "stop('boom')"] });
  assert.equal(bad.execution.status, "error");
  assert.match(bad.diagnostic?.message ?? "", /boom/);
  assert.equal(bad.diagnostic?.line, 3);
});

test("variables: the view says a Jupyter kernel cannot list them, asks nothing and raises no error; python's are listed", async (t) => {
  if (!needIR(t)) return;
  const kR = await s.kernel("jupyter:ir");
  const asked: string[] = [];
  const request = c.request.bind(c);
  (c as any).request = (m: string, ...a: unknown[]) => {
    asked.push(m);
    return (request as any)(m, ...a);
  };
  let kernel = kR;
  const view = new VariablesProvider(() => s, () => kernel);
  try {
    await view.refresh();
    assert.equal(view.view.message, "This kernel (R (Jupyter)) cannot list variables.");
    assert.equal(view.view.description, "R (Jupyter)");
    assert.deepEqual(view.getChildren(), []);
    assert.ok(!asked.includes("kernel/variables"), `asked ${asked}`);
    assert.deepEqual(fake.created.warnings, [], "no error shown");
    // A python kernel lists them.
    await s.run({ path: join(e.project, "v.py"), language: "python", code: "answer = 42", firstLine: 0, lastLine: 0 });
    kernel = s.kernels.get("python")!;
    await view.refresh();
    assert.equal(view.view.message, undefined);
    const items = view.getChildren();
    const answer = items.find((i) => i.label === "answer");
    assert.ok(answer, JSON.stringify(items.map((i) => i.label)));
    assert.equal(answer.description, "int = 42");
  } finally {
    (c as any).request = request;
    view.dispose();
  }
});

test("an R notebook (kernelspec ir, language R) runs its cells in cellbox's r; the controller offers R cells", async (t) => {
  if (!needIR(t)) return;
  const nbc = new CellboxNotebookController(async () => s, (f) => {
    const d = c.onOutput(f);
    return new fake.Disposable(() => d.dispose());
  });
  try {
    const ctrl = nbc.controllers[0] as any;
    nbc.setLanguages(s);
    assert.ok(ctrl.supportedLanguages.includes("r"), JSON.stringify(ctrl.supportedLanguages));
    assert.ok(ctrl.supportedLanguages.includes("python"));
    const uri = fake.Uri.file("/nb/stats.ipynb");
    const nb: any = { uri, notebookType: "jupyter-notebook", metadata: { metadata: { kernelspec: { name: "ir", language: "R", display_name: "R" } } } };
    nb.cells = ["x <- 40", "cat(x + 2)"].map((src, index) => ({
      index,
      kind: 2,
      notebook: nb,
      document: { languageId: "r", getText: () => src, uri: { toString: () => `vscode-notebook-cell:/nb/stats.ipynb#${index}` } },
    }));
    nb.getCells = () => nb.cells;
    await ctrl.executeHandler(nb.cells, nb, ctrl);
    const [a, b] = ctrl.executions;
    assert.equal(a.success, true);
    assert.equal(b.success, true);
    assert.deepEqual(
      b.outputs.flatMap((o: any) => o.items.map((i: any) => `${i.mime}: ${i.text}`)),
      ["application/vnd.code.notebook.stdout: 42"],
    );
    assert.equal(nbc.kernels.get(uri.toString())?.language, "r", "cellbox's own language of the kernelspec's language");
  } finally {
    nbc.dispose();
  }
});
