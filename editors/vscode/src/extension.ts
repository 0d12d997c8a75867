// The cellbox VS Code extension: wires the session (client, workspace, kernels), the output view,
// diagnostics, CodeLens, notebooks, status bar, completion/hover, SCM, terminals and previews
// of the sandbox's servers to VS Code.
import * as vscode from "vscode";
import { CellboxClient, errorMessage } from "./client";
import { Session, KernelHandle } from "./session";
import type { InterpreterInfo } from "../../protocol/protocol";
import { OutputPanel } from "./outputView";
import { findCells, cellAt, cellCode, CELL_MARKER, CellRange } from "./cells";
import { CellboxNotebookController, FilesChangedStatusBar, NOTEBOOK_TYPES } from "./notebook";
import { CellboxScm, CheckpointsProvider, CheckpointItem, SandboxContentProvider, SCHEME, sandboxUri, type ChangeState } from "./scm";
import { undoExecution, showExecutions, pickCheckpoint, exportGitCommand, exportPatchCommand, forkCommand, type UndoTarget, type HandoffViews } from "./handoff";
import { CellboxPseudoterminal } from "./terminal";
import { stripANSI } from "./outputs";
import { VariablesProvider } from "./variables";
import { networkUI, allowCommand, setCommand, installCommand } from "./networkCommands";
import { INSTALL_TOKEN_PREFIX } from "./network";
import { previewUI, previewPortCommand, openPreviewCommand, stopPreviewCommand } from "./previewCommands";
import { kernelChoices, CHOICE_GROUPS, unsupportedMessage } from "./languages";
import { Methods, type KernelOutputParams, type KernelState, type ProgressParams, type WorkspaceMode } from "../../protocol/protocol";

/** The languages that run before the daemon said which it has (initialize). */
const FILE_LANGUAGES = ["python", "javascript", "shellscript"];

let log: vscode.OutputChannel;
let session: Session | undefined;
let connecting: Promise<Session> | undefined;
let outputPanel: OutputPanel;
let diagnostics: vscode.DiagnosticCollection;
let status: vscode.StatusBarItem;
let notebook: CellboxNotebookController | undefined;
let scm: CellboxScm | undefined;
let checkpoints: CheckpointsProvider;
let content: SandboxContentProvider;
let variables: VariablesProvider | undefined;
let codeLens: CellCodeLens | undefined;
let lastLanguage: string | undefined;
const sessionSubs: vscode.Disposable[] = [];
const outputListeners = new Set<(p: KernelOutputParams) => void>();

function config() {
  return vscode.workspace.getConfiguration("cellbox");
}

function rootFolder(): string | undefined {
  return vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
}

/** The session, connecting on first use (cellbox.path / cellbox.connection). */
export function getSession(): Promise<Session> {
  if (session && !session.client.isClosed) return Promise.resolve(session);
  if (!connecting) {
    connecting = connect().finally(() => (connecting = undefined));
  }
  return connecting;
}

