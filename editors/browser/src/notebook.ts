// The notebook: cells of one language run on one kernel of the workspace.
import { ConnectionLostError, Methods, RPCError, type CellboxClient, type KernelOutputParams, type KernelStatusParams, type LanguageCapability, type NetworkMode, type ProgressParams } from "../client/client";
import { renderBundle, stripANSI } from "./outputs";
import { el } from "./dom";
import type { Files } from "./files";

/** The prefix of the languages that are the host's Jupyter kernelspecs (PROTOCOL.md §8). */
const jupyterPrefix = "jupyter:";
const isJupyter = (id: string) => id.startsWith(jupyterPrefix);

/** A language's name in the picker: its display name, and its version when the daemon knows it. */
const languageLabel = (l: LanguageCapability) => `${l.displayName} ${l.version ?? ""}`.trim();

/** A method of §4 as a person would call the feature (the toolbar's "no variables"). */
const featureName = (method: string) => method.replace(/^kernel\//, "").replace(/([a-z])([A-Z])/g, "$1 $2").toLowerCase();

let cellSeq = 0;

class Cell {
  readonly id = ++cellSeq;
  readonly root: HTMLElement;
  readonly code: HTMLTextAreaElement;
  readonly prompt: HTMLElement;
  readonly outputs: HTMLElement;
  readonly notes: HTMLElement;
  pendingClear = false;
  running = false;

  constructor(nb: Notebook, source: string) {
    this.prompt = el("div", { class: "prompt" }, "[ ]:");
    this.code = el("textarea", { class: "code", spellcheck: "false", "aria-label": "cell code" }) as HTMLTextAreaElement;
    this.code.value = source;
    this.outputs = el("div", { class: "outputs" });
    this.notes = el("div", { class: "notes" });
    const run = el("button", { class: "run", title: "Run (Shift+Enter)" }, "▶");
    const del = el("button", { class: "delete", title: "Delete cell" }, "✕");
    run.onclick = () => void nb.run(this);
    del.onclick = () => nb.remove(this);
    this.root = el("div", { class: "cell" }, this.prompt, el("div", { class: "cell-body" }, el("div", { class: "cell-input" }, this.code, el("div", { class: "cell-tools" }, run, del)), this.outputs, this.notes));
    this.root.dataset.cell = String(this.id);
    this.code.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.shiftKey || e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        void nb.run(this);
        if (e.shiftKey) nb.focusNext(this);
      } else if (e.key === "Tab" && !e.shiftKey) {
        e.preventDefault();
        this.code.setRangeText("    ", this.code.selectionStart, this.code.selectionEnd, "end");
        this.grow();
      }
    });
    this.code.addEventListener("input", () => this.grow());
    this.grow();
  }

  grow() {
    this.code.rows = Math.max(1, this.code.value.split("\n").length);
    if (this.code.isConnected) {
      this.code.style.height = "auto";
      this.code.style.height = `${this.code.scrollHeight}px`;
    }
  }

  clear() {
    this.outputs.replaceChildren();
    this.notes.replaceChildren();
    this.pendingClear = false;
  }

  setPrompt(s: string) {
    this.prompt.textContent = `[${s}]:`;
  }

  note(s: string, cls = "note") {
    this.notes.append(el("div", { class: cls }, s));
  }

  add(p: KernelOutputParams, displays: Map<string, HTMLElement[]>) {
    if (p.kind === "clear") {
      if (p.wait) this.pendingClear = true;
      else this.clear();
      return;
    }
    if (p.kind === "display" && p.update && p.displayId) {
      // Replace every output with that display id, wherever it is.
      for (const old of displays.get(p.displayId) ?? []) {
        const fresh = renderBundle(p.data ?? {});
        fresh.dataset.displayId = p.displayId;
        old.replaceWith(fresh);
        displays.set(p.displayId, (displays.get(p.displayId) ?? []).map((x) => (x === old ? fresh : x)));
      }
      return;
    }
    if (this.pendingClear) this.clear();
    let node: HTMLElement;
    switch (p.kind) {
      case "stream": {
        const last = this.outputs.lastElementChild as HTMLElement | null;
        if (last && last.dataset.stream === (p.name ?? "stdout")) {
          last.textContent += p.text ?? "";
          return;
        }
        node = el("pre", { class: `out-stream ${p.name ?? "stdout"}` }, p.text ?? "");
        node.dataset.stream = p.name ?? "stdout";
        break;
      }
      case "error":
        node = el("pre", { class: "out-error" }, stripANSI(p.text ?? (p.error ? `${p.error.ename}: ${p.error.evalue}\n${p.error.traceback.join("\n")}` : "error")));
        break;
      default: {
        node = renderBundle(p.data ?? {});
        if (p.kind === "result") node.classList.add("out-result");
        if (p.displayId) {
          node.dataset.displayId = p.displayId;
          displays.set(p.displayId, [...(displays.get(p.displayId) ?? []), node]);
        }
      }
    }
    this.outputs.append(node);
  }
}

