// The changes panel: workspace/changes (a rename as "old → new", ignored
// paths hidden until shown), diff (in a tab of the main area), commit and
// discard (each asked first, saying how many files); the hand-off (export
// to a git branch, a patch, fork); the activity (workspace/executions: what
// each recent execution, of any client, changed, with undo); the
// checkpoints, automatic ones marked. The project tree (tree.ts) gets the
// changes' marks from here, and this refreshes on its fs/didChange.
import { ErrorCodes, Methods, RPCError, type Change, type Checkpoint, type ExecutionRecord, type WorkspaceInfo } from "../client/client";
import { executionTitle, fileLabel, ignoredNote, lastChangers, listChanges, summarize, undoQuestion } from "./activity";
import { askText } from "./dialog";
import { el } from "./dom";
import type { Tree } from "./tree";
import type { Workbench } from "./workbench";

/** An execution to undo: a record of workspace/executions, or what a run's result says of it. */
export type UndoTarget = Pick<ExecutionRecord, "executionId" | "executionCount" | "checkpoint"> & { language?: string };

const short = (id: string) => id.slice(0, 10);

/** "1 file", "3 files". */
export const nFiles = (n: number) => `${n} file${n === 1 ? "" : "s"}`;

export class Files {
  private changes = new Map<string, Change>();
  /** Paths of `changes` that the project ignores (listed only when showIgnored). */
  private ignoredPaths = new Set<string>();
  /** How many changes of ignored paths workspace/changes left out. */
  private ignored = 0;
  private showIgnored = false;
  /** workspace/executions' records, oldest first. */
  executions: ExecutionRecord[] = [];
  checkpoints: Checkpoint[] = [];
  private lastFsChange = 0;
  private timer?: ReturnType<typeof setTimeout>;
  private changesList: HTMLElement;
  private ignoredLine: HTMLElement;
  private message: HTMLElement;
  private activityList: HTMLElement;
  private checkpointList: HTMLElement;
  private client: Workbench["client"];
  private workspaceId: string;

  constructor(
    private wb: Workbench,
    changesRoot: HTMLElement,
    private tree: Tree,
    /** The kernels of this page (its executions are "this notebook", others "another client"). */
    private ownKernel: (kernelId: string) => boolean = (id) => wb.kernels.get(id) !== undefined,
  ) {
    this.client = wb.client;
    this.workspaceId = wb.workspaceId;
    const btn = (label: string, cls: string, fn: () => void) => {
      const b = el("button", { class: cls }, label);
      b.onclick = fn;
      return b;
    };
    this.changesList = el("ul", { class: "changes-list" });
    this.ignoredLine = el("div", { class: "ignored-line", hidden: "" });
    this.message = el("div", { class: "changes-message", role: "status" });
    this.activityList = el("ul", { class: "activity-list" });
    this.checkpointList = el("ul", { class: "checkpoint-list" });
    changesRoot.append(
      el("div", { class: "panel-title" }, el("span", {}, "Changes"), el("span", { class: "spacer" }), btn("Diff", "diff-all", () => void this.diff()), btn("Commit", "commit-all", () => void this.commit()), btn("Discard", "discard-all", () => void this.discard())),
      el(
        "div",
        { class: "handoff" },
        btn("Export to branch…", "export-git", () => void this.exportGit()),
        btn("Patch ⤓", "export-patch", () => void this.exportPatch()),
        btn("Fork", "fork", () => void this.fork()),
      ),
      this.changesList,
      this.ignoredLine,
      this.message,
      el("div", { class: "panel-title activity-title" }, el("span", {}, "Activity"), el("span", { class: "spacer" }), el("span", { class: "hint" }, "what each run changed")),
      this.activityList,
      el("div", { class: "panel-title checkpoints-title" }, el("span", {}, "Checkpoints"), el("span", { class: "spacer" }), btn("+ Checkpoint", "checkpoint", () => void this.checkpoint())),
      this.checkpointList,
    );
    tree.onFsChange(() => {
      this.lastFsChange = Date.now();
      this.schedule();
    });
  }

  async start() {
    await this.refresh();
  }

