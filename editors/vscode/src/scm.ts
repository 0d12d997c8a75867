// The Source Control provider "cellbox": the workspace's changes (what code in the sandbox wrote
// to the overlay, not yet in the project) grouped by the execution that made them, a diff on
// click through a content provider, commit and discard per file, per group and for all; and the
// checkpoints (the user's, and the automatic ones taken before executions) in a tree view.
import * as vscode from "vscode";
import * as path from "node:path";
import { sentenceStart, type Session } from "./session";
import { Methods, type Change, type Checkpoint, type ExecutionRecord } from "../../protocol/protocol";
import { describeFiles, executionTitle, ignoredNote, lastChangers, listChanges, type ListedChange } from "../../browser/src/activity";
import { errorMessage } from "./client";

/** The scheme of the sandbox's side of a diff: cellbox-ws:/PATH?side=sandbox|empty. */
export const SCHEME = "cellbox-ws";

/**
 * The file name a change's path stands for. The daemon carries a name that is not UTF-8, or that
 * begins with `"`, quoted as git quotes it (`"caf\351.txt"`); the project's file is the unquoted
 * name (bytes that are not UTF-8 show as U+FFFD, as VS Code shows such names). Other paths are
 * as they are. The sandbox's side keeps the quoted path, which the daemon reads back.
 */
export function unquotePath(p: string): string {
  if (p.length < 2 || !p.startsWith('"') || !p.endsWith('"')) return p;
  const bytes: number[] = [];
  const esc: Record<string, number> = { a: 7, b: 8, t: 9, n: 10, v: 11, f: 12, r: 13, '"': 34, "\\": 92 };
  const body = Array.from(p.slice(1, -1)); // by code point
  for (let i = 0; i < body.length; i++) {
    const ch = body[i];
    if (ch !== "\\") {
      bytes.push(...Buffer.from(ch, "utf8"));
      continue;
    }
    const next = body[++i];
    if (next !== undefined && next in esc) bytes.push(esc[next]);
    else if (/^[0-7]{3}$/.test(body.slice(i, i + 3).join(""))) {
      bytes.push(parseInt(body.slice(i, i + 3).join(""), 8));
      i += 2;
    } else return p; // not a quoted name after all
  }
  return Buffer.from(bytes).toString("utf8");
}

export function sandboxUri(p: string, side: "sandbox" | "empty" = "sandbox"): vscode.Uri {
  return vscode.Uri.from({ scheme: SCHEME, path: "/" + p, query: `side=${side}` });
}

