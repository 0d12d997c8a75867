// The project tree: one directory listed at a time (fs/list, not
// recursive) when it is first expanded, kept live by fs/watch's
// fs/didChange (the changed paths' directories are listed again). What a
// project carries but nobody edits is folded, dimmed, marked and listed
// after the user's own files of its directory: what the project's
// .gitignore files ignore, and the usual heavy directories (virtual
// environments, node_modules, caches) even when nothing ignores them, so a
// project with a 10,000-file .venv shows its own files first and at once.
// .git is not shown. A directory with thousands of entries shows the
// first ones and "show more". Rows carry the changes' marks (A/M/D, from
// workspace/changes); folders hold a dot when something inside changed.
//
// Keys (the tree is one tab stop; the selected row holds the focus):
// Up/Down move, Right expands (or goes to the first child), Left folds (or
// goes to the parent), Enter opens a file or folds a folder, Home/End,
// F2 renames, Delete deletes, Shift+F10 or the context-menu key opens the
// menu. New file, new folder, upload (the picker, or files dropped on a
// folder), rename, delete and download go through the workspace (fs/*),
// so each is a change to review like any other.
import { Methods, type Change, type FileChange, type FileEntry, type FsDidChangeParams } from "../client/client";
import { askText } from "./dialog";
import { el } from "./dom";
import { matchIgnore, parseGitignore, type IgnoreRule } from "./gitignore";
import { bytesToBase64, base64ToBytes, downloadBytes, formatSize } from "./viewers";
import type { Workbench } from "./workbench";

/** Entries of one directory shown before "show more", and how many more each click adds. */
export const pageSize = 500;
/** The drag data of a row dragged within the tree (a move). */
const pathType = "application/x-cellbox-path";
/** The largest upload (fs/write carries base64 in a message of at most 16 MiB). */
export const maxUpload = 10 << 20;

/** Directories folded and dimmed wherever they are, ignored or not, and why. */
const heavy: Record<string, string> = {
  node_modules: "node packages",
  ".venv": "a Python virtual environment",
  venv: "a Python virtual environment",
  __pycache__: "Python's bytecode cache",
  ".mypy_cache": "mypy's cache",
  ".pytest_cache": "pytest's cache",
  ".ruff_cache": "ruff's cache",
  ".tox": "tox's environments",
  ".nox": "nox's environments",
  ".cache": "a cache",
  ".ipynb_checkpoints": "Jupyter's checkpoints",
};

interface Dir {
  entries: FileEntry[];
  /** How many entries are shown (pageSize, more after "show more"). */
  shown: number;
  /** The rules of this directory's .gitignore, if it has one. */
  rules: IgnoreRule[];
  /** Names of subdirectories that are virtual environments (hold pyvenv.cfg). */
  venvs: Set<string>;
  error?: string;
}

/** Why a row is folded and dimmed. */
interface Dim {
  badge: string;
  why: string;
  /** Inherited from a parent (no badge of its own). */
  inherited?: boolean;
}

interface Row {
  path: string;
  name: string;
  type: FileEntry["type"];
  /** A symlink (to a folder when type is "dir"). */
  link?: boolean;
  size: number;
  deleted: boolean;
  dim?: Dim;
}

const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });
const parentOf = (p: string) => (p.includes("/") ? p.slice(0, p.lastIndexOf("/")) : "");
const nameOf = (p: string) => p.slice(p.lastIndexOf("/") + 1);
const join = (dir: string, name: string) => (dir ? `${dir}/${name}` : name);

/** What a name typed for a new file, a folder or a rename may not be; undefined when fine. */
export function badName(v: string): string | undefined {
  if (!v) return "a name, please";
  if (v.startsWith("/")) return "a path inside the workspace: no leading /";
  if (v.split("/").some((c) => c === ".." || c === "." || c === "")) return "no empty, . or .. parts";
  if (v.split("/").some((c) => c === ".git")) return ".git is the repository's";
  return undefined;
}

export class Tree {
  readonly element: HTMLElement;
  private status: HTMLElement;
  private dirs = new Map<string, Dir>();
  private loading = new Map<string, Promise<void>>();
  private followUp = new Map<string, Promise<void>>();
  private expanded: Set<string>;
  private changes = new Map<string, Change>();
  private changedDirs = new Set<string>();
  private recent = new Set<string>();
  private excludeRules: IgnoreRule[] = [];
  private selected?: string;
  /** Symlinks found to point to a directory (on their first click): shown and expanded as folders. */
  private linkDirs = new Set<string>();
  /** The file whose tab is in front. */
  private active?: string;
  private watchId?: string;
  private relist = new Set<string>();
  private timer?: ReturnType<typeof setTimeout>;
  private renderQueued = false;
  /** Each directory's sorted rows, until a listing, the changes or the rules change. */
  private rowCache = new Map<string, Row[]>();
  private menu?: HTMLElement;
  private picker: HTMLInputElement;
  private uploadTarget = "";
  private typed = { text: "", at: 0 };
  private listeners: ((changes: FileChange[], overflow: boolean) => void)[] = [];
  private renameListeners: ((from: string, to: string) => void)[] = [];

