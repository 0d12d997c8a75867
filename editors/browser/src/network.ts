// The workspace's network and packages (PROTOCOL.md §9): a bar over the notebook for each
// blocked connection ("Allow once", "Always allow", dismiss; one per rule at a time, and a
// dismissed rule is not asked about again in this page's session), the header's "network"
// control (none / allowlist, the rules, add and remove) and "packages" control (pip or npm,
// the packages, a progress line). The daemon does not say what rules a workspace has and
// workspace/setNetwork replaces them, so the page keeps the list and sends all of it; "Always
// allow" keeps it in localStorage by workspace root.
import { Methods, type CellboxClient, type NetworkBlockedParams, type NetworkMode, type PackageManager, type ProgressParams, type RPCError, type WorkspaceInstallResult } from "../client/client";
import { el } from "./dom";
import { formatBytes, installMessage, ruleFor } from "../../protocol/network";

export { formatBytes, installMessage, ruleFor };

type WorkspaceNetwork = "none" | "allowlist";

const errText = (e: unknown) => {
  const message = (e as Error).message;
  const detail = (e as RPCError).data?.detail;
  return detail && !message.includes(detail) ? `${message}: ${detail}` : message;
};

export class NetworkPanel {
  mode: WorkspaceNetwork = "none";
  allow: string[] = [];
  /** Rules whose bar shows. */
  readonly pending = new Map<string, HTMLElement>();
  /** Rules dismissed in this page's session. */
  readonly dismissed = new Set<string>();
  /** Every network/blocked of this workspace (for tests and the console). */
  readonly blocked: NetworkBlockedParams[] = [];
  private readonly storeKey: string;
  private button: HTMLButtonElement;
  private panel: HTMLElement;
  private rules: HTMLElement;
  private modeSelect: HTMLSelectElement;
  private error: HTMLElement;

  constructor(
    private client: CellboxClient,
    private workspaceId: string,
    root: string,
    private bars: HTMLElement,
    header: HTMLElement,
    private describeKernel: (kernelId: string) => string | undefined,
  ) {
    this.storeKey = `cellbox.network:${root}`;
    try {
      const kept = JSON.parse(localStorage.getItem(this.storeKey) ?? "null") as { mode?: WorkspaceNetwork; allow?: string[] } | null;
      if (kept?.mode === "allowlist" || kept?.mode === "none") this.mode = kept.mode;
      if (Array.isArray(kept?.allow)) this.allow = kept.allow.filter((r) => typeof r === "string");
    } catch {
      // nothing kept
    }
    this.button = el("button", { class: "network-toggle", title: "the sandbox's network" }) as HTMLButtonElement;
    this.modeSelect = el("select", { class: "network-mode", "aria-label": "network mode" }, el("option", { value: "none" }, "none"), el("option", { value: "allowlist" }, "allowlist")) as HTMLSelectElement;
    this.rules = el("ul", { class: "network-rules" });
    this.error = el("div", { class: "network-error" });
    const input = el("input", { class: "network-rule", placeholder: "pypi.org:443", "aria-label": "rule to allow" }) as HTMLInputElement;
    const add = el("button", { class: "network-add" }, "Allow");
    const addRule = () => {
      const r = input.value.trim();
      if (!r) return;
      input.value = "";
      void this.allowRule(r, true);
    };
    add.onclick = addRule;
    input.addEventListener("keydown", (e) => e.key === "Enter" && addRule());
    this.modeSelect.onchange = () => void this.setMode(this.modeSelect.value as WorkspaceNetwork);
    this.panel = el(
      "div",
      { class: "network-panel popover", hidden: "" },
      el("label", {}, "Network ", this.modeSelect),
      this.rules,
      el("div", { class: "row" }, input, add),
      this.error,
    );
    this.button.onclick = () => (this.panel.hidden = !this.panel.hidden);
    header.append(el("span", { class: "network-control" }, this.button, this.panel));
    this.render();
    client.on(Methods.NetworkBlocked, (p: NetworkBlockedParams) => {
      if (p.workspaceId !== this.workspaceId) return;
      this.blocked.push(p);
      this.onBlocked(p);
    });
  }

  /** network and allow for kernel/start and pty/open: the workspace's live rules. */
  startParams(): { network: NetworkMode; allow?: string[] } {
    return this.mode === "allowlist" ? { network: "allowlist", allow: [...this.allow] } : { network: "none" };
  }

  private keep() {
    localStorage.setItem(this.storeKey, JSON.stringify({ mode: this.mode, allow: this.allow }));
  }

  private render() {
    this.button.textContent = `network: ${this.mode}${this.mode === "allowlist" ? ` (${this.allow.length})` : ""}`;
    this.button.dataset.mode = this.mode;
    this.modeSelect.value = this.mode;
    this.rules.replaceChildren(
      ...(this.allow.length
        ? this.allow.map((r) => {
            const rm = el("button", { class: "network-remove", title: `remove ${r}` }, "✕");
            rm.onclick = () => void this.removeRule(r);
            return el("li", { "data-rule": r }, el("code", {}, r), rm);
          })
        : [el("li", { class: "empty" }, "no rules")]),
    );
  }

