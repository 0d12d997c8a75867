// The output view's model: executions and their outputs as kernel/output builds them
// (streams merged, display updates by displayId, clear with wait), and its rendering to HTML
// for the webview. No `vscode` import: tested under plain Node.
import type { ExecuteResult, KernelOutputParams, MimeBundle, ExecuteError } from "../../protocol/protocol";
import { escapeHTML, renderMarkdown } from "../../browser/src/markdown";
import { summarize, fileLabel } from "../../browser/src/activity";

// eslint-disable-next-line no-control-regex -- an ANSI escape sequence starts with ESC
export const stripANSI = (s: string) => s.replace(/\x1b\[[0-9;?]*[ -/]*[@-~]/g, "");

export type OutputItem =
  | { kind: "stream"; name: string; text: string }
  | { kind: "display" | "result"; data: MimeBundle; displayId?: string }
  | { kind: "error"; ename: string; evalue: string; traceback: string[] };

export interface Execution {
  id: string;
  kernelId: string;
  code: string;
  /** Where it came from: "file.py:12" style label. */
  label?: string;
  executionCount?: number;
  status: "queued" | "running" | ExecuteResult["status"] | "failed";
  outputs: OutputItem[];
  result?: ExecuteResult;
  /** A request that failed (JSON-RPC error), not an error of the code. */
  failure?: string;
  clearPending?: boolean;
  lastSeq?: number;
  /** true when a seq gap showed lost output */
  lost?: boolean;
}

/** The preferred MIME type of a bundle, richest first. */
export const MIME_ORDER = ["text/html", "image/svg+xml", "image/png", "image/jpeg", "text/markdown", "application/json", "text/plain"];

export function preferredMime(data: MimeBundle): string | undefined {
  return MIME_ORDER.find((m) => data[m] !== undefined) ?? Object.keys(data)[0];
}

/** Applies one kernel/output to an execution's outputs (pure; used by the output view and notebooks). */
export function applyOutput(outputs: OutputItem[], p: KernelOutputParams, state: { clearPending?: boolean } = {}): OutputItem[] {
  if (p.kind === "clear") {
    if (p.wait) {
      state.clearPending = true;
      return outputs;
    }
    state.clearPending = false;
    return [];
  }
  if (state.clearPending) {
    state.clearPending = false;
    outputs = [];
  }
  switch (p.kind) {
    case "stream": {
      const name = p.name ?? "stdout";
      const last = outputs[outputs.length - 1];
      if (last && last.kind === "stream" && last.name === name) {
        return [...outputs.slice(0, -1), { ...last, text: last.text + (p.text ?? "") }];
      }
      return [...outputs, { kind: "stream", name, text: p.text ?? "" }];
    }
    case "display":
    case "result": {
      if (p.update && p.displayId) {
        return outputs.map((o) => ((o.kind === "display" || o.kind === "result") && o.displayId === p.displayId ? { ...o, data: p.data ?? {} } : o));
      }
      return [...outputs, { kind: p.kind, data: p.data ?? {}, displayId: p.displayId }];
    }
    case "error": {
      const e: ExecuteError = p.error ?? { ename: "Error", evalue: "", traceback: p.text ? [p.text] : [] };
      return [...outputs, { kind: "error", ename: e.ename, evalue: e.evalue, traceback: e.traceback }];
    }
  }
  return outputs;
}

/** The output view's model: every execution shown, newest last, bounded. */
export class OutputModel {
  readonly executions: Execution[] = [];
  private readonly byId = new Map<string, Execution>();
  constructor(private readonly max = 200) {}

  begin(e: Omit<Execution, "outputs" | "status"> & { status?: Execution["status"] }): Execution {
    const ex: Execution = { status: "running", outputs: [], ...e };
    this.executions.push(ex);
    this.byId.set(ex.id, ex);
    while (this.executions.length > this.max) {
      const old = this.executions.shift()!;
      this.byId.delete(old.id);
    }
    return ex;
  }

  get(id: string) {
    return this.byId.get(id);
  }

  /** Applies a kernel/output; returns the executions whose view changed (display updates reach earlier ones). */
  apply(p: KernelOutputParams): Execution[] {
    const ex = this.byId.get(p.executionId);
    if (p.kind === "display" && p.update && p.displayId) {
      const changed: Execution[] = [];
      for (const e of this.executions) {
        if (e.outputs.some((o) => (o.kind === "display" || o.kind === "result") && o.displayId === p.displayId)) {
          e.outputs = applyOutput(e.outputs, p, e);
          changed.push(e);
        }
      }
      return changed;
    }
    if (!ex) {
      return [];
    }
    if (ex.lastSeq !== undefined && p.seq !== ex.lastSeq + 1) {
      ex.lost = true;
    }
    ex.lastSeq = p.seq;
    ex.outputs = applyOutput(ex.outputs, p, ex);
    return [ex];
  }

  finish(id: string, res?: ExecuteResult, failure?: string): Execution | undefined {
    const ex = this.byId.get(id);
    if (!ex) {
      return undefined;
    }
    if (res) {
      ex.result = res;
      ex.status = res.status;
      ex.executionCount = res.executionCount || ex.executionCount;
      // An error the kernel reported only in the result (no error output): show it anyway.
      if (res.error && !ex.outputs.some((o) => o.kind === "error")) {
        ex.outputs = [...ex.outputs, { kind: "error", ...res.error }];
      }
    } else {
      ex.status = "failed";
      ex.failure = failure;
    }
    return ex;
  }

  clear() {
    this.executions.length = 0;
    this.byId.clear();
  }
}

/** HTML for one bundle. text/html goes in as is (the webview's CSP allows no scripts); images as data: URIs. */
export function renderBundle(data: MimeBundle): string {
  const mime = preferredMime(data);
  if (!mime) {
    return "";
  }
  const v = data[mime];
  const str = typeof v === "string" ? v : Array.isArray(v) ? v.join("") : JSON.stringify(v, null, 2);
  switch (mime) {
    case "text/html":
      return `<div class="html">${str}</div>`;
    case "image/svg+xml":
      return `<img class="svg" alt="svg" src="data:image/svg+xml;base64,${Buffer.from(str, "utf8").toString("base64")}">`;
    case "image/png":
    case "image/jpeg":
      return `<img alt="${mime}" src="data:${mime};base64,${str.replace(/\s/g, "")}">`;
    case "text/markdown":
      return `<div class="markdown">${renderMarkdown(str)}</div>`;
    default:
      return `<pre class="text">${escapeHTML(stripANSI(str))}</pre>`;
  }
}

export function renderOutput(o: OutputItem, count?: number): string {
  switch (o.kind) {
    case "stream":
      return `<pre class="stream ${o.name === "stderr" ? "stderr" : "stdout"}">${escapeHTML(stripANSI(o.text))}</pre>`;
    case "error":
      return `<pre class="error"><b>${escapeHTML(o.ename)}: ${escapeHTML(stripANSI(o.evalue))}</b>\n${escapeHTML(stripANSI(o.traceback.join("\n")))}</pre>`;
    default: {
      const out = o.kind === "result" ? `<span class="count">Out[${count ?? " "}]:</span>` : "";
      return `<div class="${o.kind}"${o.displayId ? ` data-display-id="${escapeHTML(o.displayId)}"` : ""}>${out}${renderBundle(o.data)}</div>`;
    }
  }
}

/** A `command:` link of the webview (its enableCommandUris lists the commands). */
function commandLink(command: string, args: unknown[], text: string, title: string, cls: string): string {
  const href = `command:${command}?${encodeURIComponent(JSON.stringify(args))}`;
  return `<a class="${cls}" href="${escapeHTML(href)}" title="${escapeHTML(title)}">${escapeHTML(text)}</a>`;
}

/**
 * The files an execution changed (kernel/execute's filesChanged, PROTOCOL.md §10), each a link
 * that opens its diff (cellbox.openChange), and "undo" (cellbox.undoExecution) when the run took
 * an automatic checkpoint first.
 */
export function renderFilesChanged(e: Execution): string {
  const r = e.result;
  if (!r?.filesChanged?.length && !r?.filesChangedMore) return "";
  const s = summarize(r.filesChanged, r.filesChangedMore);
  const parts = s.parts.map((p) => `${p.verb} ${p.files.map((f) => commandLink("cellbox.openChange", [f.path], fileLabel(f), `diff of ${f.path} (${f.kind})`, `file ${f.kind}`)).join(", ")}`);
  const more = s.hidden > 0 ? ` and ${s.hidden} more` : "";
  const undo = r.checkpoint
    ? ` · ${commandLink("cellbox.undoExecution", [{ executionId: r.executionId, executionCount: r.executionCount, checkpoint: r.checkpoint }], "undo", "restore the workspace's files to how they were before this execution", "undo")}`
    : "";
  return `<div class="files-changed">${parts.join(", ")}${more}${undo}</div>`;
}

export function renderExecution(e: Execution): string {
  const count = e.executionCount ? String(e.executionCount) : e.status === "running" || e.status === "queued" ? "*" : " ";
  const status = e.status === "ok" ? "" : ` <span class="status ${e.status}">${escapeHTML(e.status)}</span>`;
  const meta = e.result ? ` <span class="meta">${e.result.durationMs} ms${e.result.outputTruncated ? ", output truncated" : ""}</span>` : "";
  const failure = e.failure ? `<pre class="error">${escapeHTML(e.failure)}</pre>` : "";
  const lost = e.lost ? `<div class="meta">some output was lost</div>` : "";
  return (
    `<section class="exec" id="exec-${escapeHTML(e.id)}" data-status="${e.status}">` +
    `<div class="in"><span class="count">In [${count}]:</span>${e.label ? ` <span class="label">${escapeHTML(e.label)}</span>` : ""}${status}${meta}` +
    `<pre class="code">${escapeHTML(e.code)}</pre></div>` +
    `<div class="out">${e.outputs.map((o) => renderOutput(o, e.executionCount)).join("")}${failure}${lost}${renderFilesChanged(e)}</div></section>`
  );
}

/**
 * The whole page. The CSP allows no script but the one with nonce (which only scrolls to the
 * newest output): text/html outputs cannot run code.
 */
export function renderPage(model: OutputModel, cspSource = "", nonce?: string): string {
  const csp = `default-src 'none'; img-src data: ${cspSource}; style-src 'unsafe-inline' ${cspSource};${nonce ? ` script-src 'nonce-${nonce}';` : ""}`;
  const script = nonce ? `<script nonce="${nonce}">window.scrollTo(0, document.body.scrollHeight);</script>` : "";
  return `<!DOCTYPE html><html><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="${csp}">
<style>
body{font-family:var(--vscode-editor-font-family,monospace);font-size:var(--vscode-editor-font-size,13px);color:var(--vscode-foreground);padding:0 8px}
.exec{border-bottom:1px solid var(--vscode-panel-border,#8884);padding:6px 0}
.count{color:var(--vscode-descriptionForeground,#888);font-weight:bold}
.label,.meta{color:var(--vscode-descriptionForeground,#888);font-size:90%}
.status{font-weight:bold;color:var(--vscode-errorForeground,#c33)}
pre{white-space:pre-wrap;word-break:break-word;margin:2px 0}
pre.code{opacity:.75;border-left:2px solid var(--vscode-textLink-foreground,#37f);padding-left:6px}
pre.stderr{color:var(--vscode-editorWarning-foreground,#b80)}
pre.error{color:var(--vscode-errorForeground,#c33)}
img{max-width:100%;background:#fff}
.files-changed{color:var(--vscode-descriptionForeground,#888);font-size:90%;margin-top:4px}
.files-changed a{color:var(--vscode-textLink-foreground,#37f);text-decoration:none}
.files-changed a.deleted{text-decoration:line-through}
table{border-collapse:collapse}td,th{border:1px solid #8886;padding:2px 6px}
</style></head><body>${model.executions.length ? model.executions.map(renderExecution).join("\n") : '<p class="meta">Nothing run yet: cellbox: Run Selection (Shift+Enter) or Run Cell.</p>'}${script}</body></html>`;
}