/** Serves the sandbox's view of a file (fs/read through the overlay), or an empty text. */
export class SandboxContentProvider implements vscode.TextDocumentContentProvider {
  private readonly emitter = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.emitter.event;
  constructor(private readonly session: () => Session | undefined) {}

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    if (uri.query.includes("side=empty")) return "";
    const s = this.session();
    const ws = s?.workspace;
    if (!s || !ws) return "";
    try {
      const r = await s.client.request(Methods.FsRead, { workspaceId: ws.workspaceId, path: uri.path.replace(/^\//, ""), encoding: "utf8" });
      return r.encoding === "base64" ? `(binary, ${r.size} bytes)` : r.content;
    } catch (e) {
      return `cellbox: ${errorMessage(e)}`;
    }
  }

  changed(uri: vscode.Uri) {
    this.emitter.fire(uri);
  }
}

export interface ChangeState extends vscode.SourceControlResourceState {
  change: Change;
  /** The paths the commit and discard of this entry act on: both of a rename. */
  paths: string[];
  /** The execution that last changed it (workspace/executions), if one of those kept did. */
  execution?: ExecutionRecord;
}

/** The id of an execution's resource group: exec-undo: when it has a checkpoint to restore. */
export function groupId(r: ExecutionRecord): string {
  return `${r.checkpoint ? "exec-undo" : "exec"}:${r.executionId}`;
}

/** The id of the group of changes no kept execution made (edits, terminals, older runs). */
export const OTHER_GROUP = "changes";
/** The id of the group of the changes of ignored paths (hidden unless shown). */
export const IGNORED_GROUP = "ignored";

/**
 * The Source Control provider: the workspace's changes grouped by the execution that last made
 * them (workspace/executions: a run of this editor, or of any other client of the workspace such
 * as an AI agent through `cellbox mcp`), newest first, then "Other Changes" (edits, terminals,
 * executions no longer kept), then the changes of paths the project ignores (a header saying how
 * many are hidden, until shown). A rename is one entry, `old → new`.
 */
export class CellboxScm implements vscode.Disposable {
  readonly scm: vscode.SourceControl;
  /** The changes of workspace/changes (without ignored paths). */
  changes: Change[] = [];
  /** The changes of ignored paths, when shown. */
  ignoredChanges: Change[] = [];
  /** How many changes of ignored paths workspace/changes left out. */
  ignored = 0;
  /** Whether the changes of ignored paths are listed (cellbox.scm.toggleIgnored). */
  showIgnored = false;
  /** workspace/executions' records, oldest first. */
  executions: ExecutionRecord[] = [];
  private groups = new Map<string, vscode.SourceControlResourceGroup>();
  private order: string[] = [];
  private subs: vscode.Disposable[] = [];
  private timer?: ReturnType<typeof setTimeout>;
  /** When fs/didChange last came: while it is recent, changes no record names yet are asked again. */
  private lastFsChange = 0;

  constructor(private readonly session: () => Session | undefined, private readonly root: string, private readonly content?: SandboxContentProvider) {
    this.scm = vscode.scm.createSourceControl("cellbox", "cellbox", vscode.Uri.file(root));
    this.scm.inputBox.placeholder = "Checkpoint name (Ctrl+Enter: commit all changes to the project)";
    this.scm.acceptInputCommand = { command: "cellbox.scm.commitAll", title: "Commit All" };
    this.setGroups([OTHER_GROUP, IGNORED_GROUP], new Map());
  }

  /** The group of changes no kept execution made. */
  get group(): vscode.SourceControlResourceGroup {
    return this.groups.get(OTHER_GROUP)!;
  }

  /** Every group, in the order shown. */
  get resourceGroups(): vscode.SourceControlResourceGroup[] {
    return this.order.map((id) => this.groups.get(id)!);
  }

  /** Every entry of every group but the ignored one. */
  get states(): ChangeState[] {
    return this.resourceGroups.filter((g) => g.id !== IGNORED_GROUP).flatMap((g) => g.resourceStates as ChangeState[]);
  }

  /** The execution record of a group (exec:ID or exec-undo:ID). */
  recordOfGroup(id: string): ExecutionRecord | undefined {
    const m = /^exec(?:-undo)?:(.*)$/.exec(id);
    return m ? this.executions.find((r) => r.executionId === m[1]) : undefined;
  }

  private ws() {
    const s = this.session();
    const ws = s?.workspace;
    if (!s || !ws) throw new Error("cellbox: no workspace open (run some code first, or cellbox: Refresh Changes)");
    return { s, ws };
  }

  /** Asks workspace/changes and workspace/executions and shows them. */
  async refresh(): Promise<Change[]> {
    const s = this.session();
    if (!s) return [];
    const ws = await s.ensureWorkspace();
    if (!ws) return [];
    const [res, all, recs] = await Promise.all([
      s.client.request(Methods.WorkspaceChanges, { workspaceId: ws.workspaceId }),
      this.showIgnored ? s.client.request(Methods.WorkspaceChanges, { workspaceId: ws.workspaceId, ignored: true }) : undefined,
      s.executions().catch(() => [] as ExecutionRecord[]),
    ]);
    this.changes = res.changes ?? [];
    this.ignored = res.ignored ?? 0;
    const listed = new Set(this.changes.map((c) => c.path));
    this.ignoredChanges = (all?.changes ?? []).filter((c) => !listed.has(c.path));
    this.executions = recs;
    const by = lastChangers(recs);
    const groups = new Map<string, ChangeState[]>();
    const add = (id: string, st: ChangeState) => groups.set(id, [...(groups.get(id) ?? []), st]);
    for (const l of listChanges(this.changes)) {
      const r = by.get(l.change.path);
      add(r ? groupId(r) : OTHER_GROUP, this.state(l, r));
    }
    for (const l of listChanges(this.ignoredChanges)) add(IGNORED_GROUP, this.state(l, by.get(l.change.path)));
    const execIds = [...recs].reverse().map(groupId).filter((id) => groups.has(id));
    this.setGroups([...execIds, OTHER_GROUP, IGNORED_GROUP], groups);
    this.scm.count = this.changes.length;
    for (const c of [...this.changes, ...this.ignoredChanges]) this.content?.changed(sandboxUri(c.path));
    // An execution's record is kept when it ends: a change made by one that still runs (an
    // agent's long run) is asked about again while files keep changing.
    if (Date.now() - this.lastFsChange < 60_000 && (groups.get(OTHER_GROUP)?.length ?? 0) > 0) this.refreshSoon(2000);
    return this.changes;
  }

  /**
   * Shows the groups in this order (an execution's group: its record's title), recreating them
   * when the order changes (VS Code shows groups in the order they were made).
   */
  private setGroups(order: string[], states: Map<string, ChangeState[]>) {
    if (order.join("\n") !== this.order.join("\n")) {
      for (const g of this.groups.values()) g.dispose();
      this.groups.clear();
      for (const id of order) {
        const g = this.scm.createResourceGroup(id, id);
        g.hideWhenEmpty = id !== OTHER_GROUP;
        this.groups.set(id, g);
      }
      this.order = order;
    }
    for (const id of order) {
      const g = this.groups.get(id)!;
      g.resourceStates = states.get(id) ?? [];
      g.label = this.groupLabel(id);
      if (id === OTHER_GROUP) g.hideWhenEmpty = order.length > 2;
      if (id === IGNORED_GROUP) g.hideWhenEmpty = !this.ignored && !this.ignoredChanges.length;
    }
  }

  private groupLabel(id: string): string {
    if (id === OTHER_GROUP) return this.executions.length ? "Other Changes" : "Sandbox Changes";
    if (id === IGNORED_GROUP) {
      if (this.showIgnored) return `Ignored Changes (.gitignore): ${this.ignoredChanges.length}`;
      return ignoredNote(this.ignored) || "Ignored Changes";
    }
    const r = this.recordOfGroup(id);
    return r ? this.recordLabel(r) : id;
  }

  /**
   * "Cell 3 of x.ipynb — wrote a.csv, b.png (new) · 14:03:12" for this editor's runs (what ran:
   * Session.origins), "Execution 7 (python) — wrote out.txt · 14:03:12 · another client" for the
   * others (an agent's through `cellbox mcp`). The files are what the run wrote; the group holds
   * those of them no later run changed again.
   */
  recordLabel(r: ExecutionRecord): string {
    const s = this.session();
    const t = s?.origins.get(r.executionId) ?? executionTitle(r);
    const files = describeFiles(r.filesChanged, r.more, 3);
    const when = new Date(r.finishedAt);
    const time = isNaN(when.getTime()) ? "" : ` · ${when.toLocaleTimeString()}`;
    const other = s && !s.kernelById(r.kernelId) ? " · another client" : "";
    return `${sentenceStart(t)}${files ? ` — ${files}` : ""}${time}${other}`;
  }

  /** Refreshes soon (fs/didChange bursts, executions); fromFs: the call is for fs/didChange. */
  refreshSoon(ms = 150, fromFs = false) {
    if (fromFs) this.lastFsChange = Date.now();
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.refresh().catch(() => undefined);
    }, ms);
  }

