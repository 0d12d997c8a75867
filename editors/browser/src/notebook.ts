// A notebook: an .ipynb file of the workspace in a tab, with a kernel of its
// own (PROTOCOL.md §4, §8), edited as in JupyterLab (command and edit modes,
// the same keys), saved as nbformat 4.5 with fs/write (so a save shows as a
// change to review), its draft and kernel kept in the session across
// reloads (notebooks.ts brings them back).
import { closeCompletion, completionStatus } from "@codemirror/autocomplete";
import { ConnectionLostError, Methods, RPCError, type ExecuteResult, type InterpreterInfo, type KernelOutputParams, type KernelStatusParams, type LanguageCapability, type LanguageInfo } from "../client/client";
import { Cell, type CellHost } from "./cell";
import { el } from "./dom";
import type { Completion, KeyBinding } from "./editor";
import { newCellId, NotebookError, parseNotebook, serializeNotebook, type CellType, type JsonObject, type NbCell, type NbDoc, type NbOutput } from "./ipynb";
import { available, baseLanguage, defaultLanguage, interpreterOf, isJupyter, isObj, jupyterPrefix, kernelMetadata, languageFor } from "./kernelspec";
import type { Notebooks } from "./notebooks";
import { base64ToBytes } from "./viewers";

/** A language's name in the picker: its display name, and its version when the daemon knows it. */
const languageLabel = (l: LanguageCapability) => `${l.displayName} ${l.version ?? ""}`.trim();

