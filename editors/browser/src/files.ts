// The workspace's file tree (fs/list, kept live by fs/watch's fs/didChange)
// with changed files marked, and the changes panel (workspace/changes,
// diff, commit, discard).
import { Methods, type Change, type CellboxClient, type FileEntry, type FsDidChangeParams } from "../client/client";
import { el } from "./dom";

const maxEntries = 5000;

export class Files {
  private entries: FileEntry[] = [];
  private changes = new Map<string, Change>();
  private recent = new Set<string>();
  private watchId?: string;
  private collapsed = new Set<string>();
  private timer?: ReturnType<typeof setTimeout>;
  private tree: HTMLElement;
  private changesList: HTMLElement;
  private message: HTMLElement;

  constructor(
    private client: CellboxClient,
    private workspaceId: string,
    treeRoot: HTMLElement,
    changesRoot: HTMLElement,
    private view: (title: string, body: HTMLElement) => void,
  ) {
    this.tree = el("div", { class: "tree", role: "tree" });
    treeRoot.append(this.tree);
    const btn = (label: string, cls: string, fn: () => void) => {
      const b = el("button", { class: cls }, label);
      b.onclick = fn;
      return b;
    };
    this.changesList = el("ul", { class: "changes-list" });
    this.message = el("div", { class: "changes-message" });
    changesRoot.append(
      el("div", { class: "panel-title" }, el("span", {}, "Changes"), el("span", { class: "spacer" }), btn("Diff", "diff-all", () => void this.diff()), btn("Commit", "commit-all", () => void this.commit()), btn("Discard", "discard-all", () => void this.discard())),
      this.changesList,
      this.message,
    );
    client.on(Methods.FsDidChange, (p: FsDidChangeParams) => {
      if (p.watchId !== this.watchId) return;
      for (const c of p.changes) this.recent.add(c.path);
      this.schedule();
    });
  }

  async start() {
    const w = await this.client.request(Methods.FsWatch, { workspaceId: this.workspaceId });
    this.watchId = w.watchId;
    await this.refresh();
  }

  /** rewatch after a reconnect: watches belong to the connection. */
  async rewatch() {
    this.watchId = undefined;
    await this.start();
  }

