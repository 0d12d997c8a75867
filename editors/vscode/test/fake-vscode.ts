// A fake of the few parts of the `vscode` module that the tested code uses, for tests that run
// under plain Node where no VS Code host runs. Only the API surface is faked: every call the code
// makes to the daemon goes to the real cellbox binary. The test bundles alias `vscode` to this file.
import * as nodePath from "node:path";

export class Disposable {
  constructor(private readonly f: () => void) {}
  static from(...ds: { dispose(): unknown }[]) {
    return new Disposable(() => ds.forEach((d) => d.dispose()));
  }
  dispose() {
    this.f();
  }
}

export class EventEmitter<T> {
  private listeners = new Set<(e: T) => unknown>();
  event = (l: (e: T) => unknown) => {
    this.listeners.add(l);
    return new Disposable(() => this.listeners.delete(l));
  };
  fire(e: T) {
    for (const l of [...this.listeners]) l(e);
  }
  dispose() {
    this.listeners.clear();
  }
}

export class Uri {
  private constructor(readonly scheme: string, readonly path: string, readonly query = "", readonly fragment = "", readonly authority = "") {}
  static file(p: string) {
    return new Uri("file", nodePath.resolve(p));
  }
  static from(c: { scheme: string; authority?: string; path?: string; query?: string; fragment?: string }) {
    return new Uri(c.scheme, c.path ?? "", c.query ?? "", c.fragment ?? "", c.authority ?? "");
  }
  static parse(s: string) {
    const u = new URL(s);
    return new Uri(u.protocol.replace(/:$/, ""), decodeURIComponent(u.pathname), u.search.replace(/^\?/, ""), "", u.host);
  }
  get fsPath() {
    return this.path;
  }
  toString() {
    const authority = this.authority ? `//${this.authority}` : this.scheme === "file" ? "//" : "";
    return `${this.scheme}:${authority}${this.path}${this.query ? `?${this.query}` : ""}`;
  }
}

export enum NotebookCellKind {
  Markup = 1,
  Code = 2,
}

export class NotebookCellOutputItem {
  constructor(readonly data: Uint8Array, readonly mime: string) {}
  static text(s: string, mime = "text/plain") {
    return new NotebookCellOutputItem(Buffer.from(s, "utf8"), mime);
  }
  static stdout(s: string) {
    return NotebookCellOutputItem.text(s, "application/vnd.code.notebook.stdout");
  }
  static stderr(s: string) {
    return NotebookCellOutputItem.text(s, "application/vnd.code.notebook.stderr");
  }
  static json(v: unknown, mime = "text/x-json") {
    return NotebookCellOutputItem.text(JSON.stringify(v), mime);
  }
  static error(e: Error) {
    return NotebookCellOutputItem.text(JSON.stringify({ name: e.name, message: e.message, stack: e.stack }), "application/vnd.code.notebook.error");
  }
  /** For the tests: the item's bytes as text. */
  get text() {
    return Buffer.from(this.data).toString("utf8");
  }
}

export class NotebookCellOutput {
  constructor(readonly items: NotebookCellOutputItem[], readonly metadata?: Record<string, unknown>) {}
}

export class CancellationTokenSource {
  private readonly emitter = new EventEmitter<void>();
  token = { isCancellationRequested: false, onCancellationRequested: this.emitter.event };
  cancel() {
    if (!this.token.isCancellationRequested) {
      this.token.isCancellationRequested = true;
      this.emitter.fire();
    }
  }
}

/** A NotebookCellExecution that records what the controller did, in order, into `events`. */
export class FakeCellExecution {
  readonly cts = new CancellationTokenSource();
  readonly token = this.cts.token;
  executionOrder?: number;
  outputs: NotebookCellOutput[] = [];
  started = false;
  success?: boolean;
  ended = false;
  constructor(readonly cell: any, readonly events: string[]) {
    events.push(`create ${cell.index}`);
  }
  start(_t?: number) {
    this.started = true;
    this.events.push(`start ${this.cell.index}`);
  }
  end(success: boolean | undefined, _t?: number) {
    this.ended = true;
    this.success = success;
    this.events.push(`end ${this.cell.index} ${success} order=${this.executionOrder}`);
  }
  async clearOutput() {
    this.outputs = [];
  }
  async replaceOutput(o: NotebookCellOutput[]) {
    this.outputs = o;
  }
  async appendOutput(o: NotebookCellOutput[]) {
    this.outputs = [...this.outputs, ...o];
  }
}

