// A NotebookController that runs .ipynb notebooks (notebook type jupyter-notebook) on cellbox
// kernels: one kernel per notebook, cells run in the order given (each waits for the one before),
// outputs streamed into the cell, display updates and clear_output honoured, interrupt.
import * as vscode from "vscode";
import { CancellationTokenSource } from "vscode-jsonrpc/node";
import type { Session, KernelHandle } from "./session";
import { newExecutionId } from "./session";
import { applyOutput, OutputItem } from "./outputs";
import { errorMessage } from "./client";
import { vscodeLanguageIds, isJupyter, JUPYTER_PREFIX, notebookKernelSpecs, specKey, type NotebookKernelSpec } from "./languages";
import { Methods, type ExecuteResult, type KernelOutputParams } from "../../protocol/protocol";
import { summarize, fileLabel, describeFiles } from "../../browser/src/activity";

export const NOTEBOOK_TYPES = ["jupyter-notebook"];

/** The cell languages before the daemon said which it has. */
const DEFAULT_LANGUAGES = ["python", "javascript", "shellscript"];

/** VS Code's cell languageId -> the cellbox language. */
export function cellLanguage(languageId: string): string {
  return languageId === "shellscript" ? "bash" : languageId;
}

/** The part of a notebook's metadata (.ipynb) that names its kernel. */
interface KernelSpecMetadata {
  name?: string;
  language?: string;
}

/**
 * The language a notebook runs in: cellbox's own language of its kernelspec's language (a
 * `python3` notebook runs in `python`); else the Jupyter kernel its kernelspec names
 * (`jupyter:ir`), if installed; else a language that fits the kernelspec's or the cell's language
 * (an `r` cell: `jupyter:ir`).
 */
export function notebookLanguage(s: Session, spec: KernelSpecMetadata | undefined, cellLanguageId: string): string {
  const lang = spec?.language ?? cellLanguage(cellLanguageId);
  const native = s.languageFor(lang.toLowerCase());
  if (native && !isJupyter(native)) return native;
  const named = spec?.name ? s.languages.find((l) => l.id === JUPYTER_PREFIX + spec.name && l.available) : undefined;
  if (named) return named.id;
  return native ?? s.languageFor(cellLanguageId) ?? lang;
}

/** A cell's outputs as VS Code notebook outputs. */
export function toCellOutputs(items: OutputItem[], executionCount?: number): vscode.NotebookCellOutput[] {
  return items.map((o) => {
    switch (o.kind) {
      case "stream":
        return new vscode.NotebookCellOutput([o.name === "stderr" ? vscode.NotebookCellOutputItem.stderr(o.text) : vscode.NotebookCellOutputItem.stdout(o.text)]);
      case "error": {
        const err = new Error(o.evalue);
        err.name = o.ename;
        err.stack = o.traceback.join("\n");
        return new vscode.NotebookCellOutput([vscode.NotebookCellOutputItem.error(err)]);
      }
      default: {
        const outItems: vscode.NotebookCellOutputItem[] = [];
        for (const [mime, v] of Object.entries(o.data)) {
          if (mime === "image/png" || mime === "image/jpeg" || mime === "image/gif") {
            outItems.push(new vscode.NotebookCellOutputItem(Buffer.from(String(v), "base64"), mime));
          } else if (mime === "application/json" || (typeof v !== "string" && !Array.isArray(v))) {
            outItems.push(vscode.NotebookCellOutputItem.json(v, mime));
          } else {
            outItems.push(vscode.NotebookCellOutputItem.text(Array.isArray(v) ? v.join("") : String(v), mime));
          }
        }
        const meta: Record<string, unknown> = { outputType: o.kind === "result" ? "execute_result" : "display_data" };
        if (o.kind === "result" && executionCount) meta.executionCount = executionCount;
        if (o.displayId) meta.transient = { display_id: o.displayId };
        return new vscode.NotebookCellOutput(outItems, meta);
      }
    }
  });
}

/** The part of a notebook's metadata (.ipynb) that names its kernel. */
interface NotebookMetadata {
  metadata?: { kernelspec?: KernelSpecMetadata };
  custom?: { metadata?: { kernelspec?: KernelSpecMetadata } };
}

interface Running {
  exec: vscode.NotebookCellExecution;
  items: OutputItem[];
  state: { clearPending?: boolean };
  count?: number;
}

/** What a notebook's kernel was started for: its spec's key (notebookKernelSpecs). */
interface NotebookKernel {
  handle: KernelHandle;
  key: string;
}