  constructor(
    private wb: Workbench,
    section: HTMLElement,
  ) {
    this.expanded = new Set(wb.session.get<string[]>("tree:expanded", []));
    this.element = el("div", { class: "tree", role: "tree", tabindex: "0", "aria-label": "project files" });
    this.status = el("div", { class: "tree-status", role: "status" });
    this.picker = el("input", { type: "file", multiple: "", class: "upload-input", hidden: "" }) as HTMLInputElement;
    this.picker.onchange = () => {
      const files = [...(this.picker.files ?? [])];
      this.picker.value = "";
      void this.upload(this.uploadTarget, files);
    };
    const btn = (label: string, cls: string, title: string, fn: () => void) => {
      const b = el("button", { class: `tree-tool ${cls}`, title, "aria-label": title }, label);
      b.onclick = fn;
      return b;
    };
    const title = section.querySelector(".panel-title") ?? section.appendChild(el("div", { class: "panel-title" }, "Files"));
    title.append(
      el("span", { class: "spacer" }),
      btn("+ File", "new-file", "new file in the selected folder", () => void this.newFile(this.targetDir())),
      btn("+ Folder", "new-folder", "new folder in the selected folder", () => void this.newFolder(this.targetDir())),
      btn("⤒", "upload", "upload files into the selected folder", () => this.pickUpload(this.targetDir())),
      btn("⊟", "collapse-all", "fold every folder", () => this.collapseAll()),
      btn("⟳", "refresh", "list the tree again", () => void this.reload()),
    );
    section.append(this.element, this.status, this.picker);
    this.element.addEventListener("click", (e) => this.onClick(e));
    this.element.addEventListener("keydown", (e) => this.onKey(e));
    this.element.addEventListener("contextmenu", (e) => this.onContextMenu(e));
    this.element.addEventListener("focus", (e) => {
      // The tree itself got the focus (Tab): hand it to the selected row.
      if (e.target === this.element) this.focusRow(this.selected ?? this.rows()[0]?.dataset.path);
    });
    this.element.addEventListener("dragstart", (e) => this.onDragStart(e));
    this.element.addEventListener("dragover", (e) => this.onDragOver(e));
    this.element.addEventListener("dragleave", () => this.clearDrop());
    this.element.addEventListener("drop", (e) => this.onDrop(e));
    wb.client.on(Methods.FsDidChange, (p: FsDidChangeParams) => {
      if (p.watchId !== this.watchId) return;
      for (const c of p.changes) {
        this.recent.add(c.path);
        this.relistFor(c.path);
      }
      if (p.overflow) for (const d of this.dirs.keys()) this.relist.add(d);
      this.scheduleRelist();
      for (const fn of this.listeners) fn(p.changes, !!p.overflow);
    });
  }

  /** Called with each fs/didChange batch of the tree's watch (the changes panel, the file editors). */
  onFsChange(fn: (changes: FileChange[], overflow: boolean) => void) {
    this.listeners.push(fn);
  }

  /** Called after a rename through the tree (open editors follow the file). */
  onRename(fn: (from: string, to: string) => void) {
    this.renameListeners.push(fn);
  }

  async start() {
    const w = await this.wb.client.request(Methods.FsWatch, { workspaceId: this.wb.workspaceId });
    this.watchId = w.watchId;
    await this.readExclude();
    await this.load("");
    this.render();
  }

  /** rewatch after a reconnect: watches belong to the connection; what changed meanwhile is listed again. */
  async rewatch() {
    this.watchId = undefined;
    const w = await this.wb.client.request(Methods.FsWatch, { workspaceId: this.wb.workspaceId });
    this.watchId = w.watchId;
    await this.reload();
  }

  /**
   * After what fs/didChange may not report (a commit, a discard, a restore): every listed
   * directory again, and the listeners (open files) told to look at theirs.
   */
  async resync() {
    await this.reload();
    for (const fn of this.listeners) fn([], true);
  }

  /** Lists every loaded directory again. */
  async reload() {
    await Promise.all([...this.dirs.keys()].map((d) => this.load(d)));
    this.render();
  }

  /** The changes of workspace/changes (the changes panel hands them over after each refresh). */
  setChanges(changes: Map<string, Change>) {
    this.changes = changes;
    this.rowCache.clear();
    this.changedDirs = new Set();
    for (const p of changes.keys()) for (let d = parentOf(p); d; d = parentOf(d)) this.changedDirs.add(d);
    this.queueRender();
  }

  /** Marks the row of the file whose tab is in front (none: undefined). */
  setActive(path: string | undefined) {
    if (this.active === path) return;
    this.active = path;
    for (const r of this.element.querySelectorAll(".tree-item.active-file")) r.classList.remove("active-file");
    this.rowOf(path)?.classList.add("active-file");
  }

