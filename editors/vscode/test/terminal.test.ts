// The sandboxed terminal: a Pseudoterminal on pty/* of the real daemon echoes what is typed,
// resizes, and closes when its shell exits. `vscode` is faked only for its EventEmitter.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { CellboxClient } from "../src/client";
import { Session } from "../src/session";
import { CellboxPseudoterminal } from "../src/terminal";
import { tempEnv, connectStdio, until, Env } from "./helpers";

let e: Env;
let c: CellboxClient;

before(async () => {
  e = tempEnv({ "hello.txt": "from the project\n" });
  c = await connectStdio(e);
});
after(async () => {
  await c.dispose();
  e.cleanup();
});

test("pseudoterminal: echo, a command in the workspace, resize, exit closes it", async () => {
  const s = new Session(c, { root: e.project });
  const ws = await s.ensureWorkspace();
  const pty = new CellboxPseudoterminal(c, { workspaceId: ws!.workspaceId, command: ["bash", "--norc", "--noprofile", "-i"] });
  let out = "";
  let closed: number | void | undefined;
  let didClose = false;
  pty.onDidWrite((d) => (out += d));
  pty.onDidClose((code) => {
    closed = code;
    didClose = true;
  });
  // Typed before pty/open answers: kept and sent once the terminal is there.
  const opening = pty.open({ columns: 100, rows: 30 });
  pty.handleInput("echo typed-$((6*7))\r");
  await opening;
  await pty.ready;
  assert.ok(pty.ptyId, "pty opened");
  await until(() => out.includes("typed-42"), 20000, `echo in ${JSON.stringify(out)}`);
  pty.handleInput("cat hello.txt; stty size\r");
  await until(() => out.includes("from the project") && out.includes("30 100"), 20000, `cat and size in ${JSON.stringify(out)}`);
  pty.setDimensions({ columns: 120, rows: 40 });
  await new Promise((r) => setTimeout(r, 100));
  pty.handleInput("stty size\r");
  await until(() => out.includes("40 120"), 20000, `resized in ${JSON.stringify(out)}`);
  pty.handleInput("exit 3\r");
  await until(() => didClose, 20000, "close after exit");
  assert.equal(closed, 3);
  pty.close();
});

test("pseudoterminal: close() ends the terminal's process", async () => {
  const pty = new CellboxPseudoterminal(c, { command: ["sleep", "60"] });
  await pty.open(undefined);
  assert.ok(pty.ptyId);
  let exited = false;
  const sub = c.onPtyExit((p) => {
    if (p.ptyId === pty.ptyId) exited = true;
  });
  pty.close();
  await until(() => exited, 20000, "pty/exit after close");
  sub.dispose();
});
