// The NotebookController against the real daemon. No VS Code host runs here, so the `vscode`
// module is faked (test/fake-vscode.ts): the controller, NotebookCellExecution (recording start,
// end, executionOrder and outputs, in order) and the output classes. Cells run on a real kernel.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import * as vscode from "vscode";
import { CellboxClient } from "../src/client";
import { Session } from "../src/session";
import { CellboxNotebookController } from "../src/notebook";
import { tempEnv, connectStdio, until, Env } from "./helpers";

let e: Env;
let c: CellboxClient;
let s: Session;
let nbc: CellboxNotebookController;
let ctrl: any;

function notebook(name: string, sources: string[], language = "python") {
  const uri = (vscode as any).Uri.file(`/nb/${name}.ipynb`);
  const nb: any = { uri, notebookType: "jupyter-notebook", metadata: { metadata: { kernelspec: { language } } } };
  nb.cells = sources.map((src, index) => ({
    index,
    kind: 2,
    notebook: nb,
    document: { languageId: language, getText: () => src, uri: { toString: () => `vscode-notebook-cell:/nb/${name}.ipynb#${index}` } },
  }));
  nb.getCells = () => nb.cells;
  return nb;
}

/** The text of a cell execution's outputs, by mime. */
function texts(exec: any): string[] {
  return exec.outputs.flatMap((o: any) => o.items.map((i: any) => `${i.mime}: ${i.text}`));
}

before(async () => {
  e = tempEnv();
  c = await connectStdio(e);
  s = new Session(c, { root: e.project });
  nbc = new CellboxNotebookController(async () => s, (f) => {
    const d = c.onOutput(f);
    return new (vscode as any).Disposable(() => d.dispose());
  });
  ctrl = nbc.controllers[0];
  assert.equal(ctrl.notebookType, "jupyter-notebook");
  assert.ok(ctrl.supportsExecutionOrder);
});
after(async () => {
  nbc.dispose();
  await c.dispose();
  e.cleanup();
});

test("cells run in order, one after the other, with execution order and outputs", async () => {
  const nb = notebook("order", ["import time\nx = 1\ntime.sleep(0.3)\nprint('first', flush=True)", "x += 1\nx", "print('x is', x)"]);
  ctrl.events.length = 0;
  ctrl.executions.length = 0;
  // executeHandler as VS Code calls it for "Run All".
  await ctrl.executeHandler(nb.cells, nb, ctrl);
  assert.deepEqual(ctrl.events, [
    "create 0",
    "create 1",
    "create 2",
    "start 0",
    "end 0 true order=1",
    "start 1",
    "end 1 true order=2",
    "start 2",
    "end 2 true order=3",
  ]);
  const [a, b, d] = ctrl.executions;
  assert.deepEqual(texts(a), ["application/vnd.code.notebook.stdout: first\n"]);
  assert.ok(texts(b).includes("text/plain: 2"), JSON.stringify(texts(b)));
  assert.equal(b.outputs[0].metadata.outputType, "execute_result");
  assert.equal(b.outputs[0].metadata.executionCount, 2);
  assert.deepEqual(texts(d), ["application/vnd.code.notebook.stdout: x is 2\n"]);
});

test("two runs queue behind each other; a failing cell stops the cells after it", async () => {
  const nb = notebook("queue", ["import time\ntime.sleep(0.3)\nv = 'a'", "v += 'b'", "raise ValueError('boom')", "v += 'never'"]);
  ctrl.events.length = 0;
  ctrl.executions.length = 0;
  const first = ctrl.executeHandler([nb.cells[0]], nb, ctrl);
  const second = ctrl.executeHandler([nb.cells[1], nb.cells[2], nb.cells[3]], nb, ctrl);
  await Promise.all([first, second]);
  const order = ctrl.events.filter((x: string) => !x.startsWith("create"));
  assert.deepEqual(order, ["start 0", "end 0 true order=1", "start 1", "end 1 true order=2", "start 2", "end 2 false order=3", "start 3", "end 3 undefined order=undefined"]);
  const err = JSON.parse(ctrl.executions[2].outputs[0].items[0].text);
  assert.equal(err.name, "ValueError");
  assert.equal(err.message, "boom");
  assert.match(err.stack, /ValueError/);
  // v was not touched by the skipped cell.
  const check = notebook("queue", ["v"]);
  await ctrl.executeHandler(check.cells, check, ctrl);
  assert.ok(texts(ctrl.executions[4]).includes("text/plain: 'ab'"));
});

test("rich outputs and display updates in a cell; clear_output", async () => {
  const nb = notebook("rich", [
    "from IPython.display import display, HTML, Image, clear_output\nimport base64\n" +
      "h = display(HTML('<i>1</i>'), display_id='p')\nh.update(HTML('<i>2</i>'))\n" +
      "display(Image(data=base64.b64decode('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='), format='png'))",
    "print('gone')\nclear_output()\nprint('kept')",
  ]);
  ctrl.executions.length = 0;
  await ctrl.executeHandler(nb.cells, nb, ctrl);
  const [a, b] = ctrl.executions;
  const html = a.outputs[0].items.find((i: any) => i.mime === "text/html");
  assert.equal(html.text, "<i>2</i>");
  assert.equal(a.outputs.length, 2);
  const png = a.outputs[1].items.find((i: any) => i.mime === "image/png");
  assert.equal(Buffer.from(png.data).subarray(1, 4).toString(), "PNG");
  assert.deepEqual(texts(b), ["application/vnd.code.notebook.stdout: kept\n"]);
});

test("interrupt: cancelling the cell's execution interrupts the kernel; the notebook goes on", async () => {
  const nb = notebook("intr", ["import time\nprint('sleeping', flush=True)\ntime.sleep(60)", "print('after')"]);
  ctrl.executions.length = 0;
  const run = ctrl.executeHandler([nb.cells[0]], nb, ctrl);
  await until(() => ctrl.executions[0] && texts(ctrl.executions[0]).some((t: string) => t.includes("sleeping")), 20000, "cell started");
  // VS Code's stop button: the execution's token is cancelled (interruptHandler is the other path).
  ctrl.executions[0].cts.cancel();
  await run;
  assert.equal(ctrl.executions[0].success, false);
  await ctrl.executeHandler([nb.cells[1]], nb, ctrl);
  assert.deepEqual(texts(ctrl.executions[1]), ["application/vnd.code.notebook.stdout: after\n"]);
  // interruptHandler on a running cell too.
  const run2 = ctrl.executeHandler([nb.cells[0]], nb, ctrl);
  await until(() => ctrl.executions[2] && texts(ctrl.executions[2]).some((t: string) => t.includes("sleeping")), 20000, "cell started again");
  await ctrl.interruptHandler(nb);
  await run2;
  assert.equal(ctrl.executions[2].success, false);
  assert.ok(texts(ctrl.executions[2]).some((t: string) => t.includes("KeyboardInterrupt")), JSON.stringify(texts(ctrl.executions[2])));
});

test("clear outputs of every code cell; notebooks have their own kernels", async () => {
  const nb = notebook("order", ["1"]);
  await nbc.clearOutputs(nb);
  const last = ctrl.executions[ctrl.executions.length - 1];
  assert.deepEqual(last.outputs, []);
  assert.ok(last.ended);
  const ids = new Set([...nbc.kernels.values()].map((k) => k.kernelId));
  assert.equal(ids.size, nbc.kernels.size);
  assert.ok(nbc.kernels.size >= 3);
  // Notebook kernels are not the files' kernels.
  assert.equal(s.kernels.size, 0);
});