async function connect(): Promise<Session> {
  const c = config();
  const url = c.get<string>("connection.url") || undefined;
  const mode = c.get<string>("workspaceMode", "overlay");
  status.text = "$(loading~spin) cellbox: connecting";
  status.show();
  let client: CellboxClient;
  try {
    client = await CellboxClient.connect({
      path: c.get<string>("path") || "cellbox",
      url,
      token: c.get<string>("connection.token") || undefined,
      cwd: rootFolder(),
      clientName: "cellbox-vscode",
      clientVersion: vscode.extensions.getExtension("cellbox-dev.cellbox")?.packageJSON?.version,
      log: (l) => log.appendLine(l),
    });
  } catch (e) {
    status.text = "$(error) cellbox: not connected";
    status.backgroundColor = new vscode.ThemeColor("statusBarItem.errorBackground");
    throw new Error(`cellbox: cannot connect: ${errorMessage(e)} (check the setting cellbox.path or cellbox.connection.url)`, { cause: e });
  }
  const s = new Session(
    client,
    {
      root: mode === "none" ? undefined : rootFolder(),
      workspaceMode: mode === "none" ? undefined : (mode as WorkspaceMode),
      sandbox: c.get("sandbox"),
      network: c.get("network.mode", "none"),
      allow: c.get<string[]>("network.allow", []),
      timeoutMs: c.get<number>("timeoutMs") || undefined,
      checkpointRuns: c.get<boolean>("checkpointRuns", true),
    },
    networkUI((l) => log.appendLine(l)),
    previewUI((l) => log.appendLine(l)),
  );
  for (const d of sessionSubs.splice(0)) d.dispose();
  client.inputHandler = (p, token) =>
    Promise.resolve(vscode.window.showInputBox({ prompt: p.prompt || "input()", password: p.password, ignoreFocusOut: true, title: "cellbox: the code asks for input" }, token as vscode.CancellationToken));
  sessionSubs.push(
    s.onModelChange((changed) => {
      outputPanel.update();
      if (changed.some((e) => e.status !== "running")) scm?.refreshSoon();
    }),
    s.onKernelsChange(() => updateStatus()),
    client.onOutput((p) => outputListeners.forEach((f) => f(p))),
    client.onProgress((p) => onProgress(p)),
    client.onClose(() => {
      if (session === s) {
        session = undefined;
        updateStatus("disconnected");
      }
    }),
    client.onFsChange(() => scm?.refreshSoon(150, true)),
  );
  session = s;
  updateStatus();
  // The daemon's languages: a notebook cell, a file's keys, CodeLens and menus follow them.
  notebook?.setLanguages(s);
  updateRunnable();
  codeLens?.refresh();
  sessionSubs.push(
    s.onKernelsChange(() => variables?.refreshSoon()),
    s.onModelChange((changed) => changed.some((x) => x.status !== "running") && variables?.refreshSoon()),
  );
  variables?.refreshSoon();
  // Watch the workspace so the SCM view follows writes made in the sandbox.
  if (s.opts.root) {
    s.ensureWorkspace()
      .then(async (ws) => {
        if (ws) {
          await client.request(Methods.FsWatch, { workspaceId: ws.workspaceId }).catch(() => undefined);
          // The workspace says which interpreter each language runs here (its .venv): the
          // kernel picker offers the host's others beside it.
          notebook?.setLanguages(s);
          await scm?.refresh();
          checkpoints.refresh();
        }
      })
      .catch((e) => log.appendLine(`workspace: ${errorMessage(e)}`));
  }
  return s;
}

// $/progress as window progress, one per token.
const progress = new Map<string | number, { report: (v: { message?: string; increment?: number }) => void; done: () => void; last: number }>();
function onProgress(p: ProgressParams) {
  // cellbox.install shows its own progress, in a notification.
  if (String(p.token).startsWith(INSTALL_TOKEN_PREFIX)) return;
  const v = p.value;
  if (v.kind === "begin") {
    vscode.window.withProgress({ location: vscode.ProgressLocation.Window, title: v.title ?? "cellbox" }, (prog) => {
      return new Promise<void>((resolve) => {
        progress.set(p.token, { report: (x) => prog.report(x), done: resolve, last: 0 });
        if (v.message) prog.report({ message: v.message });
      });
    });
  } else if (v.kind === "report") {
    const e = progress.get(p.token);
    if (e) {
      const inc = v.percentage !== undefined ? Math.max(0, v.percentage - e.last) : undefined;
      if (v.percentage !== undefined) e.last = v.percentage;
      e.report({ message: v.message, increment: inc });
    }
  } else {
    progress.get(p.token)?.done();
    progress.delete(p.token);
  }
}

function updateStatus(override?: string) {
  if (!status) return;
  status.backgroundColor = undefined;
  if (override === "disconnected" || !session) {
    status.text = "$(debug-disconnect) cellbox";
    status.tooltip = "cellbox: not connected (runs connect on first use)";
    return;
  }
  const lang = activeLanguage() ?? lastLanguage;
  const k = lang ? session.kernels.get(lang) : [...session.kernels.values()][0];
  const ws = session.workspace ? ` · ${session.workspace.mode}` : "";
  if (!k) {
    status.text = `$(circle-outline) cellbox${lang ? ` ${session.label(lang)}` : ""}: no kernel${ws}`;
  } else {
    const icon = k.state === "busy" ? "$(sync~spin)" : k.state === "dead" ? "$(error)" : k.state === "idle" ? "$(circle-filled)" : "$(loading~spin)";
    status.text = `${icon} cellbox ${session.label(k.language)}${interpreterTag(k.interpreter)}: ${k.state}${ws}`;
    if (k.state === "dead") status.backgroundColor = new vscode.ThemeColor("statusBarItem.errorBackground");
    else if (k.interpreter?.warning) status.backgroundColor = new vscode.ThemeColor("statusBarItem.warningBackground");
  }
  const interp = k?.interpreter ? `\ninterpreter: ${k.interpreter.path} (${k.interpreter.source})${k.interpreter.warning ? `\n⚠ ${k.interpreter.warning}` : ""}` : "";
  status.tooltip = `cellbox ${session.client.info?.serverInfo.version ?? ""}\nworkspace: ${session.workspace?.root ?? "(scratch)"} (${session.workspace?.mode ?? "scratch"})\n${k ? `kernel ${k.kernelId} (${k.language} ${k.version ?? ""})${k.reason ? `: ${k.reason}` : ""}` : ""}${interp}\nClick to pick a kernel`;
  status.show();
}

