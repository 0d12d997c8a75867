// The project tree, the file editor and the viewers, driven in chromium
// against the real daemon: a git project with a 10,000-file .venv,
// node_modules and a .gitignore. Screenshots: $CELLBOX_ARTIFACTS/tree-*.png
// and editor-*.png.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { crc32, deflateSync } from "node:zlib";
import { build } from "esbuild";
import { artifacts, launchChromium } from "./chromium.mjs";
import { startDaemon, waitFor } from "./daemon.mjs";

const venvFiles = 10_000;

/** A PNG of w×h pixels, a gradient (no image library needed). */
function png(w, h) {
  const chunk = (type, data) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(td));
    return Buffer.concat([len, td, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  const raw = Buffer.alloc((w * 3 + 1) * h);
  for (let y = 0; y < h; y++) {
    raw[y * (w * 3 + 1)] = 0;
    for (let x = 0; x < w; x++) {
      const o = y * (w * 3 + 1) + 1 + x * 3;
      raw[o] = (x * 255) / w;
      raw[o + 1] = (y * 255) / h;
      raw[o + 2] = 160;
    }
  }
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk("IHDR", ihdr), chunk("IDAT", deflateSync(raw)), chunk("IEND", Buffer.alloc(0))]);
}

const csvRows = ["city,country,population", '"Zürich, ZH",CH,421878', 'Lyon,FR,"516,092"', '"A ""quoted"" town",XX,1', ...Array.from({ length: 1200 }, (_, i) => `town${i},YY,${i}`)];
const files = {
  "README.md": "# demo\n",
  "notes.txt": "to be deleted\n",
  "src/app.py": "def main():\n    print('app')\n",
  "src/util/helpers.py": "X = 1\n",
  // A .gitignore of a subfolder, with a pattern through folders.
  "src/.gitignore": "gen/**/*.py\n",
  "src/gen/a/b/out.py": "",
  "src/gen/keep.txt": "",
  "data.csv": csvRows.join("\n") + "\n",
  "config.json": JSON.stringify({ name: "demo", version: 3, tags: ["a", "b"], nested: { deep: { deeper: { value: true } } }, nothing: null }, null, 2),
  "broken.json": '{"name": "demo",',
  "pic.svg": '<svg xmlns="http://www.w3.org/2000/svg" width="30" height="20"><rect width="30" height="20" fill="teal"/><script>parent.document.title="pwned"</script></svg>',
  "blob.bin": Buffer.from([0, 1, 2, 255, 254, 0, 7]),
  "logo.png": png(48, 32),
  ".gitignore": "*.log\n!keep.log\nbuild/\n/secret\n",
  "app.log": "noise\n",
  "keep.log": "kept\n",
  "build/out.txt": "built\n",
  "secret/key.txt": "k\n",
  "node_modules/leftpad/index.js": "module.exports = 1;\n",
  "env/pyvenv.cfg": "home = /usr/bin\n",
  "env/bin/python": "",
};

const here = dirname(fileURLToPath(import.meta.url));
let d, browser, page;
let consoleErrors = [];
const framesSent = [];

before(async () => {
  const gitEnv = { ...process.env, GIT_AUTHOR_NAME: "t", GIT_AUTHOR_EMAIL: "t@example.com", GIT_COMMITTER_NAME: "t", GIT_COMMITTER_EMAIL: "t@example.com" };
  d = await startDaemon({
    files,
    setup: (dir) => {
      // A virtual environment of 10,000 files, in one directory (as site-packages gets).
      const site = join(dir, ".venv", "lib", "python3.12", "site-packages");
      mkdirSync(site, { recursive: true });
      writeFileSync(join(dir, ".venv", "pyvenv.cfg"), "home = /usr/bin\n");
      for (let i = 0; i < venvFiles; i++) writeFileSync(join(site, `mod${String(i).padStart(5, "0")}.py`), "");
      // Over the editor's 2 MiB: a log gets a pane, a CSV its table without the editor.
      writeFileSync(join(dir, "big.txt"), "x".repeat(3 << 20));
      writeFileSync(join(dir, "big.csv"), "n,square\n" + Array.from({ length: 300_000 }, (_, i) => `${i},${i * i}`).join("\n") + "\n");
      // Symlinks inside the project: to a folder (it expands) and to a file (it opens).
      symlinkSync("src/util", join(dir, "linked"));
      symlinkSync("src/util/helpers.py", join(dir, "link.py"));
      const git = (...a) => execFileSync("git", ["-C", dir, ...a], { env: gitEnv });
      git("init", "-q", "-b", "main");
      git("add", "README.md", "notes.txt", "src", "data.csv", "config.json", ".gitignore");
      git("commit", "-q", "-m", "initial");
    },
  });
  browser = await launchChromium({ viewport: { width: 1400, height: 900 }, acceptDownloads: true });
  ({ page, consoleErrors } = browser);
  page.on("websocket", (ws) => ws.on("framesent", (f) => typeof f.payload === "string" && framesSent.push(f.payload)));
  await page.goto(d.url);
  await page.waitForSelector("body[data-ready=true]", { timeout: 60_000 });
});

