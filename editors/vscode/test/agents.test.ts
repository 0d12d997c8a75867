// PROTOCOL.md §10 in the extension, against the real daemon on a temp git project: what a run
// changed (the output view's line, a notebook cell's status bar), the SCM view grouped by the
// execution that last changed each file (this editor's, or another client's kernel, live on
// fs/didChange), undo an execution, the executions list, automatic checkpoints in the tree and
// the restore picker, renames as one entry, ignored changes hidden until shown, export to a git
// branch and as a patch, fork. `vscode` is faked (test/fake-vscode.ts).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import * as vscode from "vscode";
import { CellboxClient } from "../src/client";
import { Session } from "../src/session";
import { renderExecution } from "../src/outputs";
import { CellboxScm, CheckpointsProvider, AutomaticCheckpointsItem, CheckpointItem, IGNORED_GROUP, type ChangeState } from "../src/scm";
import { CellboxNotebookController, FilesChangedStatusBar } from "../src/notebook";
import { undoExecution, showExecutions, pickCheckpoint, exportGitCommand, exportPatchCommand, forkCommand, branchProblem } from "../src/handoff";
import { describeFiles, listChanges, lastChangers, executionTitle } from "../../browser/src/activity";
import { Methods, type ExecutionRecord } from "../../protocol/protocol";
import { tempEnv, connectStdio, until, Env } from "./helpers";

const fake = vscode as any;
let e: Env;
let c: CellboxClient;
let s: Session;

const git = (...args: string[]) => execFileSync("git", ["-C", e.project, ...args], { encoding: "utf8", env: { ...process.env, GIT_AUTHOR_NAME: "t", GIT_AUTHOR_EMAIL: "t@example.com", GIT_COMMITTER_NAME: "t", GIT_COMMITTER_EMAIL: "t@example.com" } }).trim();

before(async () => {
  e = tempEnv({ "keep.txt": "original\n", "old.txt": "renamed content\n", ".gitignore": "*.log\n" });
  git("init", "-q", "-b", "main");
  git("add", "-A");
  git("commit", "-q", "-m", "initial");
  c = await connectStdio(e);
  s = new Session(c, { root: e.project });
});
after(async () => {
  await c.dispose();
  e.cleanup();
});

const py = (code: string) => s.run({ path: join(e.project, "w.py"), language: "python", code, firstLine: 0, lastLine: 0 });

test("summaries: wrote/deleted, renames as one entry, the last execution of each path", () => {
  assert.equal(describeFiles([{ path: "a.py", kind: "added" }, { path: "b.txt", kind: "deleted" }]), "wrote a.py (new), deleted b.txt");
  assert.equal(describeFiles([{ path: "m", kind: "modified" }], 1002), "wrote m and 1002 more");
  assert.equal(describeFiles(Array.from({ length: 7 }, (_, i) => ({ path: `f${i}`, kind: "modified" as const })), 0, 3), "wrote f0, f1, f2 and 4 more");
  const l = listChanges([
    { path: "new.txt", kind: "added", renamedFrom: "old.txt" },
    { path: "old.txt", kind: "deleted", renamedTo: "new.txt" },
    { path: "x.txt", kind: "modified" },
  ]);
  assert.deepEqual(l.map((x) => [x.label, x.paths]), [["old.txt → new.txt", ["old.txt", "new.txt"]], ["x.txt", ["x.txt"]]]);
  const rec = (id: string, n: number, paths: string[]): ExecutionRecord => ({ executionId: id, kernelId: "k", executionCount: n, finishedAt: "", filesChanged: paths.map((p) => ({ path: p, kind: "modified" })) });
  const by = lastChangers([rec("a", 1, ["x", "y"]), rec("b", 2, ["y"])]);
  assert.equal(by.get("x")?.executionId, "a");
  assert.equal(by.get("y")?.executionId, "b");
  assert.equal(executionTitle({ executionId: "b", executionCount: 2, language: "python" }), "execution 2 (python)");
  assert.equal(branchProblem("feature/x"), undefined);
  assert.ok(branchProblem("bad branch"));
  assert.ok(branchProblem("a..b"));
});

