// The SCM provider against the real daemon on a temp project (overlay workspace): the change list,
// the sandbox side of a diff, commit per file and discard of all, checkpoints. `vscode` is faked
// (test/fake-vscode.ts): scm.createSourceControl records the resource states the provider sets.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { readFileSync, existsSync } from "node:fs";
import { CellboxClient } from "../src/client";
import { Methods } from "../../protocol/protocol";
import { Session } from "../src/session";
import { CellboxScm, SandboxContentProvider, CheckpointsProvider, CheckpointItem, sandboxUri, unquotePath } from "../src/scm";
import { tempEnv, connectStdio, Env } from "./helpers";

let e: Env;
let c: CellboxClient;
let s: Session;

before(async () => {
  e = tempEnv({ "data.csv": "a,b\n1,2\n", "keep.txt": "original\n", "gone.txt": "bye\n" });
  c = await connectStdio(e);
  s = new Session(c, { root: e.project });
});
after(async () => {
  await c.dispose();
  e.cleanup();
});

test("changes made by code in the sandbox are listed, diffed, committed per file and discarded", async () => {
  const content = new SandboxContentProvider(() => s);
  const scm = new CellboxScm(() => s, e.project, content);
  assert.deepEqual(await scm.refresh(), []);
  const code = [
    "open('data.csv', 'a').write('3,4\\n')",
    "open('new.txt', 'w').write('fresh\\n')",
    "open('keep.txt', 'w').write('changed in sandbox\\n')",
    "import os; os.remove('gone.txt')",
  ].join("\n");
  const r = await s.run({ path: join(e.project, "w.py"), language: "python", code, firstLine: 0, lastLine: 3 });
  assert.equal(r.execution.status, "ok", JSON.stringify(r.execution.outputs));
  // The project itself is untouched until commit.
  assert.equal(readFileSync(join(e.project, "data.csv"), "utf8"), "a,b\n1,2\n");

  const changes = await scm.refresh();
  const kinds = Object.fromEntries(changes.map((x) => [x.path, x.kind]));
  assert.deepEqual(kinds, { "data.csv": "modified", "new.txt": "added", "keep.txt": "modified", "gone.txt": "deleted" });
  assert.equal(scm.scm.count, 4);
  // Every entry, whichever group (the execution that wrote them) they are in.
  const states = scm.states as any[];
  assert.equal(states.length, 4);
  const csv = states.find((x) => x.change.path === "data.csv");
  assert.equal(csv.resourceUri.fsPath, join(e.project, "data.csv"));
  // Click: vscode.diff of the project file (left) and the sandbox's version (right).
  assert.equal(csv.command.command, "vscode.diff");
  assert.equal(csv.command.arguments[0].fsPath, join(e.project, "data.csv"));
  assert.equal(await content.provideTextDocumentContent(csv.command.arguments[1]), "a,b\n1,2\n3,4\n");
  const added = states.find((x) => x.change.path === "new.txt");
  assert.equal(await content.provideTextDocumentContent(added.command.arguments[0]), "");
  assert.equal(await content.provideTextDocumentContent(sandboxUri("new.txt")), "fresh\n");
  assert.equal(states.find((x) => x.change.path === "gone.txt").decorations.strikeThrough, true);
  assert.match(await scm.diffText("data.csv"), /\+3,4/);

  // A checkpoint before committing, listed in the tree.
  const tree = new CheckpointsProvider(() => s);
  await c.request(Methods.WorkspaceCheckpoint, { workspaceId: s.workspace!.workspaceId, name: "before commit" });
  // The user's checkpoints (the automatic ones are under a node of their own).
  const items = (await tree.getChildren()).filter((x) => x instanceof CheckpointItem);
  assert.equal(items.length, 1);
  assert.equal(items[0].label, "before commit");
  assert.match(String(items[0].description), /files/);

  // Commit one file: it reaches the project; the others stay pending.
  const res = await scm.commit([csv]);
  assert.deepEqual(res.applied, ["data.csv"]);
  assert.equal(readFileSync(join(e.project, "data.csv"), "utf8"), "a,b\n1,2\n3,4\n");
  assert.deepEqual(scm.changes.map((x) => x.path).sort(), ["gone.txt", "keep.txt", "new.txt"]);

  // Commit the added file by its state, then discard all the rest.
  await scm.commit([(scm.states as any[]).find((x) => x.change.path === "new.txt")]);
  assert.equal(readFileSync(join(e.project, "new.txt"), "utf8"), "fresh\n");
  const d = await scm.discard();
  assert.deepEqual(d.discarded.sort(), ["gone.txt", "keep.txt"]);
  assert.deepEqual(scm.changes, []);
  assert.equal(scm.scm.count, 0);
  assert.equal(readFileSync(join(e.project, "keep.txt"), "utf8"), "original\n");
  assert.ok(existsSync(join(e.project, "gone.txt")));
  // The sandbox sees the project again.
  const r2 = await s.run({ path: join(e.project, "w.py"), language: "python", code: "open('keep.txt').read()", firstLine: 0, lastLine: 0 });
  assert.equal((r2.execution.outputs.find((o) => o.kind === "result") as any).data["text/plain"], "'original\\n'");
  scm.dispose();
});

test("a commit that conflicts with a newer project file is refused and reported", async () => {
  const { writeFileSync } = await import("node:fs");
  const { created } = (await import("vscode")) as any;
  const scm = new CellboxScm(() => s, e.project);
  await s.run({ path: join(e.project, "w.py"), language: "python", code: "open('keep.txt', 'w').write('sandbox\\n')", firstLine: 0, lastLine: 0 });
  await new Promise((r) => setTimeout(r, 20));
  writeFileSync(join(e.project, "keep.txt"), "edited in the project meanwhile\n");
  await scm.refresh();
  const res = await scm.commit();
  assert.equal(res.conflicts.length, 1, JSON.stringify(res));
  assert.equal(res.conflicts[0].path, "keep.txt");
  assert.ok((created as any).warnings.some((w: string) => w.includes("keep.txt")));
  assert.equal(readFileSync(join(e.project, "keep.txt"), "utf8"), "edited in the project meanwhile\n");
  await scm.discard();
  scm.dispose();
});

test("a name the daemon carries quoted (not UTF-8, or beginning with a quote) maps to the project's file", () => {
  assert.equal(unquotePath('"\\"q\\".txt"'), '"q".txt');
  assert.equal(unquotePath('"caf\\303\\251 \\\\ \\t.txt"'), "café \\ \t.txt");
  assert.equal(unquotePath('"bad\\377name"'), "bad\uFFFDname");
  assert.equal(unquotePath('"日本\\n"'), "日本\n");
  for (const plain of ["a.txt", "dir/b c.py", '"', 'a"b"', '"not \\x quoted"']) assert.equal(unquotePath(plain), plain);
});