after(async () => {
  await browser?.close();
  await d?.stop();
});

const shot = (name) => page.screenshot({ path: join(artifacts, `${name}.png`) });
const row = (path) => page.locator(`.tree-item[data-path="${path}"]`);
const rootRows = () => page.locator('.tree > .tree-item[aria-level="1"]').evaluateAll((rs) => rs.map((r) => r.dataset.path));
const change = (path) => page.locator(`.change[data-path="${path}"]`);
const activeDoc = () => page.locator(".docs .tab-pane:not([hidden])");
// The text of the editor in the active tab (its CodeMirror state, not what is drawn).
const editorText = () => page.evaluate(() => window.cellbox.editors.documents.find((x) => !x.body.hidden)?.editor?.value);
const onDisk = (p) => readFileSync(join(d.project, p), "utf8");
const rpc = (method, params) => page.evaluate(([m, p]) => window.cellbox.client.request(m, { workspaceId: window.cellbox.workspace.workspaceId, ...p }), [method, params]);

/** Answers the page's confirmation dialog (wb.confirm): ok or cancel; returns its message. */
async function answer(ok) {
  const dlg = page.locator("dialog.confirm[open]");
  await dlg.waitFor();
  const msg = await dlg.locator("p").innerText();
  await dlg.locator(ok ? "button.confirm-ok" : "button.confirm-cancel").click();
  await dlg.waitFor({ state: "detached" });
  return msg;
}

/** Fills the page's text dialog (askText) and confirms. */
async function typeName(name) {
  const dlg = page.locator("dialog.ask[open]");
  await dlg.waitFor();
  await dlg.locator("input.ask-input").fill(name);
  await dlg.locator("button.confirm-ok").click();
  await dlg.waitFor({ state: "detached" });
}

async function menu(path, item) {
  if (path) await row(path).click({ button: "right" });
  else await page.locator(".tree").dispatchEvent("contextmenu", { clientX: 60, clientY: 200 });
  await page.locator(`.context-menu .menu-item.${item}`).click();
}

test("the tree: the user's files first, heavy and ignored folders folded, dimmed and marked, .git absent", async () => {
  await waitFor(async () => (await rootRows()).length >= 10, { what: "the root's rows" });
  const rows = await rootRows();
  assert.ok(!rows.includes(".git"), `.git is not shown: ${rows}`);
  // Folders, then files, of the user's; then what is ignored or heavy, folders first.
  assert.deepEqual(rows, ["src", ".gitignore", "big.csv", "big.txt", "blob.bin", "broken.json", "config.json", "data.csv", "keep.log", "link.py", "linked", "logo.png", "notes.txt", "pic.svg", "README.md", ".venv", "build", "env", "node_modules", "secret", "app.log"]);
  for (const [path, badge] of [[".venv", "venv"], ["env", "venv"], ["node_modules", "deps"], ["build", "ignored"], ["secret", "ignored"], ["app.log", "ignored"]]) {
    const r = row(path);
    assert.ok(await r.evaluate((e) => e.classList.contains("dimmed")), `${path} dimmed`);
    assert.equal(await r.locator(".tree-badge").innerText(), badge, `${path}'s badge`);
  }
  assert.equal(await row(".venv").getAttribute("aria-expanded"), "false");
  assert.match(await row(".venv").getAttribute("title"), /virtual environment/);
  assert.match(await row("app.log").getAttribute("title"), /ignored by \.gitignore \(\*\.log\)/);
  assert.ok(!(await row("keep.log").evaluate((e) => e.classList.contains("dimmed"))), "!keep.log is not ignored");
  // Nothing below a folded folder was listed: the tree lists one directory at a time.
  assert.equal(await page.locator('.tree-item[data-path^=".venv/"]').count(), 0);
  const lists = framesSent.filter((f) => f.includes('"fs/list"')).map((f) => JSON.parse(f).params);
  assert.ok(lists.length >= 1 && lists.every((p) => !p.recursive), `fs/list calls: ${JSON.stringify(lists)}`);
  assert.ok(lists.every((p) => !p.path || !p.path.startsWith(".venv")), "the .venv was not listed");
  await shot("tree-1-project");

  // Expanding the 10,000-file directory shows the first 500 and "show more".
  for (const p of [".venv", ".venv/lib", ".venv/lib/python3.12"]) {
    await row(p).click();
    await row(p).and(page.locator('[aria-expanded="true"]')).waitFor();
  }
  await row(".venv/lib/python3.12/site-packages").click();
  const site = page.locator('.tree-item[data-path^=".venv/lib/python3.12/site-packages/"]');
  await waitFor(async () => (await site.count()) === 500, { what: "the first 500 entries", timeoutMs: 30_000 });
  assert.ok(await site.first().evaluate((e) => e.classList.contains("dimmed")), "inside the venv: dimmed");
  const more = page.locator('.tree-more[data-dir=".venv/lib/python3.12/site-packages"]');
  assert.equal(await more.innerText(), "show 500 more of 9500");
  await more.click();
  await waitFor(async () => (await site.count()) === 1000, { what: "500 more" });
  await shot("tree-2-venv-expanded");
  // Fold it again: Left on the focused row.
  await row(".venv").click();
  await waitFor(async () => (await site.count()) === 0, { what: ".venv folded" });
});