  /** Selects a path's row, expanding its parents (a file opened from elsewhere). */
  async reveal(path: string) {
    const parts = path.split("/");
    for (let i = 1; i < parts.length; i++) {
      const d = parts.slice(0, i).join("/");
      this.expanded.add(d);
      await this.ensure(d);
    }
    this.saveExpanded();
    this.selected = path;
    this.render();
    this.element.querySelector(`[data-path="${CSS.escape(path)}"]`)?.scrollIntoView({ block: "nearest" });
  }

  // --- listing

  private async readExclude() {
    try {
      const r = await this.wb.client.request(Methods.FsRead, { workspaceId: this.wb.workspaceId, path: ".git/info/exclude", encoding: "utf8" });
      this.excludeRules = parseGitignore(r.content, "");
      this.rowCache.clear();
    } catch {
      this.excludeRules = []; // no repository, or no exclude file
    }
  }

  /**
   * Lists dir (again). A listing already under way may have started before what asks for
   * this one: dir is listed once more after it (one follow-up, however many ask meanwhile).
   */
  private load(dir: string): Promise<void> {
    const had = this.loading.get(dir);
    if (had) {
      let next = this.followUp.get(dir);
      if (!next) {
        next = had.then(() => this.load(dir)).finally(() => this.followUp.delete(dir));
        this.followUp.set(dir, next);
      }
      return next;
    }
    const p = this.list(dir).finally(() => this.loading.delete(dir));
    this.loading.set(dir, p);
    return p;
  }

  /** dir's listing: the one under way, or a new one when it was never listed. */
  private ensure(dir: string): Promise<void> {
    return this.loading.get(dir) ?? (this.dirs.has(dir) ? Promise.resolve() : this.load(dir));
  }

  /** A renamed folder stays expanded, and so do the folders below it that were. */
  private moveExpanded(from: string, to: string) {
    for (const e of [...this.expanded]) {
      if (e !== from && !e.startsWith(from + "/")) continue;
      this.expanded.delete(e);
      this.expanded.add(to + e.slice(from.length));
    }
    this.saveExpanded();
  }

  /** Forgets a directory's listing and those below it (deleted, renamed). */
  private forget(dir: string) {
    for (const d of [...this.dirs.keys()]) if (d === dir || d.startsWith(dir + "/")) this.dirs.delete(d);
    for (const l of [...this.linkDirs]) if (l === dir || l.startsWith(dir + "/")) this.linkDirs.delete(l);
    this.rowCache.clear();
  }

  private async list(dir: string) {
    const ws = { workspaceId: this.wb.workspaceId };
    const old = this.dirs.get(dir);
    try {
      const r = await this.wb.client.request(Methods.FsList, dir ? { ...ws, path: dir } : ws);
      const entries = r.entries.filter((e) => nameOf(e.path) !== ".git");
      let rules: IgnoreRule[] = [];
      if (entries.some((e) => nameOf(e.path) === ".gitignore" && e.type === "file")) {
        try {
          const g = await this.wb.client.request(Methods.FsRead, { ...ws, path: join(dir, ".gitignore"), encoding: "utf8" });
          rules = parseGitignore(g.content, dir);
        } catch {
          // unreadable (too large, gone since the listing): no rules from it
        }
      }
      // A directory named env is a virtual environment when it holds pyvenv.cfg (one stat, not a listing).
      const venvs = new Set<string>();
      await Promise.all(
        entries
          .filter((e) => e.type === "dir" && (nameOf(e.path) === "env" || nameOf(e.path) === ".env"))
          .map(async (e) => {
            try {
              await this.wb.client.request(Methods.FsStat, { ...ws, path: `${e.path}/pyvenv.cfg` });
              venvs.add(nameOf(e.path));
            } catch {
              // not a virtual environment
            }
          }),
      );
      this.dirs.set(dir, { entries, shown: Math.max(old?.shown ?? 0, pageSize), rules, venvs });
      this.rowCache.clear();
    } catch (e) {
      // Gone (deleted since), or not listable: the parent's listing drops it, or the row says why.
      this.dirs.set(dir, { entries: [], shown: pageSize, rules: [], venvs: new Set(), error: (e as Error).message });
      this.rowCache.clear();
    }
  }

  /** The directory of a changed path is listed again (or its nearest listed parent, where a new folder shows). */
  private relistFor(path: string) {
    for (let d = parentOf(path); ; d = parentOf(d)) {
      if (this.dirs.has(d)) {
        // (A .gitignore is read again with its directory's listing.)
        this.relist.add(d);
        break;
      }
      if (!d) break;
    }
    // A listed directory itself changed (deleted, replaced): list it again too.
    if (this.dirs.has(path)) this.relist.add(path);
    if (path === ".git/info/exclude") void this.readExclude().then(() => this.queueRender());
  }

