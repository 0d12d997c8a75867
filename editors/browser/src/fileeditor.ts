// The file editor: the page's default opener (wb.openers' last). A text
// file opens in a CodeEditor (CodeMirror 6, the language by its path, line
// numbers) in a tab of the main area; Ctrl+S / Cmd+S saves it with
// fs/write, which makes it a change to review. The tab carries a dot while
// unsaved, and closing it then asks. When the file changes underneath
// (fs/didChange: a cell, a terminal, an agent), a clean tab reloads; an
// edited one shows a bar: changed on disk, reload or keep mine. Images,
// CSV/TSV and JSON open in their viewers (a toggle shows the text in the
// editor); a binary file, or one over 2 MiB, gets a pane with its size and
// a download button instead of an editor. The open tabs, and what was typed
// and not saved (drafts), come back after a reload (wb.session).
import { Methods, RPCError, type FileChange } from "../client/client";
import { el } from "./dom";
import { CodeEditor } from "./editor";
import type { Tree } from "./tree";
import { base64ToBytes, binaryPane, csvTable, downloadBytes, formatSize, imageView, jsonTree, viewKind, type ViewKind } from "./viewers";
import type { Opener, Workbench } from "./workbench";

/** Files over this size get a pane, not an editor. */
export const maxEditBytes = 2 << 20;
/** Images, and CSV or JSON files shown in their viewer only, over this size are not read into the page. */
const maxImageBytes = 12 << 20;
const maxViewBytes = 12 << 20;

const nameOf = (p: string) => p.slice(p.lastIndexOf("/") + 1);

type Mode = "view" | "text";

/** One open file: its tab, its editor or viewer, what is on disk. */
class FileDoc {
  readonly body: HTMLElement;
  private bar: HTMLElement;
  /** The text came from a draft edited from an older version of the file. */
  private stale = false;
  private content: HTMLElement;
  private info: HTMLElement;
  private toggles: HTMLElement;
  private pathLabel: HTMLElement;
  private saveButton: HTMLButtonElement;
  editor?: CodeEditor;
  /** The text as on disk when last read or saved (undefined: not a text document). */
  saved?: string;
  kind: ViewKind | "binary" | "large" = "text";
  /** A CSV or JSON file over maxEditBytes: its viewer, no editor. */
  viewOnly = false;
  mode: Mode = "text";
  private draftTimer?: ReturnType<typeof setTimeout>;
  private checking = false;
  private again = false;

  constructor(
    private owner: FileEditors,
    public path: string,
  ) {
    this.bar = el("div", { class: "file-bar", role: "alert", hidden: "" });
    this.info = el("span", { class: "file-info" });
    this.toggles = el("span", { class: "file-toggles" });
    this.pathLabel = el("button", { class: "file-path", title: "show it in the tree" }, path);
    this.pathLabel.onclick = () => void this.owner.reveal(this.path);
    this.saveButton = el("button", { class: "file-save", title: "save (Ctrl+S)", disabled: "" }, "Save") as HTMLButtonElement;
    this.saveButton.onclick = () => void this.save();
    this.content = el("div", { class: "file-content" });
    this.body = el("div", { class: "file-doc" }, el("div", { class: "file-toolbar" }, this.toggles, this.pathLabel, el("span", { class: "spacer" }), this.info, this.saveButton), this.bar, this.content);
    this.body.dataset.path = path;
    this.body.addEventListener("keydown", (e) => {
      // Ctrl+S outside the editor (a viewer, the toolbar); the editor's own keymap handled it already otherwise.
      if ((e.ctrlKey || e.metaKey) && e.key.toLowerCase() === "s" && !e.defaultPrevented) {
        e.preventDefault();
        void this.save();
      }
    });
  }

  get tabId() {
    return `file:${this.path}`;
  }

  get dirty(): boolean {
    return this.editor !== undefined && this.saved !== undefined && this.editor.value !== this.saved;
  }

  private get wb() {
    return this.owner.wb;
  }

  private get ws() {
    return { workspaceId: this.wb.workspaceId };
  }

