// The network of a workspace's sandbox (PROTOCOL.md §9) and its packages: the rules this client
// set for each workspace (the daemon does not say what they are, and workspace/setNetwork replaces
// them, so the client keeps the list and sends all of it), the notification a `network/blocked`
// gets (one per host at a time, never again for a host the user ignored this session), and
// workspace/install with its `$/progress`. No `vscode` import: the extension gives it the UI
// (an `ask` and a `persist`), the tests drive it against the real daemon.
import { CancellationToken } from "vscode-jsonrpc/node";
import type { CellboxClient } from "./client";
import {
  Methods,
  type NetworkMode,
  type NetworkBlockedParams,
  type PackageManager,
  type ProgressParams,
  type WorkspaceInstallResult,
} from "../../protocol/protocol";
import { formatBytes, installMessage, ruleFor } from "../../protocol/network";

export { formatBytes, installMessage, ruleFor };

/**
 * The user's answer to a blocked connection: allow it for this session, for good, or ignore it
 * (undefined: "Ignore", or the notification closed without an answer).
 */
export type BlockedAnswer = "once" | "always" | undefined;

/** The modes a workspace's network can be set to (kernel/start also takes "host": its own sandbox). */
export type WorkspaceNetwork = Extract<NetworkMode, "none" | "allowlist">;

/** What the client knows of one workspace's network: what it set, and the prompts of this session. */
export interface WorkspaceNetworkState {
  mode: NetworkMode;
  allow: string[];
  /** Hosts whose notification is showing (one per host at a time, whatever its port). */
  pending: Set<string>;
  /** Hosts the user ignored this session: not asked about again. */
  dismissed: Set<string>;
}

export interface NetworkPolicyOptions {
  /** The mode kernels and terminals start with (setting cellbox.network.mode). */
  mode?: NetworkMode;
  /** The rules they start with (setting cellbox.network.allow). */
  allow?: string[];
  /** Asks the user about a blocked connection; absent: nothing is asked (dismissed). */
  ask?: (message: string, p: NetworkBlockedParams, rule: string) => Promise<BlockedAnswer>;
  /** Keeps a rule for later sessions ("Allow always"). */
  persist?: (rule: string) => Promise<void>;
  /** "the kernel of nb.ipynb" for a kernelId, when the editor knows whose it is. */
  describeKernel?: (kernelId: string) => string | undefined;
  /** Reports a failure (setNetwork refused); absent: thrown away. */
  onError?: (message: string) => void;
}

/**
 * "The python kernel of nb.ipynb tried to reach pypi.org:443 (pypi.org is not in the allowlist)."
 * source: whose kernel it was ("the python kernel of nb.ipynb"); absent: a program of the sandbox.
 */
export function blockedMessage(p: NetworkBlockedParams, source?: string): string {
  const who = source ?? "a program in the sandbox";
  const reason = p.reason ? ` (${p.reason})` : "";
  return `${who[0].toUpperCase()}${who.slice(1)} tried to reach ${ruleFor(p)}${reason}.`;
}

/** The host a notification is about: one at a time per host, whatever the port. */
export function hostOf(p: Pick<NetworkBlockedParams, "host">): string {
  return p.host.toLowerCase().replace(/^\[(.*)\]$/, "$1");
}

/** The host of a rule: "pypi.org" of "pypi.org:443", "::1" of "[::1]:8080" (an IPv6 literal stays whole). */
export function ruleHost(rule: string): string {
  const m = /^\[([^\]]*)\](?::\d+)?$/.exec(rule);
  if (m) return m[1].toLowerCase();
  const parts = rule.split(":");
  return (parts.length === 2 && /^\d+$/.test(parts[1]) ? parts[0] : rule).toLowerCase();
}

export class NetworkPolicy {
  private readonly workspaces = new Map<string, WorkspaceNetworkState>();

  constructor(private readonly client: CellboxClient, readonly opts: NetworkPolicyOptions = {}) {}

  /** The state of a workspace, starting from the settings. */
  state(workspaceId: string): WorkspaceNetworkState {
    let s = this.workspaces.get(workspaceId);
    if (!s) {
      s = { mode: this.opts.mode ?? "none", allow: [...(this.opts.allow ?? [])], pending: new Set(), dismissed: new Set() };
      this.workspaces.set(workspaceId, s);
    }
    return s;
  }

  /**
   * network and allow for kernel/start and pty/open: the workspace's live rules (kernel/start
   * sets the workspace's network as setNetwork does, so it must carry every rule).
   */
  startParams(workspaceId?: string): { network?: NetworkMode; allow?: string[] } {
    const s = workspaceId ? this.state(workspaceId) : { mode: this.opts.mode ?? "none", allow: this.opts.allow ?? [] };
    if (s.mode === "allowlist") return { network: "allowlist", allow: [...s.allow] };
    return { network: s.mode };
  }