  private scheduleRelist() {
    if (this.timer) return;
    this.timer = setTimeout(async () => {
      this.timer = undefined;
      const dirs = [...this.relist];
      this.relist.clear();
      await Promise.all(dirs.map((d) => this.load(d)));
      // A directory that is gone drops from the listing of its parent; forget what was below it.
      for (const d of dirs) if (this.dirs.get(d)?.error && d) this.forget(d);
      this.rowCache.clear();
      this.render();
      setTimeout(() => {
        this.recent.clear();
      }, 1500);
    }, 100);
  }

  // --- what is folded and dimmed

  /** The ignore rules that apply inside dir: .git/info/exclude, then each .gitignore from the root down. */
  private rulesFor(dir: string): IgnoreRule[] {
    const out = [...this.excludeRules, ...(this.dirs.get("")?.rules ?? [])];
    if (!dir) return out;
    const parts = dir.split("/");
    for (let i = 1; i <= parts.length; i++) out.push(...(this.dirs.get(parts.slice(0, i).join("/"))?.rules ?? []));
    return out;
  }

  private dimOf(e: FileEntry, dir: Dir, rules: IgnoreRule[], parentDim?: Dim): Dim | undefined {
    if (parentDim) return { badge: parentDim.badge, why: parentDim.why, inherited: true };
    const name = nameOf(e.path);
    const isDir = e.type === "dir";
    if (isDir && heavy[name]) return { badge: name === "node_modules" ? "deps" : /venv/.test(name) ? "venv" : name === ".tox" || name === ".nox" ? "envs" : "cache", why: `${heavy[name]}: folded, and listed after your files` };
    if (isDir && dir.venvs.has(name)) return { badge: "venv", why: "a Python virtual environment (it holds pyvenv.cfg): folded, and listed after your files" };
    const hit = matchIgnore(rules, e.path, isDir);
    if (hit && !hit.negate) return { badge: "ignored", why: `ignored by ${hit.base ? `${hit.base}/` : ""}.gitignore (${hit.source}): folded, and listed after your files` };
    return undefined;
  }

  // --- rendering

  private queueRender() {
    if (this.renderQueued) return;
    this.renderQueued = true;
    requestAnimationFrame(() => {
      this.renderQueued = false;
      this.render();
    });
  }

  /** The rows of a directory, sorted: the user's folders, the user's files, then what is dimmed. */
  private rowsOf(dirPath: string, parentDim?: Dim): Row[] {
    const dir = this.dirs.get(dirPath);
    if (!dir) return [];
    const cached = this.rowCache.get(dirPath);
    if (cached) return cached;
    const rules = this.rulesFor(dirPath);
    const rows: Row[] = dir.entries.map((e) => ({ path: e.path, name: nameOf(e.path), type: this.linkDirs.has(e.path) ? "dir" : e.type, link: e.type === "symlink", size: e.size, deleted: false, dim: this.dimOf(e, dir, rules, parentDim) }));
    const present = new Set(dir.entries.map((e) => e.path));
    for (const c of this.changes.values()) {
      if (c.kind === "deleted" && parentOf(c.path) === dirPath && !present.has(c.path)) rows.push({ path: c.path, name: nameOf(c.path), type: "file", size: 0, deleted: true });
    }
    const rank = (r: Row) => (r.dim && !r.dim.inherited ? 2 : 0) + (r.type === "dir" ? 0 : 1);
    rows.sort((a, b) => rank(a) - rank(b) || collator.compare(a.name, b.name) || (a.name < b.name ? -1 : 1));
    this.rowCache.set(dirPath, rows);
    return rows;
  }

  render() {
    const hadFocus = this.element.contains(document.activeElement);
    const frag = document.createDocumentFragment();
    const walk = (dirPath: string, depth: number, parentDim?: Dim) => {
      const dir = this.dirs.get(dirPath);
      if (!dir) {
        frag.append(this.note(depth, "loading…", "tree-loading"));
        void this.ensure(dirPath).then(() => this.queueRender());
        return;
      }
      if (dir.error) {
        frag.append(this.note(depth, `cannot list: ${dir.error}`, "tree-error"));
        return;
      }
      const rows = this.rowsOf(dirPath, parentDim);
      for (const r of rows.slice(0, dir.shown)) {
        frag.append(this.row(r, depth));
        if (r.type === "dir" && this.expanded.has(r.path)) walk(r.path, depth + 1, r.dim);
      }
      if (rows.length > dir.shown) {
        const more = el("button", { class: "tree-more", "data-dir": dirPath }, `show ${Math.min(pageSize, rows.length - dir.shown)} more of ${rows.length - dir.shown}`);
        more.style.marginLeft = `${8 + depth * 14}px`;
        more.onclick = (e) => {
          e.stopPropagation();
          dir.shown += pageSize;
          this.render();
        };
        frag.append(more);
      }
      if (!rows.length && depth === 0) frag.append(el("div", { class: "empty" }, "(empty workspace)"));
    };
    walk("", 0);
    this.element.replaceChildren(frag);
    if (this.selected && !this.element.querySelector(`[data-path="${CSS.escape(this.selected)}"]`)) this.selected = undefined;
    const sel = this.selected ?? this.rows()[0]?.dataset.path;
    for (const r of this.rows()) r.tabIndex = r.dataset.path === sel ? 0 : -1;
    if (this.rows().length) this.element.tabIndex = -1;
    if (hadFocus && sel) this.focusRow(sel);
  }

