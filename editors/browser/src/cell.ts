// A notebook cell: its nbformat model, a CodeMirror editor for its source,
// the rendered view of a markdown cell, and the outputs of a code cell with
// Jupyter's prompts (In [n], Out[n]), collapsing and scrolling.
import type { KernelOutputParams } from "../client/client";
import { el } from "./dom";
import { CodeEditor, type Completion, type KeyBinding } from "./editor";
import { outputFromKernel, type CellType, type JsonObject, type NbCell, type NbOutput } from "./ipynb";
import { renderMarkdownCell } from "./mdcell";
import { renderBundle, stripANSI } from "./outputs";

/** What a cell asks of its notebook. */
export interface CellHost {
  /** The language for highlighting (the notebook's kernel's). */
  cellLanguage(): string | undefined;
  complete(cell: Cell, code: string, pos: number): Promise<Completion | null>;
  inspect(cell: Cell, code: string, pos: number): void;
  /** Edit-mode keys (run, Escape, split, save). */
  keys(cell: Cell): KeyBinding[];
  /** The source, type or outputs changed (the notebook is dirty). */
  changed(cell: Cell): void;
  /** The cell's editor took the focus (edit mode on it). */
  focused(cell: Cell): void;
  /** The cell was clicked outside its editor (select it, command mode). */
  clicked(cell: Cell): void;
  run(cell: Cell): void;
  move(cell: Cell, by: number): void;
  remove(cell: Cell): void;
}

