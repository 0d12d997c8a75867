// Previews of servers that run in a workspace's sandbox (PROTOCOL.md §11): the ports servers
// listen on (the `workspace/ports` notification, whenever the set changes), the offer of a port
// that starts listening (once while it listens; never again for one the user dismissed, until it
// stops listening), and workspace/exposePort, unexposePort and previews. No `vscode` import: the
// extension gives it the UI (an `offer`), the tests drive it against the real daemon.
import type { CellboxClient } from "./client";
import { Methods, type Preview, type WorkspacePortsParams } from "../../protocol/protocol";

/** What the user does with an offered port: open it in the browser, in the editor, or nothing. */
export type OfferAnswer = "browser" | "editor" | undefined;

export interface PreviewOptions {
  /** Offers a port that started listening; absent: nothing is offered. */
  offer?: (message: string, workspaceId: string, port: number) => Promise<OfferAnswer>;
  /** Opens a preview as answered. */
  open?: (p: Preview, where: "browser" | "editor") => Promise<void>;
  /** Reports a failure (exposePort refused); absent: thrown away. */
  onError?: (message: string) => void;
}

/** The offer's text, as VS Code words a forwarded port's. */
export function offerMessage(port: number): string {
  return `Your application running on port ${port} is available.`;
}

/** A port typed by the user: 1 to 65535, or undefined. */
export function parsePort(s: string | undefined): number | undefined {
  const t = (s ?? "").trim();
  if (!/^\d+$/.test(t)) return undefined;
  const n = Number(t);
  return n >= 1 && n <= 65535 ? n : undefined;
}

interface WorkspacePorts {
  ports: number[];
  /** Ports whose offer shows. */
  offered: Set<number>;
  /** Ports whose offer was dismissed: not offered again while they listen. */
  dismissed: Set<number>;
}

export class PreviewManager {
  private readonly workspaces = new Map<string, WorkspacePorts>();
  /** Resolves when the offers of the last notification are answered (for the tests). */
  lastOffers: Promise<unknown> = Promise.resolve();

  constructor(private readonly client: CellboxClient, readonly opts: PreviewOptions = {}) {
    client.onPorts((p) => {
      this.lastOffers = this.onPorts(p);
    });
  }

  private state(workspaceId: string): WorkspacePorts {
    let s = this.workspaces.get(workspaceId);
    if (!s) {
      s = { ports: [], offered: new Set(), dismissed: new Set() };
      this.workspaces.set(workspaceId, s);
    }
    return s;
  }

  /** The ports servers listen on in the workspace's sandbox, as last notified. */
  ports(workspaceId: string): number[] {
    return [...this.state(workspaceId).ports];
  }

  /**
   * A workspace/ports notification: offers each port that was not listening before (unless its
   * offer shows or was dismissed while it listened); "browser" and "editor" expose it and open
   * it. Resolves when every offer is answered.
   */
  async onPorts(p: WorkspacePortsParams): Promise<void> {
    const s = this.state(p.workspaceId);
    const before = new Set(s.ports);
    s.ports = [...(p.ports ?? [])].sort((a, b) => a - b);
    const now = new Set(s.ports);
    for (const port of [...s.dismissed]) if (!now.has(port)) s.dismissed.delete(port);
    const fresh = s.ports.filter((port) => !before.has(port) && !s.offered.has(port) && !s.dismissed.has(port));
    if (!this.opts.offer) return;
    await Promise.all(fresh.map((port) => this.offerPort(p.workspaceId, port)));
  }

  private async offerPort(workspaceId: string, port: number): Promise<void> {
    const s = this.state(workspaceId);
    s.offered.add(port);
    try {
      const answer = await this.opts.offer!(offerMessage(port), workspaceId, port);
      if (!answer) {
        s.dismissed.add(port);
        return;
      }
      const preview = await this.expose(workspaceId, port);
      await this.opts.open?.(preview, answer);
    } catch (e) {
      this.opts.onError?.(`cellbox: cannot preview port ${port}: ${(e as Error).message}`);
    } finally {
      s.offered.delete(port);
    }
  }

  /** workspace/exposePort (the same preview again for a port that has one). */
  expose(workspaceId: string, port: number): Promise<Preview> {
    return this.client.request(Methods.WorkspaceExposePort, { workspaceId, port, protocol: "http" });
  }

  /** workspace/unexposePort. */
  async unexpose(previewId: string): Promise<void> {
    await this.client.request(Methods.WorkspaceUnexposePort, { previewId });
  }

  /** workspace/previews, by port. */
  async list(workspaceId: string): Promise<Preview[]> {
    const r = await this.client.request(Methods.WorkspacePreviews, { workspaceId });
    return [...(r.previews ?? [])].sort((a, b) => a.port - b.port);
  }
}