  /** Reads the file and shows it; a draft kept from the last session comes back into the editor. */
  async load() {
    this.content.replaceChildren(el("div", { class: "empty" }, "loading…"));
    try {
      const st = await this.wb.client.request(Methods.FsStat, { ...this.ws, path: this.path });
      const kind = viewKind(this.path);
      if (st.type === "dir") {
        this.kind = "binary";
        this.content.replaceChildren(el("div", { class: "empty" }, `${this.path} is a folder`));
        return;
      }
      if (kind === "image" && st.size <= maxImageBytes) {
        this.kind = "image";
        this.saved = undefined;
        await this.showImage();
        return;
      }
      this.viewOnly = st.size > maxEditBytes && (kind === "csv" || kind === "json") && st.size <= maxViewBytes;
      if (st.size > maxEditBytes && !this.viewOnly) {
        this.kind = "large";
        this.showPane(st.size, "large");
        return;
      }
      const r = await this.wb.client.request(Methods.FsRead, { ...this.ws, path: this.path });
      if (r.encoding === "base64") {
        this.kind = "binary";
        this.showPane(r.size, "binary");
        return;
      }
      if (this.viewOnly) {
        this.kind = kind;
        this.saved = r.content;
        this.mode = "view";
        this.render(r.content);
        return;
      }
      this.kind = kind;
      this.saved = r.content;
      const draft = this.owner.draft(this.path);
      let text = r.content;
      if (draft !== undefined && draft !== r.content) {
        text = draft;
        const base = this.owner.draftBase(this.path);
        // The draft was edited from another text than the file's now (an agent, a
        // terminal or another editor wrote it since): saving asks before overwriting.
        this.stale = base !== undefined && base !== textHash(r.content);
        this.showBar(
          this.stale
            ? "Unsaved changes from your last session are back in the editor, but the file changed on disk since: saving asks before overwriting it."
            : "Unsaved changes from your last session are back in the editor.",
          [["Discard them", "discard-draft", () => this.reloadFromDisk()]],
        );
      }
      if (kind === "json") {
        try {
          JSON.parse(text);
        } catch {
          this.kind = "text"; // invalid JSON: the editor, where it can be fixed
        }
      }
      this.mode = this.kind === "text" || text !== r.content ? "text" : "view";
      this.render(text);
    } catch (e) {
      this.content.replaceChildren(el("div", { class: "empty error" }, `cannot open ${this.path}: ${(e as Error).message}`));
    }
  }

  private async showImage() {
    const r = await this.wb.client.request(Methods.FsRead, { ...this.ws, path: this.path, encoding: "base64" });
    this.setToggles([]);
    this.info.textContent = "";
    this.content.replaceChildren(imageView(this.path, r.content, r.size));
    this.saveButton.hidden = true;
  }

  private showPane(size: number, why: "binary" | "large") {
    this.setToggles([]);
    this.saveButton.hidden = true;
    this.info.textContent = "";
    this.content.replaceChildren(binaryPane(this.path, size, why, () => void this.owner.download(this.path)));
  }

  /** Shows the text in the current mode: the editor, or the viewer of its kind. */
  private render(text: string): void {
    const viewLabel = this.kind === "csv" ? "Table" : this.kind === "json" ? "Tree" : "";
    this.setToggles(viewLabel && !this.viewOnly ? [[viewLabel, "view"], ["Text", "text"]] : []);
    this.saveButton.hidden = this.viewOnly;
    if (this.mode === "view") {
      let view: HTMLElement;
      if (this.kind === "csv") view = csvTable(this.path, text);
      else {
        try {
          view = jsonTree(JSON.parse(text));
        } catch (e) {
          if (this.viewOnly) {
            this.kind = "large";
            this.showPane(new TextEncoder().encode(text).length, "large");
            return;
          }
          this.mode = "text";
          this.showBar(`Not valid JSON (${(e as Error).message}): shown as text.`, []);
          return this.render(text);
        }
      }
      if (this.editor) this.editor.view.dom.hidden = true;
      this.content.querySelector(".file-view")?.remove();
      this.content.querySelector(".empty")?.remove();
      this.content.append(el("div", { class: "file-view" }, view));
      this.info.textContent = `${formatSize(new TextEncoder().encode(text).length)}${this.viewOnly ? ", too large to edit here" : ""}`;
      return;
    }
    this.content.querySelector(".file-view")?.remove();
    this.content.querySelector(".empty")?.remove();
    if (!this.editor) {
      this.editor = new CodeEditor({
        parent: this.content,
        doc: text,
        language: this.path,
        gutters: true,
        label: this.path,
        keys: [{ key: "Mod-s", run: () => (void this.save(), true), preventDefault: true }],
        onChange: () => this.changed(),
      });
    } else {
      this.editor.view.dom.hidden = false;
      if (this.editor.value !== text) this.editor.value = text;
    }
    this.changed();
  }

  private setToggles(modes: [string, Mode][]) {
    this.toggles.replaceChildren(
      ...modes.map(([label, mode]) => {
        const b = el("button", { class: `file-mode mode-${mode}`, "aria-pressed": String(this.mode === mode) }, label);
        b.onclick = () => {
          if (this.mode === mode) return;
          const text = this.editor?.value ?? this.saved ?? "";
          this.mode = mode;
          this.render(text);
          if (mode === "text") this.editor?.focus();
        };
        return b;
      }),
    );
  }