test("keys: arrows move, Right expands, Left folds, Enter opens", async () => {
  await row("src").click(); // expands
  // src/.gitignore's gen/**/*.py: through any depth of folders, only there.
  for (const p of ["src/gen", "src/gen/a", "src/gen/a/b"]) {
    await row(p).click();
    await row(p).and(page.locator('[aria-expanded="true"]')).waitFor();
  }
  assert.equal(await row("src/gen/a/b/out.py").locator(".tree-badge").innerText(), "ignored");
  assert.match(await row("src/gen/a/b/out.py").getAttribute("title"), /ignored by src\/\.gitignore \(gen\/\*\*\/\*\.py\)/);
  assert.ok(!(await row("src/gen/keep.txt").evaluate((e) => e.classList.contains("dimmed"))), "keep.txt is not ignored");
  await row("src/gen").click(); // folds
  await row("src").click(); // folds
  await row("src").focus();
  await page.keyboard.press("ArrowRight");
  await row("src/app.py").waitFor();
  await page.keyboard.press("ArrowRight"); // to the first child
  assert.equal(await page.evaluate(() => document.activeElement.dataset.path), "src/gen");
  await page.keyboard.press("ArrowDown");
  assert.equal(await page.evaluate(() => document.activeElement.dataset.path), "src/util");
  await page.keyboard.press("ArrowDown");
  assert.equal(await page.evaluate(() => document.activeElement.dataset.path), "src/.gitignore");
  await page.keyboard.press("ArrowLeft"); // to the parent
  assert.equal(await page.evaluate(() => document.activeElement.dataset.path), "src");
  await page.keyboard.press("ArrowLeft"); // folds
  await row("src/app.py").waitFor({ state: "detached" });
  await page.keyboard.press("ArrowRight");
  await page.keyboard.press("End");
  assert.equal(await page.evaluate(() => document.activeElement.dataset.path), "app.log");
  // Type-ahead: the next row whose name starts with what is typed.
  await page.keyboard.type("co");
  assert.equal(await page.evaluate(() => document.activeElement.dataset.path), "config.json");
  await page.keyboard.press("Home");
  assert.equal(await page.evaluate(() => document.activeElement.dataset.path), "src");
  for (const p of ["src/gen", "src/util", "src/.gitignore", "src/app.py"]) {
    await page.keyboard.press("ArrowDown");
    assert.equal(await page.evaluate(() => document.activeElement.dataset.path), p);
  }
  await page.keyboard.press("Enter");
  await page.locator('.tab[data-tab="file:src/app.py"].active').waitFor();
  await activeDoc().locator(".cm-lineNumbers").waitFor();
  assert.equal(await editorText(), "def main():\n    print('app')\n");
  // The row of the file in front is marked.
  await row("src/app.py").and(page.locator(".active-file")).waitFor();
});

