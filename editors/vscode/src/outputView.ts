// The cellbox output view: a webview beside the editor showing every execution with its
// execution count and outputs (text, errors, HTML, PNG, SVG, Markdown, display updates).
import * as vscode from "vscode";
import { randomBytes } from "node:crypto";
import { OutputModel, renderPage } from "./outputs";

export class OutputPanel implements vscode.Disposable {
  private panel?: vscode.WebviewPanel;
  private timer?: ReturnType<typeof setTimeout>;
  constructor(private readonly model: () => OutputModel | undefined) {}

  get visible() {
    return !!this.panel;
  }

  /** Shows the view (beside the editor, keeping focus there). */
  show() {
    if (!this.panel) {
      this.panel = vscode.window.createWebviewPanel("cellbox.output", "cellbox Output", { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true }, { enableScripts: true, retainContextWhenHidden: true, localResourceRoots: [], enableCommandUris: ["cellbox.openChange", "cellbox.undoExecution"] });
      this.panel.onDidDispose(() => (this.panel = undefined));
      this.renderNow();
    } else if (!this.panel.visible) {
      this.panel.reveal(vscode.ViewColumn.Beside, true);
    }
  }

  /** Re-renders soon: output bursts are coalesced. */
  update() {
    if (!this.panel || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.renderNow();
    }, 50);
  }

  renderNow() {
    if (!this.panel) return;
    const m = this.model() ?? new OutputModel();
    this.panel.webview.html = renderPage(m, this.panel.webview.cspSource, randomBytes(16).toString("hex"));
  }

  dispose() {
    if (this.timer) clearTimeout(this.timer);
    this.panel?.dispose();
  }
}
