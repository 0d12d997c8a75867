// Previews of servers that run in the workspace's sandbox (PROTOCOL.md §11).
//
// The daemon says which TCP ports servers listen on in the sandbox
// (`workspace/ports`, whenever the set changes). A port that appears gets an
// offer in the page's corner, as VS Code's port forwarding does: "Your
// application running on port 8000 is available", with Preview (a pane in the
// documents' tabs) and Open in new tab. Both expose the port
// (`workspace/exposePort`, idempotent: the same preview again for the same
// port). The Ports panel of the side column lists the listening ports and the
// previews, each with Preview, ↗ and Stop (`workspace/unexposePort`).
//
// A preview is untrusted content: it is served on an origin of its own (a
// loopback port of its own, never the IDE's), so it is framed like any other
// site: an <iframe> with its URL, sandboxed without allow-top-navigation, and
// the IDE's CSP allows framing loopback origins only (build.mjs's frame-src).
// Its own origin keeps its script away from the IDE's token and /rpc. The
// page opens a preview's browserUrl (a name of its own under .localhost,
// which the browser resolves to the loopback: a site of its own, whose
// cookies no other preview and no other loopback service shares), else its url.
import { Methods, type Preview, type WorkspacePortsParams } from "../client/client";
import { askText } from "./dialog";
import { el } from "./dom";
import { SidePanel } from "./sidepanel";
import type { Workbench } from "./workbench";

/** The sandbox of a preview's iframe: scripts, forms and its own origin's storage; never the IDE's window. */
export const previewSandbox = "allow-scripts allow-forms allow-same-origin allow-popups allow-modals allow-downloads";

/** Where the page opens a preview: its own name under .localhost when the daemon gives one. */
export function openURL(p: Preview): string {
  return p.browserUrl || p.url;
}

/** The offer's text, as VS Code says it. */
export function offerText(port: number): string {
  return `Your application running on port ${port} is available.`;
}

