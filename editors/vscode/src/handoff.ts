// What executions changed and the hand-off of a workspace's changes (PROTOCOL.md §10), as
// commands: the executions list, undo an execution (restore the automatic checkpoint taken
// before it), restore a checkpoint picked from a list, export the changes to a git branch or as
// a patch, and fork the workspace.
import * as vscode from "vscode";
import { ResponseError } from "vscode-jsonrpc/node";
import { sentenceStart, type Session } from "./session";
import type { CellboxScm } from "./scm";
import { errorMessage } from "./client";
import { ErrorCodes, Methods, type ExecutionRecord, type WorkspaceExportGitResult, type WorkspaceInfo } from "../../protocol/protocol";
import { describeFiles, executionTitle, fileLabel, checkpointKind, undoQuestion } from "../../browser/src/activity";

/** An execution to undo: a record of workspace/executions, or what a run's result says of it. */
export type UndoTarget = Pick<ExecutionRecord, "executionId" | "executionCount" | "checkpoint"> & { language?: string };

/** What the commands refresh after changing the workspace. */
export interface HandoffViews {
  scm?: CellboxScm;
  /** The checkpoints tree. */
  checkpoints?: () => void;
}

const short = (id: string) => id.slice(0, 10);

/**
 * Restores the workspace to before an execution (its automatic checkpoint), after asking: what
 * it and everything after it wrote is undone; the kernel's memory is not.
 */
export async function undoExecution(s: Session, t: UndoTarget | undefined, views: HandoffViews = {}): Promise<boolean> {
  if (!t) return false;
  if (!t.checkpoint) {
    vscode.window.showInformationMessage(`cellbox: ${executionTitle(t)} has no checkpoint to restore (it ran without one).`);
    return false;
  }
  // This editor's run is named by what ran ("Cell 3 of x.ipynb: Restore … before execution 3").
  const origin = s.origins.get(t.executionId);
  const question = origin ? `${sentenceStart(origin)}: ${undoQuestion(t)}` : undoQuestion(t);
  const ok = await vscode.window.showWarningMessage(question, { modal: true }, "Restore");
  if (ok !== "Restore") return false;
  await s.restore(t.checkpoint);
  await views.scm?.refresh();
  views.checkpoints?.();
  vscode.window.showInformationMessage(`cellbox: the files are as before ${s.runName(t)}. The kernel's variables were not rolled back: restart it for a clean state.`);
  return true;
}

type RecordPick = vscode.QuickPickItem & { record?: ExecutionRecord; path?: string; undo?: boolean };

/**
 * cellbox: Show Executions: the workspace's recent executions that changed files (of any client
 * of the workspace), newest first; picking one lists its files (open a diff) and "Restore to
 * before execution N".
 */
export async function showExecutions(s: Session, views: HandoffViews = {}): Promise<void> {
  const recs = (await s.executions()).slice().reverse();
  if (!recs.length) {
    vscode.window.showInformationMessage("cellbox: no execution of this workspace changed files yet.");
    return;
  }
  const items: RecordPick[] = recs.map((r) => ({
    label: `$(history) ${executionTitle(r)}`,
    description: `${new Date(r.finishedAt).toLocaleTimeString()}${s.kernelById(r.kernelId) ? "" : " · another client"}${r.checkpoint ? " · undoable" : ""}`,
    detail: describeFiles(r.filesChanged, r.more),
    record: r,
  }));
  const pick = await vscode.window.showQuickPick(items, { title: "cellbox: executions that changed files (newest first)", matchOnDetail: true });
  if (!pick?.record) return;
  const r = pick.record;
  const files: RecordPick[] = r.filesChanged.map((f) => ({ label: `${f.kind === "deleted" ? "$(diff-removed)" : f.kind === "added" ? "$(diff-added)" : "$(diff-modified)"} ${fileLabel(f)}`, description: f.kind, path: f.path }));
  if (r.checkpoint) files.unshift({ label: `$(discard) Restore to before ${executionTitle(r)}`, description: "undo its writes (and everything after it)", undo: true });
  const then = await vscode.window.showQuickPick(files, { title: `cellbox: ${executionTitle(r)}` });
  if (then?.undo) await undoExecution(s, r, views);
  else if (then?.path) await vscode.commands.executeCommand("cellbox.openChange", then.path);
}

type CheckpointPick = vscode.QuickPickItem & { checkpointId?: string };

