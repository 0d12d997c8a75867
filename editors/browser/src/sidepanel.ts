// A foldable <section> of the workbench's side column (variables, kernels):
// a title bar that folds it, tools at the end of the bar, and a body. Whether
// it is open is kept in the session.
import { el } from "./dom";
import type { Workbench } from "./workbench";

export class SidePanel {
  readonly section: HTMLElement;
  readonly title: HTMLElement;
  /** Buttons and hints at the end of the title bar. */
  readonly tools: HTMLElement;
  readonly body: HTMLElement;
  private fold: HTMLElement;
  private listeners: ((open: boolean) => void)[] = [];

  constructor(
    private wb: Workbench,
    cls: string,
    name: string,
  ) {
    this.fold = el("button", { class: "panel-fold", "aria-expanded": "true", title: `fold ${name}` }, "▾");
    this.tools = el("span", { class: "panel-tools" });
    this.title = el("div", { class: `panel-title ${cls}-title` }, this.fold, el("span", { class: "panel-name" }, name), el("span", { class: "spacer" }), this.tools);
    this.body = el("div", { class: "panel-body" });
    this.section = el("section", { class: `side-panel ${cls}` }, this.title, this.body);
    this.fold.onclick = () => this.setOpen(!this.open);
    wb.side.append(this.section);
    this.setOpen(wb.session.get(`panel:${cls}:open`, true), cls);
  }

  get open(): boolean {
    return this.section.dataset.open === "true";
  }

  private setOpen(open: boolean, cls = this.section.classList[1]) {
    this.section.dataset.open = String(open);
    this.body.hidden = !open;
    this.fold.textContent = open ? "▾" : "▸";
    this.fold.setAttribute("aria-expanded", String(open));
    this.wb.session.set(`panel:${cls}:open`, open);
    for (const fn of this.listeners) fn(open);
  }

  /** Called when the panel is folded or unfolded. */
  onToggle(fn: (open: boolean) => void) {
    this.listeners.push(fn);
  }
}

/** A byte count as people read it: 512 B, 3.4 KiB, 120 MiB, 1.2 GiB. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}
