// Previews in VS Code, as a forwarded port: when a server starts listening in the sandbox
// (workspace/ports), an information message "Your application running on port 8000 is
// available." with "Open in Browser" and "Preview in Editor"; the first exposes the port and
// opens its URL through vscode.env.asExternalUri and openExternal (the preview server answers a
// loopback or localhost Host only: a remote window needs the port forwarded to localhost), the
// second in the Simple Browser (simpleBrowser.show). A local desktop window opens a preview at
// its own name (browserUrl, http://pv-ID.localhost:PORT/: a site of its own, whose cookies no
// other preview and no other loopback service shares); a remote or web window opens its loopback
// url, which asExternalUri forwards (a port forward reaches an address, not a name). The commands
// cellbox.previewPort (asks for a port), cellbox.openPreview and cellbox.stopPreview. The
// bookkeeping of the ports and offers is previews.ts's.
import * as vscode from "vscode";
import type { Session } from "./session";
import type { OfferAnswer, PreviewOptions } from "./previews";
import { parsePort } from "./previews";
import { errorMessage } from "./client";
import type { Preview } from "../../protocol/protocol";

export const OPEN_IN_BROWSER = "Open in Browser";
export const PREVIEW_IN_EDITOR = "Preview in Editor";
/** The actions of a port's offer, in order. */
export const OFFER_ACTIONS = [OPEN_IN_BROWSER, PREVIEW_IN_EDITOR];

/** Where this window opens a preview: its own name in a local desktop window, else its loopback url. */
export function previewURL(p: Preview): string {
  const local = vscode.env.remoteName === undefined && vscode.env.uiKind !== vscode.UIKind.Web;
  return (local && p.browserUrl) || p.url;
}

/** Opens a preview's URL: in the system's browser (through asExternalUri), or in the Simple Browser. */
export async function openPreview(p: Preview, where: "browser" | "editor"): Promise<void> {
  const url = previewURL(p);
  if (where === "editor") {
    await vscode.commands.executeCommand("simpleBrowser.show", url);
    return;
  }
  const uri = await vscode.env.asExternalUri(vscode.Uri.parse(url));
  await vscode.env.openExternal(uri);
}

/** The UI half of a session's PreviewManager: the offer (an information message) and the opening. */
export function previewUI(log?: (line: string) => void): PreviewOptions {
  return {
    async offer(message: string): Promise<OfferAnswer> {
      const pick = await vscode.window.showInformationMessage(message, ...OFFER_ACTIONS);
      return pick === OPEN_IN_BROWSER ? "browser" : pick === PREVIEW_IN_EDITOR ? "editor" : undefined;
    },
    open: openPreview,
    onError(message: string) {
      log?.(message);
      void vscode.window.showErrorMessage(message);
    },
  };
}

/** Asks which of the previews (a quick pick; the only one is taken at once). */
async function pickPreview(s: Session, title: string): Promise<Preview | undefined> {
  const workspaceId = (await s.requireWorkspace()).workspaceId;
  const list = await s.previews.list(workspaceId);
  if (!list.length) {
    vscode.window.showInformationMessage("cellbox: no port of the sandbox is previewed.");
    return undefined;
  }
  if (list.length === 1) return list[0];
  const pick = await vscode.window.showQuickPick(
    list.map((p) => ({ label: `Port ${p.port}`, description: new URL(previewURL(p)).origin, preview: p })),
    { title },
  );
  return pick?.preview;
}

/**
 * cellbox.previewPort: a port (typed; the first listening one not previewed is proposed),
 * exposed, then opened as the user picks (Open in Browser, Preview in Editor). Returns the preview.
 */
export async function previewPortCommand(s: Session, port?: number, where?: "browser" | "editor"): Promise<Preview | undefined> {
  const workspaceId = (await s.requireWorkspace()).workspaceId;
  if (port === undefined) {
    const listening = s.previews.ports(workspaceId);
    const typed = await vscode.window.showInputBox({
      title: "cellbox: preview a port of the sandbox",
      prompt: listening.length ? `The port a server listens on in the sandbox (listening: ${listening.join(", ")})` : "The port a server listens on in the sandbox",
      value: listening.length ? String(listening[0]) : undefined,
      placeHolder: "8000",
      validateInput: (v) => (parsePort(v) ? undefined : "a port: 1 to 65535"),
    });
    port = parsePort(typed);
    if (!port) return undefined;
  }
  let preview: Preview;
  try {
    preview = await s.previews.expose(workspaceId, port);
  } catch (e) {
    vscode.window.showErrorMessage(`cellbox: cannot preview port ${port}: ${errorMessage(e)}`);
    return undefined;
  }
  if (!where) {
    const pick = await vscode.window.showInformationMessage(`cellbox: port ${port} of the sandbox is previewed at ${new URL(previewURL(preview)).origin}.`, ...OFFER_ACTIONS);
    where = pick === OPEN_IN_BROWSER ? "browser" : pick === PREVIEW_IN_EDITOR ? "editor" : undefined;
  }
  if (where) await openPreview(preview, where);
  return preview;
}

/** cellbox.openPreview: one of the previews, opened in the browser. */
export async function openPreviewCommand(s: Session): Promise<Preview | undefined> {
  const p = await pickPreview(s, "cellbox: open a preview");
  if (p) await openPreview(p, "browser");
  return p;
}

/** cellbox.stopPreview: one of the previews ends (workspace/unexposePort; the server runs on). */
export async function stopPreviewCommand(s: Session): Promise<Preview | undefined> {
  const p = await pickPreview(s, "cellbox: stop a preview");
  if (!p) return undefined;
  await s.previews.unexpose(p.previewId);
  vscode.window.showInformationMessage(`cellbox: stopped the preview of port ${p.port}.`);
  return p;
}
