// What executions changed (PROTOCOL.md §10), in words and lists, for the browser IDE and the
// VS Code extension alike: "wrote a.py (new), b.txt, deleted c.txt", the execution that last
// changed each path, renames as "old → new", automatic checkpoints. No DOM and no `vscode`.
import type { Change, Checkpoint, ExecutionRecord, PathChange } from "../../protocol/protocol";

/** One verb of a summary with its paths: "wrote" (added and modified) or "deleted". */
export interface SummaryPart {
  verb: "wrote" | "deleted";
  files: PathChange[];
}

/** What an execution changed, by verb, the first `max` paths; hidden counts the rest. */
export interface FilesSummary {
  parts: SummaryPart[];
  hidden: number;
}

/** The paths of filesChanged grouped by verb (written first), at most max named. */
export function summarize(files: PathChange[] | undefined, more = 0, max = 5): FilesSummary {
  const list = files ?? [];
  const wrote = list.filter((f) => f.kind !== "deleted");
  const deleted = list.filter((f) => f.kind === "deleted");
  let room = max;
  const parts: SummaryPart[] = [];
  for (const [verb, of] of [["wrote", wrote], ["deleted", deleted]] as const) {
    const shown = of.slice(0, Math.max(0, room));
    room -= shown.length;
    if (shown.length) parts.push({ verb, files: shown });
  }
  const named = parts.reduce((n, p) => n + p.files.length, 0);
  return { parts, hidden: list.length - named + (more > 0 ? more : 0) };
}

/** A path as a summary names it: "a.py (new)" for one the execution created. */
export function fileLabel(f: PathChange): string {
  return f.kind === "added" ? `${f.path} (new)` : f.path;
}

/** "wrote a.py (new), b.txt, deleted c.txt and 3 more"; "" when nothing changed. */
export function describeFiles(files: PathChange[] | undefined, more = 0, max = 5): string {
  const s = summarize(files, more, max);
  const text = s.parts.map((p) => `${p.verb} ${p.files.map(fileLabel).join(", ")}`).join(", ");
  if (!text) return s.hidden > 0 ? `changed ${s.hidden} files` : "";
  return s.hidden > 0 ? `${text} and ${s.hidden} more` : text;
}

/** "execution 7 (python)": an execution record as a person names it. */
export function executionTitle(r: Pick<ExecutionRecord, "executionCount" | "language" | "executionId">): string {
  const n = r.executionCount > 0 ? `execution ${r.executionCount}` : `execution ${r.executionId}`;
  return r.language ? `${n} (${r.language})` : n;
}

/** "execution 7 (python) wrote a.py, deleted b.txt". */
export function describeExecution(r: ExecutionRecord, max = 5): string {
  const files = describeFiles(r.filesChanged, r.more, max);
  return `${executionTitle(r)} ${files || "changed no file"}`;
}

/**
 * The execution that last changed each path, from workspace/executions' records (oldest first,
 * so a later one wins).
 */
export function lastChangers(records: ExecutionRecord[]): Map<string, ExecutionRecord> {
  const m = new Map<string, ExecutionRecord>();
  for (const r of records) for (const f of r.filesChanged ?? []) m.set(f.path, r);
  return m;
}

/** A change of a changes list: a rename shows once, as its added entry with `from`. */
export interface ListedChange {
  change: Change;
  /** The rename's old path (the deleted entry, left out of the list). */
  from?: string;
  /** The paths an action on this entry acts on: both of a rename. */
  paths: string[];
  /** "old → new" for a rename, else the path. */
  label: string;
}

/**
 * The changes of workspace/changes as a changes list shows them: the two entries of a rename
 * (renamedFrom on the added one, renamedTo on the deleted one) as one, `old → new`, whose
 * actions (commit, discard, diff) take both paths. Sorted by path.
 */
export function listChanges(changes: Change[]): ListedChange[] {
  const byPath = new Map(changes.map((c) => [c.path, c]));
  const out: ListedChange[] = [];
  for (const c of changes) {
    if (c.kind === "deleted" && c.renamedTo && byPath.get(c.renamedTo)?.renamedFrom === c.path) continue;
    if (c.kind === "added" && c.renamedFrom && byPath.get(c.renamedFrom)?.renamedTo === c.path) {
      out.push({ change: c, from: c.renamedFrom, paths: [c.renamedFrom, c.path], label: `${c.renamedFrom} → ${c.path}` });
    } else {
      out.push({ change: c, paths: [c.path], label: c.path });
    }
  }
  return out.sort((a, b) => (a.change.path < b.change.path ? -1 : a.change.path > b.change.path ? 1 : 0));
}

/** "3 ignored changes hidden" (the project's .gitignore), or "" for none. */
export function ignoredNote(n: number | undefined): string {
  if (!n) return "";
  return `${n} ignored change${n === 1 ? "" : "s"} hidden`;
}

/** A checkpoint's kind in a list: "automatic" (taken before an execution) or "yours". */
export function checkpointKind(c: Checkpoint): string {
  return c.auto ? "automatic" : "yours";
}

/** The confirmation asked before restoring the checkpoint taken before an execution. */
export function undoQuestion(r: Pick<ExecutionRecord, "executionCount" | "language" | "executionId">): string {
  return (
    `Restore the workspace's files to how they were before ${executionTitle(r)}? ` +
    "What it and every later execution or edit changed is undone (the state before is kept as checkpoint 'before-restore'). " +
    "The kernel's memory (variables, imports) is not rolled back."
  );
}