test("symlinks: one to a folder expands, one to a file opens", async () => {
  assert.match(await row("linked").innerText(), /linked →/);
  await row("linked").click();
  await row("linked/helpers.py").waitFor();
  assert.equal(await row("linked").getAttribute("aria-expanded"), "true");
  await row("linked").click();
  await row("linked/helpers.py").waitFor({ state: "detached" });
  // The path in a file's toolbar shows it in the tree, its folders expanded.
  await row("src").click(); // folds
  await row("src/app.py").waitFor({ state: "detached" });
  await activeDoc().locator("button.file-path").click();
  await row("src/app.py").and(page.locator(".selected")).waitFor();
  await row("link.py").click();
  await page.locator('.tab[data-tab="file:link.py"].active').waitFor();
  await waitFor(async () => (await editorText()) === "X = 1\n", { what: "the linked file's text" });
  await page.locator('.tab[data-tab="file:link.py"] .tab-close').click();
  await page.locator('.tab[data-tab="file:src/app.py"]').click();
});

test("edit a file in CodeMirror, Ctrl+S: a modified change with its diff; the tab's dot; changed on disk", async () => {
  const tab = page.locator('.tab[data-tab="file:src/app.py"]');
  await activeDoc().locator(".cm-content").click();
  await page.keyboard.press("Control+End");
  await page.keyboard.type("main()\n");
  await waitFor(() => tab.evaluate((t) => t.classList.contains("dirty")), { what: "the dirty mark" });
  await shot("editor-1-dirty");
  await page.keyboard.press("Control+s");
  await waitFor(async () => !(await tab.evaluate((t) => t.classList.contains("dirty"))), { what: "saved" });
  const writes = framesSent.map((f) => JSON.parse(f)).filter((m) => m.method === "fs/write" && m.params.path === "src/app.py");
  assert.equal(writes.length, 1, "one fs/write for one Ctrl+S");
  assert.equal(writes[0].params.content, "def main():\n    print('app')\nmain()\n");
  await change("src/app.py").and(page.locator(".modified")).waitFor({ timeout: 20_000 });
  await row("src/app.py").and(page.locator(".changed.modified")).waitFor();
  assert.equal(onDisk("src/app.py"), "def main():\n    print('app')\n", "the project is untouched before commit");
  await change("src/app.py").locator("button.diff").click();
  const diff = page.locator(".docs .tab-pane:not([hidden]) .diff");
  await waitFor(async () => (await diff.innerText()).includes("+main()"), { what: "the diff" });
  await shot("editor-2-diff");

  // Changed underneath while clean: reloaded.
  await tab.click();
  await rpc("fs/write", { path: "src/app.py", content: "def main():\n    print('v2')\nmain()\n" });
  await waitFor(async () => (await editorText()).includes("v2"), { what: "reloaded" });
  // Changed underneath while edited: the bar; keep mine, then reload.
  await activeDoc().locator(".cm-content").click();
  await page.keyboard.press("Control+End");
  await page.keyboard.type("# mine\n");
  await rpc("fs/write", { path: "src/app.py", content: "def main():\n    print('v3')\nmain()\n" });
  const bar = activeDoc().locator(".file-bar");
  await waitFor(async () => (await bar.isVisible()) && /changed on disk/.test(await bar.innerText()), { what: "the changed-on-disk bar" });
  assert.ok((await editorText()).includes("# mine"), "the edit is kept until asked");
  await shot("editor-3-changed-on-disk");
  // Ctrl+S while the bar asks: a question, not a silent overwrite; Cancel keeps the disk's v3.
  await activeDoc().locator(".cm-content").click();
  await page.keyboard.press("Control+s");
  const ask = page.locator("dialog.confirm[open]");
  await ask.waitFor();
  assert.match(await ask.locator("p").innerText(), /changed on disk since it was opened here/);
  await ask.locator("button.confirm-cancel").click();
  assert.match((await rpc("fs/read", { path: "src/app.py" })).content, /v3/);
  await bar.locator("button.reload").click();
  await waitFor(async () => (await editorText()).includes("v3") && !(await editorText()).includes("# mine"), { what: "reloaded from disk" });
  assert.ok(!(await tab.evaluate((t) => t.classList.contains("dirty"))));
});

