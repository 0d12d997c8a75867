// The cellbox browser IDE, served by `cellbox serve --listen` at /.
import "@xterm/xterm/css/xterm.css";
import "./style.css";
import { CellboxClient, Methods, tokenFromPage, type KernelInputRequestParams } from "../client/client";
import { el } from "./dom";
import { Files } from "./files";
import { Notebook } from "./notebook";
import { TerminalPanel } from "./terminal";
import { NetworkPanel, InstallPanel } from "./network";

declare global {
  interface Window {
    /** The page's parts, for tests and for people poking at the page from the console. */
    cellbox: unknown;
  }
}

async function main() {
  const app = document.getElementById("app")!;
  const conn = el("span", { class: "conn", "data-state": "connecting" }, "connecting");
  const rootLabel = el("span", { class: "root" });
  const progress = el("span", { class: "progress" });
  const reconnect = el("button", { class: "reconnect", title: "drop the connection and reconnect" }, "⟳");
  const header = el("header", {}, el("strong", {}, "cellbox"), rootLabel, el("span", { class: "spacer" }), progress, conn, reconnect);
  const files = el("section", { class: "files" }, el("div", { class: "panel-title" }, "Files"));
  const changes = el("section", { class: "changes" });
  const notebook = el("section", { class: "notebook" });
  const terminal = el("section", { class: "term-panel" });
  const viewerTitle = el("span", { class: "viewer-title" });
  const viewerBody = el("div", { class: "viewer-body" });
  const viewerClose = el("button", { class: "viewer-close" }, "✕");
  const viewer = el("section", { class: "viewer", hidden: "" }, el("div", { class: "panel-title" }, viewerTitle, el("span", { class: "spacer" }), viewerClose), viewerBody);
  viewerClose.onclick = () => (viewer.hidden = true);
  app.append(header, el("main", {}, el("aside", {}, files, changes), el("div", { class: "center" }, notebook, terminal), viewer));

  const token = tokenFromPage();
  if (!token) {
    conn.textContent = "no token: open the URL that cellbox printed when it started";
    conn.dataset.state = "closed";
    return;
  }
  const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/rpc`;
  let client: CellboxClient;
  try {
    client = await CellboxClient.connect({ url, token, clientInfo: { name: "cellbox-browser", version: "1" }, capabilities: { inputRequest: true } });
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
  client.handle(Methods.KernelInputRequest, (p: KernelInputRequestParams) => ({ value: window.prompt(p.prompt || "input") ?? "" }));

  // #workspace=ID (a fork's "open it" link): that workspace; else the one of the project.
  const wanted = new URLSearchParams(location.hash.slice(1)).get("workspace");
  const listed = wanted ? (await client.request(Methods.WorkspaceList, {})).workspaces.find((w) => w.workspaceId === wanted) : undefined;
  const ws = listed ?? (await client.request(Methods.WorkspaceOpen, {}));
  rootLabel.textContent = `${ws.root} (${ws.mode}${ws.name ? `, ${ws.name}` : ""})`;
  const show = (title: string, body: HTMLElement) => {
    viewerTitle.textContent = title;
    viewerBody.replaceChildren(body);
    viewer.hidden = false;
  };
  const current: { nb?: Notebook } = {};
  const fileView = new Files(client, ws.workspaceId, files, changes, show, (kernelId) => kernelId === current.nb?.kernelId);
  // Blocked connections ask in bars over the notebook; the header has the network and packages controls.
  const bars = el("div", { class: "network-bars" });
  const tools = el("span", { class: "header-tools" });
  progress.before(tools);
  const network = new NetworkPanel(client, ws.workspaceId, ws.root, bars, tools, (kernelId) => (current.nb && kernelId === current.nb.kernelId ? `the ${current.nb.language} kernel of the notebook` : undefined));
  const install = new InstallPanel(client, ws.workspaceId, tools);
  const nb = new Notebook(client, ws.workspaceId, notebook, client.initializeResult!.capabilities.languages, (s) => (progress.textContent = s), () => network.startParams());
  current.nb = nb;
  nb.files = fileView;
  notebook.querySelector(".toolbar")!.after(bars);
  nb.add("print('hello from the sandbox')");
  const term = new TerminalPanel(client, ws.workspaceId, terminal, () => network.startParams());
  client.onReconnected(async () => {
    await Promise.all([fileView.rewatch(), nb.resync()]);
  });
  // For tests and for people poking at the page from the console.
  window.cellbox = { client, notebook: nb, files: fileView, terminal: term, workspace: ws, network, install };
  await Promise.all([fileView.start(), term.open(), nb.ensureKernel().catch(() => {})]);
  document.body.dataset.ready = "true";
}

void main();
