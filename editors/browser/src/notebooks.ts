// The notebooks of the page: the .ipynb opener and "+ Notebook", the
// session that brings them and their kernels back after a reload, input()
// for the asking cell, and the kernels' notifications for each notebook.
import { Methods, type FsDidChangeParams, type KernelInputRequestParams, type KernelOutputParams, type KernelStatusParams, type ProgressParams } from "../client/client";
import { el } from "./dom";
import { emptyNotebook, serializeNotebook, type NbCell } from "./ipynb";
import { defaultLanguage, kernelMetadata } from "./kernelspec";
import { errText, Notebook, type SessionEntry } from "./notebook";
import type { Opener, Workbench } from "./workbench";

/** The notebooks of the page: the .ipynb opener, "+ Notebook", the session, input() and the kernels' notifications. */
export class Notebooks {
  readonly list: Notebook[] = [];
  /** Cells copied (C, X), pasted with V anywhere. */
  clipboard: NbCell[] = [];
  /** How long after the last edit a notebook saves itself. */
  autosaveMs = 1500;
  private restoring = false;

  constructor(readonly wb: Workbench) {
    const opener: Opener = { accepts: (p) => p.toLowerCase().endsWith(".ipynb"), open: (p) => this.open(p).then(() => {}) };
    wb.openers.unshift(opener);
    const add = el("button", { class: "new-notebook", title: "a new notebook (Untitled.ipynb) in the project's top directory" }, "+ Notebook");
    add.onclick = () => void this.create().catch((e) => wb.progress(`cannot create a notebook: ${errText(e)}`));
    wb.docs.tools.append(add);
    const c = wb.client;
    c.on(Methods.KernelOutput, (p: KernelOutputParams) => this.byKernel(p.kernelId)?.output(p));
    c.on(Methods.KernelStatus, (p: KernelStatusParams) => this.byKernel(p.kernelId)?.status(p));
    c.on(Methods.Progress, (p: ProgressParams) => {
      if (String(p.token).startsWith("kernel-start")) wb.progress(p.value.kind === "end" ? "" : `${p.value.title ?? ""} ${p.value.message ?? ""}`.trim());
    });
    c.handle(Methods.KernelInputRequest, (p: KernelInputRequestParams) => this.inputRequest(p));
    wb.docs.onChange(() => {
      const nb = this.active;
      if (nb) {
        wb.kernels.setActive(nb.kernelId);
        wb.session.set("notebooks.active", nb.path);
      }
    });
    // A notebook's file changed on disk (a run, a terminal, an agent, an undo): the tree's
    // fs/watch says so; a clean notebook reloads, the active one asks when it has edits.
    c.on(Methods.FsDidChange, (p: FsDidChangeParams) => {
      if (p.workspaceId !== wb.workspaceId) return;
      for (const ch of p.changes) {
        const nb = ch.type !== "deleted" ? this.byPath(ch.path.replace(/^\/+/, "")) : undefined;
        if (nb && (nb === this.active || !nb.dirty)) void nb.checkDisk();
      }
    });
    // Back to the page: a notebook changed on disk meanwhile reloads (or asks).
    window.addEventListener("focus", () => void this.active?.checkDisk());
    // Leaving (a reload, a closed tab): unsaved edits stay in the session as drafts.
    window.addEventListener("pagehide", () => {
      for (const nb of this.list) nb.writeDraft();
      this.saveSession();
    });
  }

  /** The notebook in the active tab, if it is one. */
  get active(): Notebook | undefined {
    const id = this.wb.docs.current?.id;
    return this.list.find((n) => n.tabId === id);
  }

  byKernel(kernelId: string): Notebook | undefined {
    return this.list.find((n) => n.kernelId === kernelId);
  }

  byPath(path: string): Notebook | undefined {
    return this.list.find((n) => n.path === path);
  }