  /** Refreshes soon (fs/didChange bursts, a cell that ran, a save). */
  schedule(ms = 100) {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.refresh().catch((e) => this.say(`cannot list the changes: ${e.message}`));
    }, ms);
  }

  async refresh() {
    const ws = { workspaceId: this.workspaceId };
    const [ch, all, ex, cps] = await Promise.all([
      this.client.request(Methods.WorkspaceChanges, ws),
      this.showIgnored ? this.client.request(Methods.WorkspaceChanges, { ...ws, ignored: true }) : undefined,
      this.client.request(Methods.WorkspaceExecutions, ws).catch(() => ({ executions: [] as ExecutionRecord[] })),
      this.client.request(Methods.WorkspaceCheckpoints, ws).catch(() => ({ checkpoints: [] as Checkpoint[] })),
    ]);
    this.changes = new Map(ch.changes.map((c) => [c.path, c]));
    this.ignored = ch.ignored ?? 0;
    this.ignoredPaths = new Set((all?.changes ?? []).filter((c) => !this.changes.has(c.path)).map((c) => c.path));
    for (const c of all?.changes ?? []) this.changes.set(c.path, c);
    // A record may hold only a checkpoint (a run that changed nothing): not worth listing.
    this.executions = (ex.executions ?? []).filter((r) => r.filesChanged?.length || r.more);
    this.checkpoints = cps.checkpoints ?? [];
    this.tree.setChanges(this.changes);
    this.renderChanges();
    this.renderActivity();
    this.renderCheckpoints();
    // An execution's record is kept when it ends: while files keep changing, a change that no
    // record names yet (an agent's run still going) is asked about again.
    const by = lastChangers(this.executions);
    if (Date.now() - this.lastFsChange < 60_000 && [...this.changes.keys()].some((p) => !by.has(p) && !this.ignoredPaths.has(p))) this.schedule(2000);
  }

  private renderChanges() {
    const items = listChanges([...this.changes.values()]);
    const by = lastChangers(this.executions);
    this.changesList.replaceChildren(
      ...items.map((l) => {
        const c = l.change;
        const act = (label: string, cls: string, fn: () => void) => {
          const b = el("button", { class: cls, title: `${label} ${l.label}` }, label);
          b.onclick = fn;
          return b;
        };
        const kind = l.from ? "renamed" : c.kind;
        const r = by.get(c.path);
        const ignored = this.ignoredPaths.has(c.path);
        const li = el(
          "li",
          { class: `change ${kind}${ignored ? " ignored" : ""}`, title: `${kind}${r ? ` by ${executionTitle(r)}` : ""}${ignored ? " (the project ignores this path)" : ""}` },
          el("span", { class: "mark" }, kind[0].toUpperCase()),
          el("span", { class: "path" }, l.label),
          act("diff", "diff", () => void this.diff(l.paths)),
          act("commit", "commit", () => void this.commit(l.paths)),
          act("discard", "discard", () => void this.discard(l.paths)),
        );
        li.dataset.path = c.path;
        if (l.from) li.dataset.from = l.from;
        return li;
      }),
    );
    if (!items.length) this.changesList.append(el("li", { class: "empty" }, "no changes: the project is as on disk"));
    const note = ignoredNote(this.ignored);
    this.ignoredLine.hidden = !note && !this.showIgnored;
    const toggle = el("button", { class: "toggle-ignored" }, this.showIgnored ? "hide" : "show");
    toggle.onclick = () => {
      this.showIgnored = !this.showIgnored;
      void this.refresh();
    };
    this.ignoredLine.replaceChildren(this.showIgnored ? `${this.ignoredPaths.size} ignored change(s) shown ` : `${note} `, toggle);
  }

  /** A path a run changed, as a link: its diff while the change is pending, else the file. */
  fileLink(path: string, label: string, kind: string): HTMLElement {
    const a = el("a", { class: `file-link ${kind}`, href: "#", title: `${kind}: ${path}` }, label);
    a.onclick = (e) => {
      e.preventDefault();
      void this.openChange(path);
    };
    return a;
  }

  /** Opens the diff of a changed path (both paths of a rename), else the file as the sandbox has it. */
  async openChange(path: string) {
    if (!this.changes.has(path)) await this.refresh().catch(() => {});
    const l = listChanges([...this.changes.values()]).find((x) => x.paths.includes(path));
    if (l) return this.diff(l.paths);
    return this.wb.openPath(path);
  }

  /** The activity: workspace/executions newest first, each with its files (links) and undo. */
  private renderActivity() {
    const recs = this.executions.slice().reverse();
    this.activityList.replaceChildren(
      ...recs.map((r) => {
        const when = new Date(r.finishedAt);
        const who = this.ownKernel(r.kernelId) ? "" : " · another client";
        const head = el("div", { class: "activity-head" }, el("span", { class: "activity-title-text" }, executionTitle(r)), el("span", { class: "when" }, `${isNaN(when.getTime()) ? "" : when.toLocaleTimeString()}${who}`));
        if (r.checkpoint) {
          const undo = el("button", { class: "undo", title: "restore the workspace's files to how they were before this execution" }, "undo");
          undo.onclick = () => void this.undo(r);
          head.append(el("span", { class: "spacer" }), undo);
        }
        const li = el("li", { class: "activity" }, head, this.filesLine(r.filesChanged, r.more));
        li.dataset.execution = r.executionId;
        return li;
      }),
    );
    if (!recs.length) this.activityList.append(el("li", { class: "empty" }, "no run has changed files yet"));
  }

  /** "wrote a.py (new), b.txt, deleted c.txt and 2 more", each path a link. */
  filesLine(files: ExecutionRecord["filesChanged"] | undefined, more?: number): HTMLElement {
    const s = summarize(files, more);
    const line = el("div", { class: "files-line" });
    s.parts.forEach((p, i) => {
      line.append(`${i ? ", " : ""}${p.verb} `);
      p.files.forEach((f, j) => line.append(...(j ? [", "] : []), this.fileLink(f.path, fileLabel(f), f.kind)));
    });
    if (s.hidden > 0) line.append(` and ${s.hidden} more`);
    return line;
  }

  /** Restores the workspace to before an execution, after asking; says what is not rolled back. */
  async undo(t: UndoTarget): Promise<boolean> {
    if (!t.checkpoint || !(await this.wb.confirm(undoQuestion(t), "Undo"))) return false;
    try {
      await this.client.request(Methods.WorkspaceRestore, { workspaceId: this.workspaceId, checkpointId: t.checkpoint });
      this.say(`the files are as before ${executionTitle(t)}; the kernel's variables were not rolled back (restart it for a clean state)`);
    } catch (e) {
      this.say(`undo failed: ${(e as Error).message}`);
    }
    await Promise.all([this.refresh(), this.tree.resync()]);
    return true;
  }

  private renderCheckpoints() {
    const newest = this.checkpoints.slice().reverse();
    const mine = newest.filter((c) => !c.auto);
    const auto = newest.filter((c) => c.auto);
    const item = (c: Checkpoint) => {
      const restore = el("button", { class: "restore", title: `restore ${c.name || c.checkpointId}` }, "restore");
      restore.onclick = () => void this.restore(c);
      const li = el(
        "li",
        { class: `checkpoint${c.auto ? " auto" : ""}`, title: `${c.checkpointId}: ${c.files} files, ${c.bytes} bytes${c.copied !== undefined ? ` (${c.copied} copied)` : ""}` },
        ...(c.auto ? [el("span", { class: "badge" }, "auto")] : []),
        el("span", { class: "name" }, c.name || c.checkpointId),
        el("span", { class: "when" }, new Date(c.createdAt).toLocaleTimeString()),
        restore,
      );
      li.dataset.checkpoint = c.checkpointId;
      return li;
    };
    const wasOpen = (this.checkpointList.querySelector("details.auto-checkpoints") as HTMLDetailsElement | null)?.open;
    this.checkpointList.replaceChildren(...mine.map(item));
    if (auto.length) {
      const d = el("details", { class: "auto-checkpoints", ...(wasOpen ? { open: "" } : {}) }, el("summary", {}, `automatic (${auto.length}), taken before runs`), el("ul", {}, ...auto.map(item)));
      this.checkpointList.append(el("li", {}, d));
    }
    if (!newest.length) this.checkpointList.append(el("li", { class: "empty" }, "no checkpoints"));
  }

  async checkpoint() {
    const name = await askText("Checkpoint name", `checkpoint ${new Date().toLocaleTimeString()}`, { action: "Take checkpoint" });
    if (name === undefined) return;
    try {
      const c = await this.client.request(Methods.WorkspaceCheckpoint, { workspaceId: this.workspaceId, name: name || undefined });
      this.say(`checkpoint ${c.name} (${nFiles(c.files)})`);
    } catch (e) {
      this.say(`checkpoint failed: ${(e as Error).message}`);
    }
    await this.refresh();
  }

  /** The changed paths a commit or discard without paths acts on (ignored ones are left out). */
  private pending(): string[] {
    return [...this.changes.keys()].filter((p) => !this.ignoredPaths.has(p));
  }

  async restore(c: Checkpoint) {
    await this.refresh().catch(() => {});
    const now = this.pending().length;
    const when = new Date(c.createdAt);
    const question =
      `Restore the workspace's files to checkpoint ${c.name || c.checkpointId}${isNaN(when.getTime()) ? "" : ` (taken at ${when.toLocaleTimeString()})`}, ${nFiles(c.files)} changed from the project? ` +
      `What is changed now (${nFiles(now)}) is replaced; the state before is kept as checkpoint 'before-restore'. The kernels' variables are not rolled back.`;
    if (!(await this.wb.confirm(question, "Restore"))) return;
    try {
      await this.client.request(Methods.WorkspaceRestore, { workspaceId: this.workspaceId, checkpointId: c.checkpointId });
      this.say(`restored ${c.name || c.checkpointId}`);
    } catch (e) {
      this.say(`restore failed: ${(e as Error).message}`);
    }
    await Promise.all([this.refresh(), this.tree.resync()]);
  }

  /** Export to branch…: a commit of the changes on a branch of the project's repository. */
  async exportGit() {
    const branch = await askText("Branch to write the workspace's changes to (the working tree and the current branch are not touched)", `cellbox/changes-${new Date().toISOString().slice(0, 10)}`, {
      action: "Export",
      check: (v) => (v ? undefined : "a branch name, please"),
    });
    if (!branch) return;
    const params = { workspaceId: this.workspaceId, branch };
    try {
      let r;
      try {
        r = await this.client.request(Methods.WorkspaceExportGit, params);
      } catch (e) {
        if (!(e instanceof RPCError && e.code === ErrorCodes.Conflict) || !(await this.wb.confirm(`Branch ${branch} exists and points elsewhere (${e.data?.detail ?? e.message}). Overwrite it?`, "Overwrite"))) throw e;
        r = await this.client.request(Methods.WorkspaceExportGit, { ...params, force: true });
      }
      const base = r.baseline ? `, on top of ${short(r.baseline)} (a commit of the project's uncommitted work)` : "";
      this.say(`exported ${r.files} file(s) to branch ${r.branch}: commit ${short(r.commit)}${base}`);
    } catch (e) {
      this.say(`export failed: ${(e as Error).message}${(e as RPCError).data?.detail ? `: ${(e as RPCError).data!.detail}` : ""}`);
    }
  }

  /** Patch: the changes as a .patch file (`git apply` takes it), downloaded. */
  async exportPatch() {
    try {
      const r = await this.client.request(Methods.WorkspaceExportPatch, { workspaceId: this.workspaceId });
      if (!r.files) return this.say("no changes to export");
      const url = URL.createObjectURL(new Blob([r.patch], { type: "text/x-diff" }));
      const a = el("a", { href: url, download: `cellbox-${this.workspaceId}.patch` });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
      this.say(`patch of ${r.files} file(s) downloaded`);
    } catch (e) {
      this.say(`patch failed: ${(e as Error).message}`);
    }
  }

  /** Fork: a new workspace with a copy of the changes; a link opens it in a new tab. */
  async fork(): Promise<WorkspaceInfo | undefined> {
    const name = await askText("Name of the new workspace (empty: cellbox picks one)", "", { action: "Fork" });
    if (name === undefined) return undefined;
    try {
      const w = await this.client.request(Methods.WorkspaceFork, { workspaceId: this.workspaceId, name: name || undefined });
      const link = el("a", { class: "fork-link", href: forkURL(w.workspaceId), target: "_blank", rel: "noopener" }, "open it");
      this.message.replaceChildren(`forked as ${w.name || w.workspaceId} (${w.workspaceId}) `, link);
      return w;
    } catch (e) {
      this.say(`fork failed: ${(e as Error).message}`);
      return undefined;
    }
  }

  say(s: string) {
    this.message.textContent = s;
  }

  /** The diff of paths (all changes without), in a tab of the main area; opened again, it is brought up to date. */
  async diff(paths?: string[]) {
    const title = paths?.length ? (paths.length === 1 ? paths[0] : paths.join(" → ")) : "all changes";
    try {
      const r = await this.client.request(Methods.WorkspaceDiff, paths ? { workspaceId: this.workspaceId, paths } : { workspaceId: this.workspaceId });
      const body = diffView(r.files, (p) => void this.wb.openPath(p));
      const id = `diff:${paths?.join("\n") ?? "*"}`;
      const tab = this.wb.docs.get(id);
      if (tab) {
        tab.body.replaceChildren(body);
        this.wb.docs.activate(id);
      } else {
        this.wb.docs.open({ id, title: `Δ ${paths?.length ? (paths.at(-1)!.split("/").pop() ?? title) : "changes"}`, tooltip: `diff: ${title}`, body: el("div", { class: "viewer diff-view" }, body) });
      }
    } catch (e) {
      this.say(`diff failed: ${(e as Error).message}`);
    }
  }

  /** "src/a.py" for one path, "3 files (a, b, c)" for a few, "12 files" for many. */
  private describe(paths: string[]): string {
    if (paths.length === 1) return paths[0];
    return paths.length <= 4 ? `${nFiles(paths.length)} (${paths.join(", ")})` : nFiles(paths.length);
  }

  async commit(paths?: string[]) {
    await this.refresh().catch(() => {});
    const sel = paths ?? this.pending();
    if (!sel.length) return this.say("no changes to commit");
    if (!(await this.wb.confirm(`Commit ${this.describe(sel)} to the project in ${this.wb.root}? This writes to your files on disk.`, `Commit ${nFiles(sel.length)}`))) return;
    try {
      const r = await this.client.request(Methods.WorkspaceCommit, paths ? { workspaceId: this.workspaceId, paths } : { workspaceId: this.workspaceId });
      const conflicts = r.conflicts.map((c) => `${c.path} (${c.reason})`);
      this.say(`committed ${r.applied.length} file(s) to the project${conflicts.length ? `; conflicts, not written: ${conflicts.join(", ")}` : ""}`);
    } catch (e) {
      this.say(`commit failed: ${(e as Error).message}`);
    }
    await this.refresh();
  }

  async discard(paths?: string[]) {
    await this.refresh().catch(() => {});
    const sel = paths ?? this.pending();
    if (!sel.length) return this.say("no changes to discard");
    if (!(await this.wb.confirm(`Discard the changes of ${this.describe(sel)}? The sandbox's versions are lost, and the project's are back.`, `Discard ${nFiles(sel.length)}`))) return;
    try {
      const r = await this.client.request(Methods.WorkspaceDiscard, paths ? { workspaceId: this.workspaceId, paths } : { workspaceId: this.workspaceId });
      this.say(`discarded ${r.discarded.length} file(s)`);
    } catch (e) {
      this.say(`discard failed: ${(e as Error).message}`);
    }
    await Promise.all([this.refresh(), this.tree.resync()]);
  }
}