test("a run's result names the files it changed and its checkpoint; the output view links them", async () => {
  const r = await py("open('out.txt', 'w').write('new\\n')\nopen('keep.txt', 'w').write('changed\\n')");
  const res = r.execution.result!;
  assert.equal(res.status, "ok");
  assert.deepEqual(
    [...(res.filesChanged ?? [])].sort((a, b) => (a.path < b.path ? -1 : 1)),
    [
      { path: "keep.txt", kind: "modified" },
      { path: "out.txt", kind: "added" },
    ],
  );
  assert.ok(res.checkpoint, "the run asked for a checkpoint: the result names it");
  const html = renderExecution(r.execution);
  assert.match(html, /class="files-changed">wrote /);
  assert.match(html, /command:cellbox\.openChange\?%5B%22out\.txt%22%5D/);
  assert.match(html, />out\.txt \(new\)</);
  assert.match(html, /command:cellbox\.undoExecution\?/);
  // A run that changes nothing says nothing.
  const quiet = await py("1 + 1");
  assert.deepEqual(quiet.execution.result!.filesChanged ?? [], []);
  assert.doesNotMatch(renderExecution(quiet.execution), /files-changed/);
});

test("SCM: changes grouped by the execution that made them, another client's live; undo restores", async () => {
  const scm = new CellboxScm(() => s, e.project);
  const sub = c.onFsChange(() => scm.refreshSoon(100, true));
  await c.request(Methods.FsWatch, { workspaceId: s.workspace!.workspaceId });
  await scm.refresh();
  const mine = scm.resourceGroups.find((g) => g.resourceStates.some((x) => (x as ChangeState).change.path === "out.txt"))!;
  assert.match(mine.id, /^exec-undo:/);
  assert.match(mine.label, /^Execution 1 \(python\) — wrote (keep\.txt, out\.txt \(new\)|out\.txt \(new\), keep\.txt) · /);
  assert.doesNotMatch(mine.label, /another client/);
  assert.deepEqual(mine.resourceStates.map((x) => (x as ChangeState).change.path).sort(), ["keep.txt", "out.txt"]);
  assert.match(String(mine.resourceStates[0].decorations?.tooltip), /by execution 1 \(python\)/);

  // Another client's kernel in the same workspace (as `cellbox mcp` runs an agent's code):
  // its write shows in a group of its own, newest first, without asking for a refresh.
  const other = await c.request(Methods.KernelStart, { language: "python", workspaceId: s.workspace!.workspaceId, sandbox: "best-effort" });
  const ores = await c.request(Methods.KernelExecute, { kernelId: other.kernelId, code: "open('agent.txt', 'w').write('by an agent\\n')", executionId: "agent-run-1" });
  assert.deepEqual(ores.filesChanged, [{ path: "agent.txt", kind: "added" }]);
  const g = await until(() => scm.resourceGroups.find((x) => x.id === "exec:agent-run-1"), 10000, "the other client's execution group");
  assert.match(g.label, /^Execution 1 \(python\) — wrote agent\.txt \(new\) · .* · another client$/);
  assert.equal(scm.resourceGroups[0].id, "exec:agent-run-1", "newest first");
  assert.deepEqual(g.resourceStates.map((x) => (x as ChangeState).change.path), ["agent.txt"]);

  // The executions list: newest first; picking the first run lists its files and the restore.
  fake.created.quickPicks.length = 0;
  const first = scm.recordOfGroup(mine.id)!;
  let step = 0;
  fake.setQuickPick((items: any[]) => (step++ === 0 ? items.find((i) => i.record?.executionId === first.executionId) : items.find((i) => i.undo)));
  fake.setWarningAnswer((msg: string) => (/before execution 1/.test(msg) ? "Restore" : undefined));
  await showExecutions(s, { scm });
  assert.equal(fake.created.quickPicks[0][0].record.executionId, "agent-run-1");
  assert.match(fake.created.quickPicks[0][1].detail, /wrote (keep\.txt, out\.txt \(new\)|out\.txt \(new\), keep\.txt)/);
  assert.ok(fake.created.quickPicks[1].some((i: any) => /Restore to before execution 1/.test(i.label)));
  // Restoring the checkpoint before the first run undoes it (and the agent's write after it).
  const modal = fake.created.modals.at(-1);
  assert.match(modal, /not rolled back/);
  assert.equal(scm.changes.length, 0, JSON.stringify(scm.changes));
  assert.ok(fake.created.infos.some((m: string) => /variables were not rolled back/.test(m)));
  // Declined: nothing happens.
  await py("open('again.txt', 'w').write('x')");
  await scm.refresh();
  fake.setWarningAnswer(() => undefined);
  const rec = scm.executions.at(-1)!;
  assert.equal(await undoExecution(s, rec, { scm }), false);
  assert.deepEqual(scm.changes.map((x) => x.path), ["again.txt"]);
  sub.dispose();
  scm.dispose();
  await c.request(Methods.KernelShutdown, { kernelId: other.kernelId });
});