/**
 * " (.venv)" when a kernel runs the project's own interpreter or one picked for it, as VS Code's
 * Python status shows the environment; nothing for the host's.
 */
function interpreterTag(i: InterpreterInfo | undefined): string {
  if (!i || i.source === "system") return "";
  if (i.source === "venv") {
    const m = /([^/]+)\/bin\/[^/]+$/.exec(i.path);
    return ` (${m ? m[1] : "venv"})`;
  }
  return ` (${i.version ?? i.source})`;
}

function activeLanguage(): string | undefined {
  const ed = vscode.window.activeTextEditor;
  if (!ed || !session) return undefined;
  return session.languageFor(ed.document.languageId, ed.document.fileName);
}

/** Whether a document's code runs in a cellbox kernel (before connecting: the built-in three). */
function runnable(doc: vscode.TextDocument): boolean {
  if (doc.uri.scheme === "vscode-notebook-cell" || doc.uri.scheme === "output") return false;
  return session ? session.languageFor(doc.languageId, doc.fileName) !== undefined : FILE_LANGUAGES.includes(doc.languageId);
}

/**
 * The context key cellbox.runnable: the active editor's code runs in a cellbox kernel. Keys,
 * menus and the run button use it, so a file in a language the daemon has through a Jupyter
 * kernel (R) gets them as Python does.
 */
function updateRunnable() {
  const ed = vscode.window.activeTextEditor;
  void vscode.commands.executeCommand("setContext", "cellbox.runnable", !!ed && runnable(ed.document));
}

/** The kernel of the active notebook, or of the active editor's language (the variables view). */
function activeKernel(): KernelHandle | undefined {
  if (!session) return undefined;
  const nb = vscode.window.activeNotebookEditor?.notebook;
  if (nb) return notebook?.kernels.get(nb.uri.toString());
  const lang = activeLanguage() ?? lastLanguage;
  return lang ? session.kernels.get(lang) : undefined;
}

/** Runs lines [first, last] (0-based) of a document, or exactly `code` starting at first. */
async function runRange(doc: vscode.TextDocument, first: number, last: number, code?: string) {
  const s = await getSession();
  const language = s.languageFor(doc.languageId, doc.fileName);
  if (!language) {
    vscode.window.showErrorMessage(`cellbox: no kernel language for '${doc.languageId}' (the daemon has: ${s.languages.filter((l) => l.available).map((l) => l.id).join(", ")})`);
    return;
  }
  lastLanguage = language;
  if (code === undefined) {
    const lines: string[] = [];
    for (let i = first; i <= last; i++) lines.push(doc.lineAt(i).text);
    while (lines.length && lines[lines.length - 1].trim() === "") lines.pop();
    code = lines.join("\n");
  }
  if (code.trim() === "") return;
  if (config().get<boolean>("showOutput", true)) outputPanel.show();
  // Diagnostics of the lines that run again are stale.
  const docLines = doc.getText().split(/\r?\n/);
  const old = (diagnostics.get(doc.uri) ?? []).filter((d) => d.range.start.line < first || d.range.start.line > last);
  diagnostics.set(doc.uri, old);
  const path = doc.uri.scheme === "file" ? doc.uri.fsPath : doc.uri.toString();
  const rel = vscode.workspace.asRelativePath(doc.uri);
  const { diagnostic } = await s.run({ path, language, code, firstLine: first, lastLine: last, docLines, label: first === last ? `${rel}:${first + 1}` : `${rel}:${first + 1}-${last + 1}` });
  if (diagnostic) {
    const d = new vscode.Diagnostic(new vscode.Range(diagnostic.line, diagnostic.startCol, diagnostic.line, diagnostic.endCol), diagnostic.message, vscode.DiagnosticSeverity.Error);
    d.source = "cellbox";
    diagnostics.set(doc.uri, [...(diagnostics.get(doc.uri) ?? []), d]);
  }
}

async function runSelection(editor?: vscode.TextEditor) {
  editor = editor ?? vscode.window.activeTextEditor;
  if (!editor) return;
  const doc = editor.document;
  const sel = editor.selection;
  if (sel.isEmpty) {
    const line = sel.active.line;
    // Shift+Enter style: run the line and move to the next one.
    const next = Math.min(line + 1, doc.lineCount - 1);
    if (config().get<boolean>("advanceOnRun", true) && next !== line) {
      const p = new vscode.Position(next, doc.lineAt(next).firstNonWhitespaceCharacterIndex);
      editor.selection = new vscode.Selection(p, p);
    }
    return runRange(doc, line, line);
  }
  const text = doc.getText(sel);
  // A selection of whole lines runs the lines; otherwise exactly the selected text.
  return runRange(doc, sel.start.line, sel.end.character === 0 && sel.end.line > sel.start.line ? sel.end.line - 1 : sel.end.line, sel.start.character === 0 && (sel.end.character === 0 || sel.end.character === doc.lineAt(sel.end.line).text.length) ? undefined : text);
}