  /** After each edit: the tab's dot, the save button, the draft. */
  private changed() {
    const dirty = this.dirty;
    this.wb.docs.update(this.tabId, { dirty });
    this.saveButton.disabled = !dirty;
    this.body.classList.toggle("dirty", dirty);
    clearTimeout(this.draftTimer);
    this.draftTimer = setTimeout(() => this.owner.setDraft(this.path, this.dirty ? this.editor!.value : undefined, this.saved), 300);
  }

  async save() {
    if (!this.editor || this.saved === undefined) return;
    const text = this.editor.value;
    try {
      // Never over newer work unasked: the file as it is now against the text this
      // editor was opened or last saved with.
      const now = await this.wb.client.request(Methods.FsRead, { ...this.ws, path: this.path }).catch(() => undefined);
      if (now && now.content !== text && (this.stale || now.content !== this.saved)) {
        if (!(await this.wb.confirm(`${this.path} changed on disk since it was opened here. Overwrite it with this editor's text?`, "Overwrite"))) return;
      }
      await this.wb.client.request(Methods.FsWrite, { ...this.ws, path: this.path, content: text, createParents: true });
      this.stale = false;
      this.saved = text;
      this.hideBar();
      this.info.textContent = `saved ${new Date().toLocaleTimeString()}`;
      this.changed();
      this.owner.setDraft(this.path, undefined);
      this.wb.changes?.schedule();
    } catch (e) {
      this.showBar(`Cannot save ${this.path}: ${(e as Error).message}`, []);
    }
  }

  /** The file changed underneath (fs/didChange): reload a clean tab, ask in an edited one. */
  async diskChanged() {
    if (this.kind === "binary" || this.kind === "large") return;
    if (this.checking) {
      // A change while the last one is read: look again once that is done.
      this.again = true;
      return;
    }
    this.checking = true;
    try {
      if (this.kind === "image") {
        await this.showImage();
        return;
      }
      if (this.saved === undefined) return;
      let disk: string | undefined;
      try {
        const r = await this.wb.client.request(Methods.FsRead, { ...this.ws, path: this.path });
        disk = r.encoding === "utf8" ? r.content : undefined;
      } catch (e) {
        if (!(e instanceof RPCError)) throw e;
        disk = undefined;
      }
      if (disk === undefined) {
        this.showBar(`${this.path} was deleted (or is no longer text) on disk. Saving writes it again.`, [["Close", "close-doc", () => void this.owner.close(this)]]);
        return;
      }
      if (disk === this.saved) return; // our own save, or a touch
      if (!this.dirty) {
        this.saved = disk;
        const cursor = this.editor?.cursor;
        this.render(disk);
        if (cursor !== undefined) this.editor?.setCursor(cursor);
        this.info.textContent = `reloaded ${new Date().toLocaleTimeString()}`;
        return;
      }
      this.showBar(`${this.path} changed on disk.`, [
        ["Reload", "reload", () => void this.reloadFromDisk()],
        [
          "Keep mine",
          "keep-mine",
          () => {
            // Dirty against what is on disk now: a save writes the editor's text over it.
            this.saved = disk;
            this.hideBar();
            this.changed();
          },
        ],
      ]);
    } finally {
      this.checking = false;
      if (this.again) {
        this.again = false;
        void this.diskChanged();
      }
    }
  }

  async reloadFromDisk() {
    this.hideBar();
    this.owner.setDraft(this.path, undefined);
    try {
      const r = await this.wb.client.request(Methods.FsRead, { ...this.ws, path: this.path });
      if (r.encoding !== "utf8") return this.load();
      this.saved = r.content;
      this.render(r.content);
    } catch (e) {
      this.showBar(`Cannot read ${this.path}: ${(e as Error).message}`, []);
    }
  }

  private showBar(message: string, actions: [string, string, () => void][]) {
    this.bar.replaceChildren(
      el("span", { class: "message" }, message),
      ...actions.map(([label, cls, fn]) => {
        const b = el("button", { class: cls }, label);
        b.onclick = fn;
        return b;
      }),
    );
    const dismiss = el("button", { class: "dismiss", title: "hide" }, "✕");
    dismiss.onclick = () => this.hideBar();
    this.bar.append(dismiss);
    this.bar.hidden = false;
  }

  private hideBar() {
    this.bar.hidden = true;
    this.bar.replaceChildren();
  }

  renamed(to: string) {
    const old = this.tabId;
    this.path = to;
    this.body.dataset.path = to;
    this.pathLabel.textContent = to;
    this.wb.docs.update(old, { newId: this.tabId, title: nameOf(to), tooltip: to });
    this.editor?.setLanguage(to);
  }

  focus() {
    if (this.mode === "text") this.editor?.focus();
  }

  destroy() {
    clearTimeout(this.draftTimer);
    this.editor?.destroy();
  }
}