export enum NotebookControllerAffinity {
  Default = 1,
  Preferred = 2,
}

export class FakeNotebookController {
  supportedLanguages?: string[];
  supportsExecutionOrder?: boolean;
  description?: string;
  detail?: string;
  disposed = false;
  /** notebook uri -> the affinity set for it */
  readonly affinity = new Map<string, NotebookControllerAffinity>();
  executeHandler?: (cells: any[], nb: any, c: any) => unknown;
  interruptHandler?: (nb: any) => unknown;
  readonly events: string[] = [];
  readonly executions: FakeCellExecution[] = [];
  constructor(readonly id: string, readonly notebookType: string, public label: string) {}
  createNotebookCellExecution(cell: any) {
    const e = new FakeCellExecution(cell, this.events);
    this.executions.push(e);
    return e;
  }
  updateNotebookAffinity(nb: any, a: NotebookControllerAffinity) {
    this.affinity.set(nb.uri.toString(), a);
  }
  dispose() {
    this.disposed = true;
  }
}

export const created = { controllers: [] as FakeNotebookController[], sourceControls: [] as any[], warnings: [] as string[], infos: [] as string[], treeViews: [] as any[], quickPicks: [] as any[][], cellStatusBars: [] as any[], documents: [] as any[], shown: [] as any[], modals: [] as string[] };

export enum NotebookCellStatusBarAlignment {
  Left = 1,
  Right = 2,
}
export class NotebookCellStatusBarItem {
  tooltip?: string;
  command?: any;
  constructor(readonly text: string, readonly alignment: NotebookCellStatusBarAlignment) {}
}

export const notebooks = {
  createNotebookController(id: string, type: string, label: string) {
    const c = new FakeNotebookController(id, type, label);
    created.controllers.push(c);
    return c;
  },
  registerNotebookCellStatusBarItemProvider(type: string, provider: unknown) {
    created.cellStatusBars.push({ type, provider });
    return new Disposable(() => {});
  },
};

export const scm = {
  createSourceControl(id: string, label: string, rootUri?: Uri) {
    const sc = {
      id,
      label,
      rootUri,
      count: 0,
      inputBox: { value: "", placeholder: "" },
      acceptInputCommand: undefined as unknown,
      quickDiffProvider: undefined as unknown,
      groups: [] as any[],
      createResourceGroup(gid: string, glabel: string) {
        const g = {
          id: gid,
          label: glabel,
          resourceStates: [] as any[],
          hideWhenEmpty: false,
          disposed: false,
          dispose() {
            g.disposed = true;
            sc.groups.splice(sc.groups.indexOf(g), 1);
          },
        };
        sc.groups.push(g);
        return g;
      },
      dispose() {},
    };
    created.sourceControls.push(sc);
    return sc;
  },
};

export const window = {
  /** Records the message; answers with answerWarning's choice among the items (none: dismissed). */
  showWarningMessage(msg: string, ...items: any[]) {
    created.warnings.push(msg);
    if (items[0] && typeof items[0] === "object" && items[0].modal) created.modals.push(msg);
    const actions = items.filter((i) => typeof i === "string");
    return Promise.resolve(actions.length ? answerWarning(msg, actions) : undefined);
  },
  showErrorMessage(msg: string) {
    created.warnings.push(msg);
    return Promise.resolve(undefined);
  },
  /** Records the message; answers with answerInfo's choice among the items (none: dismissed). */
  showInformationMessage(msg: string, ...items: any[]) {
    created.infos.push(msg);
    const actions = items.filter((i) => typeof i === "string");
    return Promise.resolve(actions.length ? answerInfo(msg, actions) : undefined);
  },
  /** Records the document shown (a Uri or a document). */
  showTextDocument(d: any, opts?: unknown) {
    created.shown.push({ d, opts });
    return Promise.resolve({ document: d });
  },
  /** A TreeView that records its message and description; visible unless a test says not. */
  createTreeView(id: string, opts: { treeDataProvider: unknown }) {
    const visibility = new EventEmitter<{ visible: boolean }>();
    const v = { id, provider: opts.treeDataProvider, message: undefined as string | undefined, description: undefined as string | undefined, visible: true, onDidChangeVisibility: visibility.event, dispose() {} };
    created.treeViews.push(v);
    return v;
  },
  /** Records the items and answers with pickQuickPick's choice (none: dismissed). */
  showQuickPick(items: any[]) {
    created.quickPicks.push(items);
    return Promise.resolve(pickQuickPick(items));
  },
};