  /** Sends the workspace's mode and every rule (workspace/setNetwork replaces them). */
  async apply(workspaceId: string): Promise<void> {
    const s = this.state(workspaceId);
    const network: WorkspaceNetwork = s.mode === "allowlist" ? "allowlist" : "none";
    await this.client.request(Methods.WorkspaceSetNetwork, { workspaceId, network, allow: network === "allowlist" ? [...s.allow] : undefined });
  }

  /** Adds a rule (switching the workspace to "allowlist"); persist: also for later sessions. */
  async allow(workspaceId: string, rule: string, persist = false): Promise<void> {
    const s = this.state(workspaceId);
    rule = rule.trim();
    if (!rule) return;
    if (!s.allow.includes(rule)) s.allow.push(rule);
    s.mode = "allowlist";
    s.dismissed.delete(ruleHost(rule));
    await this.apply(workspaceId);
    if (persist) await this.opts.persist?.(rule);
  }

  /** Removes a rule. */
  async remove(workspaceId: string, rule: string): Promise<void> {
    const s = this.state(workspaceId);
    s.allow = s.allow.filter((r) => r !== rule);
    await this.apply(workspaceId);
  }

  /** Sets the workspace's mode, keeping its rules. */
  async setMode(workspaceId: string, mode: WorkspaceNetwork): Promise<void> {
    this.state(workspaceId).mode = mode;
    await this.apply(workspaceId);
  }

  /**
   * A network/blocked notification: asks once per (workspace, host) at a time, never about a
   * host the user ignored this session nor a rule already allowed, and allows what the user
   * says: "once" and "always" send workspace/setNetwork with the workspace's rules and this one
   * ("always" keeps it in the settings too); Ignore (or closing the notification) allows nothing
   * and is not asked again about that host this session. Resolves with the answer (undefined
   * when nothing was asked or it was ignored).
   */
  async onBlocked(p: NetworkBlockedParams): Promise<BlockedAnswer> {
    const s = this.state(p.workspaceId);
    const rule = ruleFor(p);
    const host = hostOf(p);
    if (s.pending.has(host) || s.dismissed.has(host) || (s.mode === "allowlist" && s.allow.includes(rule))) return undefined;
    if (!this.opts.ask) return undefined;
    s.pending.add(host);
    try {
      const source = p.kernelId ? (this.opts.describeKernel?.(p.kernelId) ?? `kernel ${p.kernelId}`) : undefined;
      const answer = await this.opts.ask(blockedMessage(p, source), p, rule);
      if (!answer) {
        s.dismissed.add(host);
        return undefined;
      }
      await this.allow(p.workspaceId, rule, answer === "always");
      return answer;
    } catch (e) {
      this.opts.onError?.(`cellbox: cannot allow ${rule}: ${(e as Error).message}`);
      return undefined;
    } finally {
      s.pending.delete(host);
    }
  }
}

/** Splits what the user typed into package specifiers ("requests numpy==2.0", commas too). */
export function parsePackages(s: string): string[] {
  return s.split(/[\s,]+/).filter(Boolean);
}

let installSeq = 0;
/** The prefix of install's workDoneTokens (the extension's window progress leaves them alone). */
export const INSTALL_TOKEN_PREFIX = "install-";

/**
 * workspace/install: reports each `$/progress` of its token ("Installing with pip: 3 files,
 * 1.2 MiB downloaded: requests-2.31.0-py3-none-any.whl", with its percentage when the daemon
 * gives one), resolves with the result.
 */
export async function install(
  client: Pick<CellboxClient, "request" | "onProgress">,
  workspaceId: string,
  manager: PackageManager,
  packages: string[],
  report: (message: string, percentage?: number) => void,
  token?: CancellationToken,
): Promise<WorkspaceInstallResult> {
  const workDoneToken = `${INSTALL_TOKEN_PREFIX}${process.pid}-${++installSeq}`;
  let ended = false;
  const sub = client.onProgress((p: ProgressParams) => {
    if (p.token !== workDoneToken || ended) return;
    if (p.value.kind === "end") {
      ended = true;
      return;
    }
    const text = [p.value.title, p.value.message].filter(Boolean).join(": ");
    if (text || p.value.percentage !== undefined) report(text, p.value.percentage);
  });
  try {
    return await client.request(Methods.WorkspaceInstall, { workspaceId, manager, packages, workDoneToken }, token);
  } finally {
    sub.dispose();
  }
}