function docCells(doc: vscode.TextDocument): { lines: string[]; cells: CellRange[] } {
  const lines = doc.getText().split(/\r?\n/);
  return { lines, cells: findCells(lines) };
}

async function runCells(doc: vscode.TextDocument, cells: CellRange[], lines: string[]) {
  for (const c of cells) {
    const cc = cellCode(lines, c);
    if (!cc) continue;
    const last = cc.line - 1 + cc.code.split("\n").length - 1;
    await runRange(doc, cc.line - 1, last, cc.code);
  }
}

async function resolveDoc(uri?: vscode.Uri): Promise<{ doc: vscode.TextDocument; editor?: vscode.TextEditor } | undefined> {
  if (uri instanceof vscode.Uri) {
    const doc = await vscode.workspace.openTextDocument(uri);
    return { doc, editor: vscode.window.visibleTextEditors.find((e) => e.document === doc) };
  }
  const editor = vscode.window.activeTextEditor;
  return editor ? { doc: editor.document, editor } : undefined;
}

async function runCellCmd(which: "cell" | "above" | "below" | "advance", uri?: vscode.Uri, line?: number) {
  const r = await resolveDoc(uri);
  if (!r) return;
  const at = typeof line === "number" ? line : r.editor?.selection.active.line ?? 0;
  const { lines, cells } = docCells(r.doc);
  const cur = cellAt(cells, at);
  if (!cur) return;
  if (which === "cell" || which === "advance") {
    if (which === "advance" && r.editor) {
      const next = cells.find((c) => c.start > cur.start);
      if (next) {
        const p = new vscode.Position(Math.min(next.start + 1, r.doc.lineCount - 1), 0);
        r.editor.selection = new vscode.Selection(p, p);
        r.editor.revealRange(new vscode.Range(p, p));
      }
    }
    return runCells(r.doc, [cur], lines);
  }
  if (which === "above") return runCells(r.doc, cells.filter((c) => c.end < cur.start), lines);
  return runCells(r.doc, cells.filter((c) => c.start >= cur.start), lines);
}

class CellCodeLens implements vscode.CodeLensProvider {
  private readonly emitter = new vscode.EventEmitter<void>();
  readonly onDidChangeCodeLenses = this.emitter.event;
  refresh() {
    this.emitter.fire();
  }
  provideCodeLenses(doc: vscode.TextDocument): vscode.CodeLens[] {
    if (!config().get<boolean>("codeLens", true) || !runnable(doc)) return [];
    const { lines, cells } = docCells(doc);
    const out: vscode.CodeLens[] = [];
    for (const c of cells) {
      if (!c.marker || !CELL_MARKER.test(lines[c.start])) continue;
      const range = new vscode.Range(c.start, 0, c.start, 0);
      out.push(
        new vscode.CodeLens(range, { title: "Run Cell", command: "cellbox.runCell", arguments: [doc.uri, c.start] }),
        new vscode.CodeLens(range, { title: "Run Above", command: "cellbox.runAbove", arguments: [doc.uri, c.start] }),
        new vscode.CodeLens(range, { title: "Run Below", command: "cellbox.runBelow", arguments: [doc.uri, c.start] }),
      );
    }
    return out;
  }
}

/** The kernel a text document's completion and hover go to: its notebook's, or its language's. */
function kernelForDoc(doc: vscode.TextDocument): KernelHandle | undefined {
  if (!session) return undefined;
  if (doc.uri.scheme === "vscode-notebook-cell") return doc.languageId === "markdown" ? undefined : notebook?.kernelOfCell(doc);
  const lang = session.languageFor(doc.languageId, doc.fileName);
  return lang ? session.kernels.get(lang) : undefined;
}

const completion: vscode.CompletionItemProvider = {
  async provideCompletionItems(doc, pos, token) {
    const k = kernelForDoc(doc);
    if (!k || !session || k.state === "dead" || !session.supports(k.language, Methods.KernelComplete)) return undefined;
    const code = doc.getText();
    // positionEncoding utf-16: offsets are VS Code's own.
    const res = await session.client.request(Methods.KernelComplete, { kernelId: k.kernelId, code, cursorPos: doc.offsetAt(pos) });
    if (token.isCancellationRequested) return undefined;
    const range = new vscode.Range(doc.positionAt(res.cursorStart), doc.positionAt(res.cursorEnd));
    return res.matches.map((m) => {
      const item = new vscode.CompletionItem(m, vscode.CompletionItemKind.Variable);
      item.range = range;
      return item;
    });
  },
};