/** Restore Checkpoint without a tree item: pick one, the user's and the automatic ones marked. */
export async function pickCheckpoint(s: Session): Promise<string | undefined> {
  const ws = await s.requireWorkspace();
  const res = await s.client.request(Methods.WorkspaceCheckpoints, { workspaceId: ws.workspaceId });
  const newest = (res.checkpoints ?? []).slice().reverse();
  if (!newest.length) {
    vscode.window.showInformationMessage("cellbox: no checkpoints yet.");
    return undefined;
  }
  const item = (c: (typeof newest)[number]): CheckpointPick => ({
    label: `${c.auto ? "$(history)" : "$(bookmark)"} ${c.name || c.checkpointId}`,
    description: `${checkpointKind(c)} · ${new Date(c.createdAt).toLocaleString()}`,
    detail: `${c.auto ? "automatic, taken before an execution" : "yours"} · ${c.files} files · ${c.checkpointId}`,
    checkpointId: c.checkpointId,
  });
  const mine = newest.filter((c) => !c.auto);
  const auto = newest.filter((c) => c.auto);
  const items: CheckpointPick[] = [];
  if (mine.length) items.push({ label: "Your checkpoints", kind: vscode.QuickPickItemKind.Separator }, ...mine.map(item));
  if (auto.length) items.push({ label: "Automatic (before executions)", kind: vscode.QuickPickItemKind.Separator }, ...auto.map(item));
  const pick = await vscode.window.showQuickPick(items, { title: "cellbox: restore a checkpoint", matchOnDescription: true, matchOnDetail: true });
  return pick?.checkpointId;
}

/** A branch name git takes (git check-ref-format, roughly): the input box's validation. */
export function branchProblem(b: string): string | undefined {
  if (!b.trim()) return "a branch name";
  if (/[\s~^:?*[\\]|\.\.|@\{|^[-/.]|[/.]$|\.lock$|\/\//.test(b)) return `'${b}' is not a branch name git takes`;
  return undefined;
}

/**
 * cellbox: Export Changes to a Git Branch…: asks for the branch, writes a commit of the
 * workspace's changes there (the project's working tree, index and current branch untouched),
 * and says which commit (and the baseline commit of the project's uncommitted work, when it had
 * some). A branch that moved elsewhere is overwritten only when the user says so.
 */
export async function exportGitCommand(s: Session): Promise<WorkspaceExportGitResult | undefined> {
  const ws = await s.requireWorkspace();
  const suggested = `cellbox/${(ws.name || "changes").replace(/[^A-Za-z0-9._-]+/g, "-")}-${new Date().toISOString().slice(0, 10)}`;
  const branch = await vscode.window.showInputBox({ title: "cellbox: export the workspace's changes to a git branch", prompt: "Branch to write (the working tree and the current branch are not touched)", value: suggested, validateInput: branchProblem });
  if (!branch) return undefined;
  let res: WorkspaceExportGitResult;
  try {
    res = await s.exportGit(branch);
  } catch (e) {
    if (!(e instanceof ResponseError && e.code === ErrorCodes.Conflict)) throw e;
    const ok = await vscode.window.showWarningMessage(`cellbox: branch ${branch} exists and points elsewhere (${errorMessage(e)}). Overwrite it?`, { modal: true }, "Overwrite");
    if (ok !== "Overwrite") return undefined;
    res = await s.exportGit(branch, { force: true });
  }
  const base = res.baseline ? `, on top of ${short(res.baseline)} (a commit of the project's uncommitted work)` : "";
  const act = await vscode.window.showInformationMessage(`cellbox: exported ${res.files} file(s) to branch ${res.branch}: commit ${short(res.commit)}${base}.`, "Copy Commit");
  if (act === "Copy Commit") await vscode.env.clipboard.writeText(res.commit);
  return res;
}

/** cellbox: Export Changes as a Patch: the patch (`git apply` takes it) in an untitled diff document. */
export async function exportPatchCommand(s: Session): Promise<vscode.TextDocument | undefined> {
  const res = await s.exportPatch();
  if (!res.files) {
    vscode.window.showInformationMessage("cellbox: no changes to export.");
    return undefined;
  }
  const doc = await vscode.workspace.openTextDocument({ content: res.patch, language: "diff" });
  await vscode.window.showTextDocument(doc, { preview: false });
  return doc;
}

/**
 * cellbox: Fork Workspace: a new workspace with a copy of this one's changes (try something
 * else without losing them); says its name and id, and switches this window's runs to it when
 * asked (the kernels of the workspace before keep running).
 */
export async function forkCommand(s: Session, onSwitch: (ws: WorkspaceInfo) => Promise<void> | void): Promise<WorkspaceInfo | undefined> {
  const ws = await s.requireWorkspace();
  const name = await vscode.window.showInputBox({ title: "cellbox: fork the workspace", prompt: "Name of the new workspace (empty: cellbox picks one)", value: "" });
  if (name === undefined) return undefined;
  const fork = await s.fork(name);
  const act = await vscode.window.showInformationMessage(`cellbox: forked workspace ${ws.name || ws.workspaceId} as ${fork.name || fork.workspaceId} (${fork.workspaceId}), with a copy of its changes.`, "Switch to It", "Copy ID");
  if (act === "Copy ID") await vscode.env.clipboard.writeText(fork.workspaceId);
  if (act === "Switch to It") {
    s.useWorkspace(fork);
    await onSwitch(fork);
  }
  return fork;
}