export class CellboxNotebookController implements vscode.Disposable {
  /**
   * The controllers: for each notebook type, first the one that picks the notebook's language
   * from its kernelspec ("cellbox (sandboxed)", there before the daemon is asked), then one per
   * kernel the daemon offers (setLanguages): its languages, Jupyter kernels and interpreters.
   */
  readonly controllers: vscode.NotebookController[] = [];
  /** controller id -> the kernel it runs (absent: the notebook's own language). */
  readonly specs = new Map<string, NotebookKernelSpec>();
  /** notebook uri -> its kernel */
  readonly kernels = new Map<string, KernelHandle>();
  /** notebook uri -> what its kernel was started for */
  private readonly started = new Map<string, NotebookKernel>();
  /** notebook uri -> the tail of its execution queue */
  private readonly queues = new Map<string, Promise<void>>();
  /** executionId -> the cell execution its outputs go to */
  private readonly running = new Map<string, Running>();
  /** cell document uri -> the result of its last run (its filesChanged and checkpoint) */
  readonly results = new Map<string, ExecuteResult>();
  private readonly _onResults = new vscode.EventEmitter<void>();
  /** A cell's last result changed (the cell status bar follows). */
  readonly onResults = this._onResults.event;
  private readonly subs: vscode.Disposable[] = [];
  /** The log lines of languages left out, said once each. */
  private readonly logged = new Set<string>();
  /** The session the controllers were made for (their affinity follows its languages). */
  private languages?: Session;

  constructor(
    private readonly session: () => Promise<Session>,
    private readonly onOutputSub: (f: (p: KernelOutputParams) => void) => vscode.Disposable,
    private readonly log: (line: string) => void = () => undefined,
  ) {
    for (const type of NOTEBOOK_TYPES) {
      const c = this.create(`cellbox-${type}`, type, "cellbox (sandboxed)");
      c.supportedLanguages = DEFAULT_LANGUAGES;
      c.description = "the notebook's language (its kernelspec)";
    }
    this.subs.push(this.onOutputSub((p) => this.onOutput(p)));
  }

  private create(id: string, type: string, label: string): vscode.NotebookController {
    const c = vscode.notebooks.createNotebookController(id, type, label);
    c.supportsExecutionOrder = true;
    c.executeHandler = (cells, nb, ctrl) => this.execute(cells, nb, ctrl);
    c.interruptHandler = (nb) => this.interrupt(nb);
    this.controllers.push(c);
    return c;
  }

  /**
   * Follows the daemon's kernels: one controller per language of initialize (cellbox's own and
   * Jupyter kernels) and per interpreter of the host that the language's own would not run
   * (notebookKernelSpecs); those no longer offered are disposed. A language that is not
   * available is left out, with a line in the log saying why. The controller that fits each
   * open notebook's kernelspec is marked preferred.
   */
  setLanguages(s: Session) {
    const ids = vscodeLanguageIds(s.languages);
    for (const c of this.controllers) if (!this.specs.has(c.id)) c.supportedLanguages = ids.length ? ids : DEFAULT_LANGUAGES;
    const { specs, leftOut } = notebookKernelSpecs(s.languages, s.client.info?.capabilities.interpreters, s.workspace?.interpreters);
    for (const line of leftOut) {
      if (this.logged.has(line)) continue;
      this.logged.add(line);
      this.log(line);
    }
    const wanted = new Set<string>();
    for (const type of NOTEBOOK_TYPES) {
      for (const spec of specs) {
        const id = `cellbox-${type}:${spec.key}`;
        wanted.add(id);
        let c = this.controllers.find((x) => x.id === id);
        if (!c) c = this.create(id, type, spec.label);
        c.label = spec.label;
        c.description = spec.description;
        c.detail = spec.detail;
        c.supportedLanguages = spec.cellLanguages.length ? spec.cellLanguages : undefined;
        this.specs.set(id, spec);
      }
    }
    for (const c of [...this.controllers]) {
      if (!this.specs.has(c.id) || wanted.has(c.id)) continue;
      this.specs.delete(c.id);
      this.controllers.splice(this.controllers.indexOf(c), 1);
      c.dispose();
    }
    this.languages = s;
    for (const nb of vscode.workspace.notebookDocuments) this.prefer(nb);
  }

  /** Marks the controller of a notebook's kernelspec language preferred (the picker's first). */
  prefer(nb: vscode.NotebookDocument) {
    const s = this.languages;
    if (!s || !NOTEBOOK_TYPES.includes(nb.notebookType)) return;
    const md = (nb.metadata ?? {}) as NotebookMetadata;
    const first = nb.getCells().find((c) => c.kind === vscode.NotebookCellKind.Code);
    const lang = notebookLanguage(s, md?.metadata?.kernelspec ?? md?.custom?.metadata?.kernelspec, first?.document.languageId ?? "python");
    const id = `cellbox-${nb.notebookType}:${specKey(lang)}`;
    this.controllers.find((c) => c.id === id)?.updateNotebookAffinity(nb, vscode.NotebookControllerAffinity.Preferred);
  }