/** A preview's address as shown (its origin, without the token). */
export function shownURL(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}/`;
  } catch {
    return url;
  }
}

function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

interface Pane {
  port: number;
  frame: HTMLIFrameElement;
  address: HTMLAnchorElement;
}

export class Previews {
  readonly panel: SidePanel;
  /** The ports servers listen on in the sandbox, from the last `workspace/ports`. */
  ports: number[] = [];
  /**
   * Whether a `workspace/ports` came on this connection: until one does (the daemon sends one
   * when the set changes), a preview's port is not said to be not listening.
   */
  private portsKnown = false;
  /** The workspace's previews by port. */
  readonly previews = new Map<number, Preview>();
  /** The offers showing, by port. */
  readonly offers = new Map<number, HTMLElement>();
  /** Ports whose offer was dismissed: not offered again until they stop listening. */
  private dismissed = new Set<number>();
  private panes = new Map<number, Pane>();
  private list: HTMLElement;
  private message: HTMLElement;
  private toasts: HTMLElement;
  private error = "";
  /** Until restore() is done, the session's list of open panes is left as it was. */
  private restored = false;
  /** workspace/ports notifications seen (for tests and the console). */
  notifications = 0;

  constructor(private wb: Workbench) {
    this.panel = new SidePanel(wb, "ports", "Ports");
    const add = el("button", { class: "port-add", title: "preview a port of the sandbox" }, "+ Port");
    add.onclick = () => void this.askPort();
    this.panel.tools.append(add);
    this.list = el("ul", { class: "port-list" });
    this.message = el("div", { class: "empty ports-message", role: "status" });
    this.panel.body.append(this.list, this.message);
    this.toasts = el("div", { class: "toasts", "aria-live": "polite" });
    document.body.append(this.toasts);
    wb.client.on(Methods.WorkspacePorts, (p) => this.onPorts(p));
    wb.client.onReconnected(() => this.refresh());
    wb.docs.onChange(() => this.keep());
    this.render();
  }

  /** Lists the workspace's previews, then opens again the panes the session had open. */
  async restore(): Promise<void> {
    const open = this.wb.session.get<number[]>("previews:open", []);
    await this.refresh();
    for (const port of open) {
      const p = this.previews.get(port);
      if (p) this.openPane(p, false);
    }
    this.restored = true;
    this.keep();
  }

  /** workspace/previews now. */
  async refresh(): Promise<void> {
    try {
      const r = await this.wb.client.request(Methods.WorkspacePreviews, { workspaceId: this.wb.workspaceId });
      this.previews.clear();
      for (const p of r.previews ?? []) this.previews.set(p.port, p);
      this.error = "";
    } catch (e) {
      this.error = `Cannot list the previews: ${errText(e)}`;
    }
    for (const [port, pane] of this.panes) {
      const p = this.previews.get(port);
      if (p) this.setPaneURL(pane, openURL(p));
    }
    this.render();
  }

  private onPorts(p: WorkspacePortsParams) {
    if (p.workspaceId !== this.wb.workspaceId) return;
    this.notifications++;
    this.portsKnown = true;
    const before = new Set(this.ports);
    this.ports = [...(p.ports ?? [])].sort((a, b) => a - b);
    const now = new Set(this.ports);
    for (const port of [...this.dismissed]) if (!now.has(port)) this.dismissed.delete(port);
    for (const [port] of this.offers) if (!now.has(port)) this.dropOffer(port);
    for (const port of this.ports) {
      if (before.has(port) || this.offers.has(port) || this.dismissed.has(port) || this.panes.has(port)) continue;
      this.offer(port);
    }
    this.render();
  }

  /** Shows the offer of a port that started listening. */
  offer(port: number) {
    const preview = el("button", { class: "offer-preview" }, "Preview");
    const open = el("button", { class: "offer-open", title: "open it in a new browser tab" }, "Open in new tab");
    const dismiss = el("button", { class: "offer-dismiss", title: "dismiss (not offered again while it listens)", "aria-label": "dismiss" }, "✕");
    const status = el("div", { class: "offer-status" });
    const toast = el("div", { class: "toast preview-offer", role: "alert", "data-port": String(port) }, el("div", { class: "message" }, offerText(port)), el("div", { class: "offer-buttons" }, preview, open, dismiss), status);
    preview.onclick = async () => {
      status.textContent = "";
      if (!(await this.preview(port))) status.textContent = this.error;
    };
    open.onclick = async () => {
      status.textContent = "";
      if (!(await this.openExternal(port))) status.textContent = this.error;
    };
    dismiss.onclick = () => {
      this.dismissed.add(port);
      this.dropOffer(port);
    };
    this.offers.set(port, toast);
    this.toasts.append(toast);
  }

  private dropOffer(port: number) {
    this.offers.get(port)?.remove();
    this.offers.delete(port);
  }

  /** workspace/exposePort: the port's preview (the same one when it has one). */
  async expose(port: number): Promise<Preview | undefined> {
    try {
      const p = await this.wb.client.request(Methods.WorkspaceExposePort, { workspaceId: this.wb.workspaceId, port, protocol: "http" });
      this.previews.set(p.port, p);
      this.error = "";
      this.render();
      return p;
    } catch (e) {
      this.error = `Cannot preview port ${port}: ${errText(e)}`;
      this.render();
      return undefined;
    }
  }

  /** Exposes the port and shows it in a pane of the documents (its offer goes); true when shown. */
  async preview(port: number): Promise<boolean> {
    const p = this.previews.get(port) ?? (await this.expose(port));
    if (!p) return false;
    this.dropOffer(port);
    this.openPane(p, true);
    return true;
  }

  /** Exposes the port and opens it in a new browser tab (no opener, no referrer). */
  async openExternal(port: number): Promise<boolean> {
    const p = this.previews.get(port) ?? (await this.expose(port));
    if (!p) return false;
    this.dropOffer(port);
    window.open(openURL(p), "_blank", "noopener,noreferrer");
    return true;
  }

  /** workspace/unexposePort: the preview ends, its pane closes. */
  async stop(port: number): Promise<boolean> {
    const p = this.previews.get(port);
    if (p) {
      try {
        await this.wb.client.request(Methods.WorkspaceUnexposePort, { previewId: p.previewId });
      } catch (e) {
        this.error = `Cannot stop the preview of port ${port}: ${errText(e)}`;
        this.render();
        return false;
      }
    }
    this.previews.delete(port);
    this.error = "";
    this.panes.delete(port);
    await this.wb.docs.close(paneId(port), false);
    this.keep();
    this.render();
    return true;
  }

  private openPane(p: Preview, activate: boolean) {
    const id = paneId(p.port);
    if (this.panes.has(p.port)) {
      this.setPaneURL(this.panes.get(p.port)!, openURL(p));
      if (activate) this.wb.docs.activate(id);
      return;
    }
    const frame = el("iframe", { class: "preview-frame", sandbox: previewSandbox, referrerpolicy: "no-referrer", title: `preview of port ${p.port}` }) as HTMLIFrameElement;
    const address = el("a", { class: "preview-address", target: "_blank", rel: "noopener noreferrer", title: "open in a new tab" }) as HTMLAnchorElement;
    const reload = el("button", { class: "preview-reload", title: "reload the preview" }, "⟳ Reload");
    const open = el("button", { class: "preview-open", title: "open in a new browser tab" }, "↗ Open in new tab");
    const stop = el("button", { class: "preview-stop", title: "stop previewing this port (the server runs on)" }, "■ Stop preview");
    const pane: Pane = { port: p.port, frame, address };
    reload.onclick = () => {
      const cur = this.previews.get(p.port);
      if (cur) frame.src = openURL(cur);
    };
    open.onclick = () => void this.openExternal(p.port);
    stop.onclick = () => void this.stop(p.port);
    const body = el("div", { class: "preview-pane", "data-port": String(p.port) }, el("div", { class: "toolbar preview-toolbar" }, el("span", { class: "preview-port" }, `Port ${p.port}`), address, el("span", { class: "spacer" }), reload, open, stop), frame);
    this.panes.set(p.port, pane);
    this.setPaneURL(pane, openURL(p));
    const before = this.wb.docs.current?.id;
    this.wb.docs.open({
      id,
      title: `Port ${p.port}`,
      tooltip: `preview of port ${p.port} of the sandbox (${shownURL(openURL(p))})`,
      body,
      close: () => {
        this.panes.delete(p.port);
        return true;
      },
    });
    if (!activate && before) this.wb.docs.activate(before);
    this.keep();
  }

  private setPaneURL(pane: Pane, url: string) {
    pane.address.href = url;
    pane.address.textContent = shownURL(url);
    if (pane.frame.getAttribute("src") !== url) pane.frame.src = url;
  }

  // keep remembers which preview panes are open, for a reload.
  private keep() {
    if (!this.restored) return;
    this.wb.session.set("previews:open", [...this.panes.keys()]);
  }

  /** "+ Port": a port typed in the page's dialog, previewed in a pane. */
  private async askPort() {
    const first = this.ports.find((p) => !this.previews.has(p));
    const v = await askText("Preview which port of the sandbox?", first ? String(first) : "", {
      action: "Preview",
      check: (s) => (/^\d+$/.test(s) && +s >= 1 && +s <= 65535 ? undefined : "a port: 1 to 65535"),
    });
    if (v) await this.preview(Number(v));
  }

  private render() {
    const ports = [...new Set([...this.ports, ...this.previews.keys()])].sort((a, b) => a - b);
    this.list.replaceChildren(
      ...ports.map((port) => {
        const p = this.previews.get(port);
        const listening = this.ports.includes(port);
        const state = p ? (listening || !this.portsKnown ? "previewed" : "not listening") : "listening";
        const preview = el("button", { class: "port-preview", title: "preview in a pane" }, "Preview");
        const open = el("button", { class: "port-open", title: "open in a new browser tab" }, "↗");
        preview.onclick = () => void this.preview(port);
        open.onclick = () => void this.openExternal(port);
        const row = el(
          "li",
          { class: `port-row${p ? " previewed" : ""}`, "data-port": String(port) },
          el("span", { class: "port-number" }, String(port)),
          el("span", { class: "port-state", "data-state": state, title: p ? shownURL(openURL(p)) : "" }, state),
          el("span", { class: "spacer" }),
          preview,
          open,
        );
        if (p) {
          const stop = el("button", { class: "port-stop", title: "stop previewing (the server runs on)" }, "Stop");
          stop.onclick = () => void this.stop(port);
          row.append(stop);
        }
        return row;
      }),
    );
    this.message.textContent = this.error || (ports.length ? "" : "No server listens in the sandbox.");
    this.message.hidden = !this.message.textContent;
  }
}

function paneId(port: number): string {
  return `preview:${port}`;
}
