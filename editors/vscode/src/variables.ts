// The "cellbox Variables" view: the variables of the kernel of the active editor or notebook
// (kernel/variables). A kernel whose language cannot list them (languages[].unsupported, e.g. a
// Jupyter kernel) gets a message in the view instead, and no request.
import * as vscode from "vscode";
import type { Session, KernelHandle, VariablesView } from "./session";
import type { Variable } from "../../protocol/protocol";

export const VARIABLES_VIEW = "cellbox.variables";

export class VariableItem extends vscode.TreeItem {
  constructor(readonly variable: Variable) {
    super(variable.name, vscode.TreeItemCollapsibleState.None);
    const summary = variable.summary.length > 80 ? `${variable.summary.slice(0, 79)}…` : variable.summary;
    this.description = `${variable.type}${summary ? ` = ${summary}` : ""}`;
    this.tooltip = `${variable.name}: ${variable.type}${variable.size !== undefined ? ` (${variable.size})` : ""}\n${variable.summary}`;
    this.contextValue = "variable";
  }
}

export class VariablesProvider implements vscode.TreeDataProvider<VariableItem>, vscode.Disposable {
  private readonly emitter = new vscode.EventEmitter<void>();
  readonly onDidChangeTreeData = this.emitter.event;
  readonly view: vscode.TreeView<VariableItem>;
  /** What the view shows now. */
  current: VariablesView = { variables: [], message: "Not connected to cellbox." };
  private timer?: ReturnType<typeof setTimeout>;
  private refreshing?: Promise<void>;
  private readonly subs: vscode.Disposable[] = [];

  /** session: the session, if connected; kernel: the kernel of the active editor or notebook. */
  constructor(private readonly session: () => Session | undefined, private readonly kernel: () => KernelHandle | undefined) {
    this.view = vscode.window.createTreeView(VARIABLES_VIEW, { treeDataProvider: this });
    this.view.message = this.current.message;
    this.subs.push(this.view.onDidChangeVisibility((e) => e.visible && this.refreshSoon()));
  }

  /** Asks the kernel again (when the view is visible; it refreshes when it becomes visible). */
  refresh(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const run = async () => {
      const s = this.session();
      this.current = s ? await s.variables(this.kernel()) : { variables: [], message: "Not connected to cellbox." };
      this.view.message = this.current.message;
      this.view.description = this.current.kernel && s ? s.label(this.current.kernel.language) : undefined;
      this.emitter.fire();
    };
    const p = (this.refreshing ?? Promise.resolve()).then(run, run);
    this.refreshing = p;
    return p;
  }

  /**
   * Refreshes soon, once for a burst of triggers (kernel states, editor switches); not while the
   * kernel is busy (the request would wait for the code), since it refreshes when it goes idle.
   */
  refreshSoon() {
    if (!this.view.visible || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.kernel()?.state !== "busy") void this.refresh();
    }, 150);
  }

  getTreeItem(item: VariableItem): vscode.TreeItem {
    return item;
  }

  getChildren(): VariableItem[] {
    return this.current.variables.map((v) => new VariableItem(v));
  }

  dispose() {
    if (this.timer) clearTimeout(this.timer);
    for (const d of this.subs) d.dispose();
    this.view.dispose();
    this.emitter.dispose();
  }
}