  /** The spec a controller runs for a notebook: its own, or the notebook's language (the first controller). */
  specFor(ctrl: vscode.NotebookController | undefined, s: Session, nb: vscode.NotebookDocument, languageId: string): { key: string; language: string; interpreter?: string } {
    const own = ctrl ? this.specs.get(ctrl.id) : undefined;
    if (own) return own;
    const md = (nb.metadata ?? {}) as NotebookMetadata;
    const language = notebookLanguage(s, md?.metadata?.kernelspec ?? md?.custom?.metadata?.kernelspec, languageId);
    return { key: specKey(language), language };
  }

  private onOutput(p: KernelOutputParams) {
    if (p.kind === "display" && p.update && p.displayId) {
      // A display update reaches every running cell that shows that display.
      for (const r of this.running.values()) {
        if (r.items.some((o) => o.kind !== "stream" && o.kind !== "error" && o.displayId === p.displayId)) {
          r.items = applyOutput(r.items, p, r.state);
          r.exec.replaceOutput(toCellOutputs(r.items, r.count));
        }
      }
      return;
    }
    const r = this.running.get(p.executionId);
    if (!r) return;
    r.items = applyOutput(r.items, p, r.state);
    r.exec.replaceOutput(toCellOutputs(r.items, r.count));
  }

  /**
   * The kernel of a notebook for the controller that runs it, started on first use. A kernel
   * started for another controller (the user picked another kernel) is shut down first: a
   * notebook has one kernel.
   */
  async kernelFor(nb: vscode.NotebookDocument, languageId: string, ctrl?: vscode.NotebookController): Promise<KernelHandle> {
    const key = nb.uri.toString();
    const s = await this.session();
    const spec = this.specFor(ctrl, s, nb, languageId);
    const cur = this.started.get(key);
    // Shut down elsewhere (cellbox: Shut Down Kernel forgets it) or dead: started again.
    const live = !!cur && this.kernels.get(key) === cur.handle && cur.handle.state !== "dead";
    if (cur && live && cur.key === spec.key) return cur.handle;
    if (cur) {
      this.started.delete(key);
      this.kernels.delete(key);
      if (live) {
        await s.client.request(Methods.KernelShutdown, { kernelId: cur.handle.kernelId }).catch((e) => this.log(`shutting down ${cur.handle.kernelId}: ${errorMessage(e)}`));
      }
    }
    const h = await s.startKernel(spec.language, undefined, false, spec.interpreter);
    this.kernels.set(key, h);
    this.started.set(key, { handle: h, key: spec.key });
    s.kernelOwners.set(h.kernelId, nb.uri.path.split("/").pop() || key);
    return h;
  }

  /** Runs cells in order, after whatever the notebook already has queued. */
  execute(cells: vscode.NotebookCell[], nb: vscode.NotebookDocument, ctrl: vscode.NotebookController): Promise<void> {
    const key = nb.uri.toString();
    // Every cell shows as pending at once, as VS Code does for queued cells.
    const execs = cells.map((cell) => ctrl.createNotebookCellExecution(cell));
    const prev = this.queues.get(key) ?? Promise.resolve();
    const run = prev.then(async () => {
      let failed = false;
      for (let i = 0; i < cells.length; i++) {
        const exec = execs[i];
        if (failed || exec.token.isCancellationRequested) {
          exec.start(Date.now());
          exec.end(undefined, Date.now());
          continue;
        }
        const ok = await this.runCell(cells[i], nb, exec, ctrl);
        if (!ok) failed = true; // stopOnError: the cells after a failed one do not run
      }
    });
    const tail = run.catch(() => undefined);
    this.queues.set(key, tail);
    return tail;
  }

  private async runCell(cell: vscode.NotebookCell, nb: vscode.NotebookDocument, exec: vscode.NotebookCellExecution, ctrl?: vscode.NotebookController): Promise<boolean> {
    exec.start(Date.now());
    await exec.clearOutput();
    if (this.results.delete(cell.document.uri.toString())) this._onResults.fire();
    let k: KernelHandle;
    let s: Session;
    try {
      s = await this.session();
      k = await this.kernelFor(nb, cell.document.languageId, ctrl);
    } catch (e) {
      await exec.replaceOutput([new vscode.NotebookCellOutput([vscode.NotebookCellOutputItem.error(new Error(errorMessage(e)))])]);
      exec.end(false, Date.now());
      return false;
    }
    const id = newExecutionId("nb");
    s.noteOrigin(id, `cell ${cell.index + 1} of ${nb.uri.path.split("/").pop() || nb.uri.toString()}`);
    const r: Running = { exec, items: [], state: {} };
    this.running.set(id, r);
    const cts = new CancellationTokenSource();
    const sub = exec.token.onCancellationRequested(() => cts.cancel());
    try {
      const res = await s.client.request(Methods.KernelExecute, { kernelId: k.kernelId, code: cell.document.getText(), executionId: id, allowStdin: true, stopOnError: true, source: { path: cell.document.uri.toString(), line: 1 }, checkpoint: s.checkpointRuns }, cts.token);
      r.count = res.executionCount;
      this.results.set(cell.document.uri.toString(), res);
      this._onResults.fire();
      exec.executionOrder = res.executionCount || undefined;
      if (res.error && !r.items.some((o) => o.kind === "error")) r.items.push({ kind: "error", ...res.error });
      await exec.replaceOutput(toCellOutputs(r.items, r.count));
      exec.end(res.status === "ok", Date.now());
      return res.status === "ok";
    } catch (e) {
      r.items.push({ kind: "error", ename: "cellbox", evalue: errorMessage(e), traceback: [] });
      await exec.replaceOutput(toCellOutputs(r.items));
      exec.end(false, Date.now());
      return false;
    } finally {
      sub.dispose();
      this.running.delete(id);
    }
  }