  private note(depth: number, text: string, cls: string): HTMLElement {
    const n = el("div", { class: `tree-note ${cls}` }, text);
    n.style.paddingLeft = `${22 + depth * 14}px`;
    return n;
  }

  private row(r: Row, depth: number): HTMLElement {
    const isDir = r.type === "dir";
    const open = isDir && this.expanded.has(r.path);
    const change = this.changes.get(r.path);
    const row = el(
      "div",
      { class: `tree-item ${r.type}`, role: "treeitem", "aria-level": String(depth + 1), title: r.dim ? `${r.path} — ${r.dim.why}` : r.path, draggable: String(!r.deleted) },
      el("span", { class: "twisty" }),
      el("span", { class: "name" }, r.name + (r.link ? " →" : "")),
    );
    row.dataset.path = r.path;
    row.dataset.type = r.type;
    if (r.link) row.dataset.link = "true";
    row.style.paddingLeft = `${4 + depth * 14}px`;
    if (isDir) {
      row.setAttribute("aria-expanded", String(open));
      if (!open) row.classList.add("collapsed");
      if (this.changedDirs.has(r.path)) row.append(el("span", { class: "dir-mark", title: "something inside changed" }, "•"));
    }
    if (r.dim) {
      row.classList.add("dimmed");
      if (!r.dim.inherited) {
        row.classList.add(r.dim.badge === "ignored" ? "ignored" : "heavy");
        row.append(el("span", { class: "badge tree-badge" }, r.dim.badge));
      }
    }
    if (r.deleted) row.classList.add("deleted");
    if (change) {
      row.classList.add("changed", change.kind);
      row.append(el("span", { class: "mark", title: change.kind }, change.kind[0].toUpperCase()));
    }
    if (this.recent.has(r.path)) row.classList.add("recent");
    if (r.path === this.active) row.classList.add("active-file");
    if (r.path === this.selected) {
      row.classList.add("selected");
      row.setAttribute("aria-selected", "true");
    }
    return row;
  }

  private rows(): HTMLElement[] {
    return [...this.element.querySelectorAll<HTMLElement>(".tree-item")];
  }

  private rowOf(path: string | undefined): HTMLElement | null {
    return path === undefined ? null : this.element.querySelector<HTMLElement>(`.tree-item[data-path="${CSS.escape(path)}"]`);
  }

  private select(path: string | undefined) {
    this.selected = path;
    for (const r of this.rows()) {
      const on = r.dataset.path === path;
      r.classList.toggle("selected", on);
      r.tabIndex = on ? 0 : -1;
      if (on) r.setAttribute("aria-selected", "true");
      else r.removeAttribute("aria-selected");
    }
  }

  private focusRow(path: string | undefined) {
    const r = this.rowOf(path);
    if (!r) return;
    this.select(path);
    r.focus({ preventScroll: true });
    r.scrollIntoView({ block: "nearest" });
  }

  private saveExpanded() {
    // Kept bounded: the most recent 500 expanded folders.
    this.wb.session.set("tree:expanded", [...this.expanded].slice(-500));
  }

  async toggle(path: string, open = !this.expanded.has(path)) {
    if (open) {
      this.expanded.add(path);
      this.saveExpanded();
      if (!this.dirs.has(path)) {
        this.render();
        await this.ensure(path);
      }
    } else {
      this.expanded.delete(path);
      this.saveExpanded();
    }
    this.render();
  }

  collapseAll() {
    this.expanded.clear();
    this.saveExpanded();
    this.render();
  }

  /** The folder new files go to: the selected folder, or the selected file's folder, or the root. */
  private targetDir(): string {
    const r = this.rowOf(this.selected);
    if (!r) return "";
    return r.dataset.type === "dir" ? r.dataset.path! : parentOf(r.dataset.path!);
  }

  // --- events

  private onClick(e: MouseEvent) {
    const row = (e.target as HTMLElement).closest<HTMLElement>(".tree-item");
    if (!row) return;
    const path = row.dataset.path!;
    this.focusRow(path);
    if (row.dataset.type === "dir") void this.toggle(path);
    else if (row.dataset.type === "symlink") void this.openLink(path);
    else if (!row.classList.contains("deleted")) void this.wb.openPath(path);
    else void this.wb.changes?.openChange?.(path);
  }