  /** Sends the mode and every rule (workspace/setNetwork replaces them). */
  private async apply(): Promise<void> {
    this.render();
    this.error.textContent = "";
    try {
      await this.client.request(Methods.WorkspaceSetNetwork, { workspaceId: this.workspaceId, network: this.mode, allow: this.mode === "allowlist" ? [...this.allow] : undefined });
    } catch (e) {
      this.error.textContent = `cannot set the network: ${errText(e)}`;
      throw e;
    }
  }

  /** Allows a rule (the workspace becomes "allowlist"); keep: in localStorage too. */
  async allowRule(rule: string, keep: boolean): Promise<void> {
    if (!this.allow.includes(rule)) this.allow.push(rule);
    this.mode = "allowlist";
    this.dismissed.delete(rule);
    if (keep) this.keep();
    await this.apply().catch(() => {});
  }

  async removeRule(rule: string): Promise<void> {
    this.allow = this.allow.filter((r) => r !== rule);
    this.keep();
    await this.apply().catch(() => {});
  }

  async setMode(mode: WorkspaceNetwork): Promise<void> {
    this.mode = mode;
    this.keep();
    await this.apply().catch(() => {});
  }

  private onBlocked(p: NetworkBlockedParams) {
    const rule = ruleFor(p);
    if (this.pending.has(rule) || this.dismissed.has(rule) || (this.mode === "allowlist" && this.allow.includes(rule))) return;
    const source = p.kernelId ? (this.describeKernel(p.kernelId) ?? `kernel ${p.kernelId}`) : undefined;
    const text = `cellbox blocked ${rule}${p.reason ? ` (${p.reason})` : ""}${source ? ` from ${source}` : ""}. Allow?`;
    const close = () => {
      bar.remove();
      this.pending.delete(rule);
    };
    const once = el("button", { class: "allow-once" }, "Allow once");
    const always = el("button", { class: "allow-always" }, "Always allow");
    const dismiss = el("button", { class: "dismiss", title: "don't allow (not asked again in this session)" }, "✕");
    once.onclick = () => {
      close();
      void this.allowRule(rule, false);
    };
    always.onclick = () => {
      close();
      void this.allowRule(rule, true);
    };
    dismiss.onclick = () => {
      close();
      this.dismissed.add(rule);
    };
    const bar = el("div", { class: "network-bar", role: "alert", "data-rule": rule }, el("span", { class: "message" }, text), once, always, dismiss);
    this.pending.set(rule, bar);
    this.bars.append(bar);
  }
}

let installSeq = 0;

/** The header's "packages" control: pip or npm, the packages, Install, a progress line. */
export class InstallPanel {
  private line: HTMLElement;
  private token?: string;

  constructor(private client: CellboxClient, private workspaceId: string, header: HTMLElement) {
    const manager = el("select", { class: "install-manager", "aria-label": "package manager" }, el("option", { value: "pip" }, "pip"), el("option", { value: "npm" }, "npm")) as HTMLSelectElement;
    const input = el("input", { class: "install-packages", placeholder: "requests numpy", "aria-label": "packages" }) as HTMLInputElement;
    const go = el("button", { class: "install-go" }, "Install") as HTMLButtonElement;
    this.line = el("div", { class: "install-line" });
    const panel = el("div", { class: "install-panel popover", hidden: "" }, el("div", { class: "row" }, manager, input, go), this.line);
    const toggle = el("button", { class: "install-toggle", title: "install packages into the workspace's environment" }, "Install packages");
    toggle.onclick = () => (panel.hidden = !panel.hidden);
    const run = async () => {
      const packages = input.value.split(/[\s,]+/).filter(Boolean);
      if (!packages.length) return;
      go.disabled = true;
      try {
        await this.install(manager.value as PackageManager, packages);
      } finally {
        go.disabled = false;
      }
    };
    go.onclick = () => void run();
    input.addEventListener("keydown", (e) => e.key === "Enter" && void run());
    header.append(el("span", { class: "install-control" }, toggle, panel));
    client.on(Methods.Progress, (p: ProgressParams) => {
      if (p.token !== this.token || p.value.kind === "end") return;
      const text = [p.value.title, p.value.message].filter(Boolean).join(": ");
      if (text) this.show(text, "progress");
    });
  }

  private show(text: string, state: string) {
    this.line.textContent = text;
    this.line.dataset.state = state;
  }

  async install(manager: PackageManager, packages: string[]): Promise<WorkspaceInstallResult | undefined> {
    const token = `install-${Date.now()}-${++installSeq}`;
    this.token = token;
    this.show(`${manager} install ${packages.join(" ")} …`, "progress");
    try {
      const r = await this.client.request(Methods.WorkspaceInstall, { workspaceId: this.workspaceId, manager, packages, workDoneToken: token });
      this.token = undefined;
      this.show(installMessage(r), "done");
      return r;
    } catch (e) {
      this.token = undefined;
      this.show(`${manager} install failed: ${errText(e)}`, "error");
      return undefined;
    }
  }
}