test("open tabs and unsaved edits come back after a reload; closing a dirty tab asks", async () => {
  await activeDoc().locator(".cm-content").click();
  await page.keyboard.press("Control+End");
  await page.keyboard.type("# draft\n");
  const tab = page.locator('.tab[data-tab="file:src/app.py"]');
  await waitFor(() => page.evaluate(() => Object.keys(localStorage).some((k) => k.endsWith(":files:drafts") && localStorage[k].includes("# draft"))), { what: "the draft kept" });
  // Another file open after it; the first one in front again before the reload.
  await row("config.json").click();
  await page.locator('.tab[data-tab="file:config.json"].active').waitFor();
  await tab.click();
  await page.reload();
  await page.waitForSelector("body[data-ready=true]", { timeout: 60_000 });
  await tab.waitFor();
  await page.locator('.tab[data-tab="file:config.json"]').waitFor();
  await waitFor(() => tab.evaluate((t) => t.classList.contains("dirty")), { what: "dirty after the reload" });
  await waitFor(() => tab.evaluate((t) => t.classList.contains("active")), { what: "the tab in front before the reload, in front" });
  await waitFor(async () => (await editorText()).includes("# draft"), { what: "the draft in the editor" });
  // The folders expanded before the reload are expanded again.
  await row("src/app.py").waitFor();
  await tab.locator(".tab-close").click();
  assert.match(await answer(false), /src\/app\.py has unsaved changes/);
  assert.equal(await tab.count(), 1, "cancel keeps the tab");
  await tab.locator(".tab-close").click();
  await answer(true);
  await tab.waitFor({ state: "detached" });
  assert.equal(await page.evaluate(() => Object.keys(localStorage).filter((k) => k.endsWith(":files:drafts") && localStorage[k].includes("# draft")).length), 0, "the draft is dropped");
});

test("new file, new folder, rename, delete through the tree: each is a change", async () => {
  await menu("src", "new-file");
  await typeName("fresh.py");
  await change("src/fresh.py").and(page.locator(".added")).waitFor({ timeout: 20_000 });
  await page.locator('.tab[data-tab="file:src/fresh.py"].active').waitFor();
  await menu("", "new-folder");
  await typeName("docs/guides");
  await row("docs").waitFor();
  assert.deepEqual((await rpc("fs/stat", { path: "docs/guides" })).type, "dir");
  // A name that is no name is refused in the dialog.
  await menu("", "new-file");
  const dlg = page.locator("dialog.ask[open]");
  await dlg.locator("input.ask-input").fill("../escape.txt");
  await dlg.locator("button.confirm-ok").click();
  assert.match(await dlg.locator(".ask-error").innerText(), /\.\./);
  await dlg.locator("button.confirm-cancel").click();

  await menu("README.md", "rename");
  await typeName("README2.md");
  const renamed = page.locator('.change.renamed[data-path="README2.md"]');
  await renamed.waitFor({ timeout: 20_000 });
  assert.equal(await renamed.locator(".path").innerText(), "README.md → README2.md");
  await row("README2.md").waitFor();

  // Delete with the key, asked first (a click opens the file, and its editor takes the focus).
  await row("notes.txt").click();
  await page.locator('.tab[data-tab="file:notes.txt"].active').waitFor();
  await waitFor(() => page.evaluate(() => document.activeElement?.closest(".cm-editor") !== null), { what: "the editor focused" });
  await row("notes.txt").focus();
  await page.keyboard.press("Delete");
  assert.match(await answer(true), /Delete notes\.txt\?/);
  await change("notes.txt").and(page.locator(".deleted")).waitFor({ timeout: 20_000 });
  await row("notes.txt").and(page.locator(".deleted")).waitFor();
  assert.ok(existsSync(join(d.project, "notes.txt")), "the project keeps it until commit");
  await shot("tree-3-new-rename-delete");
});