export class Notebook {
  kernelId?: string;
  language: string;
  /**
   * The changes panel: a cell's "wrote a.py" line links into it, undo restores through it, and
   * it refreshes when a cell ends.
   */
  files?: Files;
  /** Runs ask for an automatic checkpoint first (kernel/execute's checkpoint), so that each can be undone. */
  checkpointRuns = true;
  private cells: Cell[] = [];
  private byExec = new Map<string, Cell>();
  private displays = new Map<string, HTMLElement[]>();
  private execSeq = 0;
  private list: HTMLElement;
  private status: HTMLElement;
  private select: HTMLSelectElement;
  private kind: HTMLElement;
  private limits: HTMLElement;
  private interruptButton: HTMLElement;
  private restartButton: HTMLElement;
  private languages = new Map<string, LanguageCapability>();
  private starting?: Promise<void>;

  constructor(
    private client: CellboxClient,
    private workspaceId: string,
    root: HTMLElement,
    languages: LanguageCapability[],
    private progress: (s: string) => void,
    /** network and allow for kernel/start: the workspace's live rules (NetworkPanel.startParams). */
    private networkParams: () => { network?: NetworkMode; allow?: string[] } = () => ({}),
  ) {
    // cellbox's own languages first, then the host's Jupyter kernels, which
    // the daemon runs in the same sandbox.
    const native = languages.filter((l) => !isJupyter(l.id));
    const jupyter = languages.filter((l) => isJupyter(l.id));
    for (const l of languages) this.languages.set(l.id, l);
    const avail = [...native, ...jupyter].filter((l) => l.available);
    this.language = avail.find((l) => l.id === "python")?.id ?? avail[0]?.id ?? "python";
    this.select = el("select", { class: "language", "aria-label": "language" }) as HTMLSelectElement;
    const option = (l: LanguageCapability) => {
      const o = el("option", { value: l.id }, languageLabel(l)) as HTMLOptionElement;
      o.disabled = !l.available;
      if (!l.available) o.title = l.reason || "not available";
      else if (isJupyter(l.id)) o.title = `Jupyter kernelspec ${l.id.slice(jupyterPrefix.length)}, run in this workspace's sandbox`;
      return o;
    };
    this.select.append(...native.map(option));
    if (jupyter.length) this.select.append(el("optgroup", { label: "Jupyter kernels (sandboxed)" }, ...jupyter.map(option)));
    this.select.value = this.language;
    this.select.onchange = () => void this.setLanguage(this.select.value);
    const btn = (label: string, cls: string, fn: () => void) => {
      const b = el("button", { class: cls }, label);
      b.onclick = fn;
      return b;
    };
    this.kind = el("span", { class: "kernel-kind", hidden: "" }, "Jupyter");
    this.limits = el("span", { class: "kernel-limits", hidden: "" });
    this.interruptButton = btn("■ Interrupt", "interrupt", () => void this.interrupt());
    this.restartButton = btn("↻ Restart", "restart", () => void this.restart());
    this.status = el("span", { class: "kernel-status", title: "kernel status" }, "no kernel");
    this.list = el("div", { class: "cells" });
    root.append(
      el(
        "div",
        { class: "toolbar" },
        this.select,
        this.kind,
        btn("+ Cell", "add-cell", () => this.add("").code.focus()),
        btn("▶▶ Run all", "run-all", () => void this.runAll()),
        this.interruptButton,
        this.restartButton,
        this.status,
        this.limits,
      ),
      this.list,
    );
    this.showLanguage();
    client.on(Methods.KernelOutput, (p: KernelOutputParams) => {
      if (p.kernelId !== this.kernelId) return;
      this.byExec.get(p.executionId)?.add(p, this.displays);
    });
    client.on(Methods.KernelStatus, (p: KernelStatusParams) => {
      if (p.kernelId !== this.kernelId) return;
      this.setStatus(p.state + (p.reason ? `: ${p.reason}` : ""), p.state);
      if (p.state === "idle") {
        // Executions whose result was lost with a dropped connection.
        void this.recoverCounts();
      }
    });
    client.on(Methods.Progress, (p: ProgressParams) => {
      if (String(p.token).startsWith("kernel-start")) this.progress(p.value.kind === "end" ? "" : `${p.value.title ?? ""} ${p.value.message ?? ""}`.trim());
    });
  }