  /** A symlink's first click: a folder (fs/list follows it inside the workspace) expands, anything else opens. */
  private async openLink(path: string) {
    await this.load(path);
    if (this.dirs.get(path)?.error) {
      this.forget(path);
      await this.wb.openPath(path);
      return;
    }
    this.linkDirs.add(path);
    this.rowCache.clear();
    await this.toggle(path, true);
    this.focusRow(path);
  }

  private onKey(e: KeyboardEvent) {
    const rows = this.rows();
    if (!rows.length) return;
    const i = Math.max(0, rows.findIndex((r) => r.dataset.path === this.selected));
    const row = rows[i];
    const path = row.dataset.path!;
    const isDir = row.dataset.type === "dir";
    const go = (j: number) => this.focusRow(rows[Math.max(0, Math.min(rows.length - 1, j))].dataset.path);
    switch (e.key) {
      case "ArrowDown":
        go(i + 1);
        break;
      case "ArrowUp":
        go(i - 1);
        break;
      case "Home":
        go(0);
        break;
      case "End":
        go(rows.length - 1);
        break;
      case "ArrowRight":
        if (isDir && !this.expanded.has(path)) void this.toggle(path, true).then(() => this.focusRow(path));
        else if (isDir) go(i + 1);
        break;
      case "ArrowLeft":
        if (isDir && this.expanded.has(path)) void this.toggle(path, false).then(() => this.focusRow(path));
        else if (parentOf(path)) this.focusRow(parentOf(path));
        break;
      case "Enter":
        if (isDir) void this.toggle(path).then(() => this.focusRow(path));
        else if (row.dataset.type === "symlink") void this.openLink(path);
        else if (!row.classList.contains("deleted")) void this.wb.openPath(path);
        break;
      case "F2":
        void this.rename(path);
        break;
      case "Delete":
        void this.remove(path);
        break;
      case "ContextMenu":
        this.openMenu(row, row.getBoundingClientRect().left + 20, row.getBoundingClientRect().bottom);
        break;
      case "F10":
        if (!e.shiftKey) return;
        this.openMenu(row, row.getBoundingClientRect().left + 20, row.getBoundingClientRect().bottom);
        break;
      default:
        if (e.key.length === 1 && !e.ctrlKey && !e.metaKey && !e.altKey && e.key !== " ") {
          this.typeAhead(rows, i, e.key);
          break;
        }
        return;
    }
    e.preventDefault();
  }

  /** Typing a name's first letters goes to the next row whose name starts with them. */
  private typeAhead(rows: HTMLElement[], i: number, key: string) {
    const now = Date.now();
    const same = now - this.typed.at < 800;
    this.typed = { text: (same ? this.typed.text : "") + key.toLowerCase(), at: now };
    const text = this.typed.text;
    // A new search starts after the current row; a longer one may stay on it.
    const start = same ? i : i + 1;
    for (let k = 0; k < rows.length; k++) {
      const r = rows[(start + k) % rows.length];
      if (nameOf(r.dataset.path!).toLowerCase().startsWith(text)) return this.focusRow(r.dataset.path);
    }
  }

  private onContextMenu(e: MouseEvent) {
    e.preventDefault();
    const row = (e.target as HTMLElement).closest<HTMLElement>(".tree-item");
    if (row) this.focusRow(row.dataset.path);
    this.openMenu(row, e.clientX, e.clientY);
  }

  private closeMenu() {
    this.menu?.remove();
    this.menu = undefined;
  }

  /** The context menu of a row (or of the root, for the empty space). */
  private openMenu(row: HTMLElement | null, x: number, y: number) {
    this.closeMenu();
    const path = row?.dataset.path ?? "";
    const isDir = !row || row.dataset.type === "dir";
    const deleted = !!row?.classList.contains("deleted");
    const dir = isDir ? path : parentOf(path);
    const items: [string, string, () => void][] = [];
    if (row && !isDir && !deleted) items.push(["Open", "open", () => void this.wb.openPath(path)]);
    if (isDir) {
      items.push(["New file…", "new-file", () => void this.newFile(dir)]);
      items.push(["New folder…", "new-folder", () => void this.newFolder(dir)]);
      items.push(["Upload files…", "upload", () => this.pickUpload(dir)]);
    }
    if (row && !isDir && !deleted) items.push(["Download", "download", () => void this.download(path)]);
    if (row && !deleted) {
      items.push(["Rename…", "rename", () => void this.rename(path)]);
      items.push(["Delete", "delete", () => void this.remove(path)]);
    }
    if (row && this.changes.has(path)) items.push(["Show the change", "show-change", () => void this.wb.changes?.openChange?.(path)]);
    if (row) items.push(["Copy path", "copy-path", () => void navigator.clipboard?.writeText(path).catch(() => this.say(path))]);
    if (!row) items.push(["Refresh", "refresh", () => void this.reload()]);
    const menu = el("div", { class: "context-menu", role: "menu" });
    for (const [label, cls, fn] of items) {
      const b = el("button", { class: `menu-item ${cls}`, role: "menuitem" }, label);
      b.onclick = () => {
        this.closeMenu();
        fn();
      };
      menu.append(b);
    }
    menu.addEventListener("keydown", (e) => {
      const bs = [...menu.querySelectorAll<HTMLElement>("button")];
      const k = bs.indexOf(document.activeElement as HTMLElement);
      if (e.key === "Escape") {
        this.closeMenu();
        this.focusRow(path || undefined);
      } else if (e.key === "ArrowDown") bs[(k + 1) % bs.length].focus();
      else if (e.key === "ArrowUp") bs[(k - 1 + bs.length) % bs.length].focus();
      else return;
      e.preventDefault();
    });
    document.body.append(menu);
    const r = menu.getBoundingClientRect();
    if (!Number.isFinite(x) || !Number.isFinite(y)) {
      const t = (row ?? this.element).getBoundingClientRect();
      [x, y] = [t.left + 20, t.top + 20];
    }
    menu.style.left = `${Math.max(0, Math.min(x, innerWidth - r.width - 4))}px`;
    menu.style.top = `${Math.max(0, Math.min(y, innerHeight - r.height - 4))}px`;
    this.menu = menu;
    (menu.querySelector("button") as HTMLElement | null)?.focus();
    const away = (e: Event) => {
      if (this.menu === menu && !menu.contains(e.target as Node)) this.closeMenu();
      if (this.menu !== menu) {
        document.removeEventListener("pointerdown", away, true);
        window.removeEventListener("blur", away);
      }
    };
    document.addEventListener("pointerdown", away, true);
    window.addEventListener("blur", away);
  }