  /** Lists (or hides again) the changes of paths the project ignores. */
  async toggleIgnored(show = !this.showIgnored) {
    this.showIgnored = show;
    await this.refresh();
  }

  state(l: ListedChange, r?: ExecutionRecord): ChangeState {
    const c = l.change;
    const project = vscode.Uri.file(path.join(this.root, unquotePath(c.path)));
    const left = l.from ? vscode.Uri.file(path.join(this.root, unquotePath(l.from))) : c.kind === "added" ? sandboxUri(c.path, "empty") : project;
    const right = c.kind === "deleted" ? sandboxUri(c.path, "empty") : sandboxUri(c.path);
    const what = l.from ? `renamed ${l.label}` : c.kind;
    const by = r ? ` by ${this.session()?.runName(r) ?? executionTitle(r)}` : "";
    return {
      change: c,
      paths: l.paths,
      execution: r,
      resourceUri: project,
      contextValue: l.from ? "renamed" : c.kind,
      decorations: {
        strikeThrough: c.kind === "deleted",
        tooltip: `${what} in the sandbox${by}${c.binary ? " (binary)" : ""}`,
        faded: c.kind === "deleted",
        iconPath: new vscode.ThemeIcon(l.from ? "diff-renamed" : c.kind === "added" ? "diff-added" : c.kind === "deleted" ? "diff-removed" : "diff-modified"),
      },
      command: c.binary ? undefined : { command: "vscode.diff", title: "Diff", arguments: [left, right, `${l.label} (project ↔ sandbox)`] },
    };
  }

  /** The entry of a path (either path of a rename), for cellbox.openChange. */
  stateOf(p: string): ChangeState | undefined {
    return [...this.states, ...((this.groups.get(IGNORED_GROUP)?.resourceStates ?? []) as ChangeState[])].find((st) => st.paths.includes(p));
  }

  private pathsOf(states: (vscode.SourceControlResourceState | undefined)[]): string[] {
    const out = new Set<string>();
    for (const st of states) {
      if (!st) continue;
      const cs = st as ChangeState;
      if (cs.paths) cs.paths.forEach((p) => out.add(p));
      else out.add(cs.change ? cs.change.path : path.relative(this.root, st.resourceUri.fsPath));
    }
    return [...out];
  }

