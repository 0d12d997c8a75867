// The kernels panel: every kernel of this workspace (kernel/list), with its
// language, state, the notebook that holds it (wb.kernels) and its live CPU
// and memory (kernel/list's cpuMs and memoryBytes, PROTOCOL.md §4). A kernel
// no notebook of this page holds (left by a closed tab, or another client's)
// can be shut down from here. The list is asked for every 2 s, and only
// while it can be seen: the page is visible and the panel unfolded.
import { Methods, type KernelInfo } from "../client/client";
import { el } from "./dom";
import { formatBytes, SidePanel } from "./sidepanel";
import type { Workbench } from "./workbench";

/** How often the list is asked for while the panel is visible. */
export const kernelsPollMs = 2000;

interface Sample {
  cpuMs: number;
  at: number;
}

export class KernelsPanel {
  readonly panel: SidePanel;
  private list: HTMLElement;
  private message: HTMLElement;
  private kernels: KernelInfo[] = [];
  /** The last cpuMs of each kernel and when it was read. */
  private samples = new Map<string, Sample>();
  /** CPU use over the last interval, per kernel (0-100 per core). */
  private cpu = new Map<string, number>();
  private timer?: ReturnType<typeof setTimeout>;
  private inFlight = false;
  private error = "";
  /** Polls done (for tests and the console). */
  polls = 0;

  constructor(private wb: Workbench) {
    this.panel = new SidePanel(wb, "kernels", "Kernels");
    this.panel.tools.append(el("span", { class: "hint" }, "CPU · memory"));
    this.list = el("ul", { class: "kernel-list" });
    this.message = el("div", { class: "empty kernels-message", role: "status" });
    this.panel.body.append(this.list, this.message);
    this.panel.onToggle(() => this.follow());
    document.addEventListener("visibilitychange", () => this.follow());
    wb.kernels.onChange(() => {
      this.render();
      if (this.visible) this.poll(0);
    });
    this.follow();
  }

  /** Whether the list can be seen: the page is visible and the panel unfolded. */
  get visible(): boolean {
    return document.visibilityState === "visible" && this.panel.open;
  }

  // follow polls while the panel is visible, and stops when it is not.
  private follow() {
    if (this.visible) this.poll(0);
    else if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  /** Asks for the list in ms (again every kernelsPollMs while visible). */
  poll(ms = kernelsPollMs) {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.refresh();
    }, ms);
  }

  /** kernel/list now. */
  async refresh() {
    if (this.inFlight) return;
    this.inFlight = true;
    try {
      const r = await this.wb.client.request(Methods.KernelList, {});
      const now = performance.now();
      this.kernels = r.kernels.filter((k) => k.workspaceId === this.wb.workspaceId);
      const live = new Set<string>();
      for (const k of this.kernels) {
        live.add(k.kernelId);
        if (k.cpuMs === undefined) {
          this.samples.delete(k.kernelId);
          this.cpu.delete(k.kernelId);
          continue;
        }
        const prev = this.samples.get(k.kernelId);
        if (prev && now > prev.at) this.cpu.set(k.kernelId, Math.max(0, ((k.cpuMs - prev.cpuMs) / (now - prev.at)) * 100));
        this.samples.set(k.kernelId, { cpuMs: k.cpuMs, at: now });
      }
      for (const id of [...this.samples.keys()]) if (!live.has(id)) this.samples.delete(id);
      for (const id of [...this.cpu.keys()]) if (!live.has(id)) this.cpu.delete(id);
      this.error = "";
      this.polls++;
    } catch (e) {
      this.error = `Cannot list the kernels: ${(e as Error).message}`;
    } finally {
      this.inFlight = false;
    }
    this.render();
    if (this.visible) this.poll();
  }

  private languageName(id: string): string {
    return this.wb.languages.find((l) => l.id === id)?.displayName || id;
  }

  private render() {
    const active = this.wb.kernels.active?.kernelId;
    this.list.replaceChildren(
      ...this.kernels.map((k) => {
        const held = this.wb.kernels.get(k.kernelId);
        const cpu = this.cpu.get(k.kernelId);
        const holder = held ? el("span", { class: "kernel-holder", title: held.title }, held.title) : el("span", { class: "kernel-holder orphan" }, "not open in this page");
        const row = el(
          "li",
          { class: `kernel-row${k.kernelId === active ? " active" : ""}${held ? "" : " orphan"}`, "data-kernel-id": k.kernelId, title: `kernel ${k.kernelId}` },
          el(
            "div",
            { class: "kernel-head" },
            el("span", { class: "kernel-language" }, this.languageName(k.language)),
            el("span", { class: "kernel-state", "data-state": k.state }, k.state),
            el("span", { class: "spacer" }),
            el("span", { class: "kernel-cpu", title: "CPU over the last interval (100% is one core)" }, cpu === undefined ? "CPU –" : `CPU ${cpu < 10 ? cpu.toFixed(1) : Math.round(cpu)}%`),
            el("span", { class: "kernel-memory", title: "resident memory of the kernel's processes" }, k.memoryBytes ? formatBytes(k.memoryBytes) : "–"),
          ),
          el("div", { class: "kernel-foot" }, holder, el("span", { class: "kernel-started", title: `started ${new Date(k.startedAt).toLocaleString()}` }, new Date(k.startedAt).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", hourCycle: "h23" }))),
        );
        if (!held) {
          const stop = el("button", { class: "kernel-shutdown", title: "shut this kernel down: its processes end and its variables are lost" }, "Shut down");
          stop.onclick = () => void this.shutdown(k);
          row.querySelector(".kernel-foot")!.append(stop);
        }
        return row;
      }),
    );
    this.message.textContent = this.error || (this.kernels.length ? "" : "No kernel runs in this workspace.");
    this.message.hidden = !this.message.textContent;
  }

  private async shutdown(k: KernelInfo) {
    const ok = await this.wb.confirm(`Shut down the ${this.languageName(k.language)} kernel ${k.kernelId}? No notebook of this page holds it; its processes end and its variables are lost.`, "Shut down");
    if (!ok) return;
    try {
      await this.wb.client.request(Methods.KernelShutdown, { kernelId: k.kernelId });
    } catch (e) {
      this.error = `Cannot shut down ${k.kernelId}: ${(e as Error).message}`;
      this.render();
      return;
    }
    this.kernels = this.kernels.filter((x) => x.kernelId !== k.kernelId);
    this.render();
    await this.refresh();
  }
}