/** A duration as a person reads it. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const m = Math.floor(ms / 60_000);
  return `${m} min ${Math.round((ms % 60_000) / 1000)} s`;
}

interface Shown {
  out: NbOutput;
  node: HTMLElement;
  displayId?: string;
}

export class Cell {
  readonly model: NbCell;
  readonly root: HTMLElement;
  readonly editor: CodeEditor;
  readonly prompt: HTMLElement;
  /** The rendered markdown (markdown cells). */
  readonly view: HTMLElement;
  readonly outputsEl: HTMLElement;
  readonly notes: HTMLElement;
  readonly timing: HTMLElement;
  readonly inspectBox: HTMLElement;
  private area: HTMLElement;
  private hiddenStub: HTMLElement;
  private typeSelect: HTMLSelectElement;
  private shown: Shown[] = [];
  /** clear_output(wait=True): clear when the next output comes. */
  private pendingClear = false;
  /** The running execution's id, while it runs. */
  executionId?: string;
  /** A markdown cell shows its rendering (not its editor). */
  rendered = false;

  constructor(
    private host: CellHost,
    model: NbCell,
  ) {
    this.model = model;
    this.prompt = el("div", { class: "prompt" });
    const editorHost = el("div", { class: "cell-editor" });
    this.view = el("div", { class: "md-view", title: "double-click to edit" });
    this.typeSelect = el("select", { class: "cell-type", "aria-label": "cell type", title: "cell type (Y code, M markdown, R raw)" }, el("option", { value: "code" }, "Code"), el("option", { value: "markdown" }, "Markdown"), el("option", { value: "raw" }, "Raw")) as HTMLSelectElement;
    this.typeSelect.onchange = () => this.setType(this.typeSelect.value as CellType);
    const btn = (label: string, cls: string, title: string, fn: () => void) => {
      const b = el("button", { class: cls, title }, label);
      b.onclick = (e) => {
        e.stopPropagation();
        fn();
      };
      return b;
    };
    const tools = el(
      "div",
      { class: "cell-tools" },
      btn("▶", "run", "Run (Shift+Enter)", () => host.run(this)),
      btn("↑", "move-up", "Move up", () => host.move(this, -1)),
      btn("↓", "move-down", "Move down", () => host.move(this, 1)),
      this.typeSelect,
      btn("⌫", "clear-outputs", "Clear outputs", () => {
        this.clearOutputs();
        host.changed(this);
      }),
      btn("✕", "delete", "Delete cell (D,D)", () => host.remove(this)),
    );
    this.editor = new CodeEditor({
      parent: editorHost,
      doc: model.source,
      language: this.editorLanguage(),
      label: "cell source",
      keys: host.keys(this),
      complete: (code, pos) => (this.model.cell_type === "code" ? host.complete(this, code, pos) : Promise.resolve(null)),
      inspect: (code, pos) => this.model.cell_type === "code" && host.inspect(this, code, pos),
      onChange: (doc) => {
        this.model.source = doc;
        host.changed(this);
      },
      onFocus: () => host.focused(this),
    });
    this.inspectBox = el("div", { class: "inspect", hidden: "" });
    this.timing = el("div", { class: "cell-timing" });
    this.outputsEl = el("div", { class: "outputs" });
    this.hiddenStub = el("div", { class: "outputs-hidden", hidden: "", title: "show the outputs" });
    this.hiddenStub.onclick = () => this.setCollapsed(false);
    const collapser = el("div", { class: "out-collapser", title: "collapse or expand the outputs" });
    collapser.onclick = () => this.setCollapsed(!this.collapsed);
    this.area = el("div", { class: "output-area" }, collapser, el("div", { class: "output-col" }, this.outputsEl, this.hiddenStub));
    this.notes = el("div", { class: "notes" });
    this.view.ondblclick = () => this.edit();
    this.root = el(
      "div",
      { class: "cell", "data-cell-id": model.id },
      el("div", { class: "cell-row" }, this.prompt, el("div", { class: "cell-input" }, editorHost, this.view, tools)),
      this.inspectBox,
      el("div", { class: "cell-foot" }, this.timing),
      this.area,
      this.notes,
    );
    this.root.addEventListener("mousedown", (e) => {
      const t = e.target as HTMLElement;
      // A click anywhere in the cell but its editor and its fields selects it (its toolbar stays then).
      if (!t.closest(".cm-editor") && !t.closest("input,select")) host.clicked(this);
    });
    this.showType();
    for (const o of model.outputs) this.appendShown(o);
    this.setPrompt(model.execution_count === null ? " " : String(model.execution_count));
    this.showTiming();
    this.applyCollapse();
    if (model.cell_type === "markdown") this.render();
  }

  get type(): CellType {
    return this.model.cell_type;
  }

  get source(): string {
    return this.model.source;
  }

  private editorLanguage(): string | undefined {
    return this.model.cell_type === "code" ? this.host.cellLanguage() : this.model.cell_type === "markdown" ? "markdown" : undefined;
  }

  /** The notebook's language changed: highlight for it. */
  relanguage() {
    this.editor.setLanguage(this.editorLanguage());
  }

  setType(t: CellType) {
    if (t === this.model.cell_type) return;
    const m = this.model;
    m.cell_type = t;
    if (t === "code") {
      delete m.attachments;
      m.outputs = [];
      m.execution_count = null;
    } else {
      this.clearOutputs();
      m.execution_count = null;
    }
    this.showType();
    this.relanguage();
    if (t === "markdown") this.render();
    else this.edit(false);
    this.host.changed(this);
  }

  private showType() {
    const t = this.model.cell_type;
    this.root.dataset.type = t;
    this.typeSelect.value = t;
    this.area.hidden = t !== "code";
    this.setPrompt(t === "code" && this.model.execution_count !== null ? String(this.model.execution_count) : " ");
  }

  /** Shows a markdown cell rendered (Shift+Enter, run). */
  render() {
    if (this.model.cell_type !== "markdown") return;
    renderMarkdownCell(this.view, this.model.source, this.model.attachments);
    if (!this.model.source.trim()) this.view.replaceChildren(el("p", { class: "md-empty" }, "Empty markdown cell: double-click or Enter to edit"));
    this.rendered = true;
    this.root.classList.add("rendered");
  }

  /** Shows a markdown cell's editor; focus: put the cursor in it. */
  edit(focus = true) {
    this.rendered = false;
    this.root.classList.remove("rendered");
    if (focus) this.editor.focus();
  }

  setPrompt(s: string) {
    this.prompt.textContent = this.model.cell_type === "code" ? `[${s}]:` : "";
  }

  // --- outputs ---

  get collapsed(): boolean {
    const j = this.model.metadata.jupyter as JsonObject | undefined;
    return this.model.metadata.collapsed === true || (typeof j === "object" && j !== null && j.outputs_hidden === true);
  }

  /** Hides or shows the outputs, as JupyterLab records it (jupyter.outputs_hidden, and nbformat's collapsed). */
  setCollapsed(on: boolean) {
    const md = this.model.metadata;
    const j = (typeof md.jupyter === "object" && md.jupyter !== null && !Array.isArray(md.jupyter) ? md.jupyter : {}) as JsonObject;
    if (on) {
      md.jupyter = { ...j, outputs_hidden: true };
      md.collapsed = true;
    } else {
      delete j.outputs_hidden;
      if (Object.keys(j).length) md.jupyter = j;
      else delete md.jupyter;
      delete md.collapsed;
    }
    this.applyCollapse();
    this.host.changed(this);
  }

  private applyCollapse() {
    const on = this.collapsed && this.model.outputs.length > 0;
    this.outputsEl.hidden = on;
    this.hiddenStub.hidden = !on;
    this.hiddenStub.textContent = `${this.model.outputs.length} output${this.model.outputs.length === 1 ? "" : "s"} hidden: click to show`;
    this.root.classList.toggle("outputs-collapsed", on);
    // metadata.scrolled === false: the outputs take all the room they need.
    this.outputsEl.classList.toggle("unscrolled", this.model.metadata.scrolled === false);
  }

  clearOutputs() {
    this.model.outputs = [];
    this.shown = [];
    this.outputsEl.replaceChildren();
    this.notes.replaceChildren();
    this.pendingClear = false;
    this.applyCollapse();
  }

  /** Starts a run: outputs, notes and help go, the prompt says running. */
  startRun(executionId: string) {
    this.clearOutputs();
    this.inspectBox.hidden = true;
    this.executionId = executionId;
    this.model.execution_count = null;
    this.setPrompt("*");
    this.root.classList.remove("failed");
    this.root.classList.add("running");
    delete this.root.dataset.status;
    this.timing.textContent = "";
  }

  /** A run ended (its response, or recovered after a reload). */
  endRun(executionCount: number | null, status?: string) {
    this.executionId = undefined;
    // A question the run no longer waits for (interrupted, or the kernel went away).
    for (const input of this.outputsEl.querySelectorAll(".stdin-input")) input.closest(".output")?.remove();
    this.root.classList.remove("running");
    this.model.execution_count = executionCount;
    this.setPrompt(executionCount === null ? " " : String(executionCount));
    for (const s of this.shown) {
      if (s.out.output_type === "execute_result") {
        s.out.execution_count = executionCount;
        const p = s.node.querySelector(".out-prompt");
        if (p) p.textContent = executionCount === null ? "Out:" : `Out[${executionCount}]:`;
      }
    }
    if (status) {
      this.root.dataset.status = status;
      this.root.classList.toggle("failed", status !== "ok");
    }
  }

  /** Records a run's times as JupyterLab does (metadata.execution, iopub/shell timestamps). */
  recordTiming(started: Date, ended: Date) {
    const exec = { "iopub.execute_input": started.toISOString(), "iopub.status.busy": started.toISOString(), "shell.execute_reply": ended.toISOString(), "iopub.status.idle": ended.toISOString() };
    this.model.metadata.execution = exec;
    this.showTiming();
  }

  private showTiming() {
    const e = this.model.metadata.execution as JsonObject | undefined;
    if (!e || typeof e !== "object" || Array.isArray(e)) {
      this.timing.textContent = "";
      return;
    }
    const a = Date.parse(String(e["iopub.execute_input"] ?? e["shell.execute_reply.started"] ?? ""));
    const b = Date.parse(String(e["shell.execute_reply"] ?? ""));
    if (Number.isNaN(a) || Number.isNaN(b) || this.model.cell_type !== "code") {
      this.timing.textContent = "";
      return;
    }
    this.timing.textContent = `${formatDuration(Math.max(0, b - a))} · ${new Date(b).toLocaleTimeString()}`;
    this.timing.title = `ran ${new Date(a).toLocaleString()} for ${formatDuration(b - a)}`;
  }

  /** Shows the duration the daemon measured (durationMs). */
  setDuration(ms: number) {
    this.timing.textContent = `${formatDuration(ms)} · ${new Date().toLocaleTimeString()}`;
  }

  /**
   * addKernelOutput takes a kernel/output of this cell's execution.
   * displays: every shown output with a display id, in any cell of the
   * notebook (an update replaces them all).
   */
  addKernelOutput(p: KernelOutputParams, displays: Map<string, { cell: Cell; out: NbOutput }[]>): boolean {
    if (p.kind === "clear") {
      if (p.wait) this.pendingClear = true;
      else this.clearKeepNotes();
      return true;
    }
    if (p.kind === "display" && p.update && p.displayId) {
      for (const d of displays.get(p.displayId) ?? []) d.cell.updateDisplay(d.out, p);
      return true;
    }
    if (this.pendingClear) this.clearKeepNotes();
    const out = outputFromKernel(p);
    if (!out) return false;
    const last = this.shown.at(-1);
    if (out.output_type === "stream" && last?.out.output_type === "stream" && last.out.name === out.name) {
      // Jupyter merges a stream's consecutive text into one output.
      last.out.text += out.text;
      const pre = last.node.querySelector("pre");
      if (pre) pre.textContent = stripANSI(last.out.text);
      return true;
    }
    this.model.outputs.push(out);
    const s = this.appendShown(out);
    if (p.displayId) {
      s.displayId = p.displayId;
      displays.set(p.displayId, [...(displays.get(p.displayId) ?? []), { cell: this, out }]);
    }
    this.applyCollapse();
    return true;
  }

  private clearKeepNotes() {
    this.model.outputs = [];
    this.shown = [];
    this.outputsEl.replaceChildren(...[...this.outputsEl.querySelectorAll(".stdin")].map((x) => x.closest(".output") as HTMLElement).filter(Boolean));
    this.pendingClear = false;
  }

  private updateDisplay(out: NbOutput, p: KernelOutputParams) {
    const s = this.shown.find((x) => x.out === out);
    if (!s || (out.output_type !== "display_data" && out.output_type !== "execute_result")) return;
    out.data = (p.data ?? {}) as JsonObject;
    out.metadata = (p.metadata ?? {}) as JsonObject;
    const fresh = this.outputNode(out);
    s.node.replaceWith(fresh);
    s.node = fresh;
    this.host.changed(this);
  }

  private appendShown(out: NbOutput): Shown {
    const s: Shown = { out, node: this.outputNode(out) };
    this.shown.push(s);
    this.outputsEl.append(s.node);
    return s;
  }

  /** An output's row: its prompt (Out[n] for a result), then its content. */
  private outputNode(out: NbOutput): HTMLElement {
    const prompt = el("div", { class: "out-prompt", title: "click to collapse the outputs" });
    prompt.onclick = () => this.setCollapsed(!this.collapsed);
    let body: HTMLElement;
    switch (out.output_type) {
      case "stream":
        body = el("pre", { class: `out-stream ${out.name === "stderr" ? "stderr" : "stdout"}` }, stripANSI(out.text));
        body.dataset.stream = out.name;
        break;
      case "error":
        body = el("pre", { class: "out-error" }, stripANSI(out.traceback.length ? out.traceback.join("\n") : `${out.ename}: ${out.evalue}`));
        break;
      default:
        body = renderBundle(out.data, out.metadata);
        if (out.output_type === "execute_result") {
          body.classList.add("out-result");
          prompt.textContent = out.execution_count === null ? "Out:" : `Out[${out.execution_count}]:`;
        }
    }
    return el("div", { class: `output ${out.output_type}` }, prompt, body);
  }

  /** input(): a field in the outputs; resolves with what was typed (Enter). */
  askInput(prompt: string, password: boolean, echo: boolean): Promise<string> {
    return new Promise((resolve) => {
      const input = el("input", { class: "stdin-input", type: password ? "password" : "text", "aria-label": prompt || "input", autocomplete: "off", spellcheck: "false" }) as HTMLInputElement;
      const label = el("span", { class: "stdin-prompt" }, prompt);
      const row = el("div", { class: "output stdin" }, el("div", { class: "out-prompt" }), el("div", { class: "stdin-line" }, label, input));
      this.outputsEl.append(row);
      this.outputsEl.hidden = false;
      input.addEventListener("keydown", (e) => {
        e.stopPropagation(); // not a command-mode key
        if (e.key !== "Enter") return;
        e.preventDefault();
        const value = input.value;
        // What was typed stays shown (a password as dots), as in Jupyter; it is not an output.
        // cellbox's kernels write that line to stdout themselves (echo false).
        if (echo) row.querySelector(".stdin-line")!.replaceChildren(el("pre", { class: "stdin-echo" }, `${prompt}${password ? "········" : value}`));
        else row.remove();
        resolve(value);
      });
      input.focus();
    });
  }

  /** Shows a kernel/inspect answer under the input (Escape closes it). */
  showInspect(text: string | undefined) {
    if (!text) {
      this.inspectBox.replaceChildren(el("div", { class: "inspect-none" }, "no help found here"));
    } else {
      this.inspectBox.replaceChildren(el("pre", {}, stripANSI(text)));
    }
    const close = el("button", { class: "inspect-close", title: "close (Escape)" }, "✕");
    close.onclick = () => (this.inspectBox.hidden = true);
    this.inspectBox.prepend(close);
    this.inspectBox.hidden = false;
  }

  note(s: string, cls = "note") {
    this.notes.append(el("div", { class: cls }, s));
  }

  destroy() {
    this.editor.destroy();
    this.root.remove();
  }
}
