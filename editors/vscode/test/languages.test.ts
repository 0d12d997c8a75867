// The languages a project's files run in, against the real daemon: R, Ruby, SQL, TypeScript and
// Go documents in cellbox's own kernels (not a Jupyter kernel of the same language), and a python
// file in the project's .venv, which the kernel handle reports for the status bar.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { CellboxClient } from "../src/client";
import { Session } from "../src/session";
import { tempEnv, connectStdio, Env } from "./helpers";

let e: Env;
let c: CellboxClient;
let s: Session;

before(async () => {
  e = tempEnv({ "main.py": "print('hi')\n" });
  // A real virtual environment of the project, with a package of its own.
  execFileSync("/usr/bin/python3", ["-m", "venv", "--without-pip", join(e.project, ".venv")]);
  const site = execFileSync(join(e.project, ".venv/bin/python"), ["-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).toString().trim();
  execFileSync("sh", ["-c", `mkdir -p '${site}/onlyvenv' && echo "where = 'venv'" > '${site}/onlyvenv/__init__.py'`]);
  c = await connectStdio(e);
  s = new Session(c, { root: e.project });
});
after(async () => {
  await c.dispose();
  e.cleanup();
});

test("documents of the new languages run in cellbox's own kernels", () => {
  const want: [string, string, string][] = [
    ["r", "analysis.R", "r"],
    ["ruby", "app.rb", "ruby"],
    ["sql", "q.sql", "sql"],
    ["typescript", "index.ts", "typescript"],
    ["go", "main.go", "go"],
  ];
  for (const [languageId, file, lang] of want) {
    const l = s.languages.find((x) => x.id === lang);
    if (!l?.available) continue; // reported unavailable on this host: nothing to resolve to
    assert.equal(s.languageFor(languageId, join(e.project, file)), lang, `${file} (${languageId})`);
  }
  assert.equal(s.languageFor("sql", join(e.project, "q.sql")), "sql", "sql is built in: always available");
});

test("a python file runs in the project's .venv, and the kernel says so", async () => {
  const out = await s.run({ path: join(e.project, "main.py"), language: "python", code: "import sys, onlyvenv\nprint(sys.prefix, onlyvenv.where)", firstLine: 0, lastLine: 1 });
  assert.equal(out.execution.status, "ok", JSON.stringify(out.execution));
  const text = out.execution.outputs.map((o) => ("text" in o ? o.text : "")).join("");
  assert.equal(text, "/workspace/.venv venv\n");
  const k = s.kernels.get("python");
  assert.equal(k?.interpreter?.source, "venv");
  assert.match(k?.interpreter?.path ?? "", /\/\.venv\/bin\/python3?$/);
});