test("upload with the picker and by dropping on a folder; download", async () => {
  const [chooser] = await Promise.all([page.waitForEvent("filechooser"), menu("src", "upload")]);
  const bytes = Buffer.from([0x89, 0x00, 0xff, 0x10, 0x41, 0x42]);
  await chooser.setFiles([{ name: "up.bin", mimeType: "application/octet-stream", buffer: bytes }]);
  await change("src/up.bin").and(page.locator(".added")).waitFor({ timeout: 20_000 });
  const r = await rpc("fs/read", { path: "src/up.bin", encoding: "base64" });
  assert.deepEqual(Buffer.from(r.content, "base64"), bytes);

  // The upload button puts files in the selected folder, through the same input.
  await row("docs").click();
  await Promise.all([page.waitForEvent("filechooser"), page.click("button.tree-tool.upload")]);
  await page.locator("input.upload-input").setInputFiles({ name: "guide.md", mimeType: "text/markdown", buffer: Buffer.from("# guide\n") });
  await change("docs/guide.md").waitFor({ timeout: 20_000 });

  // Drop a file on the src/util folder.
  await row("src/util").waitFor();
  await page.evaluate(() => {
    const dt = new DataTransfer();
    dt.items.add(new File(["dropped\n"], "dropped.txt", { type: "text/plain" }));
    const target = document.querySelector('.tree-item[data-path="src/util"] .name');
    target.dispatchEvent(new DragEvent("dragover", { dataTransfer: dt, bubbles: true, cancelable: true }));
    target.dispatchEvent(new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }));
  });
  await change("src/util/dropped.txt").waitFor({ timeout: 20_000 });
  assert.equal((await rpc("fs/read", { path: "src/util/dropped.txt" })).content, "dropped\n");

  // A row dragged onto a folder moves there (fs/rename).
  await page.evaluate(() => {
    const dt = new DataTransfer();
    const from = document.querySelector('.tree-item[data-path="keep.log"]');
    from.dispatchEvent(new DragEvent("dragstart", { dataTransfer: dt, bubbles: true, cancelable: true }));
    const target = document.querySelector('.tree-item[data-path="docs"]');
    target.dispatchEvent(new DragEvent("dragover", { dataTransfer: dt, bubbles: true, cancelable: true }));
    target.dispatchEvent(new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }));
  });
  await change("docs/keep.log").waitFor({ timeout: 20_000 });
  await row("docs/keep.log").waitFor();
  assert.equal((await rpc("fs/read", { path: "docs/keep.log" })).content, "kept\n");
  await row("keep.log").and(page.locator(".deleted")).waitFor();

  const [dl] = await Promise.all([page.waitForEvent("download"), menu("logo.png", "download")]);
  assert.equal(dl.suggestedFilename(), "logo.png");
  assert.deepEqual(readFileSync(await dl.path()), readFileSync(join(d.project, "logo.png")));
  await shot("tree-4-upload");
});

test("viewers: an image, an SVG (no script), a CSV table, JSON folding, invalid JSON and a binary file", async () => {
  await row("logo.png").click();
  const img = activeDoc().locator("img.image-view");
  await waitFor(() => img.evaluate((i) => i.complete && i.naturalWidth === 48 && i.naturalHeight === 32), { what: "the png decoded" });
  assert.match(await img.getAttribute("src"), /^data:image\/png;base64,iVBORw0KGgo/);
  assert.match(await activeDoc().locator(".view-info").innerText(), /48 × 32/);
  await shot("editor-4-image");

  await row("pic.svg").click();
  const svg = activeDoc().locator('img.image-view[src^="data:image/svg+xml"]');
  await waitFor(() => svg.evaluate((i) => i.complete && i.naturalWidth === 30), { what: "the svg" });
  assert.notEqual(await page.title(), "pwned", "the svg's script did not run");

  await row("data.csv").click();
  const table = activeDoc().locator("table.csv-table");
  await table.waitFor();
  assert.deepEqual(await table.locator("thead th").allInnerTexts(), ["", "city", "country", "population"]);
  assert.deepEqual(await table.locator("tbody tr").first().locator("td").allInnerTexts(), ["1", "Zürich, ZH", "CH", "421878"]);
  assert.equal(await table.locator("tbody tr").nth(2).locator("td").nth(1).innerText(), 'A "quoted" town');
  assert.equal(await table.locator("tbody tr").count(), 1000, "the first 1,000 rows");
  assert.match(await activeDoc().locator(".view-info").innerText(), /the first 1000 shown/);
  await shot("editor-5-csv");
  await activeDoc().locator("button.mode-text").click();
  await activeDoc().locator(".cm-content").waitFor();
  assert.ok((await editorText()).startsWith("city,country,population\n"));
  await activeDoc().locator("button.mode-view").click();
  await table.waitFor();

  await row("config.json").click();
  const tree = activeDoc().locator(".json-tree");
  await tree.waitFor();
  assert.match(await tree.innerText(), /name: "demo"/);
  const summary = (key) => tree.locator("summary").filter({ has: page.locator(`.json-key:text-is("${key}")`) });
  const deep = summary("deep").locator("..");
  assert.equal(await deep.evaluate((e) => e.open), false, "the third level starts folded");
  await summary("deep").click();
  await summary("deeper").click();
  await waitFor(async () => (await deep.innerText()).includes("value: true"), { what: "unfolded" });
  const nested = summary("nested").locator("..");
  await summary("nested").click();
  assert.equal(await nested.evaluate((e) => e.open), false, "folded");
  await shot("editor-6-json");
  await page.emulateMedia({ colorScheme: "dark" });
  await shot("editor-7-json-dark");
  await page.emulateMedia({ colorScheme: "light" });

  await row("broken.json").click();
  await activeDoc().locator(".cm-content").waitFor();
  assert.equal(await editorText(), '{"name": "demo",');

  await row("blob.bin").click();
  const pane = activeDoc().locator(".binary-pane");
  await pane.waitFor();
  assert.match(await pane.innerText(), /binary, 7 bytes/);
  const [dl] = await Promise.all([page.waitForEvent("download"), pane.locator("button.download").click()]);
  assert.deepEqual(readFileSync(await dl.path()), readFileSync(join(d.project, "blob.bin")));

  await row("big.txt").click();
  await waitFor(async () => /big\.txt — 3\.0 MiB, too large to edit here/.test(await activeDoc().locator(".binary-pane").innerText()), { what: "the large file's pane" });
  assert.equal(await activeDoc().locator(".cm-content").count(), 0, "no editor");
  await row("big.csv").click();
  await activeDoc().locator("table.csv-table").waitFor();
  assert.equal(await activeDoc().locator("table.csv-table tbody tr").count(), 1000);
  assert.match(await activeDoc().locator(".file-info").innerText(), /too large to edit here/);
  assert.equal(await activeDoc().locator("button.mode-text").count(), 0, "no text toggle");
});