/** A method of §4 as a person would call the feature (the toolbar's "no variables"). */
const featureName = (method: string) => method.replace(/^kernel\//, "").replace(/([a-z])([A-Z])/g, "$1 $2").toLowerCase();

/** An error as a person reads it: the message and the daemon's detail. */
export const errText = (e: unknown) => {
  const msg = String((e as Error)?.message ?? e);
  const detail = (e as RPCError)?.data?.detail;
  return detail && !msg.includes(detail) ? `${msg} (${detail})` : msg;
};

/** A notebook as the session keeps it across reloads. */
export interface SessionEntry {
  path: string;
  kernelId?: string;
  language?: string;
  languageInfo?: LanguageInfo;
  /** The seq after the last kernel/output seen: kernel/attach replays from there. */
  fromSeq?: number;
  /** Runs under way when the session was written. */
  running?: { executionId: string; cellId: string; code: string; fromSeq: number }[];
}

/** An unsaved notebook as the session keeps it. */
interface Draft {
  text: string;
  /** The file's mtime and size when the draft's edits began. */
  mtime?: string;
  size?: number;
}

/** choose asks in a modal <dialog> with buttons; resolves with the value of the one pressed ("" for Escape). */
function choose(message: string, buttons: { label: string; value: string; cls?: string }[]): Promise<string> {
  return new Promise((resolve) => {
    const row = el("div", { class: "confirm-buttons" });
    const dialog = el("dialog", { class: "confirm nb-choose" }, el("p", {}, message), row) as HTMLDialogElement;
    for (const b of buttons) {
      const e = el("button", { class: b.cls ?? "", value: b.value }, b.label);
      e.onclick = () => dialog.close(b.value);
      row.append(e);
    }
    dialog.addEventListener("close", () => {
      resolve(dialog.returnValue);
      dialog.remove();
    });
    document.body.append(dialog);
    dialog.showModal();
    (row.lastElementChild as HTMLElement | null)?.focus();
  });
}

export class Notebook implements CellHost {
  readonly root: HTMLElement;
  readonly tabId: string;
  title: string;
  kernelId?: string;
  language?: string;
  languageInfo?: LanguageInfo;
  dirty = false;
  /** The file could not be read: the tab says why, the session forgets it. */
  failed = false;
  /** Runs ask for an automatic checkpoint first (kernel/execute's checkpoint), so that each can be undone. */
  checkpointRuns = true;
  cells: Cell[] = [];
  private metadata: JsonObject = {};
  private list: HTMLElement;
  private statusEl: HTMLElement;
  private picker: HTMLSelectElement;
  private kind: HTMLElement;
  private limits: HTMLElement;
  private saveState: HTMLElement;
  private interruptButton: HTMLElement;
  private restartButton: HTMLElement;
  private message: HTMLElement;
  private byExec = new Map<string, Cell>();
  private displays = new Map<string, { cell: Cell; out: NbOutput }[]>();
  private execSeq = 0;
  private starting?: Promise<void>;
  /** The file's mtime and size as last read or written (a change on disk differs). */
  private disk: { mtime?: string; size?: number } = {};
  private saveTimer?: ReturnType<typeof setTimeout>;
  private draftTimer?: ReturnType<typeof setTimeout>;
  private saving?: Promise<boolean>;
  /** Bumped by every edit: a save that began before an edit leaves the notebook dirty. */
  private version = 0;
  /** A disk change the user chose to keep editing over (not asked again). */
  private ignoredDisk?: string;
  /** Cells deleted (Z brings the last back). */
  private trash: { model: NbCell; index: number }[] = [];
  private selected = 0;
  mode: "command" | "edit" = "command";
  /** The key pressed before (D,D; I,I; 0,0). */
  private lastKey?: { key: string; at: number };
  /** Runs whose response this page will not get (a reload or a lost connection): finished from kernel/history when the kernel is idle. */
  private lost = new Map<Cell, string>();
  /** Runs sent, with their code and the seq to replay from after a reload. */
  private running = new Map<string, { cell: Cell; code: string; fromSeq: number }>();
  /** Runs go out in order through this chain. */
  private sendQueue: Promise<unknown> = Promise.resolve();
  /** Runs sent whose result has not come yet. */
  inFlight = 0;

  constructor(
    private mgr: Notebooks,
    public path: string,
  ) {
    const wb = mgr.wb;
    this.tabId = `nb:${path}`;
    this.title = path.split("/").pop() || path;
    this.picker = el("select", { class: "language", "aria-label": "kernel" }) as HTMLSelectElement;
    const native = wb.languages.filter((l) => !isJupyter(l.id));
    const jupyter = wb.languages.filter((l) => isJupyter(l.id));
    const option = (l: LanguageCapability) => {
      const o = el("option", { value: l.id }, languageLabel(l)) as HTMLOptionElement;
      o.disabled = !l.available;
      if (!l.available) o.title = l.reason || "not available";
      else if (isJupyter(l.id)) o.title = `Jupyter kernelspec ${l.id.slice(jupyterPrefix.length)}, run in this workspace's sandbox`;
      return o;
    };
    this.picker.append(...native.map(option));
    // The host's other interpreters (pyenv's, uv's, nvm's...): a language on one of them.
    const byId = new Map(wb.languages.map((l) => [l.id, l]));
    const others = this.interpreters.filter((i) => i.language && i.source !== "system" && byId.get(i.language)?.available);
    if (others.length) {
      this.picker.append(
        el(
          "optgroup",
          { label: "Interpreters" },
          ...others.map((i) => {
            const o = el("option", { value: `${i.language}@${i.path}`, class: "interpreter" }, `${byId.get(i.language!)!.displayName} ${i.version ?? ""} (${i.source})`.replace(/ +/g, " ")) as HTMLOptionElement;
            o.title = i.path;
            return o;
          }),
        ),
      );
    }
    if (jupyter.length) this.picker.append(el("optgroup", { label: "Jupyter kernels (sandboxed)" }, ...jupyter.map(option)));
    this.picker.onchange = () => void this.changeLanguage(this.picker.value);
    const btn = (label: string, cls: string, title: string, fn: () => void) => {
      const b = el("button", { class: cls, title }, label);
      b.onclick = fn;
      return b;
    };
    this.kind = el("span", { class: "kernel-kind", hidden: "" }, "Jupyter");
    this.limits = el("span", { class: "kernel-limits", hidden: "" });
    this.interruptButton = btn("■", "interrupt", "Interrupt the kernel (I,I)", () => void this.interrupt());
    this.restartButton = btn("↻", "restart", "Restart the kernel (0,0)", () => void this.restart(true));
    this.statusEl = el("span", { class: "kernel-status", title: "kernel status" }, "no kernel");
    this.saveState = el("span", { class: "save-state" });
    this.message = el("div", { class: "nb-message", hidden: "" });
    this.list = el("div", { class: "cells", tabindex: "0", "aria-label": `cells of ${this.title}` });
    this.root = el(
      "section",
      { class: "notebook", "data-path": path },
      el(
        "div",
        { class: "toolbar" },
        btn("Save", "save", "Save (Ctrl+S)", () => void this.save()),
        btn("+", "add-cell", "Insert a cell below (B)", () => this.insert(this.selected + 1, "code", true)),
        btn("Cut", "cut-cell", "Cut the cell (X)", () => this.cut()),
        btn("Copy", "copy-cell", "Copy the cell (C)", () => this.copy()),
        btn("Paste", "paste-cell", "Paste below (V)", () => this.paste(1)),
        btn("▶", "run-cell", "Run the cell and select the next (Shift+Enter)", () => void this.runAndAdvance()),
        this.interruptButton,
        this.restartButton,
        btn("▶▶", "run-all", "Run all cells", () => void this.runAll()),
        btn("⌫ all", "clear-all", "Clear every output", () => this.clearAll()),
        this.cellTypeSelect(),
        el("span", { class: "spacer" }),
        this.saveState,
        this.picker,
        this.kind,
        this.statusEl,
        this.limits,
      ),
      this.message,
      this.list,
    );
    this.list.addEventListener("keydown", (e) => this.commandKey(e));
    this.root.addEventListener("keydown", (e) => {
      if ((e.ctrlKey || e.metaKey) && !e.shiftKey && !e.altKey && e.key.toLowerCase() === "s") {
        e.preventDefault();
        void this.save();
      }
    });
    this.list.addEventListener("focusin", () => this.showMode());
    this.list.addEventListener("focusout", () => queueMicrotask(() => this.showMode()));
  }

  private typeSelect?: HTMLSelectElement;
  private cellTypeSelect(): HTMLElement {
    const s = el("select", { class: "toolbar-cell-type", "aria-label": "type of the selected cell" }, el("option", { value: "code" }, "Code"), el("option", { value: "markdown" }, "Markdown"), el("option", { value: "raw" }, "Raw")) as HTMLSelectElement;
    s.onchange = () => {
      this.cell?.setType(s.value as CellType);
      this.command();
    };
    this.typeSelect = s;
    return s;
  }

  /** The host's interpreters (initialize's), for LANGUAGE@PATH. */
  get interpreters(): InterpreterInfo[] {
    return this.mgr.wb.client.initializeResult?.capabilities.interpreters ?? [];
  }

  /** The language as the status and the panels name it: "python", or "python 3.12.1" on another interpreter. */
  get languageTitle(): string {
    const id = this.language;
    if (!id) return "no kernel";
    const path = interpreterOf(id);
    if (!path) return id;
    const i = this.interpreters.find((x) => x.path === path && x.language === baseLanguage(id));
    return `${baseLanguage(id)} ${i?.version ?? path}`;
  }

  /** The selected cell. */
  get cell(): Cell | undefined {
    return this.cells[this.selected];
  }

  get runningCount(): number {
    return this.running.size;
  }

  cellOf(executionId: string): Cell | undefined {
    return this.byExec.get(executionId);
  }

  // --- loading and saving ---

  /** load reads the file (or the session's draft of it) and re-attaches the session's kernel. */
  async load(entry?: SessionEntry) {
    const { client, workspaceId, session } = this.mgr.wb;
    const r = await client.request(Methods.FsRead, { workspaceId, path: this.path });
    this.disk = { mtime: r.mtime, size: r.size };
    const draft = session.get<Draft | undefined>(`notebooks.draft:${this.path}`, undefined);
    let text = fileText(r);
    let fromDraft = false;
    if (draft && typeof draft.text === "string") {
      try {
        parseNotebook(draft.text);
        text = draft.text;
        fromDraft = true;
        // The draft's edits began on this version of the file: a newer one on disk is a conflict on save.
        if (draft.mtime) this.disk = { mtime: draft.mtime, size: draft.size };
      } catch {
        session.set(`notebooks.draft:${this.path}`, undefined);
      }
    }
    const doc = parseNotebook(text);
    this.setDoc(doc);
    const lang = entry?.language && available(entry.language, this.mgr.wb.languages, this.interpreters) ? entry.language : languageFor(doc.metadata, this.mgr.wb.languages, defaultLanguage(this.mgr.wb.languages), this.interpreters);
    this.setLanguage(lang);
    if (!lang) this.askLanguage();
    if (fromDraft) this.markDirty();
    if (entry?.kernelId && lang && entry.language === lang) await this.reattach(entry);
    this.select(0);
  }

  /** The tab shows why the notebook could not be opened. */
  fail(e: unknown) {
    this.failed = true;
    const why = e instanceof NotebookError ? `${this.path} is not a notebook this page can open: ${e.message}` : `cannot open ${this.path}: ${errText(e)}`;
    this.list.replaceChildren(el("div", { class: "nb-error" }, why));
  }

  private setDoc(doc: NbDoc) {
    for (const c of this.cells) c.destroy();
    this.cells = [];
    this.displays.clear();
    this.metadata = doc.metadata;
    for (const m of doc.cells) {
      const c = new Cell(this, m);
      this.cells.push(c);
      this.list.append(c.root);
    }
    if (!this.cells.length) this.insert(0, "code", false);
    this.selected = Math.min(this.selected, this.cells.length - 1);
    this.showSelection();
  }

  /** The notebook as nbformat, with its kernel's metadata. */
  toDoc(): NbDoc {
    const metadata = this.language ? kernelMetadata(this.metadata, this.language, this.mgr.wb.languages, this.languageInfo) : this.metadata;
    return { cells: this.cells.map((c) => c.model), metadata };
  }

  private markDirty(save = true) {
    this.version++;
    if (!this.dirty) {
      this.dirty = true;
      this.mgr.wb.docs.update(this.tabId, { dirty: true });
      this.saveState.textContent = "unsaved";
    }
    clearTimeout(this.draftTimer);
    this.draftTimer = setTimeout(() => this.writeDraft(), 300);
    if (save) this.scheduleSave(this.mgr.autosaveMs);
  }

  writeDraft() {
    if (!this.dirty) return;
    this.mgr.wb.session.set(`notebooks.draft:${this.path}`, { text: serializeNotebook(this.toDoc()), mtime: this.disk.mtime, size: this.disk.size } satisfies Draft);
  }

  private setClean(version: number) {
    if (version !== this.version) return; // edited while saving
    this.dirty = false;
    clearTimeout(this.draftTimer);
    this.mgr.wb.session.set(`notebooks.draft:${this.path}`, undefined);
    this.mgr.wb.docs.update(this.tabId, { dirty: false });
    this.saveState.textContent = `saved ${new Date().toLocaleTimeString()}`;
  }

  /** Autosave in ms, unless a run of the page is under way (it saves when the runs end). */
  scheduleSave(ms: number) {
    clearTimeout(this.saveTimer);
    this.saveTimer = setTimeout(() => {
      if (this.mgr.running) return; // runEnded saves
      void this.save({ auto: true });
    }, ms);
  }

  /**
   * save writes the notebook with fs/write (it then shows in the changes).
   * A file changed on disk since it was read is not overwritten without
   * asking (an autosave leaves it, and says so).
   */
  save(opts: { auto?: boolean } = {}): Promise<boolean> {
    if (this.failed) return Promise.resolve(false);
    clearTimeout(this.saveTimer);
    const prev = this.saving ?? Promise.resolve(true);
    const p = prev.then(() => this.saveNow(!!opts.auto));
    this.saving = p;
    void p.finally(() => {
      if (this.saving === p) this.saving = undefined;
    });
    return p;
  }

  private async saveNow(auto: boolean): Promise<boolean> {
    if (auto && !this.dirty) return true;
    const { client, workspaceId } = this.mgr.wb;
    try {
      const st = await client.request(Methods.FsStat, { workspaceId, path: this.path }).catch((e) => {
        if (e instanceof RPCError && e.code === -32001) return undefined; // deleted: written again
        throw e;
      });
      if (st && this.changedOnDisk(st)) {
        if (auto) {
          this.saveState.textContent = "changed on disk: not saved (Ctrl+S to overwrite)";
          return false;
        }
        const ok = await this.mgr.wb.confirm(`${this.path} changed on disk since it was opened here. Overwrite it with this notebook?`, "Overwrite");
        if (!ok) return false;
      }
      const version = this.version;
      this.saveState.textContent = "saving…";
      const r = await client.request(Methods.FsWrite, { workspaceId, path: this.path, content: serializeNotebook(this.toDoc()), createParents: true });
      this.disk = { mtime: r.mtime, size: r.size };
      this.ignoredDisk = undefined;
      this.setClean(version);
      this.mgr.wb.changes?.schedule();
      return true;
    } catch (e) {
      this.saveState.textContent = `not saved: ${errText(e)}`;
      return false;
    }
  }

  private changedOnDisk(st: { mtime: string; size: number }): boolean {
    return !!this.disk.mtime && (st.mtime !== this.disk.mtime || st.size !== this.disk.size);
  }

  /** checkDisk: the file changed on disk (another program, a restore): reload it, asking first when there are edits. */
  async checkDisk() {
    if (this.failed || this.saving) return;
    const { client, workspaceId } = this.mgr.wb;
    let st;
    try {
      st = await client.request(Methods.FsStat, { workspaceId, path: this.path });
    } catch {
      return; // deleted or unreachable: a save writes it again
    }
    if (!this.changedOnDisk(st) || this.saving) return;
    const key = `${st.mtime}/${st.size}`;
    if (this.dirty) {
      if (this.ignoredDisk === key) return;
      const reload = await this.mgr.wb.confirm(`${this.path} changed on disk, and this notebook has unsaved changes. Reload it from disk and lose them?`, "Reload");
      if (!reload) {
        this.ignoredDisk = key;
        return;
      }
    }
    await this.reload();
  }

  /** Reads the file again (the kernel stays). */
  async reload() {
    const { client, workspaceId, session } = this.mgr.wb;
    const r = await client.request(Methods.FsRead, { workspaceId, path: this.path });
    const doc = parseNotebook(fileText(r));
    this.disk = { mtime: r.mtime, size: r.size };
    session.set(`notebooks.draft:${this.path}`, undefined);
    const sel = this.selected;
    this.setDoc(doc);
    this.dirty = false;
    this.mgr.wb.docs.update(this.tabId, { dirty: false });
    this.saveState.textContent = "reloaded from disk";
    this.select(Math.min(sel, this.cells.length - 1));
  }

  // --- kernel ---

  supports(method: string): boolean {
    return !!this.language && !this.mgr.wb.languages.find((l) => l.id === baseLanguage(this.language!))?.unsupported?.includes(method);
  }

  /** The language for the cells' highlighting: the kernel's language name, else the language id. */
  languageName(): string | undefined {
    return this.languageInfo?.name ?? this.language;
  }

  private setLanguage(lang: string | undefined) {
    this.language = lang;
    if (lang) {
      [...this.picker.querySelectorAll("option.choose")].forEach((o) => o.remove());
      this.picker.value = lang;
    }
    const l = lang ? this.mgr.wb.languages.find((x) => x.id === baseLanguage(lang)) : undefined;
    const jupyter = !!lang && isJupyter(lang);
    this.kind.hidden = !jupyter;
    this.kind.title = jupyter ? `the host's Jupyter kernelspec ${lang!.slice(jupyterPrefix.length)}, run in this workspace's sandbox` : "";
    const unsupported = l?.unsupported ?? [];
    this.limits.hidden = unsupported.length === 0;
    this.limits.textContent = unsupported.length ? `no ${unsupported.map(featureName).join(", ")}` : "";
    this.limits.title = unsupported.length ? `${l?.displayName ?? lang} cannot answer ${unsupported.join(", ")}` : "";
    this.interruptButton.hidden = !this.supports(Methods.KernelInterrupt);
    this.restartButton.hidden = !this.supports(Methods.KernelRestart);
    for (const c of this.cells) c.relanguage();
    if (!this.kernelId) this.setStatus(lang ? "no kernel (starts when a cell runs)" : "no kernel chosen", lang ? "none" : "dead");
  }

  /** No language of this host runs the notebook's kernelspec: the picker asks. */
  private askLanguage() {
    const ks = isObj(this.metadata.kernelspec) ? this.metadata.kernelspec : {};
    const what = String(ks.display_name ?? ks.name ?? "its kernel");
    const o = el("option", { value: "", class: "choose", disabled: "" }, `choose a kernel (${what} is not here)`) as HTMLOptionElement;
    this.picker.prepend(o);
    this.picker.value = "";
    this.showMessage(`This notebook's kernel (${what}) is not available here: choose one in the kernel list.`);
  }

  private showMessage(s: string) {
    this.message.textContent = s;
    this.message.hidden = !s;
  }

  private setStatus(text: string, state: string) {
    this.statusEl.textContent = this.language ? `${this.languageTitle}: ${text}` : text;
    this.statusEl.dataset.state = state;
  }

  /** The kernel as the workbench names it. */
  private register() {
    if (!this.kernelId || !this.language) return;
    this.mgr.wb.kernels.set({ kernelId: this.kernelId, language: this.languageTitle, title: this.title });
    if (this.mgr.active === this) this.mgr.wb.kernels.setActive(this.kernelId);
  }

  ensureKernel(): Promise<void> {
    if (this.kernelId) return Promise.resolve();
    if (!this.language) return Promise.reject(new Error("choose a kernel for this notebook first"));
    const language = this.language;
    this.starting ??= (async () => {
      this.setStatus("starting", "starting");
      const { client, workspaceId } = this.mgr.wb;
      try {
        const interpreter = interpreterOf(language);
        const r = await client.request(Methods.KernelStart, { language: baseLanguage(language), ...(interpreter ? { interpreter } : {}), workspaceId, ...this.mgr.wb.networkParams(), workDoneToken: `kernel-start-${Date.now()}` });
        if (this.language !== language || this.closed) {
          // The notebook changed its language or closed while this one started.
          await client.request(Methods.KernelShutdown, { kernelId: r.kernelId }).catch(() => {});
          return;
        }
        this.kernelId = r.kernelId;
        this.languageInfo = r.languageInfo;
        this.showMessage("");
        await client.followKernel(r.kernelId, false);
        this.register();
        this.mgr.saveSession();
        this.setStatus("idle", "idle");
        for (const c of this.cells) c.relanguage();
        const info = r.languageInfo;
        // The interpreter: the project's .venv, one picked for it, or the host's (not named).
        const interp = r.interpreter;
        const where = interp && interp.source !== "system" ? ` · ${interp.path} (${interp.source})` : "";
        const warn = interp?.warning ? ` · ${interp.warning}` : "";
        this.statusEl.title = `kernel ${r.kernelId}: ${[info?.name, info?.version].filter(Boolean).join(" ") || r.language}${where}${warn}`;
      } catch (e) {
        // The status stays short; the reason goes in the bar over the cells.
        this.setStatus("cannot start", "dead");
        this.statusEl.title = errText(e);
        this.showMessage(`The ${this.languageTitle} kernel cannot start: ${errText(e)}`);
        throw e;
      } finally {
        this.starting = undefined;
      }
    })();
    return this.starting;
  }

  /** Re-attaches the session's kernel after a reload, replaying what ran meanwhile. */
  private async reattach(entry: SessionEntry) {
    const { client } = this.mgr.wb;
    const kernelId = entry.kernelId!;
    this.kernelId = kernelId;
    this.languageInfo = entry.languageInfo;
    for (const c of this.cells) c.relanguage();
    const runs = (entry.running ?? []).filter((r) => this.cells.some((c) => c.model.id === r.cellId));
    for (const r of runs) {
      const cell = this.cells.find((c) => c.model.id === r.cellId)!;
      cell.startRun(r.executionId);
      cell.setPrompt("*");
      this.byExec.set(r.executionId, cell);
      this.lost.set(cell, r.code);
    }
    const fromSeq = runs.length ? Math.min(...runs.map((r) => r.fromSeq)) : (entry.fromSeq ?? 1);
    this.setStatus("attaching", "starting");
    try {
      await client.followKernel(kernelId, true, Math.max(1, fromSeq));
      this.register();
      this.statusEl.title = `kernel ${kernelId} (re-attached)`;
    } catch (e) {
      client.unfollowKernel(kernelId);
      this.kernelId = undefined;
      for (const c of this.lost.keys()) c.endRun(null);
      this.lost.clear();
      this.setStatus(`gone (${errText(e)}); a run starts a new one`, "dead");
    }
  }

  /** kernel/output of this notebook's kernel. */
  output(p: KernelOutputParams) {
    const cell = this.byExec.get(p.executionId);
    if (!cell) return;
    if (cell.addKernelOutput(p, this.displays)) this.markDirty(!this.mgr.running);
  }

  /** kernel/status of this notebook's kernel. */
  status(p: KernelStatusParams) {
    this.setStatus(p.state + (p.reason ? `: ${p.reason}` : ""), p.state);
    if (p.state === "idle" && this.lost.size) void this.recover();
    if (p.state === "dead") {
      for (const [cell] of this.lost) cell.endRun(null, "dead");
      this.lost.clear();
    }
  }

  // recover ends the runs whose kernel/execute response this page did not
  // get (sent before a reload, or lost with the connection) once the kernel
  // is idle: the execution count from kernel/history (matched by code), the
  // files from workspace/executions.
  private recovering = false;
  private async recover() {
    if (this.recovering || !this.kernelId) return;
    this.recovering = true;
    const { client, workspaceId } = this.mgr.wb;
    try {
      let entries: { executionCount: number; code: string }[] = [];
      if (this.supports(Methods.KernelHistory)) {
        try {
          entries = (await client.request(Methods.KernelHistory, { kernelId: this.kernelId, n: 200 })).entries ?? [];
        } catch {
          // no counts, then
        }
      }
      for (const [cell, code] of [...this.lost]) {
        const e = entries.findLast((x) => x.code === code);
        const id = cell.executionId;
        cell.endRun(e ? e.executionCount : null);
        cell.notes.querySelector(".lost")?.remove();
        this.lost.delete(cell);
        if (id) {
          this.running.delete(id);
          const rec = await client.request(Methods.WorkspaceExecutions, { workspaceId, executionId: id }).catch(() => undefined);
          const x = rec?.executions?.find((r) => r.executionId === id);
          if (x) this.filesLine(cell, { executionId: x.executionId, executionCount: x.executionCount, checkpoint: x.checkpoint, filesChanged: x.filesChanged, filesChangedMore: x.more });
        }
      }
      this.markDirty(false);
      this.mgr.saveSession();
      this.mgr.runEnded();
    } finally {
      this.recovering = false;
    }
  }

  /** After a reconnect: a kernel gone meanwhile is dropped (the next run starts a new one). */
  resync(kernels: { kernelId: string; state: string }[]) {
    if (!this.kernelId) return;
    const k = kernels.find((x) => x.kernelId === this.kernelId);
    if (!k) {
      this.forgetKernel("gone (culled or stopped); a run starts a new one");
      return;
    }
    this.setStatus(k.state, k.state);
    if (k.state === "idle" && this.lost.size) void this.recover();
  }

  /** The kernel is gone (culled, shut down by another page): the next run starts a new one. */
  private forgetKernel(why: string) {
    if (!this.kernelId) return;
    this.mgr.wb.kernels.delete(this.kernelId);
    this.mgr.wb.client.unfollowKernel(this.kernelId);
    this.kernelId = undefined;
    this.setStatus(why, "dead");
    this.mgr.saveSession();
  }

  private async changeLanguage(lang: string) {
    if (lang === this.language || !lang) return;
    const label = [...this.picker.options].find((o) => o.value === lang)?.textContent ?? lang;
    if (this.kernelId || this.starting) {
      const ok = await this.mgr.wb.confirm(`Change the kernel of ${this.title} to ${label}? Its ${this.languageTitle} kernel is shut down: its variables are lost.`, "Change kernel");
      if (!ok) {
        this.picker.value = this.language ?? "";
        return;
      }
    }
    await this.shutdownKernel();
    this.languageInfo = undefined;
    this.showMessage("");
    this.setLanguage(lang);
    for (const c of this.cells) if (c.type === "code") c.setPrompt(" ");
    this.markDirty();
    this.mgr.saveSession();
    await this.ensureKernel().catch(() => {});
  }

  /** Shuts the notebook's kernel down (a change of kernel, or the tab closes). */
  async shutdownKernel() {
    await this.starting?.catch(() => {});
    const id = this.kernelId;
    if (!id) return;
    this.kernelId = undefined;
    this.mgr.wb.kernels.delete(id);
    this.mgr.wb.client.unfollowKernel(id);
    for (const [cell] of this.lost) cell.endRun(null);
    this.lost.clear();
    for (const r of this.running.values()) r.cell.endRun(null);
    this.running.clear();
    await this.mgr.wb.client.request(Methods.KernelShutdown, { kernelId: id }).catch(() => {});
  }

  async interrupt() {
    if (this.kernelId) await this.mgr.wb.client.request(Methods.KernelInterrupt, { kernelId: this.kernelId }).catch((e) => this.mgr.wb.progress(errText(e)));
  }

  async restart(ask = false) {
    if (!this.kernelId) return this.ensureKernel().catch(() => {});
    if (ask && !(await this.mgr.wb.confirm(`Restart the ${this.languageTitle} kernel of ${this.title}? Its variables are lost.`, "Restart"))) return;
    this.setStatus("restarting", "restarting");
    await this.mgr.wb.client.request(Methods.KernelRestart, { kernelId: this.kernelId }).catch((e) => this.mgr.wb.progress(errText(e)));
  }

  // --- running ---

  /** Runs a cell: a markdown cell renders; a code cell executes on the notebook's kernel. */
  run(cell: Cell): Promise<void> {
    if (cell.type === "markdown") {
      cell.render();
      return Promise.resolve();
    }
    if (cell.type !== "code") return Promise.resolve();
    return this.execute(cell);
  }

  private async execute(c: Cell): Promise<void> {
    const code = c.source;
    const executionId = `${c.model.id}-${Date.now().toString(36)}-${++this.execSeq}`;
    c.startRun(executionId);
    this.byExec.set(executionId, c);
    const pending = { cell: c, code, fromSeq: 0 };
    this.running.set(executionId, pending);
    const { client } = this.mgr.wb;
    let started = new Date();
    // The runs of a notebook go out one after the other, in the order they were asked for
    // (the kernel queues them): each step waits for the kernel and sends, not for the result.
    const step: Promise<{ sent?: Promise<ExecuteResult>; error?: Error }> = this.sendQueue.then(async () => {
      try {
        // Unsaved edits are saved before a run when no run is under way, so that the run's
        // changes (and its undo) are its own.
        if (this.dirty && !this.mgr.inFlight && !this.failed) await this.save({ auto: true });
        await this.ensureKernel();
      } catch (e) {
        return { error: e as Error };
      }
      const kernelId = this.kernelId!;
      pending.fromSeq = client.lastSeq(kernelId) + 1;
      this.mgr.saveSession();
      started = new Date();
      this.inFlight++;
      const sent = client.request(Methods.KernelExecute, { kernelId, code, executionId, allowStdin: true, stopOnError: true, checkpoint: this.checkpointRuns || undefined });
      void sent.catch(() => {}).finally(() => this.inFlight--);
      return { sent };
    });
    this.sendQueue = step;
    const s = await step;
    if (!s.sent) {
      this.running.delete(executionId);
      c.endRun(null);
      c.note(String(s.error?.message), "note error");
      this.mgr.runEnded();
      return;
    }
    try {
      const r = await s.sent;
      const ended = new Date();
      c.endRun(r.status === "aborted" ? null : r.executionCount, r.status);
      c.recordTiming(new Date(Math.min(started.getTime(), ended.getTime() - r.durationMs)), ended);
      c.setDuration(r.durationMs);
      this.filesLine(c, r);
      if (r.status !== "ok" && r.status !== "error") c.note(r.status === "timeout" && r.error ? `${r.status}: ${r.error.ename} ${r.error.evalue}` : r.status);
      if (r.outputTruncated) c.note("output truncated");
    } catch (e) {
      if (e instanceof ConnectionLostError) {
        c.setPrompt("?");
        c.note("connection lost: output continues here after reconnecting", "note lost");
        this.lost.set(c, code);
        return; // ends when the kernel is idle again (recover)
      }
      c.endRun(null, "failed");
      c.note(errText(e), "note error");
      if (e instanceof RPCError && e.code === -32001 && this.kernelId) this.forgetKernel("gone (shut down elsewhere, or culled); a run starts a new one");
    } finally {
      if (!this.lost.has(c)) {
        this.running.delete(executionId);
        this.markDirty(false);
        this.mgr.saveSession();
        this.mgr.runEnded();
      }
    }
  }

  /** The line of what an execution changed under its cell's output (PROTOCOL.md §10), with undo. */
  private filesLine(c: Cell, r: { executionId: string; executionCount: number; checkpoint?: string; filesChanged?: { path: string; kind: string }[]; filesChangedMore?: number }) {
    const changes = this.mgr.wb.changes;
    changes?.schedule();
    if (!changes || !(r.filesChanged?.length || r.filesChangedMore)) return;
    const line = changes.filesLine(r.filesChanged as Parameters<typeof changes.filesLine>[0], r.filesChangedMore);
    line.classList.add("files-changed");
    if (r.checkpoint) {
      const undo = el("button", { class: "undo", title: "restore the workspace's files to how they were before this execution" }, "undo");
      // The undo may take the notebook's own file back too: it reloads (or asks) then.
      undo.onclick = () =>
        void changes.undo({ executionId: r.executionId, executionCount: r.executionCount, checkpoint: r.checkpoint, language: this.languageTitle }).then((ok) => {
          if (ok) void this.checkDisk();
        });
      line.append(" ", undo);
    }
    c.notes.prepend(line);
  }

  async runAll(): Promise<void> {
    await Promise.all(this.cells.map((c) => this.run(c)));
  }

  /** Shift+Enter: run, select the next cell (a new one after the last). */
  async runAndAdvance() {
    const c = this.cell;
    if (!c) return;
    const i = this.selected;
    if (i === this.cells.length - 1) this.insert(i + 1, "code", false);
    this.select(i + 1);
    const next = this.cells[i + 1];
    const p = this.run(c);
    if (next.type === "code" && this.mode === "edit") next.editor.focus();
    else this.command();
    await p;
  }

  clearAll() {
    for (const c of this.cells) c.clearOutputs();
    this.markDirty();
  }

  // --- cells ---

  insert(at: number, type: CellType, edit: boolean, model?: NbCell): Cell {
    const m: NbCell = model ?? { id: newCellId(), cell_type: type, source: "", metadata: {}, outputs: [], execution_count: null };
    const c = new Cell(this, m);
    at = Math.max(0, Math.min(at, this.cells.length));
    this.cells.splice(at, 0, c);
    const next = this.cells[at + 1];
    if (next) this.list.insertBefore(c.root, next.root);
    else this.list.append(c.root);
    this.select(at);
    if (edit) this.editCell(c);
    if (model || this.cells.length > 1) this.markDirty();
    return c;
  }

  remove(c: Cell) {
    const i = this.cells.indexOf(c);
    if (i < 0) return;
    this.trash.push({ model: c.model, index: i });
    if (this.trash.length > 50) this.trash.shift();
    this.cells.splice(i, 1);
    c.destroy();
    if (!this.cells.length) this.insert(0, "code", false);
    this.select(Math.min(i, this.cells.length - 1));
    this.markDirty();
  }

  /** Z: the last deleted cell comes back where it was. */
  undelete() {
    const t = this.trash.pop();
    if (!t) return;
    this.insert(t.index, t.model.cell_type, false, t.model);
  }

  move(c: Cell, by: number) {
    const i = this.cells.indexOf(c);
    const j = i + by;
    if (i < 0 || j < 0 || j >= this.cells.length) return;
    this.cells.splice(i, 1);
    this.cells.splice(j, 0, c);
    const after = this.cells[j + 1];
    if (after) this.list.insertBefore(c.root, after.root);
    else this.list.append(c.root);
    this.select(j);
    if (this.mode === "command") this.command();
    this.markDirty();
  }

  copy() {
    if (this.cell) this.mgr.clipboard = [structuredClone(this.cell.model)];
  }

  cut() {
    if (!this.cell) return;
    this.copy();
    this.remove(this.cell);
  }

  /** V pastes below (by 1), Shift+V above (by 0). */
  paste(by: 0 | 1) {
    let at = this.selected + by;
    for (const m of this.mgr.clipboard) this.insert(at++, m.cell_type, false, { ...structuredClone(m), id: newCellId() });
  }

  /** Shift+M: the next cell's source joins this one's (their outputs go). */
  mergeNext() {
    const c = this.cell;
    const n = this.cells[this.selected + 1];
    if (!c || !n) return;
    c.editor.value = c.source.replace(/\n$/, "") + "\n" + n.source;
    c.clearOutputs();
    c.endRun(null);
    this.cells.splice(this.selected + 1, 1);
    n.destroy();
    this.markDirty();
  }

  /** Ctrl+Shift+Minus: the cell splits at the cursor. */
  split(c: Cell) {
    const pos = c.editor.cursor;
    const src = c.source;
    const head = src.slice(0, pos).replace(/\n$/, "");
    const tail = src.slice(pos).replace(/^\n/, "");
    c.editor.value = head;
    const i = this.cells.indexOf(c);
    const n = this.insert(i + 1, c.type, false);
    n.editor.value = tail;
    this.editCell(n);
    n.editor.setCursor(0);
  }

  // --- selection and modes ---

  select(i: number) {
    if (!this.cells.length) return;
    this.selected = Math.max(0, Math.min(i, this.cells.length - 1));
    this.showSelection();
  }

  private showSelection() {
    this.cells.forEach((c, j) => c.root.classList.toggle("selected", j === this.selected));
    const c = this.cell;
    if (this.typeSelect && c) this.typeSelect.value = c.type;
    c?.root.scrollIntoView({ block: "nearest" });
  }

  private showMode() {
    const editing = this.cells.some((c) => c.editor.hasFocus) || !!this.list.querySelector(".stdin-input:focus");
    this.mode = editing ? "edit" : "command";
    this.root.classList.toggle("edit-mode", editing);
    this.root.classList.toggle("command-mode", !editing && this.list.contains(document.activeElement));
  }

  /** Command mode: the cell stays selected, keys act on cells. */
  command() {
    this.mode = "command";
    this.list.focus({ preventScroll: true });
    this.showMode();
  }

  editCell(c: Cell) {
    this.select(this.cells.indexOf(c));
    if (c.type === "markdown") c.edit();
    else c.editor.focus();
    this.mode = "edit";
    this.showMode();
  }

  focusFirst() {
    if (this.cells[0]) this.editCell(this.cells[0]);
  }

  /** The tab became the active one. */
  activated() {
    this.mgr.wb.kernels.setActive(this.kernelId);
    void this.checkDisk();
    requestAnimationFrame(() => {
      if (this.root.hidden) return;
      if (this.mode === "edit" && this.cell) this.cell.editor.focus();
      else this.list.focus({ preventScroll: true });
    });
  }

  /** Command-mode keys, as in Jupyter. */
  private commandKey(e: KeyboardEvent) {
    const t = e.target as HTMLElement;
    if (t !== this.list && t.closest(".cm-editor, input, select, textarea")) return;
    // A button or link of a cell keeps Enter and Space; other keys are commands.
    if (t !== this.list && t.closest("button, a") && (e.key === "Enter" || e.key === " ")) return;
    const k = e.key;
    const plain = !e.ctrlKey && !e.metaKey && !e.altKey;
    const twice = (key: string) => {
      const hit = this.lastKey?.key === key && Date.now() - this.lastKey.at < 800;
      this.lastKey = hit ? undefined : { key, at: Date.now() };
      return hit;
    };
    const c = this.cell;
    let handled = true;
    if (k === "Enter" && e.shiftKey && !e.ctrlKey && !e.metaKey && !e.altKey) void this.runAndAdvance();
    else if (k === "Enter" && (e.ctrlKey || e.metaKey)) {
      if (c) void this.run(c);
    } else if (k === "Enter" && e.altKey) {
      if (c) {
        void this.run(c);
        this.insert(this.selected + 1, "code", true);
      }
    } else if (k === "Enter" && plain) {
      if (c) {
        e.preventDefault();
        this.editCell(c);
      }
    } else if (!plain) handled = false;
    else if (k === "ArrowUp" || k === "k") this.select(this.selected - 1);
    else if (k === "ArrowDown" || k === "j") this.select(this.selected + 1);
    else if (k === "a") this.insert(this.selected, "code", false);
    else if (k === "b") this.insert(this.selected + 1, "code", false);
    else if (k === "d") {
      if (twice("d") && c) this.remove(c);
    } else if (k === "z") this.undelete();
    else if (k === "m") c?.setType("markdown");
    else if (k === "y") c?.setType("code");
    else if (k === "r") c?.setType("raw");
    else if (k === "c") this.copy();
    else if (k === "x") this.cut();
    else if (k === "v") this.paste(1);
    else if (k === "V") this.paste(0);
    else if (k === "M") this.mergeNext();
    else if (k === "i") {
      if (twice("i")) void this.interrupt();
    } else if (k === "0") {
      if (twice("0")) void this.restart(true);
    } else if (k === "Escape") this.cell?.inspectBox.setAttribute("hidden", "");
    else handled = false;
    if (handled) {
      e.preventDefault();
      e.stopPropagation();
      if (k !== "d" && k !== "i" && k !== "0") this.lastKey = undefined;
      if (this.mode === "command" && !(k === "Enter" && plain)) this.list.focus({ preventScroll: true });
    }
  }

  // --- CellHost ---

  cellLanguage(): string | undefined {
    return this.languageName();
  }

  keys(cell: Cell): KeyBinding[] {
    return [
      {
        key: "Shift-Enter",
        run: (v) => {
          closeCompletion(v);
          this.select(this.cells.indexOf(cell));
          this.mode = "edit";
          void this.runAndAdvance();
          return true;
        },
      },
      {
        key: "Mod-Enter",
        run: (v) => {
          closeCompletion(v);
          void this.run(cell);
          if (cell.type === "markdown") this.command();
          return true;
        },
      },
      {
        key: "Alt-Enter",
        run: (v) => {
          closeCompletion(v);
          void this.run(cell);
          this.insert(this.cells.indexOf(cell) + 1, "code", true);
          return true;
        },
      },
      {
        key: "Escape",
        run: (v) => {
          if (completionStatus(v.state)) return false; // closes the completion first
          if (!cell.inspectBox.hidden) {
            cell.inspectBox.hidden = true;
            return true;
          }
          this.select(this.cells.indexOf(cell));
          this.command();
          return true;
        },
      },
      {
        // Up on the first line goes to the cell above, Down on the last to the cell below, as in JupyterLab.
        key: "ArrowUp",
        run: (v) => {
          const sel = v.state.selection.main;
          if (completionStatus(v.state) || !sel.empty || v.state.doc.lineAt(sel.head).number !== 1) return false;
          const i = this.cells.indexOf(cell);
          if (i <= 0) return false;
          const prev = this.cells[i - 1];
          this.editCell(prev);
          prev.editor.setCursor(prev.source.length);
          return true;
        },
      },
      {
        key: "ArrowDown",
        run: (v) => {
          const sel = v.state.selection.main;
          if (completionStatus(v.state) || !sel.empty || v.state.doc.lineAt(sel.head).number !== v.state.doc.lines) return false;
          const i = this.cells.indexOf(cell);
          if (i < 0 || i >= this.cells.length - 1) return false;
          const next = this.cells[i + 1];
          this.editCell(next);
          next.editor.setCursor(0);
          return true;
        },
      },
      {
        key: "Mod-Shift--",
        run: () => {
          this.split(cell);
          return true;
        },
      },
      {
        key: "Mod-s",
        run: () => {
          void this.save();
          return true;
        },
      },
    ];
  }

  async complete(_cell: Cell, code: string, pos: number): Promise<Completion | null> {
    if (!this.kernelId || !this.supports(Methods.KernelComplete)) return null;
    try {
      const r = await this.mgr.wb.client.request(Methods.KernelComplete, { kernelId: this.kernelId, code, cursorPos: pos });
      return { matches: r.matches ?? [], from: r.cursorStart, to: r.cursorEnd };
    } catch {
      return null;
    }
  }

  inspect(cell: Cell, code: string, pos: number) {
    if (!this.kernelId || !this.supports(Methods.KernelInspect)) {
      cell.showInspect(this.kernelId ? `${this.languageTitle} cannot show help (kernel/inspect)` : "no kernel yet: run a cell first");
      return;
    }
    void this.mgr.wb.client
      .request(Methods.KernelInspect, { kernelId: this.kernelId, code, cursorPos: pos, detailLevel: 0 })
      .then((r) => cell.showInspect(r.found ? String((r.data ?? {})["text/plain"] ?? "") : undefined))
      .catch((e) => cell.showInspect(errText(e)));
  }

  changed(_cell: Cell) {
    this.markDirty();
  }

  focused(cell: Cell) {
    this.select(this.cells.indexOf(cell));
    this.mode = "edit";
    this.showMode();
  }

  clicked(cell: Cell) {
    this.select(this.cells.indexOf(cell));
    if (cell.type === "markdown" && !cell.rendered) return;
    this.mode = "command";
    // The click focuses the cell list (the nearest focusable element) itself.
    queueMicrotask(() => this.showMode());
  }

  // --- the session and closing ---

  sessionEntry(): SessionEntry {
    const e: SessionEntry = { path: this.path, language: this.language };
    if (this.kernelId) {
      e.kernelId = this.kernelId;
      e.languageInfo = this.languageInfo;
      e.fromSeq = this.mgr.wb.client.lastSeq(this.kernelId) + 1;
      const running = [...this.running].filter(([, r]) => r.fromSeq > 0).map(([executionId, r]) => ({ executionId, cellId: r.cell.model.id, code: r.code, fromSeq: r.fromSeq }));
      if (running.length) e.running = running;
    }
    return e;
  }

  private closed = false;

  /** The tab closes: asks when there are unsaved changes, then shuts the kernel down. */
  async close(): Promise<boolean> {
    if (this.dirty && !this.failed) {
      const choice = await choose(`${this.title} has unsaved changes.`, [
        { label: "Cancel", value: "cancel", cls: "confirm-cancel" },
        { label: "Discard", value: "discard", cls: "confirm-discard" },
        { label: "Save", value: "save", cls: "confirm-ok" },
      ]);
      if (choice === "save") {
        if (!(await this.save())) return false;
      } else if (choice !== "discard") return false;
    }
    this.closed = true;
    clearTimeout(this.saveTimer);
    clearTimeout(this.draftTimer);
    this.mgr.wb.session.set(`notebooks.draft:${this.path}`, undefined);
    await this.shutdownKernel();
    for (const c of this.cells) c.destroy();
    const i = this.mgr.list.indexOf(this);
    if (i >= 0) this.mgr.list.splice(i, 1);
    this.mgr.saveSession();
    return true;
  }
}

/** The text of an fs/read result (the daemon answers base64 for bytes that are not UTF-8). */
function fileText(r: { content: string; encoding: string }): string {
  return r.encoding === "base64" ? new TextDecoder().decode(base64ToBytes(r.content)) : r.content;
}