const hover: vscode.HoverProvider = {
  async provideHover(doc, pos) {
    const k = kernelForDoc(doc);
    if (!k || !session || k.state === "dead" || !session.supports(k.language, Methods.KernelInspect)) return undefined;
    const res = await session.client.request(Methods.KernelInspect, { kernelId: k.kernelId, code: doc.getText(), cursorPos: doc.offsetAt(pos), detailLevel: 0 });
    if (!res.found || !res.data) return undefined;
    const md = res.data["text/markdown"];
    if (typeof md === "string") return new vscode.Hover(new vscode.MarkdownString(md));
    const text = res.data["text/plain"];
    if (typeof text !== "string") return undefined;
    const m = new vscode.MarkdownString();
    // R's help marks bold and underline with overstrikes (`_\bP`): keep the letters.
    // eslint-disable-next-line no-control-regex -- an overstrike is a character and a backspace
    m.appendCodeblock(stripANSI(text).replace(/[^\n]\x08/g, ""), "text");
    return new vscode.Hover(m);
  },
};

async function pickKernel() {
  const s = await getSession();
  const list = await s.client.request(Methods.KernelList, {});
  type Item = vscode.QuickPickItem & { kernelId?: string; language?: string; interpreter?: string; state?: KernelState };
  const items: Item[] = [];
  if (list.kernels.length) items.push({ label: "Running kernels", kind: vscode.QuickPickItemKind.Separator });
  for (const k of list.kernels) {
    items.push({ label: `$(server-process) ${s.label(k.language)}: ${k.kernelId}`, description: `${k.state} · [${k.executionCount}]`, detail: `workspace ${k.workspaceId}`, kernelId: k.kernelId, language: k.language, state: k.state });
  }
  const choices = kernelChoices(s.languages, s.client.info?.capabilities.interpreters, s.workspace?.interpreters);
  for (const g of CHOICE_GROUPS) {
    const of = choices.filter((c) => c.group === g.group);
    if (of.length) items.push({ label: g.title, kind: vscode.QuickPickItemKind.Separator });
    for (const c of of) items.push({ label: `$(add) ${c.label}`, description: c.description, detail: c.detail, language: c.language, interpreter: c.interpreter });
  }
  const pick = await vscode.window.showQuickPick(items, { title: "cellbox: pick the kernel for its language" });
  if (!pick?.language) return;
  if (pick.kernelId) await s.useKernel(pick.kernelId, pick.language, pick.state ?? "idle");
  else await s.startKernel(pick.language, `start-${Date.now()}`, true, pick.interpreter);
  // The active file runs in the picked kernel from now on when it fits it (a .py file in
  // jupyter:python3); files of that kernel's own language do anyway.
  const doc = vscode.window.activeTextEditor?.document;
  if (doc && doc.uri.scheme !== "vscode-notebook-cell") s.pickFor(doc.languageId, doc.fileName, pick.language);
  lastLanguage = pick.language;
  updateStatus();
  updateRunnable();
  variables?.refreshSoon();
}

async function kernelCommand(kind: "interrupt" | "restart" | "shutdown") {
  const s = await getSession();
  const lang = activeLanguage() ?? lastLanguage ?? [...s.kernels.keys()][0];
  const nb = vscode.window.activeNotebookEditor?.notebook;
  const nbKernel = nb ? notebook?.kernels.get(nb.uri.toString()) : undefined;
  const k = nbKernel ?? (lang ? s.kernels.get(lang) : undefined);
  if (!k) {
    vscode.window.showInformationMessage("cellbox: no kernel to " + kind);
    return;
  }
  const method = kind === "interrupt" ? Methods.KernelInterrupt : kind === "restart" ? Methods.KernelRestart : Methods.KernelShutdown;
  if (!s.supports(k.language, method)) {
    vscode.window.showInformationMessage(`cellbox: ${unsupportedMessage(s.languages, k.language, method)}`);
    return;
  }
  if (kind === "interrupt") await s.client.request(Methods.KernelInterrupt, { kernelId: k.kernelId });
  else if (kind === "restart") await s.client.request(Methods.KernelRestart, { kernelId: k.kernelId });
  else {
    await s.client.request(Methods.KernelShutdown, { kernelId: k.kernelId });
    if (nbKernel && nb) notebook?.kernels.delete(nb.uri.toString());
    else s.kernels.delete(k.language);
    updateStatus();
  }
}