test("commit and discard ask first, saying how many files; cancel leaves the change, confirm applies it", async () => {
  await change("src/app.py").waitFor();
  await page.click("button.commit-all");
  const msg = await answer(false);
  const n = await page.locator(".change:not(.ignored)").count();
  assert.match(msg, /^Commit \d+ files/);
  assert.ok(Number(msg.match(/^Commit (\d+) files/)[1]) >= n, `${msg} vs ${n} entries`);
  assert.equal(onDisk("src/app.py"), "def main():\n    print('app')\n", "cancelled: nothing written");
  assert.equal(await change("src/app.py").count(), 1);

  await change("src/app.py").locator("button.commit").click();
  assert.match(await answer(true), /^Commit src\/app\.py to the project/);
  await waitFor(() => onDisk("src/app.py").includes("v3"), { what: "the commit on disk" });
  await change("src/app.py").waitFor({ state: "detached" });

  await change("src/fresh.py").locator("button.discard").click();
  assert.match(await answer(true), /^Discard the changes of src\/fresh\.py\?/);
  await change("src/fresh.py").waitFor({ state: "detached" });
  await row("src/fresh.py").waitFor({ state: "detached" });
  // Its open tab says the file is gone.
  await page.locator('.tab[data-tab="file:src/fresh.py"]').click();
  await waitFor(async () => /deleted/.test(await activeDoc().locator(".file-bar").innerText()), { what: "the gone file's bar" });
  await shot("tree-5-after-commit");

  // A checkpoint, named in the page's dialog; a file written after it; restoring asks, saying how many files.
  await page.click("button.checkpoint");
  await typeName("before-extra");
  const cp = page.locator(".checkpoint").filter({ hasText: "before-extra" });
  await cp.waitFor({ timeout: 20_000 });
  await rpc("fs/write", { path: "extra.txt", content: "after the checkpoint\n" });
  await change("extra.txt").waitFor({ timeout: 20_000 });
  await cp.locator("button.restore").click();
  const question = await answer(false);
  assert.match(question, /^Restore the workspace's files to checkpoint before-extra .*\d+ files? changed from the project\? What is changed now \(\d+ files?\) is replaced/);
  assert.equal(await change("extra.txt").count(), 1, "cancelled: nothing restored");
  await cp.locator("button.restore").click();
  await answer(true);
  await change("extra.txt").waitFor({ state: "detached", timeout: 20_000 });
  await row("extra.txt").waitFor({ state: "detached" });
  // A reload asks for the page without the token first (a 401 the page answers by itself).
  assert.deepEqual(consoleErrors.filter((e) => !/WebSocket|ERR_|status of 401/.test(e)), []);
});

test("the tree's .gitignore matcher agrees with git check-ignore", async () => {
  // src/gitignore.ts as a module (no DOM in it), against git itself on a repository of its own.
  const out = await build({ entryPoints: [join(here, "../src/gitignore.ts")], bundle: true, format: "esm", write: false, logLevel: "warning" });
  const { parseGitignore, matchIgnore } = await import(`data:text/javascript;base64,${Buffer.from(out.outputFiles[0].text).toString("base64")}`);
  const repo = mkdtempSync(join(tmpdir(), "cellbox-gitignore-"));
  try {
    const ignores = {
      ".gitignore": ["# a comment", "*.log", "!keep.log", "build/", "/secret", "doc/*.txt", "**/tmp", "a/**/z", "foo/**", "*.py[cod]", "\\#hash", "x?y", "[a-c]*.md", "lib/**/gen/", "trail   ", "esc\\ ", "only_dir/", "**/deep/*.bin", "[!q]uux"].join("\n"),
      "sub/.gitignore": ["*.tmp", "!keep.tmp", "/anch", "inner/"].join("\n"),
    };
    const filesList = [
      "app.log", "keep.log", "sub/x/app.log", "build/out.txt", "sub/build/o", "secret/k", "sub/secret/k", "doc/a.txt", "doc/sub/a.txt", "x/doc/a.txt",
      "tmp/t", "q/tmp/t", "a/z", "a/b/c/z", "b/a/z", "foo/bar", "foo/b/c", "m.pyc", "m.pyd", "m.pyx", "#hash", "xay", "xy", "a1.md", "d1.md", "lib/gen/g.c",
      "lib/x/y/gen/g.c", "lib/gen.c", "trail", "esc ", "esc", "only_dir/f", "sub/only_dir/f", "x/only_dir", "p/deep/a.bin", "deep/b.bin", "p/deep/q/c.bin",
      "auux", "quux", "sub/a.tmp", "sub/keep.tmp", "sub/d/b.tmp", "sub/anch", "sub/d/anch", "sub/inner/f", "sub/d/inner/f", "inner/f", "plain.txt", "src/main.py",
    ];
    for (const [p, c] of Object.entries(ignores)) {
      mkdirSync(dirname(join(repo, p)), { recursive: true });
      writeFileSync(join(repo, p), c + "\n");
    }
    for (const p of filesList) {
      mkdirSync(dirname(join(repo, p)), { recursive: true });
      writeFileSync(join(repo, p), "");
    }
    execFileSync("git", ["init", "-q", repo]);
    // Every file and every directory above one.
    const paths = new Map();
    for (const p of filesList) {
      paths.set(p, false);
      for (let dir = dirname(p); dir !== "."; dir = dirname(dir)) paths.set(dir, true);
    }
    const list = [...paths.keys()];
    let gitSays = "";
    try {
      gitSays = execFileSync("git", ["-C", repo, "check-ignore", "--stdin"], { input: list.join("\n") + "\n", encoding: "utf8" });
    } catch (e) {
      if (e.status !== 1) throw e; // 1: nothing ignored
      gitSays = e.stdout;
    }
    const byGit = new Set(gitSays.split("\n").filter(Boolean));
    const rulesOf = (dir) => {
      const out = parseGitignore(ignores[".gitignore"], "");
      const parts = dir === "" ? [] : dir.split("/");
      for (let i = 1; i <= parts.length; i++) {
        const base = parts.slice(0, i).join("/");
        if (ignores[`${base}/.gitignore`]) out.push(...parseGitignore(ignores[`${base}/.gitignore`], base));
      }
      return out;
    };
    // As the tree decides: a path inside an ignored folder is ignored; else the last rule that matches.
    const mine = (p) => {
      const parts = p.split("/");
      for (let i = 1; i <= parts.length; i++) {
        const q = parts.slice(0, i).join("/");
        const dir = parts.slice(0, i - 1).join("/");
        const hit = matchIgnore(rulesOf(dir), q, i < parts.length || paths.get(p));
        if (hit && !hit.negate) return true;
      }
      return false;
    };
    const disagree = list.filter((p) => mine(p) !== byGit.has(p)).map((p) => `${p}: git ${byGit.has(p) ? "ignores" : "keeps"} it`);
    assert.deepEqual(disagree, []);
    assert.ok(byGit.size > 20 && byGit.size < list.length - 10, `a fair mix: ${byGit.size} of ${list.length} ignored`);
  } finally {
    rmSync(repo, { recursive: true, force: true });
  }
});
