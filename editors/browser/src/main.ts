// The cellbox browser IDE, served by `cellbox serve --listen` at /.
//
// Layout: a header (project, network and packages, connection); on the left
// the project's tree with the side panels (changes, activity, checkpoints,
// variables, kernels) below it; in the middle the documents in tabs
// (notebooks, file editors, viewers, previews of the sandbox's servers) over
// the terminals in tabs. Splitters
// between them keep their sizes across reloads.
import "@xterm/xterm/css/xterm.css";
import "./style.css";
import { CellboxClient, Methods, tokenFromPage } from "../client/client";
import { el } from "./dom";
import { FileEditors } from "./fileeditor";
import { Files } from "./files";
import { splitter } from "./layout";
import { InstallPanel, NetworkPanel } from "./network";
import { Notebooks } from "./notebooks";
import { Previews } from "./previews";
import { Session } from "./session";
import { Tabs } from "./tabs";
import { KernelsPanel } from "./kernels";
import { Terminals } from "./terminal";
import { Tree } from "./tree";
import { VariablesPanel } from "./variables";
import { KernelRegistry, type Opener, type Workbench } from "./workbench";

declare global {
  interface Window {
    /** The page's parts, for tests and for people poking at the page from the console. */
    cellbox: unknown;
  }
}

/** confirmDialog asks in a modal <dialog> (never window.confirm, which freezes the page's connection handling). */
function confirmDialog(message: string, action = "OK"): Promise<boolean> {
  return new Promise((resolve) => {
    const ok = el("button", { class: "confirm-ok", value: "ok" }, action);
    const cancel = el("button", { class: "confirm-cancel", value: "cancel" }, "Cancel");
    const dialog = el("dialog", { class: "confirm" }, el("p", {}, message), el("div", { class: "confirm-buttons" }, cancel, ok)) as HTMLDialogElement;
    ok.onclick = () => dialog.close("ok");
    cancel.onclick = () => dialog.close("cancel");
    dialog.addEventListener("close", () => {
      resolve(dialog.returnValue === "ok");
      dialog.remove();
    });
    document.body.append(dialog);
    dialog.showModal();
    ok.focus();
  });
}