/** The fake user's answer to a showWarningMessage with actions (a test sets it; may be a promise). */
export let answerWarning: (msg: string, actions: string[]) => string | undefined | Promise<string | undefined> = () => undefined;
export function setWarningAnswer(f: typeof answerWarning) {
  answerWarning = f;
}
/** The fake user's answer to a showInformationMessage with actions (a test sets it). */
export let answerInfo: (msg: string, actions: string[]) => string | undefined | Promise<string | undefined> = () => undefined;
export function setInfoAnswer(f: typeof answerInfo) {
  answerInfo = f;
}
/** The fake user's text in the next showInputBox (undefined: cancelled). */
export let inputBoxValue: (opts: any) => string | undefined = () => undefined;
export function setInputBox(f: typeof inputBoxValue) {
  inputBoxValue = f;
}
/** What withProgress showed: its title and every message reported. */
export const progressShown: { title?: string; location?: unknown; messages: string[] }[] = [];

/** The fake user's choice in the next showQuickPick (a test sets it). */
export let pickQuickPick: (items: any[]) => any = () => undefined;
export function setQuickPick(f: (items: any[]) => any) {
  pickQuickPick = f;
}

export enum QuickPickItemKind {
  Separator = -1,
  Default = 0,
}

export const workspace = {
  notebookDocuments: [] as any[],
  onDidOpenNotebookDocument: () => new Disposable(() => {}),
  /** An untitled document with content and language, recorded in created.documents. */
  openTextDocument(o: { content?: string; language?: string } | Uri) {
    const doc = o instanceof Uri ? { uri: o } : { uri: Uri.from({ scheme: "untitled", path: `/Untitled-${created.documents.length + 1}` }), languageId: o.language, getText: () => o.content ?? "" };
    created.documents.push(doc);
    return Promise.resolve(doc);
  },
};
/** What was copied to the clipboard. */
export const clipboard: string[] = [];
/** What openExternal opened, and what asExternalUri was asked for, as strings. */
export const openedExternal: string[] = [];
export const externalUris: string[] = [];
export enum UIKind {
  Desktop = 1,
  Web = 2,
}
export const env = {
  clipboard: { writeText: (t: string) => (clipboard.push(t), Promise.resolve()) },
  /** A local desktop window; a test sets remoteName to act as a remote one. */
  remoteName: undefined as string | undefined,
  uiKind: UIKind.Desktop,
  /** As a local window: the same URI (a remote one would tunnel a localhost URL). */
  asExternalUri: (u: Uri) => (externalUris.push(u.toString()), Promise.resolve(u)),
  openExternal: (u: Uri) => (openedExternal.push(u.toString()), Promise.resolve(true)),
};

export enum TreeItemCollapsibleState {
  None = 0,
  Collapsed = 1,
  Expanded = 2,
}
export class TreeItem {
  description?: string;
  tooltip?: string;
  contextValue?: string;
  iconPath?: unknown;
  constructor(readonly label: string, readonly collapsibleState?: TreeItemCollapsibleState) {}
}
export class ThemeIcon {
  constructor(readonly id: string) {}
}