test("automatic checkpoints: in the tree under Automatic, marked in the restore picker", async () => {
  const tree = new CheckpointsProvider(() => s);
  await c.request(Methods.WorkspaceCheckpoint, { workspaceId: s.workspace!.workspaceId, name: "mine" });
  const top = await tree.getChildren();
  const mine = top.filter((x) => x instanceof CheckpointItem) as CheckpointItem[];
  assert.equal(mine[0].label, "mine", "the user's, newest first");
  assert.ok(mine.every((x) => !x.checkpoint.auto && !String(x.description).startsWith("automatic")));
  const auto = top.find((x) => x instanceof AutomaticCheckpointsItem) as AutomaticCheckpointsItem;
  assert.ok(auto, "an Automatic node");
  const kids = (await tree.getChildren(auto)) as CheckpointItem[];
  assert.ok(kids.length >= 1);
  assert.ok(kids.every((k) => k.checkpoint.auto && String(k.description).startsWith("automatic · ")));
  fake.setQuickPick((items: any[]) => items.find((i) => i.checkpointId && /automatic/.test(i.description)));
  fake.created.quickPicks.length = 0;
  const picked = await pickCheckpoint(s);
  assert.equal(picked, kids[0].checkpoint.checkpointId);
  const labels = fake.created.quickPicks[0].map((i: any) => i.label);
  assert.ok(labels.includes("Your checkpoints") && labels.includes("Automatic (before executions)"), JSON.stringify(labels));
});

test("a notebook cell's status bar names the files its run changed, with undo", async () => {
  const nbc = new CellboxNotebookController(async () => s, (f) => {
    const d = c.onOutput(f);
    return new fake.Disposable(() => d.dispose());
  });
  const bar = new FilesChangedStatusBar(nbc);
  const uri = fake.Uri.file("/nb/files.ipynb");
  const nb: any = { uri, notebookType: "jupyter-notebook", metadata: {} };
  const cell: any = { index: 0, kind: 2, notebook: nb, document: { languageId: "python", getText: () => "import os\nopen('nb.txt', 'w').write('x')\nos.remove('again.txt')", uri: { toString: () => "vscode-notebook-cell:/nb/files.ipynb#0" } } };
  nb.getCells = () => [cell];
  let fired = 0;
  bar.onDidChangeCellStatusBarItems(() => fired++);
  await nbc.controllers[0].executeHandler!([cell], nb, nbc.controllers[0]);
  assert.ok(fired > 0);
  const items = bar.provideCellStatusBarItems(cell) as any[];
  const texts = items.map((i) => i.text);
  assert.match(texts[0], /^\$\(history\) execution \d+$/);
  const wrote = items.find((i) => /wrote nb\.txt \(new\)/.test(i.text));
  assert.ok(wrote, JSON.stringify(texts));
  assert.deepEqual(wrote.command.arguments, ["nb.txt"]);
  assert.equal(wrote.command.command, "cellbox.openChange");
  assert.ok(items.some((i) => /deleted again\.txt/.test(i.text)), JSON.stringify(texts));
  const undo = items.find((i) => /undo/.test(i.text));
  assert.equal(undo.command.command, "cellbox.undoExecution");
  assert.ok(undo.command.arguments[0].checkpoint);
  nbc.dispose();
  bar.dispose();
});