  async interrupt(nb: vscode.NotebookDocument) {
    const k = this.kernels.get(nb.uri.toString());
    if (!k) return;
    const s = await this.session();
    await s.client.request(Methods.KernelInterrupt, { kernelId: k.kernelId });
  }

  /** The kernel of the notebook that holds this cell document (completion, hover). */
  kernelOfCell(doc: vscode.TextDocument): KernelHandle | undefined {
    for (const nb of vscode.workspace.notebookDocuments) {
      if (nb.getCells().some((c) => c.document === doc)) {
        return this.kernels.get(nb.uri.toString());
      }
    }
    return undefined;
  }

  /** Clears every cell's outputs (cellbox: Clear Notebook Outputs). */
  async clearOutputs(nb: vscode.NotebookDocument) {
    const ctrl = this.controllers.find((c) => c.notebookType === nb.notebookType) ?? this.controllers[0];
    for (const cell of nb.getCells()) {
      if (cell.kind !== vscode.NotebookCellKind.Code) continue;
      const e = ctrl.createNotebookCellExecution(cell);
      e.start();
      await e.clearOutput();
      e.end(undefined);
    }
  }

  dispose() {
    this._onResults.dispose();
    for (const c of this.controllers) c.dispose();
    for (const s of this.subs) s.dispose();
  }
}

/**
 * The cell status bar of a cell whose last run changed files (kernel/execute's filesChanged,
 * PROTOCOL.md §10): "execution 3:" then each file (click: its diff), "+N more" (click: the
 * executions list) and "undo" when the run took an automatic checkpoint first.
 */
export class FilesChangedStatusBar implements vscode.NotebookCellStatusBarItemProvider {
  private readonly emitter = new vscode.EventEmitter<void>();
  readonly onDidChangeCellStatusBarItems = this.emitter.event;
  private readonly sub: vscode.Disposable;
  constructor(private readonly controller: CellboxNotebookController) {
    this.sub = controller.onResults(() => this.emitter.fire());
  }

  provideCellStatusBarItems(cell: vscode.NotebookCell): vscode.NotebookCellStatusBarItem[] {
    const res = this.controller.results.get(cell.document.uri.toString());
    if (!res || (!res.filesChanged?.length && !res.filesChangedMore)) return [];
    const left = vscode.NotebookCellStatusBarAlignment.Left;
    const item = (text: string, tooltip: string, command?: vscode.Command) => {
      const it = new vscode.NotebookCellStatusBarItem(text, left);
      it.tooltip = tooltip;
      it.command = command;
      return it;
    };
    const what = describeFiles(res.filesChanged, res.filesChangedMore);
    const items = [item(`$(history) execution ${res.executionCount}`, `execution ${res.executionCount} ${what}`, { title: "Executions", command: "cellbox.showExecutions" })];
    const s = summarize(res.filesChanged, res.filesChangedMore, 3);
    for (const p of s.parts) {
      p.files.forEach((f, i) => {
        const icon = f.kind === "added" ? "$(diff-added)" : f.kind === "deleted" ? "$(diff-removed)" : "$(diff-modified)";
        items.push(item(`${icon} ${i === 0 ? `${p.verb} ` : ""}${fileLabel(f)}`, `${p.verb} ${f.path}: open its diff`, { title: "Open Diff", command: "cellbox.openChange", arguments: [f.path] }));
      });
    }
    if (s.hidden > 0) items.push(item(`+${s.hidden} more`, what, { title: "Executions", command: "cellbox.showExecutions" }));
    if (res.checkpoint) {
      items.push(item("$(discard) undo", "Restore the workspace's files to how they were before this execution", { title: "Undo", command: "cellbox.undoExecution", arguments: [{ executionId: res.executionId, executionCount: res.executionCount, checkpoint: res.checkpoint }] }));
    }
    return items;
  }

  dispose() {
    this.sub.dispose();
    this.emitter.dispose();
  }
}