// What extension.ts's activate() touches: recorded so that a test can check the wiring.
export const registered = { commands: new Map<string, (...a: any[]) => unknown>(), providers: [] as string[] };
let config: Record<string, unknown> = {};
export function setConfig(c: Record<string, unknown>) {
  config = c;
}
export enum ConfigurationTarget {
  Global = 1,
  Workspace = 2,
  WorkspaceFolder = 3,
}
/** What getConfiguration().update wrote: [key, value, target], in order (the value is kept too). */
export const configUpdates: [string, unknown, unknown][] = [];
export enum StatusBarAlignment {
  Left = 1,
  Right = 2,
}
export class ThemeColor {
  constructor(readonly id: string) {}
}
export enum ProgressLocation {
  SourceControl = 1,
  Window = 10,
  Notification = 15,
}
export enum ViewColumn {
  Active = -1,
  Beside = -2,
}
export const statusItems: any[] = [];
Object.assign(window, {
  activeTextEditor: undefined,
  visibleTextEditors: [],
  activeNotebookEditor: undefined,
  createOutputChannel: (name: string) => ({ name, lines: [] as string[], appendLine(l: string) { this.lines.push(l); }, dispose() {} }),
  createStatusBarItem: (id: string) => {
    const s = { id, text: "", tooltip: "", command: "", name: "", backgroundColor: undefined, visible: false, show() { s.visible = true; }, hide() {}, dispose() {} };
    statusItems.push(s);
    return s;
  },
  registerTreeDataProvider: (id: string) => (registered.providers.push(`tree:${id}`), new Disposable(() => {})),
  registerTerminalProfileProvider: (id: string) => (registered.providers.push(`terminal:${id}`), new Disposable(() => {})),
  onDidChangeActiveTextEditor: () => new Disposable(() => {}),
  onDidChangeActiveNotebookEditor: () => new Disposable(() => {}),
  withProgress: (o: { title?: string; location?: unknown }, task: (p: unknown, token: unknown) => Promise<unknown>) => {
    const shown = { title: o.title, location: o.location, messages: [] as string[] };
    progressShown.push(shown);
    return task({ report: (v: { message?: string }) => v.message && shown.messages.push(v.message) }, new CancellationTokenSource().token);
  },
  showInputBox: (opts: any) => Promise.resolve(inputBoxValue(opts)),
});
/** What setContext set (cellbox.runnable). */
export const contextKeys = new Map<string, unknown>();
export const commands = {
  registerCommand(id: string, f: (...a: any[]) => unknown) {
    registered.commands.set(id, f);
    return new Disposable(() => registered.commands.delete(id));
  },
  executeCommand(id: string, ...a: any[]) {
    if (id === "setContext") {
      contextKeys.set(a[0], a[1]);
      return Promise.resolve(undefined);
    }
    return Promise.resolve(registered.commands.get(id)?.(...a));
  },
};
export const languages = {
  createDiagnosticCollection: (name: string) => {
    const m = new Map<string, unknown[]>();
    return { name, get: (u: Uri) => m.get(u.toString()), set: (u: Uri, d: unknown[]) => m.set(u.toString(), d), clear: () => m.clear(), dispose() {} };
  },
  registerCodeLensProvider: () => (registered.providers.push("codelens"), new Disposable(() => {})),
  registerCompletionItemProvider: () => (registered.providers.push("completion"), new Disposable(() => {})),
  registerHoverProvider: () => (registered.providers.push("hover"), new Disposable(() => {})),
};
Object.assign(workspace, {
  workspaceFolders: undefined as undefined | { uri: Uri }[],
  getConfiguration: () => ({
    get: (k: string, d?: unknown) => (k in config ? config[k] : d),
    update: (k: string, v: unknown, target?: unknown) => {
      configUpdates.push([k, v, target]);
      config[k] = v;
      return Promise.resolve();
    },
  }),
  registerTextDocumentContentProvider: (scheme: string) => (registered.providers.push(`content:${scheme}`), new Disposable(() => {})),
  asRelativePath: (u: Uri) => {
    const root = (workspace as any).workspaceFolders?.[0]?.uri.fsPath;
    return root && u.fsPath.startsWith(root + "/") ? u.fsPath.slice(root.length + 1) : u.fsPath;
  },
});
export const extensions = { getExtension: () => undefined };
export class Position {
  constructor(readonly line: number, readonly character: number) {}
}
export class Range {
  readonly start: Position;
  readonly end: Position;
  constructor(a: number | Position, b: number | Position, c?: number, d?: number) {
    this.start = typeof a === "number" ? new Position(a, b as number) : a;
    this.end = typeof a === "number" ? new Position(c!, d!) : (b as Position);
  }
}
export class Selection extends Range {}
export enum DiagnosticSeverity {
  Error = 0,
  Warning = 1,
}
export class Diagnostic {
  source?: string;
  constructor(readonly range: Range, readonly message: string, readonly severity?: DiagnosticSeverity) {}
}
export class CodeLens {
  constructor(readonly range: Range, readonly command?: unknown) {}
}
export class MarkdownString {
  value = "";
  constructor(v = "") {
    this.value = v;
  }
  appendCodeblock(code: string, lang = "") {
    this.value += "\n```" + lang + "\n" + code + "\n```\n";
    return this;
  }
}
export class Hover {
  constructor(readonly contents: unknown) {}
}
export enum CompletionItemKind {
  Variable = 5,
}
export class CompletionItem {
  range?: Range;
  constructor(readonly label: string, readonly kind?: CompletionItemKind) {}
}
export class TerminalProfile {
  constructor(readonly options: unknown) {}
}