async function main() {
  const app = document.getElementById("app")!;
  const conn = el("span", { class: "conn", "data-state": "connecting" }, "connecting");
  const rootLabel = el("span", { class: "root" });
  const progress = el("span", { class: "progress" });
  const tools = el("span", { class: "header-tools" });
  const reconnect = el("button", { class: "reconnect", title: "drop the connection and reconnect" }, "⟳");
  const header = el("header", {}, el("strong", {}, "cellbox"), rootLabel, el("span", { class: "spacer" }), tools, progress, conn, reconnect);
  const files = el("section", { class: "files" }, el("div", { class: "panel-title" }, "Files"));
  const side = el("div", { class: "side" });
  const changes = el("section", { class: "changes" });
  side.append(changes);
  const docs = new Tabs("docs", el("div", { class: "tabs-empty" }, "Open a notebook or a file from the tree, or start a new notebook."));
  const terms = new Tabs("terms", el("div", { class: "tabs-empty" }, "No terminal open."));
  const bars = el("div", { class: "network-bars" });
  const aside = el("aside", {}, files, splitter(document.documentElement, "--tree-height", "y", { min: 80, max: 2000, initial: 320, key: "cellbox:layout:tree" }), side);
  const center = el("div", { class: "center" }, bars, docs.root, splitter(document.documentElement, "--terms-height", "y", { min: 60, max: 2000, initial: 260, invert: true, key: "cellbox:layout:terms" }), terms.root);
  app.append(header, el("main", {}, aside, splitter(document.documentElement, "--aside-width", "x", { min: 160, max: 900, initial: 300, key: "cellbox:layout:aside" }), center));

  const token = tokenFromPage();
  if (!token) {
    conn.textContent = "no token: open the URL that cellbox printed when it started";
    conn.dataset.state = "closed";
    return;
  }
  const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/rpc`;
  let client: CellboxClient;
  try {
    client = await CellboxClient.connect({
      url,
      token,
      clientInfo: { name: "cellbox-browser", version: "1" },
      // CodeMirror counts UTF-16 units, as JavaScript strings do.
      capabilities: { inputRequest: true, positionEncoding: "utf-16" },
    });
  } catch (e) {
    conn.textContent = `cannot connect: ${(e as Error).message}`;
    conn.dataset.state = "closed";
    return;
  }
  const setConn = (s: string, detail?: string) => {
    conn.textContent = s + (detail && s !== "open" ? ` (${detail})` : "");
    conn.dataset.state = s;
  };
  setConn("open");
  client.onState(setConn);
  reconnect.onclick = () => client.drop();

  // #workspace=ID (a fork's "open it" link): that workspace; else the one of the project.
  const wanted = new URLSearchParams(location.hash.slice(1)).get("workspace");
  const listed = wanted ? (await client.request(Methods.WorkspaceList, {})).workspaces.find((w) => w.workspaceId === wanted) : undefined;
  const ws = listed ?? (await client.request(Methods.WorkspaceOpen, {}));
  rootLabel.textContent = `${ws.root} (${ws.mode}${ws.name ? `, ${ws.name}` : ""})`;
  document.title = `${ws.root.split("/").pop() || ws.root} · cellbox`;

  const openers: Opener[] = [];
  const parts: { network?: NetworkPanel } = {};
  const wb: Workbench = {
    client,
    workspaceId: ws.workspaceId,
    root: ws.root,
    languages: client.initializeResult!.capabilities.languages,
    docs,
    terms,
    side,
    tools,
    bars,
    session: new Session(ws.workspaceId),
    progress: (s) => (progress.textContent = s),
    networkParams: () => parts.network?.startParams() ?? {},
    openers,
    async openPath(path) {
      const o = openers.find((x) => x.accepts(path));
      if (o) await o.open(path);
    },
    kernels: new KernelRegistry(),
    confirm: confirmDialog,
  };

  const kernelName = (kernelId: string) => {
    const k = wb.kernels.get(kernelId);
    return k ? `the ${k.language} kernel of ${k.title}` : undefined;
  };
  // The project tree, the changes panel, and the file editors (the last opener: any path).
  const tree = new Tree(wb, files);
  const fileView = new Files(wb, changes, tree, (kernelId) => !!wb.kernels.get(kernelId));
  const editors = new FileEditors(wb, tree);
  openers.push(editors);
  const network = (parts.network = new NetworkPanel(client, ws.workspaceId, ws.root, bars, tools, kernelName));
  const install = new InstallPanel(client, ws.workspaceId, tools);
  wb.changes = fileView;
  // Notebooks: .ipynb files in tabs, each with its kernel; kernel/inputRequest goes to the asking cell.
  const notebooks = new Notebooks(wb);
  const terminals = new Terminals(wb);
  const variables = new VariablesPanel(wb);
  const kernels = new KernelsPanel(wb);
  // Servers of the sandbox: offers as ports start listening, preview panes, the Ports panel.
  const previews = new Previews(wb);
  client.onReconnected(async () => {
    await Promise.all([tree.rewatch().then(() => fileView.refresh()), notebooks.resync()]);
  });
  // For tests and for people poking at the page from the console.
  window.cellbox = {
    client,
    workbench: wb,
    notebooks,
    files: fileView,
    tree,
    editors,
    /** The terminal in front. */
    get terminal() {
      return terminals.current;
    },
    terminals,
    variables,
    kernels,
    workspace: ws,
    network,
    install,
    previews,
  };
  await Promise.all([tree.start().then(() => fileView.start()), terminals.restore().catch(() => {}), notebooks.restore(), editors.restore(), previews.restore()]);
  document.body.dataset.ready = "true";
}

void main();