test("SCM: a group per notebook run named by its cell and files; Undo This Run restores to before it after a modal", async () => {
  const pkg = JSON.parse(readFileSync(join(process.cwd(), "package.json"), "utf8"));
  const inline = pkg.contributes.menus["scm/resourceGroup/context"].find((m: any) => m.command === "cellbox.scm.undoRun");
  assert.equal(inline?.when, "scmProvider == cellbox && scmResourceGroup =~ /^exec-undo:/");
  assert.equal(pkg.contributes.commands.find((x: any) => x.command === "cellbox.scm.undoRun")?.title, "Undo This Run");
  const scm = new CellboxScm(() => s, e.project);
  await scm.refresh();
  const before = new Set(scm.changes.map((x) => x.path));
  const nbc = new CellboxNotebookController(async () => s, (f) => {
    const d = c.onOutput(f);
    return new fake.Disposable(() => d.dispose());
  });
  const nb: any = { uri: fake.Uri.file("/nb/x.ipynb"), notebookType: "jupyter-notebook", metadata: {} };
  const src = ["x = 1", "y = 2", "open('a.csv', 'w').write('1,2\\n')\nopen('b.png', 'wb').write(b'\\x89PNG')"];
  nb.cells = src.map((code, index) => ({ index, kind: 2, notebook: nb, document: { languageId: "python", getText: () => code, uri: { toString: () => `vscode-notebook-cell:/nb/x.ipynb#${index}` } } }));
  nb.getCells = () => nb.cells;
  await nbc.controllers[0].executeHandler!(nb.cells, nb, nbc.controllers[0]);
  await scm.refresh();
  const g = scm.resourceGroups.find((x) => x.resourceStates.some((st) => (st as ChangeState).change.path === "a.csv"))!;
  assert.ok(g, JSON.stringify(scm.resourceGroups.map((x) => x.label)));
  assert.match(g.id, /^exec-undo:nb-/);
  assert.match(g.label, /^Cell 3 of x\.ipynb — wrote (a\.csv \(new\), b\.png \(new\)|b\.png \(new\), a\.csv \(new\)) · /);
  assert.equal(scm.resourceGroups[0], g, "the newest run first");
  assert.deepEqual(g.resourceStates.map((st) => (st as ChangeState).change.path).sort(), ["a.csv", "b.png"]);
  assert.match(String(g.resourceStates[0].decorations?.tooltip), /by cell 3 of x\.ipynb \(execution \d+\)/);
  // Undo This Run on the group: a modal naming the cell; declined, nothing happens.
  const rec = scm.recordOfGroup(g.id)!;
  const restores: any[] = [];
  const request = c.request.bind(c) as (...a: unknown[]) => Promise<unknown>;
  (c as any).request = (method: string, ...rest: unknown[]) => {
    if (method === Methods.WorkspaceRestore) restores.push(rest[0]);
    return request(method, ...rest);
  };
  try {
    fake.setWarningAnswer(() => undefined);
    assert.equal(await undoExecution(s, rec, { scm }), false);
    assert.match(fake.created.modals.at(-1), /^Cell 3 of x\.ipynb: Restore the workspace's files to how they were before execution \d+ \(python\)\?/);
    assert.deepEqual(restores, []);
    assert.ok(scm.changes.some((x) => x.path === "a.csv"));
    // Accepted: workspace/restore to the run's checkpoint; its files are gone, the ones before stay.
    fake.setWarningAnswer((msg: string) => (msg.startsWith("Cell 3 of x.ipynb: ") ? "Restore" : undefined));
    assert.equal(await undoExecution(s, rec, { scm }), true);
    assert.deepEqual(restores, [{ workspaceId: s.workspace!.workspaceId, checkpointId: rec.checkpoint }]);
    assert.deepEqual(new Set(scm.changes.map((x) => x.path)), before);
    assert.ok(!existsSync(join(e.project, "a.csv")), "the project was never touched");
    assert.match(fake.created.infos.at(-1), /^cellbox: the files are as before cell 3 of x\.ipynb \(execution \d+\)\./);
    // A file's run: its group is named by the file and lines that ran, as they are.
    await s.run({ path: join(e.project, "analysis.py"), language: "python", code: "open('c.txt', 'w').write('c')", firstLine: 3, lastLine: 3, label: "analysis.py:4" });
    await scm.refresh();
    assert.match(scm.resourceGroups[0].label, /^analysis\.py:4 — wrote c\.txt \(new\) · /);
  } finally {
    (c as any).request = request;
    fake.setWarningAnswer(() => undefined);
    nbc.dispose();
    scm.dispose();
  }
});

test("renames are one entry old → new; ignored changes are counted, then shown", async () => {
  const scm = new CellboxScm(() => s, e.project);
  await py("import os\nos.rename('old.txt', 'new.txt')\nopen('debug.log', 'w').write('noise')");
  await scm.refresh();
  const ren = scm.states.find((x) => x.paths.includes("old.txt"))!;
  assert.ok(ren, JSON.stringify(scm.changes));
  assert.deepEqual(ren.paths, ["old.txt", "new.txt"]);
  assert.equal(ren.contextValue, "renamed");
  assert.match(String(ren.decorations?.tooltip), /renamed old\.txt → new\.txt/);
  assert.match(String(ren.command?.arguments?.[2]), /^old\.txt → new\.txt/);
  assert.equal(scm.states.filter((x) => x.paths.includes("new.txt")).length, 1, "one entry for the rename");
  // debug.log is ignored (.gitignore): counted, not listed, until shown.
  assert.equal(scm.ignored, 1);
  assert.ok(!scm.changes.some((x) => x.path === "debug.log"));
  const ig = () => scm.resourceGroups.find((g) => g.id === IGNORED_GROUP)!;
  assert.equal(ig().label, "1 ignored change hidden");
  assert.equal(ig().hideWhenEmpty, false);
  await scm.toggleIgnored(true);
  assert.deepEqual(ig().resourceStates.map((x) => (x as ChangeState).change.path), ["debug.log"]);
  await scm.toggleIgnored(false);
  assert.deepEqual(ig().resourceStates, []);
  // Committing the rename's entry applies both paths.
  await scm.commit([ren]);
  assert.ok(existsSync(join(e.project, "new.txt")) && !existsSync(join(e.project, "old.txt")));
  git("add", "-A");
  git("commit", "-q", "-m", "take the rename");
  scm.dispose();
});

test("export to a git branch (with the baseline of uncommitted work), as a patch; fork", async () => {
  await py("open('feature.py', 'w').write('print(1)\\n')");
  // Uncommitted work in the project: the export makes a baseline commit of it first.
  writeFileSync(join(e.project, "keep.txt"), "edited in the project\n");
  fake.setInputBox((o: any) => (/branch/i.test(o.prompt ?? "") ? "cellbox/feature" : undefined));
  fake.created.infos.length = 0;
  const res = await exportGitCommand(s);
  assert.ok(res);
  assert.equal(res.branch, "cellbox/feature");
  assert.equal(git("rev-parse", "cellbox/feature"), res.commit);
  assert.ok(res.baseline, "a baseline commit of the uncommitted work");
  assert.equal(git("rev-parse", `${res.commit}^`), res.baseline);
  assert.match(git("show", "--stat", "--format=", res.commit), /feature\.py/);
  assert.equal(git("rev-parse", "--abbrev-ref", "HEAD"), "main", "the current branch is untouched");
  assert.match(fake.created.infos.at(-1), new RegExp(`commit ${res.commit.slice(0, 10)}, on top of ${res.baseline!.slice(0, 10)}`));

  const doc = await exportPatchCommand(s);
  assert.ok(doc);
  assert.equal((doc as any).languageId, "diff");
  assert.match(doc.getText(), /\+\+\+ b\/feature\.py/);
  assert.match(doc.getText(), /\+print\(1\)/);

  const before = s.workspace!.workspaceId;
  fake.setInputBox(() => "");
  fake.setInfoAnswer((_: string, actions: string[]) => (actions.includes("Switch to It") ? "Switch to It" : undefined));
  let switched = 0;
  const fork = await forkCommand(s, () => void switched++);
  assert.ok(fork && fork.workspaceId !== before);
  assert.match(fake.created.infos.at(-1), new RegExp(`\\(${fork.workspaceId}\\)`));
  assert.equal(switched, 1);
  assert.equal(s.workspace!.workspaceId, fork.workspaceId);
  const fch = await c.request(Methods.WorkspaceChanges, { workspaceId: fork.workspaceId });
  assert.ok(fch.changes.some((x) => x.path === "feature.py"), "the fork starts with the changes");
  // Runs go to the fork now; the original is untouched by them.
  await py("open('only-in-fork.txt', 'w').write('f')");
  const och = await c.request(Methods.WorkspaceChanges, { workspaceId: before });
  assert.ok(!och.changes.some((x) => x.path === "only-in-fork.txt"));
  assert.equal(readFileSync(join(e.project, "keep.txt"), "utf8"), "edited in the project\n");
  fake.setInfoAnswer(() => undefined);
});