  private schedule() {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.refresh().catch((e) => this.say(`cannot list the workspace: ${e.message}`));
    }, 100);
  }

  async refresh() {
    const [list, ch] = await Promise.all([
      this.client.request(Methods.FsList, { workspaceId: this.workspaceId, recursive: true }),
      this.client.request(Methods.WorkspaceChanges, { workspaceId: this.workspaceId }),
    ]);
    this.entries = list.entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    this.changes = new Map(ch.changes.map((c) => [c.path, c]));
    this.renderTree();
    this.renderChanges();
  }

  private renderTree() {
    const frag = document.createDocumentFragment();
    const deleted = [...this.changes.values()].filter((c) => c.kind === "deleted").map((c) => ({ path: c.path, type: "file", deleted: true }));
    const all = [...this.entries.map((e) => ({ path: e.path, type: e.type, deleted: false })), ...deleted].sort((a, b) => (a.path < b.path ? -1 : 1));
    let shown = 0;
    for (const e of all) {
      const parts = e.path.split("/");
      if (parts.some((_, i) => i < parts.length - 1 && this.collapsed.has(parts.slice(0, i + 1).join("/")))) continue;
      if (++shown > maxEntries) {
        frag.append(el("div", { class: "tree-more" }, `… ${all.length - maxEntries} more`));
        break;
      }
      const change = this.changes.get(e.path);
      const name = parts[parts.length - 1] + (e.type === "dir" ? "/" : "");
      const row = el("div", { class: `tree-item ${e.type}`, role: "treeitem", title: e.path }, el("span", { class: "name" }, name));
      row.style.paddingLeft = `${6 + (parts.length - 1) * 14}px`;
      row.dataset.path = e.path;
      if (change) {
        row.classList.add("changed", change.kind);
        row.append(el("span", { class: "mark", title: change.kind }, change.kind[0].toUpperCase()));
      }
      if (this.recent.has(e.path)) row.classList.add("recent");
      if (e.type === "dir") {
        if (this.collapsed.has(e.path)) row.classList.add("collapsed");
        row.onclick = () => {
          if (this.collapsed.has(e.path)) this.collapsed.delete(e.path);
          else this.collapsed.add(e.path);
          this.renderTree();
        };
      } else if (!e.deleted) {
        row.onclick = () => void this.open(e.path);
      }
      frag.append(row);
    }
    if (!all.length) frag.append(el("div", { class: "empty" }, "(empty workspace)"));
    this.tree.replaceChildren(frag);
  }

  private renderChanges() {
    const items = [...this.changes.values()].sort((a, b) => (a.path < b.path ? -1 : 1));
    this.changesList.replaceChildren(
      ...items.map((c) => {
        const act = (label: string, cls: string, fn: () => void) => {
          const b = el("button", { class: cls, title: `${label} ${c.path}` }, label);
          b.onclick = fn;
          return b;
        };
        const li = el("li", { class: `change ${c.kind}` }, el("span", { class: "mark" }, c.kind[0].toUpperCase()), el("span", { class: "path" }, c.path), act("diff", "diff", () => void this.diff([c.path])), act("commit", "commit", () => void this.commit([c.path])), act("discard", "discard", () => void this.discard([c.path])));
        li.dataset.path = c.path;
        return li;
      }),
    );
    if (!items.length) this.changesList.append(el("li", { class: "empty" }, "no changes: the project is as on disk"));
  }

  private say(s: string) {
    this.message.textContent = s;
  }

  async open(path: string) {
    try {
      const r = await this.client.request(Methods.FsRead, { workspaceId: this.workspaceId, path });
      const body = el("pre", { class: "file-view" }, r.encoding === "base64" ? `(binary, ${r.size} bytes)` : r.content);
      this.view(path, body);
    } catch (e) {
      this.say(`${path}: ${(e as Error).message}`);
    }
  }

  async diff(paths?: string[]) {
    const r = await this.client.request(Methods.WorkspaceDiff, paths ? { workspaceId: this.workspaceId, paths } : { workspaceId: this.workspaceId });
    const body = el("div", { class: "diff" });
    for (const f of r.files) {
      const pre = el("pre", { class: "diff-file" });
      if (f.binary) pre.append(`${f.kind} ${f.path} (binary)`);
      for (const line of (f.diff ?? "").split("\n")) {
        const cls = line.startsWith("+++") || line.startsWith("---") ? "hdr" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : line.startsWith("@@") ? "hunk" : "";
        pre.append(el("span", { class: `line ${cls}` }, line + "\n"));
      }
      body.append(el("div", { class: "diff-path" }, `${f.kind}: ${f.path}`), pre);
    }
    if (!r.files.length) body.append("no changes");
    this.view(paths?.length === 1 ? `diff ${paths[0]}` : "diff", body);
  }

  async commit(paths?: string[]) {
    try {
      const r = await this.client.request(Methods.WorkspaceCommit, paths ? { workspaceId: this.workspaceId, paths } : { workspaceId: this.workspaceId });
      const conflicts = r.conflicts.map((c) => `${c.path} (${c.reason})`);
      this.say(`committed ${r.applied.length} file(s) to the project${conflicts.length ? `; conflicts, not written: ${conflicts.join(", ")}` : ""}`);
    } catch (e) {
      this.say(`commit failed: ${(e as Error).message}`);
    }
    await this.refresh();
  }

  async discard(paths?: string[]) {
    if (!paths && !confirm("Discard every change of the workspace?")) return;
    try {
      const r = await this.client.request(Methods.WorkspaceDiscard, paths ? { workspaceId: this.workspaceId, paths } : { workspaceId: this.workspaceId });
      this.say(`discarded ${r.discarded.length} file(s)`);
    } catch (e) {
      this.say(`discard failed: ${(e as Error).message}`);
    }
    await this.refresh();
  }
}