/** A coloured unified diff of workspace/diff's files. */
export function diffView(files: { path: string; kind: string; diff?: string; binary?: boolean }[], open?: (path: string) => void): HTMLElement {
  const body = el("div", { class: "diff viewer-body" });
  for (const f of files) {
    const pre = el("pre", { class: "diff-file" });
    if (f.binary) pre.append(`${f.kind} ${f.path} (binary)`);
    for (const line of (f.diff ?? "").split("\n")) {
      const cls = line.startsWith("+++") || line.startsWith("---") ? "hdr" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : line.startsWith("@@") ? "hunk" : "";
      pre.append(el("span", { class: `line ${cls}` }, line + "\n"));
    }
    const head = el("div", { class: `diff-path ${f.kind}` }, `${f.kind}: ${f.path}`);
    head.dataset.path = f.path;
    if (open && f.kind !== "deleted") {
      const b = el("button", { class: "diff-open", title: `open ${f.path}` }, "open");
      b.onclick = () => open(f.path);
      head.append(" ", b);
    }
    body.append(head, pre);
  }
  if (!files.length) body.append(el("div", { class: "empty" }, "no changes"));
  return body;
}

/** The page of another workspace (a fork), with the token, for a new tab: #workspace=ID. */
export function forkURL(workspaceId: string): string {
  let token = "";
  try {
    token = sessionStorage.getItem("cellbox.token") ?? "";
  } catch {
    // storage disabled: the new tab asks for the URL cellbox printed
  }
  return `${location.origin}/${token ? `?token=${encodeURIComponent(token)}` : ""}#workspace=${encodeURIComponent(workspaceId)}`;
}
