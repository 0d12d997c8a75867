// The Source Control provider "cellbox": the workspace's changes (what code in the sandbox wrote
// to the overlay, not yet in the project), a diff on click through a content provider, commit and
// discard per file and for all; and the checkpoints in a tree view.
import * as vscode from "vscode";
import * as path from "node:path";
import type { Session } from "./session";
import { Methods, type Change, type Checkpoint } from "../../protocol/protocol";
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
}

export class CellboxScm implements vscode.Disposable {
  readonly scm: vscode.SourceControl;
  readonly group: vscode.SourceControlResourceGroup;
  changes: Change[] = [];
  private subs: vscode.Disposable[] = [];
  private timer?: ReturnType<typeof setTimeout>;

  constructor(private readonly session: () => Session | undefined, private readonly root: string, private readonly content?: SandboxContentProvider) {
    this.scm = vscode.scm.createSourceControl("cellbox", "cellbox", vscode.Uri.file(root));
    this.scm.inputBox.placeholder = "Checkpoint name (Ctrl+Enter: commit all changes to the project)";
    this.scm.acceptInputCommand = { command: "cellbox.scm.commitAll", title: "Commit All" };
    this.group = this.scm.createResourceGroup("changes", "Sandbox Changes");
    this.group.hideWhenEmpty = false;
  }

  private ws() {
    const s = this.session();
    const ws = s?.workspace;
    if (!s || !ws) throw new Error("cellbox: no workspace open (run some code first, or cellbox: Refresh Changes)");
    return { s, ws };
  }

  /** Asks workspace/changes and shows them. */
  async refresh(): Promise<Change[]> {
    const s = this.session();
    if (!s) return [];
    const ws = await s.ensureWorkspace();
    if (!ws) return [];
    const res = await s.client.request(Methods.WorkspaceChanges, { workspaceId: ws.workspaceId });
    this.changes = res.changes ?? [];
    this.group.resourceStates = this.changes.map((c) => this.state(c));
    this.scm.count = this.changes.length;
    for (const c of this.changes) this.content?.changed(sandboxUri(c.path));
    return this.changes;
  }

  /** Refreshes soon (fs/didChange bursts, executions). */
  refreshSoon(ms = 150) {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.refresh().catch(() => undefined), ms);
  }

  state(c: Change): ChangeState {
    const project = vscode.Uri.file(path.join(this.root, unquotePath(c.path)));
    const left = c.kind === "added" ? sandboxUri(c.path, "empty") : project;
    const right = c.kind === "deleted" ? sandboxUri(c.path, "empty") : sandboxUri(c.path);
    return {
      change: c,
      resourceUri: project,
      contextValue: c.kind,
      decorations: {
        strikeThrough: c.kind === "deleted",
        tooltip: `${c.kind} in the sandbox${c.binary ? " (binary)" : ""}`,
        faded: c.kind === "deleted",
        iconPath: new vscode.ThemeIcon(c.kind === "added" ? "diff-added" : c.kind === "deleted" ? "diff-removed" : "diff-modified"),
      },
      command: c.binary
        ? undefined
        : { command: "vscode.diff", title: "Diff", arguments: [left, right, `${c.path} (project ↔ sandbox)`] },
    };
  }

  private pathsOf(states: (vscode.SourceControlResourceState | undefined)[]): string[] {
    const out = new Set<string>();
    for (const st of states) {
      if (!st) continue;
      const ch = (st as ChangeState).change;
      out.add(ch ? ch.path : path.relative(this.root, st.resourceUri.fsPath));
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
    this.description = `${new Date(checkpoint.createdAt).toLocaleString()} · ${checkpoint.files} files`;
    this.tooltip = `${checkpoint.checkpointId}: ${checkpoint.files} files, ${checkpoint.bytes} bytes`;
    this.contextValue = "checkpoint";
    this.iconPath = new vscode.ThemeIcon("history");
  }
}

/** The checkpoints of the workspace (view cellbox.checkpoints). */
export class CheckpointsProvider implements vscode.TreeDataProvider<CheckpointItem> {
  private readonly emitter = new vscode.EventEmitter<CheckpointItem | undefined | void>();
  readonly onDidChangeTreeData = this.emitter.event;
  constructor(private readonly session: () => Session | undefined) {}

  refresh() {
    this.emitter.fire();
  }

  getTreeItem(e: CheckpointItem) {
    return e;
  }

  async getChildren(e?: CheckpointItem): Promise<CheckpointItem[]> {
    if (e) return [];
    const s = this.session();
    const ws = s?.workspace;
    if (!s || !ws) return [];
    const res = await s.client.request(Methods.WorkspaceCheckpoints, { workspaceId: ws.workspaceId });
    return (res.checkpoints ?? []).slice().reverse().map((c) => new CheckpointItem(c));
  }
}
