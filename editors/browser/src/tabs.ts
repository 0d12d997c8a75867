// Tabs: a strip of named tabs over one body, used for the documents of the
// main area (notebooks, files, viewers) and for the terminals below it.
import { el } from "./dom";

export interface Tab {
  /** Unique within its strip: "nb:analysis.ipynb", "file:src/app.py", "term:3". */
  id: string;
  title: string;
  /** A longer name for the tab's tooltip (the path). */
  tooltip?: string;
  /** The tab's content; shown while the tab is active. */
  body: HTMLElement;
  /**
   * Asked before the tab closes (the close button, Ctrl+W is the browser's):
   * false keeps it open (the user cancelled). Release what the tab holds here.
   */
  close?: () => Promise<boolean> | boolean;
  /** Called when the tab becomes the active one (focus its editor). */
  activate?: () => void;
}

interface Entry {
  tab: Tab;
  button: HTMLElement;
  label: HTMLElement;
}

export class Tabs {
  readonly root: HTMLElement;
  readonly strip: HTMLElement;
  readonly body: HTMLElement;
  /** Buttons at the end of the strip (+ Notebook, + Terminal). */
  readonly tools: HTMLElement;
  private entries: Entry[] = [];
  private active?: Entry;
  private listeners: (() => void)[] = [];

  constructor(cls: string, private empty: HTMLElement = el("div", { class: "tabs-empty" })) {
    this.strip = el("div", { class: "tab-strip", role: "tablist" });
    this.tools = el("div", { class: "tab-tools" });
    this.body = el("div", { class: "tab-body" }, empty);
    this.root = el("div", { class: `tabs ${cls}` }, el("div", { class: "tab-bar" }, this.strip, this.tools), this.body);
  }

  /** Adds a tab (or activates the one with the same id) and makes it active. */
  open(tab: Tab): Tab {
    const had = this.entries.find((e) => e.tab.id === tab.id);
    if (had) {
      this.activate(had.tab.id);
      return had.tab;
    }
    const label = el("span", { class: "tab-title" }, tab.title);
    const close = el("button", { class: "tab-close", title: "close", "aria-label": `close ${tab.title}` }, "✕");
    const button = el("div", { class: "tab", role: "tab", title: tab.tooltip ?? tab.title, "data-tab": tab.id }, label, close);
    const entry: Entry = { tab, button, label };
    button.onclick = () => this.activate(tab.id);
    button.onauxclick = (e) => {
      if ((e as MouseEvent).button === 1) void this.close(tab.id);
    };
    close.onclick = (e) => {
      e.stopPropagation();
      void this.close(tab.id);
    };
    tab.body.classList.add("tab-pane");
    tab.body.hidden = true;
    this.entries.push(entry);
    this.strip.append(button);
    this.body.append(tab.body);
    this.activate(tab.id);
    return tab;
  }

  get(id: string): Tab | undefined {
    return this.entries.find((e) => e.tab.id === id)?.tab;
  }

  get current(): Tab | undefined {
    return this.active?.tab;
  }

  get all(): Tab[] {
    return this.entries.map((e) => e.tab);
  }

  activate(id: string) {
    const entry = this.entries.find((e) => e.tab.id === id);
    if (!entry) return;
    for (const e of this.entries) {
      const on = e === entry;
      e.button.classList.toggle("active", on);
      e.button.setAttribute("aria-selected", String(on));
      e.tab.body.hidden = !on;
    }
    this.empty.hidden = true;
    this.active = entry;
    entry.tab.activate?.();
    this.changed();
  }

  /** Sets a tab's title (a rename) and its unsaved mark. */
  update(id: string, p: { title?: string; tooltip?: string; dirty?: boolean; newId?: string }) {
    const entry = this.entries.find((e) => e.tab.id === id);
    if (!entry) return;
    if (p.title !== undefined) {
      entry.tab.title = p.title;
      entry.label.textContent = p.title;
    }
    if (p.tooltip !== undefined) {
      entry.tab.tooltip = p.tooltip;
      entry.button.title = p.tooltip;
    }
    if (p.dirty !== undefined) entry.button.classList.toggle("dirty", p.dirty);
    if (p.newId !== undefined) {
      entry.tab.id = p.newId;
      entry.button.dataset.tab = p.newId;
    }
    this.changed();
  }

  /** Closes a tab after asking it; false when it stayed open. */
  async close(id: string, ask = true): Promise<boolean> {
    const entry = this.entries.find((e) => e.tab.id === id);
    if (!entry) return true;
    if (ask && entry.tab.close && !(await entry.tab.close())) return false;
    const i = this.entries.indexOf(entry);
    this.entries.splice(i, 1);
    entry.button.remove();
    entry.tab.body.remove();
    if (this.active === entry) {
      this.active = undefined;
      const next = this.entries[i] ?? this.entries[i - 1];
      if (next) this.activate(next.tab.id);
      else this.empty.hidden = false;
    }
    this.changed();
    return true;
  }

  /** Called after a tab opens, closes, is renamed or becomes active (to save the session). */
  onChange(fn: () => void) {
    this.listeners.push(fn);
  }

  private changed() {
    for (const fn of this.listeners) fn();
  }
}
