// The variables panel: kernel/variables of the active notebook's kernel
// (wb.kernels.active), name, type, summary and size. It asks again when that
// kernel goes idle after a run (kernel/status) and when another notebook
// comes to the front; for a language that cannot answer kernel/variables
// (languages[].unsupported, a Jupyter kernel) it says so instead.
import { Methods, type KernelStatusParams, type Variable } from "../client/client";
import { el } from "./dom";
import { SidePanel } from "./sidepanel";
import type { KernelRef, Workbench } from "./workbench";

/** The most rows the panel shows (the rest are counted). */
const maxRows = 500;

export class VariablesPanel {
  readonly panel: SidePanel;
  private hint: HTMLElement;
  private message: HTMLElement;
  private table: HTMLTableElement;
  private rows: HTMLElement;
  /** The kernel whose variables are shown (or being asked for). */
  private shown?: string;
  private busy = false;
  private again = false;
  private timer?: ReturnType<typeof setTimeout>;

  constructor(private wb: Workbench) {
    this.panel = new SidePanel(wb, "variables", "Variables");
    this.hint = el("span", { class: "hint variables-kernel" });
    const refresh = el("button", { class: "variables-refresh", title: "ask the kernel again" }, "⟳");
    refresh.onclick = () => void this.refresh();
    this.panel.tools.append(this.hint, refresh);
    this.message = el("div", { class: "empty variables-message", role: "status" });
    this.rows = el("tbody");
    this.table = el(
      "table",
      { class: "variables-table" },
      el("thead", {}, el("tr", {}, el("th", {}, "name"), el("th", {}, "type"), el("th", {}, "value"), el("th", { class: "num" }, "size"))),
      this.rows,
    ) as HTMLTableElement;
    this.panel.body.append(this.message, this.table);
    wb.kernels.onChange(() => {
      if (wb.kernels.active?.kernelId !== this.shown) this.schedule(0);
      else this.describe(wb.kernels.active);
    });
    wb.client.on(Methods.KernelStatus, (p: KernelStatusParams) => {
      if (p.kernelId !== wb.kernels.active?.kernelId) return;
      if (p.state === "idle") this.schedule(50);
      else if (p.state === "dead" || p.state === "restarting") this.schedule(0);
    });
    wb.client.onReconnected(() => this.schedule(0));
    this.panel.onToggle((open) => open && this.schedule(0));
    this.schedule(0);
  }

  /** Asks again soon (a burst of status changes asks once). */
  schedule(ms = 50) {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.refresh();
    }, ms);
  }

  /** kernel/variables of the active kernel, now (one request at a time). */
  async refresh() {
    if (this.busy) {
      this.again = true;
      return;
    }
    this.busy = true;
    try {
      do {
        this.again = false;
        await this.load();
      } while (this.again);
    } finally {
      this.busy = false;
    }
  }

  private describe(k: KernelRef | undefined) {
    this.hint.textContent = k ? `${this.languageName(k.language)} · ${k.title}` : "";
    this.hint.title = k ? `kernel ${k.kernelId}` : "";
  }

  private languageName(id: string): string {
    return this.wb.languages.find((l) => l.id === id)?.displayName || id;
  }

  private show(message: string, state: string) {
    this.section.dataset.state = state;
    this.message.textContent = message;
    this.message.hidden = !message;
    this.table.hidden = true;
    this.rows.replaceChildren();
  }

  private get section(): HTMLElement {
    return this.panel.section;
  }

  private async load() {
    const k = this.wb.kernels.active;
    this.shown = k?.kernelId;
    this.describe(k);
    if (!k) {
      this.show("No notebook in front: open one to see its kernel's variables.", "none");
      return;
    }
    const lang = this.wb.languages.find((l) => l.id === k.language);
    if (lang?.unsupported?.includes(Methods.KernelVariables)) {
      this.show(`The ${lang.displayName || lang.id} kernel cannot list its variables (the language does not answer kernel/variables).`, "unsupported");
      return;
    }
    if (!this.panel.open) return; // asked again when unfolded
    let vars: Variable[];
    try {
      vars = (await this.wb.client.request(Methods.KernelVariables, { kernelId: k.kernelId })).variables;
    } catch (e) {
      if (this.wb.kernels.active?.kernelId === k.kernelId) this.show(`Cannot list the variables: ${(e as Error).message}`, "error");
      return;
    }
    if (this.wb.kernels.active?.kernelId !== k.kernelId) return; // another came to the front meanwhile
    vars.sort((a, b) => a.name.localeCompare(b.name));
    this.section.dataset.state = "shown";
    this.rows.replaceChildren(
      ...vars.slice(0, maxRows).map((v) =>
        el(
          "tr",
          { class: "variable", "data-name": v.name },
          el("td", { class: "var-name" }, v.name),
          el("td", { class: "var-type" }, v.type),
          el("td", { class: "var-summary", title: v.summary }, v.summary),
          el("td", { class: "var-size num" }, v.size === undefined ? "" : String(v.size)),
        ),
      ),
    );
    this.table.hidden = vars.length === 0;
    this.message.hidden = vars.length > 0 && vars.length <= maxRows;
    this.message.textContent = vars.length === 0 ? "No variables defined yet." : vars.length > maxRows ? `${vars.length - maxRows} more not shown.` : "";
  }
}