/** The default opener: project files in editors and viewers, one tab per path. */
export class FileEditors implements Opener {
  private open_ = new Map<string, FileDoc>();
  private drafts: Record<string, string>;
  private bases: Record<string, string>;
  private restoring = false;

  constructor(
    readonly wb: Workbench,
    private tree: Tree,
  ) {
    this.drafts = wb.session.get<Record<string, string>>("files:drafts", {});
    this.bases = wb.session.get<Record<string, string>>("files:draftBases", {});
    tree.onFsChange((changes: FileChange[], overflow: boolean) => {
      const paths = new Set(changes.map((c) => c.path));
      for (const d of this.open_.values()) if (overflow || paths.has(d.path)) void d.diskChanged();
    });
    // Which file tab was in front, to bring it to the front again after a reload.
    wb.docs.onChange(() => {
      const id = wb.docs.current?.id;
      const path = id?.startsWith("file:") ? id.slice("file:".length) : undefined;
      tree.setActive(path);
      if (path !== undefined && !this.restoring) wb.session.set("files:active", path);
    });
    tree.onRename((from, to) => {
      for (const d of [...this.open_.values()]) {
        if (d.path !== from && !d.path.startsWith(from + "/")) continue;
        const next = to + d.path.slice(from.length);
        this.open_.delete(d.path);
        const draft = this.drafts[d.path];
        this.setDraft(d.path, undefined);
        d.renamed(next);
        this.open_.set(next, d);
        if (draft !== undefined) this.setDraft(next, draft);
      }
      this.saveOpen();
    });
  }

  accepts(): boolean {
    return true;
  }

  /** The open documents (for tests and the console). */
  get documents(): FileDoc[] {
    return [...this.open_.values()];
  }

  async open(path: string) {
    const had = this.open_.get(path);
    if (had) {
      this.wb.docs.activate(had.tabId);
      return;
    }
    const doc = new FileDoc(this, path);
    this.open_.set(path, doc);
    this.wb.docs.open({
      id: doc.tabId,
      title: nameOf(path),
      tooltip: path,
      body: doc.body,
      activate: () => doc.focus(),
      close: async () => {
        if (doc.dirty && !(await this.wb.confirm(`${doc.path} has unsaved changes. Close it and lose them?`, "Close without saving"))) return false;
        doc.destroy();
        this.open_.delete(doc.path);
        this.setDraft(doc.path, undefined);
        this.saveOpen();
        return true;
      },
    });
    this.saveOpen();
    await doc.load();
    doc.focus();
  }

  /** Shows a path's row in the tree (its folders expanded). */
  async reveal(path: string) {
    await this.tree.reveal(path);
  }

  /** Closes a document without asking (its file is gone). */
  async close(doc: FileDoc) {
    doc.destroy();
    this.open_.delete(doc.path);
    this.setDraft(doc.path, undefined);
    this.saveOpen();
    await this.wb.docs.close(doc.tabId, false);
  }

  /** Opens the files that were open before the reload. */
  async restore() {
    const paths = this.wb.session.get<string[]>("files:open", []);
    const active = this.wb.session.get<string | undefined>("files:active", undefined);
    this.restoring = true;
    try {
      for (const p of paths) await this.open(p).catch(() => {});
    } finally {
      this.restoring = false;
    }
    const front = active && this.open_.get(active);
    if (front) this.wb.docs.activate(front.tabId);
    // Drafts of files whose tab is gone (closed in another tab of the browser) are dropped.
    for (const p of Object.keys(this.drafts)) if (!this.open_.has(p)) this.setDraft(p, undefined);
  }

  private saveOpen() {
    this.wb.session.set("files:open", [...this.open_.keys()]);
  }

  draft(path: string): string | undefined {
    return this.drafts[path];
  }

  /** The hash of the file's text the draft of path was edited from (undefined: not known). */
  draftBase(path: string): string | undefined {
    return this.bases[path];
  }

  setDraft(path: string, text: string | undefined, base?: string) {
    if (text === undefined) {
      if (!(path in this.drafts)) return;
      delete this.drafts[path];
      delete this.bases[path];
    } else {
      this.drafts[path] = text;
      if (base !== undefined) this.bases[path] = textHash(base);
    }
    this.wb.session.set("files:drafts", this.drafts);
    this.wb.session.set("files:draftBases", this.bases);
  }

  async download(path: string) {
    try {
      const r = await this.wb.client.request(Methods.FsRead, { workspaceId: this.wb.workspaceId, path, encoding: "base64" });
      downloadBytes(nameOf(path), base64ToBytes(r.content));
    } catch (e) {
      this.tree.say(`cannot download ${path}: ${(e as Error).message}`, true);
    }
  }
}

/** A short hash of a text (FNV-1a, 32 bits), to tell whether a draft's base is the file's text. */
function textHash(s: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return `${s.length}:${(h >>> 0).toString(16)}`;
}