/** What the §10 commands refresh after changing the workspace. */
function views(): HandoffViews {
  return { scm, checkpoints: () => checkpoints.refresh() };
}

/**
 * Opens the diff of a changed path (a link of a run's "wrote a.py" line): the SCM entry's diff
 * while the change is pending, else the file as the sandbox has it.
 */
async function openChange(p: string) {
  if (typeof p !== "string") return;
  const s = await getSession();
  await s.ensureWorkspace();
  let st = scm?.stateOf(p);
  if (!st && scm) {
    await scm.refresh();
    st = scm.stateOf(p);
  }
  if (st?.command) {
    await vscode.commands.executeCommand(st.command.command, ...(st.command.arguments ?? []));
    return;
  }
  // No longer pending (committed or discarded since): the file as the sandbox sees it.
  await vscode.window.showTextDocument(sandboxUri(p), { preview: true });
}

/** The execution an undo is for: an SCM group of one, a run's result, or one picked from the list. */
async function undoCommand(arg?: UndoTarget | vscode.SourceControlResourceGroup) {
  const s = await getSession();
  if (arg && "resourceStates" in arg) {
    const r = scm?.recordOfGroup(arg.id);
    if (r) await undoExecution(s, r, views());
    return;
  }
  if (arg && typeof arg === "object" && "executionId" in arg) {
    await undoExecution(s, arg, views());
    return;
  }
  await showExecutions(s, views());
}

/** After switching to a forked workspace: watch it, and show its changes and checkpoints. */
async function switchedWorkspace(s: Session) {
  const ws = s.workspace;
  if (ws) await s.client.request(Methods.FsWatch, { workspaceId: ws.workspaceId }).catch(() => undefined);
  await scm?.refresh();
  checkpoints.refresh();
  updateStatus();
}

function wrap<T extends unknown[]>(f: (...a: T) => unknown) {
  return async (...a: T) => {
    try {
      await f(...a);
    } catch (e) {
      vscode.window.showErrorMessage(errorMessage(e));
    }
  };
}