  /** Commits the given changes (none: all) into the project; returns the applied paths and conflicts. */
  async commit(states?: vscode.SourceControlResourceState[]) {
    const { s, ws } = this.ws();
    const paths = states && states.length ? this.pathsOf(states) : undefined;
    const res = await s.client.request(Methods.WorkspaceCommit, { workspaceId: ws.workspaceId, paths });
    if (res.conflicts?.length) {
      vscode.window.showWarningMessage(`cellbox: not committed (changed in the project meanwhile): ${res.conflicts.map((c) => `${c.path} (${c.reason})`).join(", ")}`);
    }
    await this.refresh();
    return res;
  }

  async discard(states?: vscode.SourceControlResourceState[]) {
    const { s, ws } = this.ws();
    const paths = states && states.length ? this.pathsOf(states) : undefined;
    const res = await s.client.request(Methods.WorkspaceDiscard, { workspaceId: ws.workspaceId, paths });
    await this.refresh();
    return res;
  }

  /** The unified diff of one change (or all), as the daemon renders it. */
  async diffText(p?: string): Promise<string> {
    const { s, ws } = this.ws();
    const res = await s.client.request(Methods.WorkspaceDiff, { workspaceId: ws.workspaceId, paths: p ? [p] : undefined });
    return res.files.map((f) => (f.binary ? `Binary file ${f.path} ${f.kind}\n` : f.diff)).join("\n");
  }

  dispose() {
    if (this.timer) clearTimeout(this.timer);
    for (const s of this.subs) s.dispose();
    this.scm.dispose();
  }
}

export class CheckpointItem extends vscode.TreeItem {
  constructor(readonly checkpoint: Checkpoint) {
    super(checkpoint.name || checkpoint.checkpointId, vscode.TreeItemCollapsibleState.None);
    const kind = checkpoint.auto ? "automatic · " : "";
    this.description = `${kind}${new Date(checkpoint.createdAt).toLocaleString()} · ${checkpoint.files} files`;
    const copied = checkpoint.copied !== undefined ? ` (${checkpoint.copied} copied, the rest shared with the checkpoint before)` : "";
    this.tooltip = `${checkpoint.auto ? "An automatic checkpoint (taken before an execution)" : "Your checkpoint"} ${checkpoint.checkpointId}: ${checkpoint.files} files, ${checkpoint.bytes} bytes${copied}`;
    this.contextValue = "checkpoint";
    this.iconPath = new vscode.ThemeIcon(checkpoint.auto ? "history" : "bookmark");
  }
}

/** The node that holds the automatic checkpoints (collapsed: there may be a hundred). */
export class AutomaticCheckpointsItem extends vscode.TreeItem {
  constructor(readonly checkpoints: Checkpoint[]) {
    super(`Automatic (${checkpoints.length})`, vscode.TreeItemCollapsibleState.Collapsed);
    this.description = "taken before executions";
    this.tooltip = "The checkpoints cellbox took before executions (kernel/execute with checkpoint), newest first: restoring one undoes what that execution and everything after it wrote.";
    this.contextValue = "automaticCheckpoints";
    this.iconPath = new vscode.ThemeIcon("history");
  }
}

export type CheckpointNode = CheckpointItem | AutomaticCheckpointsItem;

/** The checkpoints of the workspace (view cellbox.checkpoints): the user's, then the automatic ones under one node. */
export class CheckpointsProvider implements vscode.TreeDataProvider<CheckpointNode> {
  private readonly emitter = new vscode.EventEmitter<CheckpointNode | undefined | void>();
  readonly onDidChangeTreeData = this.emitter.event;
  constructor(private readonly session: () => Session | undefined) {}

  refresh() {
    this.emitter.fire();
  }

  getTreeItem(e: CheckpointNode) {
    return e;
  }

  async getChildren(e?: CheckpointNode): Promise<CheckpointNode[]> {
    if (e instanceof AutomaticCheckpointsItem) return e.checkpoints.map((c) => new CheckpointItem(c));
    if (e) return [];
    const s = this.session();
    const ws = s?.workspace;
    if (!s || !ws) return [];
    const res = await s.client.request(Methods.WorkspaceCheckpoints, { workspaceId: ws.workspaceId });
    const newest = (res.checkpoints ?? []).slice().reverse();
    const auto = newest.filter((c) => c.auto);
    const out: CheckpointNode[] = newest.filter((c) => !c.auto).map((c) => new CheckpointItem(c));
    if (auto.length) out.push(new AutomaticCheckpointsItem(auto));
    return out;
  }
}