  // recoverCounts fills in the execution count of cells whose kernel/execute
  // result was lost with a dropped connection, from kernel/history once the
  // execution is there (it is recorded when the execution ends).
  private recovering = false;
  private async recoverCounts() {
    if (this.recovering || !this.supports(Methods.KernelHistory)) return;
    this.recovering = true;
    try {
      for (let attempt = 0; attempt < 120; attempt++) {
        const lost = this.cells.filter((c) => c.running && c.prompt.textContent === "[?]:");
        const kernelId = this.kernelId;
        if (!lost.length || !kernelId) return;
        if (this.client.state === "open") {
          try {
            const h = await this.client.request(Methods.KernelHistory, { kernelId, n: 100 });
            const entries: { executionCount: number; code: string }[] = h.entries ?? [];
            for (const c of lost) {
              const e = entries.findLast((x) => x.code === c.code.value);
              if (!e) continue;
              c.running = false;
              c.notes.querySelector(".lost")?.remove();
              c.setPrompt(String(e.executionCount));
            }
            if (!this.cells.some((c) => c.running && c.prompt.textContent === "[?]:")) return;
          } catch {
            // try again
          }
        }
        await new Promise((r) => setTimeout(r, 1000));
      }
    } finally {
      this.recovering = false;
    }
  }

  /**
   * supports says whether the notebook's language answers a method of §4:
   * what a language cannot do is in its `unsupported` (PROTOCOL.md §8), and
   * the notebook hides what needs it instead of sending a request that fails.
   */
  supports(method: string): boolean {
    return !this.languages.get(this.language)?.unsupported?.includes(method);
  }

  /** showLanguage marks a Jupyter kernel and what its language cannot do, and hides what it cannot do. */
  private showLanguage() {
    const l = this.languages.get(this.language);
    const jupyter = isJupyter(this.language);
    this.kind.hidden = !jupyter;
    this.kind.title = jupyter ? `the host's Jupyter kernelspec ${this.language.slice(jupyterPrefix.length)}, run in this workspace's sandbox` : "";
    const unsupported = l?.unsupported ?? [];
    this.limits.hidden = unsupported.length === 0;
    this.limits.textContent = unsupported.length ? `no ${unsupported.map(featureName).join(", ")}` : "";
    this.limits.title = unsupported.length ? `${l?.displayName ?? this.language} cannot answer ${unsupported.join(", ")}` : "";
    this.interruptButton.hidden = !this.supports(Methods.KernelInterrupt);
    this.restartButton.hidden = !this.supports(Methods.KernelRestart);
  }

  private setStatus(text: string, state: string) {
    this.status.textContent = `${this.language}: ${text}`;
    this.status.dataset.state = state;
  }

  add(source: string, after?: Cell): Cell {
    const c = new Cell(this, source);
    const i = after ? this.cells.indexOf(after) + 1 : this.cells.length;
    this.cells.splice(i, 0, c);
    const next = this.cells[i + 1];
    if (next) this.list.insertBefore(c.root, next.root);
    else this.list.append(c.root);
    c.grow();
    return c;
  }

  remove(c: Cell) {
    this.cells = this.cells.filter((x) => x !== c);
    c.root.remove();
  }

  focusNext(c: Cell) {
    const i = this.cells.indexOf(c);
    (this.cells[i + 1] ?? this.add("", c)).code.focus();
  }

  async setLanguage(lang: string) {
    if (lang === this.language && this.kernelId) return;
    const old = this.kernelId;
    this.kernelId = undefined;
    this.language = lang;
    this.select.value = lang;
    this.showLanguage();
    if (old) {
      this.client.unfollowKernel(old);
      await this.client.request(Methods.KernelShutdown, { kernelId: old }).catch(() => {});
    }
    for (const c of this.cells) c.setPrompt(" ");
    await this.ensureKernel();
  }

