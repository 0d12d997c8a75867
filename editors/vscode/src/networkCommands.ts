// The network and packages in VS Code: the notification of a blocked connection (a warning
// message with "Allow once" / "Allow always" / "Ignore"), the settings cellbox.network.mode and
// cellbox.network.allow that "Allow always" writes, and the commands cellbox.network.allow,
// cellbox.network.set and cellbox.install. The rules and the notifications' bookkeeping are
// network.ts's.
import * as vscode from "vscode";
import type { Session } from "./session";
import type { NetworkPolicyOptions, BlockedAnswer, WorkspaceNetwork } from "./network";
import { install, installMessage, parsePackages } from "./network";
import type { PackageManager } from "../../protocol/protocol";
import { errorMessage } from "./client";

export const ALLOW_ONCE = "Allow once";
export const ALWAYS_ALLOW = "Allow always";
export const IGNORE = "Ignore";
/** The actions of a blocked connection's notification, in order. */
export const BLOCKED_ACTIONS = [ALLOW_ONCE, ALWAYS_ALLOW, IGNORE];

function config() {
  return vscode.workspace.getConfiguration("cellbox");
}

/** Adds a rule to the workspace setting cellbox.network.allow, and makes the mode "allowlist". */
export async function persistRule(rule: string): Promise<void> {
  const c = config();
  const allow = c.get<string[]>("network.allow", []) ?? [];
  if (!allow.includes(rule)) await c.update("network.allow", [...allow, rule], vscode.ConfigurationTarget.Workspace);
  if (c.get<string>("network.mode", "none") === "none") await c.update("network.mode", "allowlist", vscode.ConfigurationTarget.Workspace);
}

/**
 * The UI half of a session's NetworkPolicy: the notification (a warning message: Allow once,
 * Allow always, Ignore; closing it is Ignore) and the settings.
 */
export function networkUI(log?: (line: string) => void): Omit<NetworkPolicyOptions, "mode" | "allow"> {
  return {
    async ask(message: string): Promise<BlockedAnswer> {
      const pick = await vscode.window.showWarningMessage(message, ...BLOCKED_ACTIONS);
      return pick === ALLOW_ONCE ? "once" : pick === ALWAYS_ALLOW ? "always" : undefined;
    },
    persist: persistRule,
    onError(message: string) {
      log?.(message);
      void vscode.window.showErrorMessage(message);
    },
  };
}

/** cellbox.network.allow: a rule typed into an input box, allowed now and kept in the settings. */
export async function allowCommand(s: Session, rule?: string): Promise<void> {
  const workspaceId = (await s.requireWorkspace()).workspaceId;
  rule ??= await vscode.window.showInputBox({
    title: "cellbox: allow a host",
    prompt: 'A rule: "host", "*.domain", "host:port", or an IP or CIDR with an optional port',
    placeHolder: "pypi.org:443",
    validateInput: (v) => (/\s/.test(v.trim()) ? "one rule, without spaces" : undefined),
  });
  if (!rule?.trim()) return;
  await s.network.allow(workspaceId, rule.trim(), true);
  vscode.window.showInformationMessage(`cellbox: allowed ${rule.trim()} (the workspace's allowlist: ${s.network.state(workspaceId).allow.join(", ")})`);
}

/** cellbox.network.set: none or allowlist, now and in the setting cellbox.network.mode. */
export async function setCommand(s: Session, mode?: WorkspaceNetwork): Promise<void> {
  const workspaceId = (await s.requireWorkspace()).workspaceId;
  const st = s.network.state(workspaceId);
  if (!mode) {
    type Item = vscode.QuickPickItem & { mode: WorkspaceNetwork };
    const items: Item[] = [
      { label: "none", description: st.mode === "none" ? "(current)" : "", detail: "No network: every connection is refused (and you are asked to allow it).", mode: "none" },
      { label: "allowlist", description: st.mode === "allowlist" ? "(current)" : "", detail: `Only the allowed hosts: ${st.allow.join(", ") || "none yet"}`, mode: "allowlist" },
    ];
    const pick = await vscode.window.showQuickPick(items, { title: "cellbox: the workspace's network" });
    if (!pick) return;
    mode = pick.mode;
  }
  await s.network.setMode(workspaceId, mode);
  await config().update("network.mode", mode, vscode.ConfigurationTarget.Workspace);
}

/**
 * cellbox.install: pip or npm, the packages, the daemon's `$/progress` in a notification
 * (cancellable: $/cancelRequest), then what was installed, or the error, in a message. Returns
 * that message.
 */
export async function installCommand(s: Session, manager?: PackageManager, packages?: string[]): Promise<string | undefined> {
  const workspaceId = (await s.requireWorkspace()).workspaceId;
  if (!manager) {
    const pick = await vscode.window.showQuickPick(
      [
        { label: "pip", description: "Python packages", manager: "pip" as PackageManager },
        { label: "npm", description: "Node.js packages", manager: "npm" as PackageManager },
      ],
      { title: "cellbox: install packages into the workspace's environment" },
    );
    if (!pick) return undefined;
    manager = pick.manager;
  }
  if (!packages) {
    const typed = await vscode.window.showInputBox({
      title: `cellbox: ${manager} install`,
      prompt: "Packages, separated by spaces (requirement specifiers; options are refused)",
      placeHolder: manager === "pip" ? "requests numpy==2.0" : "lodash@4",
      validateInput: (v) => (parsePackages(v).some((x) => x.startsWith("-")) ? "packages only: options such as --index-url are refused" : undefined),
    });
    packages = parsePackages(typed ?? "");
  }
  if (!packages.length) return undefined;
  const what = `${manager} install ${packages.join(" ")}`;
  try {
    const res = await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: `cellbox: ${what}`, cancellable: true }, (progress, token) => {
      let last = 0;
      return install(
        s.client,
        workspaceId,
        manager!,
        packages!,
        (message, percentage) => {
          // VS Code's progress adds increments; the daemon's percentage is where it is.
          const increment = percentage !== undefined ? Math.max(0, percentage - last) : undefined;
          if (percentage !== undefined) last = Math.max(last, percentage);
          progress.report({ message: message || undefined, increment });
        },
        token,
      );
    });
    const message = `cellbox: ${installMessage(res)}`;
    vscode.window.showInformationMessage(message);
    return message;
  } catch (e) {
    const message = `cellbox: ${what} failed: ${errorMessage(e)}`;
    vscode.window.showErrorMessage(message);
    return message;
  }
}