  private dropDir(e: DragEvent): string {
    const row = (e.target as HTMLElement).closest<HTMLElement>(".tree-item");
    if (!row) return "";
    return row.dataset.type === "dir" ? row.dataset.path! : parentOf(row.dataset.path!);
  }

  private onDragStart(e: DragEvent) {
    const row = (e.target as HTMLElement).closest<HTMLElement>(".tree-item");
    if (!row || !e.dataTransfer) return;
    e.dataTransfer.setData(pathType, row.dataset.path!);
    e.dataTransfer.setData("text/plain", row.dataset.path!);
    e.dataTransfer.effectAllowed = "move";
  }

  private onDragOver(e: DragEvent) {
    const types = e.dataTransfer?.types ?? [];
    const move = types.includes(pathType);
    if (!move && !types.includes("Files")) return;
    e.preventDefault();
    e.dataTransfer!.dropEffect = move ? "move" : "copy";
    const dir = this.dropDir(e);
    this.clearDrop();
    (this.rowOf(dir) ?? this.element).classList.add("drop-target");
  }

  private clearDrop() {
    for (const r of this.element.querySelectorAll(".drop-target")) r.classList.remove("drop-target");
    this.element.classList.remove("drop-target");
  }

  private onDrop(e: DragEvent) {
    const dt = e.dataTransfer;
    if (!dt) return;
    const from = dt.getData(pathType);
    if (!from && !dt.files.length) return;
    e.preventDefault();
    this.clearDrop();
    if (from) void this.move(from, this.dropDir(e));
    else void this.upload(this.dropDir(e), [...dt.files]);
  }

  // --- operations, each through the workspace

  say(s: string, error = false) {
    this.status.textContent = s;
    this.status.classList.toggle("error", error);
  }

  private fail(what: string, e: unknown) {
    this.say(`${what}: ${(e as Error).message}`, true);
  }

  private async exists(path: string): Promise<boolean> {
    try {
      await this.wb.client.request(Methods.FsStat, { workspaceId: this.wb.workspaceId, path });
      return true;
    } catch {
      return false;
    }
  }

  /** After an operation: the directory listed again now (fs/didChange follows), the changes soon. */
  private async changed(...dirs: string[]) {
    await Promise.all(dirs.filter((d) => this.dirs.has(d)).map((d) => this.load(d)));
    this.render();
    this.wb.changes?.schedule();
  }

  async newFile(dir: string) {
    const name = await askText(`New file in ${dir ? `${dir}/` : "the workspace"} (a/b.txt makes its folders)`, "", { action: "Create", check: badName });
    if (!name) return;
    const path = join(dir, name);
    try {
      if (await this.exists(path)) return this.say(`${path} exists already`, true);
      await this.wb.client.request(Methods.FsWrite, { workspaceId: this.wb.workspaceId, path, content: "", createParents: true });
      this.say(`created ${path}`);
      if (dir) this.expanded.add(dir);
      await this.changed(dir, parentOf(path));
      await this.reveal(path);
      await this.wb.openPath(path);
    } catch (e) {
      this.fail(`cannot create ${path}`, e);
    }
  }