  ensureKernel(): Promise<void> {
    if (this.kernelId) return Promise.resolve();
    this.starting ??= (async () => {
      this.setStatus("starting", "starting");
      this.status.title = "kernel status";
      try {
        const r = await this.client.request(Methods.KernelStart, { language: this.language, workspaceId: this.workspaceId, ...this.networkParams(), workDoneToken: `kernel-start-${Date.now()}` });
        this.kernelId = r.kernelId;
        await this.client.followKernel(r.kernelId, false);
        this.setStatus("idle", "idle");
        // A Jupyter kernel's version is known once it runs.
        const info = r.languageInfo;
        // The interpreter: the project's .venv, one picked for it, or the host's (not named).
        const interp = r.interpreter;
        const where = interp && interp.source !== "system" ? ` · ${interp.path} (${interp.source})` : "";
        const warn = interp?.warning ? ` · ${interp.warning}` : "";
        this.status.title = `kernel status: ${[info?.name, info?.version].filter(Boolean).join(" ") || r.language}${where}${warn}`;
      } catch (e) {
        this.setStatus(`cannot start: ${(e as Error).message}${(e as RPCError).data?.detail ? ` (${(e as RPCError).data!.detail})` : ""}`, "dead");
        throw e;
      } finally {
        this.starting = undefined;
      }
    })();
    return this.starting;
  }

  async run(c: Cell): Promise<void> {
    const code = c.code.value;
    c.clear();
    c.setPrompt("*");
    c.running = true;
    c.root.classList.remove("failed");
    delete c.root.dataset.status; // set again by this run's response
    try {
      await this.ensureKernel();
    } catch (e) {
      c.setPrompt(" ");
      c.running = false;
      c.note(String((e as Error).message), "note error");
      return;
    }
    const executionId = `cell${c.id}-${++this.execSeq}`;
    this.byExec.set(executionId, c);
    try {
      // kernelId is set by ensureKernel above; a resync in between that finds the kernel
      // gone clears it, and the daemon then answers invalid params.
      const r = await this.client.request(Methods.KernelExecute, { kernelId: this.kernelId!, code, executionId, allowStdin: true, stopOnError: true, checkpoint: this.checkpointRuns || undefined });
      c.setPrompt(String(r.executionCount));
      if ((r.filesChanged?.length || r.filesChangedMore) && this.files) {
        // What the execution changed (PROTOCOL.md §10): each path opens its diff; undo
        // restores the checkpoint taken before it.
        const line = this.files.filesLine(r.filesChanged, r.filesChangedMore);
        line.classList.add("files-changed");
        if (r.checkpoint) {
          const undo = el("button", { class: "undo", title: "restore the workspace's files to how they were before this execution" }, "undo");
          undo.onclick = () => void this.files?.undo({ executionId: r.executionId, executionCount: r.executionCount, checkpoint: r.checkpoint, language: this.language });
          line.append(" ", undo);
        }
        c.notes.prepend(line);
      }
      this.files?.schedule();
      c.root.dataset.status = r.status;
      if (r.status !== "ok") c.root.classList.add("failed");
      if (r.status !== "ok" && r.status !== "error") c.note(r.status === "timeout" && r.error ? `${r.status}: ${r.error.ename} ${r.error.evalue}` : r.status);
      if (r.outputTruncated) c.note("output truncated");
    } catch (e) {
      if (e instanceof ConnectionLostError) {
        c.setPrompt("?");
        c.note("connection lost: output continues here after reconnecting", "note lost");
        return; // running stays true until the kernel reports idle
      }
      c.setPrompt(" ");
      c.note(`${(e as Error).message}${(e as RPCError).data?.detail ? `: ${(e as RPCError).data!.detail}` : ""}`, "note error");
    }
    c.running = false;
  }

  async runAll(): Promise<void> {
    await this.ensureKernel().catch(() => {});
    await Promise.all(this.cells.map((c) => this.run(c)));
  }

  async interrupt() {
    if (this.kernelId) await this.client.request(Methods.KernelInterrupt, { kernelId: this.kernelId }).catch((e) => this.progress(String(e.message)));
  }

  async restart() {
    if (!this.kernelId) return this.ensureKernel();
    this.setStatus("restarting", "restarting");
    await this.client.request(Methods.KernelRestart, { kernelId: this.kernelId }).catch((e) => this.progress(String(e.message)));
    for (const c of this.cells) c.setPrompt(" ");
  }

  /** resync after a reconnect: the kernel may have been culled or died. */
  async resync() {
    if (!this.kernelId) return;
    const r = await this.client.request(Methods.KernelList, {});
    const k = r.kernels.find((x) => x.kernelId === this.kernelId);
    if (!k) {
      this.kernelId = undefined;
      this.setStatus("gone (culled or stopped); runs start a new one", "dead");
    } else this.setStatus(k.state, k.state);
    void this.recoverCounts();
  }
}
