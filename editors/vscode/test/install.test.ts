// cellbox: Install Packages against the real daemon (PROTOCOL.md §9's workspace/install): pip
// installs from a PEP 503 index this test serves on the host's loopback (the daemon's
// --pypi-index, through its verified package cache), with a wheel built here. The command shows
// the daemon's `$/progress` in a notification (vscode.window.withProgress, faked in
// test/fake-vscode.ts), then what was installed, which a kernel of the workspace then imports;
// a package the index does not have ends with the error.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { createServer, type Server } from "node:http";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as vscode from "vscode";
import { CellboxClient } from "../src/client";
import { Session } from "../src/session";
import { installCommand } from "../src/networkCommands";
import { tempEnv, connectStdio, Env } from "./helpers";

const fake = vscode as any;
let e: Env;
let c: CellboxClient;
let s: Session;
let index: Server;
const WHEEL = "cellboxdemo-1.2.0-py3-none-any.whl";

/** A pure-Python wheel of cellboxdemo 1.2.0 whose module has VALUE = 7, built with zipfile. */
function buildWheel(dir: string): Buffer {
  const script = `
import base64, hashlib, sys, zipfile
files = {
  "cellboxdemo/__init__.py": "VALUE = 7\\n",
  "cellboxdemo-1.2.0.dist-info/METADATA": "Metadata-Version: 2.1\\nName: cellboxdemo\\nVersion: 1.2.0\\n",
  "cellboxdemo-1.2.0.dist-info/WHEEL": "Wheel-Version: 1.0\\nGenerator: cellbox-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
record = ""
with zipfile.ZipFile(sys.argv[1], "w") as z:
  for name, text in files.items():
    z.writestr(name, text)
    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
    record += f"{name},sha256={digest},{len(text)}\\n"
  record += "cellboxdemo-1.2.0.dist-info/RECORD,,\\n"
  z.writestr("cellboxdemo-1.2.0.dist-info/RECORD", record)
`;
  const out = join(dir, WHEEL);
  execFileSync("python3", ["-c", script, out]);
  return readFileSync(out);
}

before(async () => {
  e = tempEnv();
  const wheel = buildWheel(e.base);
  const sum = createHash("sha256").update(wheel).digest("hex");
  index = createServer((req, res) => {
    if (req.url === "/simple/cellboxdemo/") {
      res.setHeader("Content-Type", "text/html");
      res.end(`<!DOCTYPE html><html><body><a href="../../files/${WHEEL}#sha256=${sum}">${WHEEL}</a></body></html>\n`);
    } else if (req.url === `/files/${WHEEL}`) {
      res.end(wheel);
    } else {
      res.statusCode = 404;
      res.end("not found");
    }
  });
  await new Promise<void>((r) => index.listen(0, "127.0.0.1", r));
  const port = (index.address() as { port: number }).port;
  e.env.CELLBOX_PYPI_INDEX = `http://127.0.0.1:${port}/simple/`;
  e.env.CELLBOX_PACKAGE_CACHE = join(e.base, "packages");
  c = await connectStdio(e);
  s = new Session(c, { root: e.project });
});
after(async () => {
  await c.dispose();
  index.close();
  e.cleanup();
});

test("Install Packages: the daemon's progress in a notification, then what was installed; a kernel imports it", async () => {
  fake.setQuickPick((items: any[]) => items.find((i) => i.label === "pip"));
  let validate: ((v: string) => string | undefined) | undefined;
  fake.setInputBox((opts: any) => {
    validate = opts.validateInput;
    return "cellboxdemo==1.2.0";
  });
  const shownBefore = fake.progressShown.length;
  const message = await installCommand(s);
  assert.match(message ?? "", /^cellbox: installed cellboxdemo 1\.2\.0 \(0 from cache, \d+(\.\d+)? [kM]?B downloaded, \d+\.\d s\)$/);
  assert.equal(fake.created.infos.at(-1), message);
  assert.ok(validate?.("--index-url=http://evil/"), "options are refused before they are sent");
  assert.equal(validate?.("requests numpy==2.0"), undefined);
  const shown = fake.progressShown.slice(shownBefore);
  assert.equal(shown.length, 1);
  assert.equal(shown[0].title, "cellbox: pip install cellboxdemo==1.2.0");
  assert.equal(shown[0].location, fake.ProgressLocation.Notification);
  // The daemon's $/progress for the token: its title, then what it fetched.
  assert.ok(shown[0].messages.length > 0, "progress was reported");
  assert.match(shown[0].messages[0], /^Installing with pip/);
  assert.ok(shown[0].messages.some((m: string) => m.includes(WHEEL)), JSON.stringify(shown[0].messages));
  // Installed into the workspace's environment: a kernel of the workspace imports it.
  const r = await s.run({ path: join(e.project, "a.py"), language: "python", code: "import cellboxdemo\nprint(cellboxdemo.VALUE)", firstLine: 0, lastLine: 1 });
  assert.equal(r.execution.status, "ok", JSON.stringify(r.execution.outputs));
  assert.deepEqual(r.execution.outputs, [{ kind: "stream", name: "stdout", text: "7\n" }]);
  // Again: already in the environment, nothing is fetched.
  const again = await installCommand(s, "pip", ["cellboxdemo==1.2.0"]);
  assert.match(again ?? "", /^cellbox: installed nothing new \(0 from cache, 0 B downloaded/);
});

test("Install Packages: a package the index does not have ends with the error", async () => {
  const warnings = fake.created.warnings.length;
  const message = await installCommand(s, "pip", ["no-such-package-anywhere"]);
  assert.match(message ?? "", /^cellbox: pip install no-such-package-anywhere failed: .+/);
  assert.equal(fake.created.warnings.length, warnings + 1);
  assert.equal(fake.created.warnings.at(-1), message);
});