  async newFolder(dir: string) {
    const name = await askText(`New folder in ${dir ? `${dir}/` : "the workspace"}`, "", { action: "Create", check: badName });
    if (!name) return;
    const path = join(dir, name);
    try {
      if (await this.exists(path)) return this.say(`${path} exists already`, true);
      await this.wb.client.request(Methods.FsMkdir, { workspaceId: this.wb.workspaceId, path, parents: true });
      this.say(`created ${path}/`);
      if (dir) this.expanded.add(dir);
      await this.changed(dir);
      await this.reveal(path);
    } catch (e) {
      this.fail(`cannot create ${path}`, e);
    }
  }

  async rename(path: string) {
    const name = nameOf(path);
    const dot = name.lastIndexOf(".");
    const dir = parentOf(path);
    const to = await askText(`Rename ${path} to (relative to ${dir ? `${dir}/` : "the workspace"})`, name, { action: "Rename", check: badName, select: [0, dot > 0 ? dot : name.length] });
    if (!to || to === name) return;
    const target = join(dir, to);
    try {
      if (await this.exists(target)) return this.say(`${target} exists already`, true);
      await this.wb.client.request(Methods.FsRename, { workspaceId: this.wb.workspaceId, from: path, to: target });
      this.moveExpanded(path, target);
      this.forget(path);
      this.say(`renamed ${path} to ${target}`);
      for (const fn of this.renameListeners) fn(path, target);
      await this.changed(dir, parentOf(target));
      await this.reveal(target);
    } catch (e) {
      this.fail(`cannot rename ${path}`, e);
    }
  }

  /** Moves a file or folder into dir (a row dropped on a folder): fs/rename, a change like any other. */
  async move(from: string, dir: string) {
    const to = join(dir, nameOf(from));
    if (to === from || parentOf(from) === dir) return;
    if (dir === from || dir.startsWith(from + "/")) return this.say(`cannot move ${from} into itself`, true);
    try {
      if (await this.exists(to)) return this.say(`${to} exists already`, true);
      await this.wb.client.request(Methods.FsRename, { workspaceId: this.wb.workspaceId, from, to });
      this.moveExpanded(from, to);
      this.forget(from);
      this.say(`moved ${from} to ${dir || "the workspace"}/`);
      for (const fn of this.renameListeners) fn(from, to);
      if (dir) this.expanded.add(dir);
      await this.changed(parentOf(from), dir);
      await this.reveal(to);
    } catch (e) {
      this.fail(`cannot move ${from}`, e);
    }
  }

  async remove(path: string) {
    const row = this.rowOf(path);
    // A symlink is removed itself, never what it points to.
    const isDir = row?.dataset.type === "dir" && !row.dataset.link;
    const listed = this.dirs.get(path)?.entries.length;
    const what = isDir ? `the folder ${path} and everything in it${listed ? ` (${listed} entr${listed === 1 ? "y" : "ies"} at its top)` : ""}` : path;
    if (!(await this.wb.confirm(`Delete ${what}? It shows as a deletion in Changes until you commit it (discard brings it back).`, "Delete"))) return;
    try {
      await this.wb.client.request(Methods.FsDelete, { workspaceId: this.wb.workspaceId, path, recursive: isDir });
      this.say(`deleted ${path}`);
      this.forget(path);
      this.expanded.delete(path);
      await this.changed(parentOf(path));
    } catch (e) {
      this.fail(`cannot delete ${path}`, e);
    }
  }

  pickUpload(dir: string) {
    this.uploadTarget = dir;
    this.picker.click();
  }

  /** Writes files (the picker's, or dropped ones) into dir, asking before one replaces a file. */
  async upload(dir: string, files: File[]) {
    const done: string[] = [];
    for (const f of files) {
      const path = join(dir, f.name);
      if (f.size > maxUpload) {
        this.say(`${f.name} is ${formatSize(f.size)}: uploads are up to ${formatSize(maxUpload)} (copy larger files into the project instead)`, true);
        continue;
      }
      try {
        if ((await this.exists(path)) && !(await this.wb.confirm(`${path} exists. Replace it with the uploaded ${f.name} (${formatSize(f.size)})?`, "Replace"))) continue;
        const content = bytesToBase64(new Uint8Array(await f.arrayBuffer()));
        await this.wb.client.request(Methods.FsWrite, { workspaceId: this.wb.workspaceId, path, content, encoding: "base64", createParents: true });
        done.push(path);
      } catch (e) {
        this.fail(`cannot upload ${f.name}`, e);
        return;
      }
    }
    if (!done.length) return;
    this.say(`uploaded ${done.length === 1 ? done[0] : `${done.length} files to ${dir || "the workspace"}`}`);
    if (dir) this.expanded.add(dir);
    await this.changed(dir);
    await this.reveal(done[0]);
  }

  async download(path: string) {
    try {
      const r = await this.wb.client.request(Methods.FsRead, { workspaceId: this.wb.workspaceId, path, encoding: "base64" });
      downloadBytes(nameOf(path), base64ToBytes(r.content));
      this.say(`downloaded ${path} (${formatSize(r.size)})`);
    } catch (e) {
      this.fail(`cannot download ${path}`, e);
    }
  }
}