  /** Opens a notebook file in a tab (or shows the open one). */
  async open(path: string, entry?: SessionEntry): Promise<Notebook> {
    // Workspace-relative; /workspace/x as the sandbox names it is x.
    path = path.replace(/^\/workspace\//, "").replace(/^\/+/, "");
    const had = this.byPath(path);
    if (had) {
      this.wb.docs.activate(had.tabId);
      return had;
    }
    const nb = new Notebook(this, path);
    this.list.push(nb);
    this.wb.docs.open({ id: nb.tabId, title: nb.title, tooltip: path, body: nb.root, close: () => nb.close(), activate: () => nb.activated() });
    try {
      await nb.load(entry);
    } catch (e) {
      nb.fail(e);
    }
    this.saveSession();
    return nb;
  }

  /** A new notebook: Untitled.ipynb (Untitled1.ipynb, ...: the first free name) at the top of the project. */
  async create(): Promise<Notebook> {
    const { client, workspaceId } = this.wb;
    const r = await client.request(Methods.FsList, { workspaceId });
    const taken = new Set(r.entries.map((e) => e.path.replace(/^\/+/, "")));
    let name = "Untitled.ipynb";
    for (let i = 1; taken.has(name) || this.byPath(name); i++) name = `Untitled${i}.ipynb`;
    const doc = emptyNotebook();
    const lang = defaultLanguage(this.wb.languages);
    if (lang) doc.metadata = kernelMetadata({}, lang, this.wb.languages, undefined);
    await client.request(Methods.FsWrite, { workspaceId, path: name, content: serializeNotebook(doc) });
    this.wb.changes?.schedule();
    const nb = await this.open(name);
    nb.focusFirst();
    return nb;
  }

  /** Writes the open notebooks, their kernels and the runs under way to the session. */
  saveSession() {
    if (this.restoring) return;
    this.wb.session.set(
      "notebooks",
      this.list.filter((n) => !n.failed).map((n) => n.sessionEntry()),
    );
  }

  /**
   * restore reopens the notebooks of the last visit: their drafts, and
   * their kernels when still alive (re-attached, replaying what ran while
   * the page was away); a kernel no notebook takes back is shut down.
   */
  async restore() {
    const entries = this.wb.session.get<SessionEntry[]>("notebooks", []);
    if (!Array.isArray(entries) || !entries.length) return;
    let alive = new Set<string>();
    try {
      const r = await this.wb.client.request(Methods.KernelList, {});
      alive = new Set(r.kernels.filter((k) => k.workspaceId === this.wb.workspaceId && k.state !== "dead").map((k) => k.kernelId));
    } catch {
      // then every kernel counts as gone: cells start new ones
    }
    this.restoring = true;
    try {
      for (const e of entries) {
        if (!e || typeof e.path !== "string") continue;
        const entry = { ...e, kernelId: e.kernelId && alive.has(e.kernelId) ? e.kernelId : undefined };
        const nb = await this.open(e.path, entry);
        // A kernel the notebook did not take back (it failed to open, or its language is
        // no longer offered and it runs on another) is shut down: no orphan is left.
        if (entry.kernelId && (nb.failed || nb.kernelId !== entry.kernelId)) {
          await this.wb.client.request(Methods.KernelShutdown, { kernelId: entry.kernelId }).catch(() => {});
        }
      }
    } finally {
      this.restoring = false;
    }
    const active = this.wb.session.get<string | undefined>("notebooks.active", undefined);
    const nb = active ? this.byPath(active) : undefined;
    if (nb) this.wb.docs.activate(nb.tabId);
    this.saveSession();
  }

  /** After a reconnect: kernels culled or dead meanwhile are dropped; lost counts are recovered. */
  async resync() {
    let r;
    try {
      r = await this.wb.client.request(Methods.KernelList, {});
    } catch {
      return;
    }
    for (const nb of this.list) nb.resync(r.kernels);
  }

  /** kernel/inputRequest: a field in the output of the cell whose execution asks. */
  async inputRequest(p: KernelInputRequestParams): Promise<{ value: string }> {
    const nb = this.byKernel(p.kernelId);
    const cell = nb?.cellOf(p.executionId);
    if (!nb || !cell) return { value: "" };
    // A Jupyter kernel does not write the answered prompt to its output; the page shows it.
    return { value: await cell.askInput(p.prompt ?? "", !!p.password, !!nb.language?.startsWith("jupyter:")) };
  }

  /** Runs under way in any notebook of the page: autosave waits for none (a save during a run would count as the run's change). */
  get running(): number {
    return this.list.reduce((n, nb) => n + nb.runningCount, 0);
  }

  /** Runs sent in any notebook of the page whose result has not come. */
  get inFlight(): number {
    return this.list.reduce((n, nb) => n + nb.inFlight, 0);
  }

  /** A run ended: when none runs any more, every dirty notebook saves. */
  runEnded() {
    if (this.running) return;
    for (const nb of this.list) if (nb.dirty) nb.scheduleSave(100);
  }
}