export function activate(ctx: vscode.ExtensionContext) {
  log = vscode.window.createOutputChannel("cellbox");
  outputPanel = new OutputPanel(() => session?.model);
  diagnostics = vscode.languages.createDiagnosticCollection("cellbox");
  status = vscode.window.createStatusBarItem("cellbox.status", vscode.StatusBarAlignment.Left, 50);
  status.name = "cellbox kernel";
  status.command = "cellbox.pickKernel";
  updateStatus("disconnected");
  status.show();
  content = new SandboxContentProvider(() => session);
  checkpoints = new CheckpointsProvider(() => session);
  const root = rootFolder();
  if (root && config().get<string>("workspaceMode", "overlay") !== "none") {
    scm = new CellboxScm(() => session, root, content);
    ctx.subscriptions.push(scm);
  }
  notebook = new CellboxNotebookController(
    getSession,
    (f) => {
      outputListeners.add(f);
      return new vscode.Disposable(() => outputListeners.delete(f));
    },
    (l) => log.appendLine(l),
  );
  const filesChanged = new FilesChangedStatusBar(notebook);
  ctx.subscriptions.push(
    filesChanged,
    vscode.notebooks.registerNotebookCellStatusBarItemProvider("jupyter-notebook", filesChanged),
    notebook.onResults(() => scm?.refreshSoon()),
  );
  variables = new VariablesProvider(() => session, activeKernel);
  codeLens = new CellCodeLens();
  updateRunnable();
  // Every file and notebook cell: whether its language runs in a kernel is the daemon's to say
  // (runnable, kernelForDoc), since Jupyter kernels add languages.
  const fileSelectors = [{ scheme: "file" }, { scheme: "untitled" }];
  const cellSelectors = [{ notebookType: "jupyter-notebook" }];
  const reg = <T extends unknown[]>(id: string, f: (...a: T) => unknown) => ctx.subscriptions.push(vscode.commands.registerCommand(id, wrap(f)));
  reg("cellbox.runSelection", () => runSelection());
  reg("cellbox.runLine", () => {
    const ed = vscode.window.activeTextEditor;
    if (ed) return runRange(ed.document, ed.selection.active.line, ed.selection.active.line);
  });
  reg("cellbox.runCell", (uri?: vscode.Uri, line?: number) => runCellCmd("cell", uri, line));
  reg("cellbox.runCellAndAdvance", (uri?: vscode.Uri, line?: number) => runCellCmd("advance", uri, line));
  reg("cellbox.runAbove", (uri?: vscode.Uri, line?: number) => runCellCmd("above", uri, line));
  reg("cellbox.runBelow", (uri?: vscode.Uri, line?: number) => runCellCmd("below", uri, line));
  reg("cellbox.runFile", async (uri?: vscode.Uri) => {
    const r = await resolveDoc(uri);
    if (r) return runRange(r.doc, 0, r.doc.lineCount - 1);
  });
  reg("cellbox.interrupt", () => kernelCommand("interrupt"));
  reg("cellbox.restart", () => kernelCommand("restart"));
  reg("cellbox.shutdown", () => kernelCommand("shutdown"));
  reg("cellbox.pickKernel", pickKernel);
  reg("cellbox.showOutput", () => outputPanel.show());
  reg("cellbox.clearOutput", () => {
    session?.model.clear();
    outputPanel.renderNow();
    diagnostics.clear();
  });
  reg("cellbox.reconnect", async () => {
    const old = session;
    session = undefined;
    await old?.client.dispose();
    await getSession();
  });
  reg("cellbox.clearNotebookOutputs", () => {
    const nb = vscode.window.activeNotebookEditor?.notebook;
    if (nb) return notebook?.clearOutputs(nb);
  });
  reg("cellbox.newTerminal", async () => {
    const s = await getSession();
    const ws = await s.ensureWorkspace();
    const pty = new CellboxPseudoterminal(s.client, { workspaceId: ws?.workspaceId, ...s.network.startParams(ws?.workspaceId) });
    vscode.window.createTerminal({ name: "cellbox (sandboxed)", pty, iconPath: new vscode.ThemeIcon("shield") }).show();
  });
  reg("cellbox.scm.refresh", async () => {
    await getSession();
    await scm?.refresh();
    checkpoints.refresh();
  });
  reg("cellbox.scm.commit", (...states: vscode.SourceControlResourceState[]) => scm?.commit(states.flat().filter((x) => x && x.resourceUri)));
  reg("cellbox.scm.discard", async (...states: vscode.SourceControlResourceState[]) => {
    const list = states.flat().filter((x) => x && x.resourceUri);
    const ok = await vscode.window.showWarningMessage(`Discard the sandbox's changes to ${list.length} file(s)?`, { modal: true }, "Discard");
    if (ok) await scm?.discard(list);
  });
  reg("cellbox.scm.commitAll", async () => {
    const name = scm?.scm.inputBox.value.trim();
    if (name) {
      const s = await getSession();
      if (s.workspace) await s.client.request(Methods.WorkspaceCheckpoint, { workspaceId: s.workspace.workspaceId, name: `before commit: ${name}` });
      scm!.scm.inputBox.value = "";
    }
    await scm?.commit();
    checkpoints.refresh();
  });
  reg("cellbox.scm.discardAll", async () => {
    const ok = await vscode.window.showWarningMessage("Discard every change the sandbox made?", { modal: true }, "Discard All");
    if (ok) await scm?.discard();
  });
  reg("cellbox.scm.openDiff", async () => {
    const text = await scm?.diffText();
    const doc = await vscode.workspace.openTextDocument({ content: text ?? "", language: "diff" });
    await vscode.window.showTextDocument(doc, { preview: true });
  });
  reg("cellbox.checkpoint.create", async () => {
    const s = await getSession();
    const ws = await s.requireWorkspace();
    const name = await vscode.window.showInputBox({ prompt: "Checkpoint name", value: `checkpoint ${new Date().toLocaleTimeString()}` });
    if (name === undefined) return;
    await s.client.request(Methods.WorkspaceCheckpoint, { workspaceId: ws.workspaceId, name: name || undefined });
    checkpoints.refresh();
  });
  reg("cellbox.checkpoint.restore", async (item?: CheckpointItem) => {
    const s = await getSession();
    const id = item instanceof CheckpointItem ? item.checkpoint.checkpointId : await pickCheckpoint(s);
    if (!s.workspace || !id) return;
    await s.client.request(Methods.WorkspaceRestore, { workspaceId: s.workspace.workspaceId, checkpointId: id });
    checkpoints.refresh();
    await scm?.refresh();
  });
  reg("cellbox.checkpoint.delete", async (item: CheckpointItem) => {
    const s = await getSession();
    if (!s.workspace || !item) return;
    await s.client.request(Methods.WorkspaceDeleteCheckpoint, { workspaceId: s.workspace.workspaceId, checkpointId: item.checkpoint.checkpointId });
    checkpoints.refresh();
  });
  reg("cellbox.checkpoint.refresh", () => checkpoints.refresh());
  reg("cellbox.openChange", (p: string) => openChange(p));
  reg("cellbox.undoExecution", (arg?: UndoTarget | vscode.SourceControlResourceGroup) => undoCommand(arg));
  // The inline action of a run's group in the SCM view: restore to before that run, after a modal.
  reg("cellbox.scm.undoRun", (g?: vscode.SourceControlResourceGroup) => undoCommand(g));
  reg("cellbox.showExecutions", async () => showExecutions(await getSession(), views()));
  reg("cellbox.exportGit", async () => exportGitCommand(await getSession()));
  reg("cellbox.exportPatch", async () => exportPatchCommand(await getSession()));
  reg("cellbox.fork", async () => forkCommand(await getSession(), () => switchedWorkspace(session!)));
  reg("cellbox.scm.toggleIgnored", async () => {
    await getSession();
    await scm?.toggleIgnored();
  });
  reg("cellbox.scm.commitGroup", async (g?: vscode.SourceControlResourceGroup) => {
    const list = (g?.resourceStates ?? []) as ChangeState[];
    if (list.length) await scm?.commit(list);
  });
  reg("cellbox.scm.discardGroup", async (g?: vscode.SourceControlResourceGroup) => {
    const list = (g?.resourceStates ?? []) as ChangeState[];
    if (!list.length) return;
    const ok = await vscode.window.showWarningMessage(`Discard the sandbox's changes to the ${list.length} file(s) of ${g!.label}?`, { modal: true }, "Discard");
    if (ok) await scm?.discard(list);
  });
  reg("cellbox.network.allow", async (rule?: string) => allowCommand(await getSession(), typeof rule === "string" ? rule : undefined));
  reg("cellbox.network.set", async () => setCommand(await getSession()));
  reg("cellbox.install", async () => installCommand(await getSession()));
  reg("cellbox.previewPort", async (port?: number) => previewPortCommand(await getSession(), typeof port === "number" ? port : undefined));
  reg("cellbox.openPreview", async () => openPreviewCommand(await getSession()));
  reg("cellbox.stopPreview", async () => stopPreviewCommand(await getSession()));
  reg("cellbox.variables.refresh", async () => {
    await getSession();
    await variables?.refresh();
  });

  ctx.subscriptions.push(
    log,
    outputPanel,
    diagnostics,
    status,
    notebook,
    variables,
    vscode.languages.registerCodeLensProvider(fileSelectors, codeLens),
    vscode.languages.registerCompletionItemProvider([...cellSelectors, ...fileSelectors], completion, "."),
    vscode.languages.registerHoverProvider([...cellSelectors, ...fileSelectors], hover),
    vscode.workspace.registerTextDocumentContentProvider(SCHEME, content),
    vscode.window.registerTreeDataProvider("cellbox.checkpoints", checkpoints),
    vscode.window.registerTerminalProfileProvider("cellbox.terminal", {
      async provideTerminalProfile() {
        const s = await getSession();
        const ws = await s.ensureWorkspace();
        return new vscode.TerminalProfile({ name: "cellbox (sandboxed)", pty: new CellboxPseudoterminal(s.client, { workspaceId: ws?.workspaceId, ...s.network.startParams(ws?.workspaceId) }) });
      },
    }),
    vscode.window.onDidChangeActiveTextEditor(() => {
      updateStatus(session ? undefined : "disconnected");
      updateRunnable();
      variables?.refreshSoon();
    }),
    vscode.window.onDidChangeActiveNotebookEditor(() => variables?.refreshSoon()),
    // A notebook opens: the kernel picker lists the daemon's kernels (connect for them), the
    // one of its kernelspec first.
    vscode.workspace.onDidOpenNotebookDocument((nb) => {
      if (!NOTEBOOK_TYPES.includes(nb.notebookType)) return;
      if (session) notebook?.prefer(nb);
      else if (config().get<boolean>("connectOnStartup", true)) getSession().catch((e) => log.appendLine(errorMessage(e)));
    }),
    new vscode.Disposable(() => {
      for (const d of sessionSubs.splice(0)) d.dispose();
    }),
  );
  // With a workspace folder, connect at once so the SCM view shows the sandbox's pending changes
  // (and with a notebook open, so that the kernel picker lists the daemon's kernels).
  const notebookOpen = vscode.workspace.notebookDocuments.some((nb) => NOTEBOOK_TYPES.includes(nb.notebookType));
  if ((scm || notebookOpen) && config().get<boolean>("connectOnStartup", true)) {
    getSession().catch((e) => log.appendLine(errorMessage(e)));
  }
}

/**
 * Closes the connection without shutting kernels down: under `cellbox connect` (and websocket)
 * they outlive the editor, and cellbox: Pick Kernel attaches to them again.
 */
export function deactivate() {
  const s = session;
  session = undefined;
  s?.client.close();
}
