// A session: one connection to the daemon, the workspace of the VS Code folder, a kernel per
// language, and the output view's model. No `vscode` import: the extension wires it to the UI,
// the tests drive it against the real daemon.
import { CancellationToken, Emitter, Event } from "vscode-jsonrpc/node";
import { CellboxClient, errorMessage } from "./client";
import { OutputModel, Execution } from "./outputs";
import { NetworkPolicy, type NetworkPolicyOptions } from "./network";
import { PreviewManager, type PreviewOptions } from "./previews";
import { diagnosticFor, DiagnosticSpec } from "./errors";
import { executionTitle } from "../../browser/src/activity";
import { resolveLanguage, supports, languageLabel, unsupportedMessage, extensionOf, LANGUAGE_ID_EXTENSIONS } from "./languages";
import {
  Methods,
  type KernelState,
  type KernelStartParams,
  type WorkspaceInfo,
  type LanguageCapability,
  type WorkspaceMode,
  type SandboxMode,
  type NetworkMode,
  type Limits,
  type RequestMethod,
  type Variable,
  type InterpreterInfo,
  type ExecutionRecord,
  type WorkspaceExportGitResult,
} from "../../protocol/protocol";

export interface KernelHandle {
  kernelId: string;
  language: string;
  state: KernelState;
  reason?: string;
  version?: string;
  /** The interpreter the kernel runs and why (the project's .venv, kernel/start's, the host's). */
  interpreter?: InterpreterInfo;
}

export interface SessionOptions {
  /** The project directory (the VS Code workspace folder); absent: kernels get scratch workspaces. */
  root?: string;
  workspaceMode?: WorkspaceMode;
  sandbox?: SandboxMode;
  /** The network kernels and terminals start with: "none", "allowlist" (with allow) or "host". */
  network?: NetworkMode;
  /** The allowlist's rules (§9) they start with. */
  allow?: string[];
  limits?: Limits;
  timeoutMs?: number;
  /**
   * Runs ask for an automatic checkpoint first (kernel/execute's checkpoint, PROTOCOL.md §10),
   * so that each one can be undone; the daemon takes none when nothing changed since the last.
   * Default true (setting cellbox.checkpointRuns).
   */
  checkpointRuns?: boolean;
}

/** What ran and where: a document's path, language, lines, and the 0-based range that ran. */
export interface RunRequest {
  path: string;
  language: string;
  code: string;
  /** 0-based first line of code in the document. */
  firstLine: number;
  /** 0-based last line. */
  lastLine: number;
  /** The document's lines, for the diagnostic's range. */
  docLines?: string[];
  label?: string;
}

/** What a variables view shows for a kernel. */
export interface VariablesView {
  kernel?: KernelHandle;
  variables: Variable[];
  /** Shown instead of (or, for an empty list, with) the variables. */
  message?: string;
  /** The kernel's language cannot list variables (languages[].unsupported). */
  unsupported?: boolean;
}

export interface RunOutcome {
  execution: Execution;
  diagnostic?: DiagnosticSpec;
}

/**
 * A name at the start of a sentence: "Cell 3 of x.ipynb", "Execution 7 (python)"; a file's
 * ("analysis.py:4-9") stays as it is.
 */
export function sentenceStart(name: string): string {
  return /^[a-z]+(\s|$)/.test(name) ? name[0].toUpperCase() + name.slice(1) : name;
}

/** How many executions' origins a session keeps (the daemon keeps fewer records than this). */
export const MAX_ORIGINS = 1000;

let seq = 0;
/** A fresh executionId. */
export function newExecutionId(prefix = "vscode"): string {
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${++seq}`;
}

export class Session {
  readonly model = new OutputModel();
  workspace?: WorkspaceInfo;
  /** language -> the kernel code of that language runs on */
  readonly kernels = new Map<string, KernelHandle>();
  /** kernels started for notebooks, by kernelId */
  readonly extra = new Map<string, KernelHandle>();
  private readonly starting = new Map<string, Promise<KernelHandle>>();
  /** VS Code languageId -> the language picked for its documents (pickFor) */
  private readonly picked = new Map<string, string>();

  /** The workspaces' network: their rules, and the prompts of network/blocked (see network.ts). */
  readonly network: NetworkPolicy;
  /** The previews of servers in the workspaces' sandboxes, and the offers of new ports (see previews.ts). */
  readonly previews: PreviewManager;
  /** kernelId -> whose kernel it is ("nb.ipynb"), for the blocked prompt. */
  readonly kernelOwners = new Map<string, string>();
  /**
   * executionId -> what ran ("cell 3 of x.ipynb", "a.py:3-5"), for this editor's runs: the SCM
   * view and the undo name them so. The newest MAX_ORIGINS are kept.
   */
  readonly origins = new Map<string, string>();

  private readonly _onModel = new Emitter<Execution[]>();
  private readonly _onKernels = new Emitter<void>();
  readonly onModelChange: Event<Execution[]> = this._onModel.event;
  readonly onKernelsChange: Event<void> = this._onKernels.event;

  constructor(readonly client: CellboxClient, readonly opts: SessionOptions = {}, network: Omit<NetworkPolicyOptions, "mode" | "allow"> = {}, previews: PreviewOptions = {}) {
    this.previews = new PreviewManager(client, previews);
    this.network = new NetworkPolicy(client, {
      describeKernel: (id) => this.describeKernel(id),
      ...network,
      mode: opts.network,
      allow: opts.allow,
    });
    client.onBlocked((p) => void this.network.onBlocked(p));
    client.onOutput((p) => {
      const changed = this.model.apply(p);
      if (changed.length) this._onModel.fire(changed);
    });
    client.onStatus((p) => {
      for (const k of [...this.kernels.values(), ...this.extra.values()]) {
        if (k.kernelId === p.kernelId) {
          k.state = p.state;
          k.reason = p.reason;
        }
      }
      this._onKernels.fire();
    });
  }

  get languages(): LanguageCapability[] {
    return this.client.info?.capabilities.languages ?? [];
  }

  /**
   * The cellbox language for a VS Code languageId and file name, if the daemon has one: the
   * language picked for that languageId (pickKernel), else the language of the same id, else one
   * whose fileExtensions fit (an `r` document runs in `jupyter:ir`); see resolveLanguage.
   */
  languageFor(languageId: string, fileName?: string): string | undefined {
    const picked = this.picked.get(languageId);
    if (picked && this.languages.some((l) => l.id === picked && l.available)) return picked;
    return resolveLanguage(this.languages, languageId, fileName);
  }

  /**
   * Makes documents of languageId run in language from now on (the kernel picker: a `.py` file
   * runs in `jupyter:python3` once it was picked for it). Returns whether the language fits such
   * documents (the same language, or one whose fileExtensions fit); one that does not is ignored.
   */
  pickFor(languageId: string, fileName: string | undefined, language: string): boolean {
    const natural = resolveLanguage(this.languages, languageId, fileName);
    const l = this.languages.find((x) => x.id === language);
    if (!l) return false;
    const exts = [fileName ? extensionOf(fileName) : "", LANGUAGE_ID_EXTENSIONS[languageId] ?? ""].filter(Boolean).map((x) => x.toLowerCase());
    if (language !== natural && !l.fileExtensions.some((e) => exts.includes(e.toLowerCase()))) return false;
    if (language === natural) this.picked.delete(languageId);
    else this.picked.set(languageId, language);
    return true;
  }

  /** Whether the kernels of a language answer method (languages[].unsupported). */
  supports(language: string, method: RequestMethod): boolean {
    return supports(this.languages, language, method);
  }

  /** `python`, or `R (Jupyter)` for jupyter:ir. */
  label(language: string): string {
    return languageLabel(this.languages, language);
  }

  /**
   * The variables of a kernel for a variables view: the list, or a message instead (no kernel
   * yet; a kernel whose language cannot list variables, which is not asked; a failed request).
   * Never throws.
   */
  async variables(k: KernelHandle | undefined): Promise<VariablesView> {
    if (!k) return { variables: [], message: "No kernel yet: run code to start one." };
    if (!this.supports(k.language, Methods.KernelVariables)) {
      return { kernel: k, variables: [], unsupported: true, message: unsupportedMessage(this.languages, k.language, Methods.KernelVariables) };
    }
    if (k.state === "dead") return { kernel: k, variables: [], message: `The ${this.label(k.language)} kernel is dead${k.reason ? `: ${k.reason}` : ""}.` };
    try {
      const res = await this.client.request(Methods.KernelVariables, { kernelId: k.kernelId });
      return { kernel: k, variables: res.variables, message: res.variables.length ? undefined : "No variables defined yet." };
    } catch (e) {
      return { kernel: k, variables: [], message: `Cannot list the variables: ${errorMessage(e)}` };
    }
  }

  /** "the python kernel of nb.ipynb", "the python kernel": whose kernel a kernelId is. */
  describeKernel(kernelId: string): string | undefined {
    const owner = this.kernelOwners.get(kernelId);
    const k = this.kernelById(kernelId);
    const kind = k ? `${this.label(k.language)} kernel` : "kernel";
    if (owner) return `the ${kind} of ${owner}`;
    return k ? `the ${kind}` : undefined;
  }

  /** Notes what an execution ran (origins), forgetting the oldest past MAX_ORIGINS. */
  noteOrigin(executionId: string, origin: string) {
    this.origins.set(executionId, origin);
    for (const id of this.origins.keys()) {
      if (this.origins.size <= MAX_ORIGINS) break;
      this.origins.delete(id);
    }
  }

  /** "cell 3 of x.ipynb (execution 3)", else "execution 3 (python)": an execution as the user knows it. */
  runName(r: Pick<ExecutionRecord, "executionId" | "executionCount" | "language">): string {
    const origin = this.origins.get(r.executionId);
    if (!origin) return executionTitle(r);
    return r.executionCount > 0 ? `${origin} (execution ${r.executionCount})` : origin;
  }

  /** Opens the workspace of opts.root (once). */
  async ensureWorkspace(): Promise<WorkspaceInfo | undefined> {
    if (!this.opts.root) return undefined;
    if (!this.workspace) {
      this.workspace = await this.client.request(Methods.WorkspaceOpen, { root: this.opts.root, mode: this.opts.workspaceMode ?? "overlay" });
    }
    return this.workspace;
  }

  /** The kernel for a language, started (in the workspace) on first use. */
  async kernel(language: string, workDoneToken: string = `kernel-start-${++seq}`): Promise<KernelHandle> {
    const k = this.kernels.get(language);
    if (k && k.state !== "dead") return k;
    let p = this.starting.get(language);
    if (!p) {
      p = this.startKernel(language, workDoneToken).finally(() => this.starting.delete(language));
      this.starting.set(language, p);
    }
    return p;
  }

  /**
   * Starts a kernel; register: it becomes the language's kernel for files (notebooks keep their
   * own); interpreter: kernel/start's (a host path of one of initialize's interpreters).
   */
  async startKernel(language: string, workDoneToken?: string, register = true, interpreter?: string): Promise<KernelHandle> {
    const ws = await this.ensureWorkspace();
    const params: KernelStartParams = { language, workspaceId: ws?.workspaceId, sandbox: this.opts.sandbox, ...this.network.startParams(ws?.workspaceId), limits: this.opts.limits, workDoneToken, interpreter };
    const res = await this.client.request(Methods.KernelStart, params);
    const h: KernelHandle = { kernelId: res.kernelId, language: res.language, state: "idle", version: res.languageInfo?.version, interpreter: res.interpreter };
    if (register) this.kernels.set(language, h);
    else this.extra.set(h.kernelId, h);
    this._onKernels.fire();
    return h;
  }

  /** Uses an existing kernel (from kernel/list) for its language: attaches to it. */
  async useKernel(kernelId: string, language: string, state: KernelState = "idle"): Promise<KernelHandle> {
    await this.client.request(Methods.KernelAttach, { kernelId });
    const h: KernelHandle = { kernelId, language, state };
    this.kernels.set(language, h);
    this._onKernels.fire();
    return h;
  }

  /** Runs code of a document in its language's kernel; the model follows its outputs. */
  async run(r: RunRequest, token?: CancellationToken): Promise<RunOutcome> {
    const k = await this.kernel(r.language);
    const id = newExecutionId();
    const ex = this.model.begin({ id, kernelId: k.kernelId, code: r.code, label: r.label });
    if (r.label) this.noteOrigin(id, r.label);
    this._onModel.fire([ex]);
    try {
      const res = await this.client.request(
        Methods.KernelExecute,
        { kernelId: k.kernelId, code: r.code, executionId: id, source: { path: r.path, line: r.firstLine + 1 }, allowStdin: true, timeoutMs: this.opts.timeoutMs, checkpoint: this.checkpointRuns },
        token,
      );
      this.model.finish(id, res);
      this._onModel.fire([ex]);
      let diagnostic: DiagnosticSpec | undefined;
      if (res.error && (res.status === "error" || res.status === "timeout")) {
        diagnostic = diagnosticFor(res.error, r.path, k.language, r.docLines ?? r.code.split("\n"), r.docLines ? r.firstLine : 0);
      }
      return { execution: ex, diagnostic };
    } catch (e) {
      this.model.finish(id, undefined, errorMessage(e));
      if ((e as { code?: number }).code === -32800) ex.status = "interrupted"; // $/cancelRequest interrupted it
      this._onModel.fire([ex]);
      return { execution: ex };
    }
  }

  /**
   * Whether runs ask for an automatic checkpoint first: only in an overlay workspace of the
   * folder (what the checkpoint keeps is the overlay's upper layer, so it costs the files that
   * changed since the one before).
   */
  get checkpointRuns(): true | undefined {
    return this.opts.checkpointRuns !== false && !!this.opts.root && (this.opts.workspaceMode ?? "overlay") === "overlay" ? true : undefined;
  }

  /** The workspace, or an error that says why there is none. */
  async requireWorkspace(): Promise<WorkspaceInfo> {
    const ws = await this.ensureWorkspace();
    if (!ws) throw new Error("cellbox: no workspace (cellbox.workspaceMode is none or no folder is open)");
    return ws;
  }

  /** workspace/executions: what each recent execution of the workspace changed, oldest first (those that changed files). */
  async executions(): Promise<ExecutionRecord[]> {
    const ws = this.workspace ?? (await this.ensureWorkspace());
    if (!ws) return [];
    const res = await this.client.request(Methods.WorkspaceExecutions, { workspaceId: ws.workspaceId });
    // A record may hold only a checkpoint (a run that changed nothing): not worth listing.
    return (res.executions ?? []).filter((r) => r.filesChanged?.length || r.more);
  }

  /** Restores a checkpoint of the workspace (the one before an execution: undoes it). */
  async restore(checkpointId: string): Promise<void> {
    const ws = await this.requireWorkspace();
    await this.client.request(Methods.WorkspaceRestore, { workspaceId: ws.workspaceId, checkpointId });
  }

  /** workspace/exportGit: a commit of the changes on `branch` of the project's repository. */
  async exportGit(branch: string, opts: { message?: string; force?: boolean; paths?: string[] } = {}): Promise<WorkspaceExportGitResult> {
    const ws = await this.requireWorkspace();
    return this.client.request(Methods.WorkspaceExportGit, { workspaceId: ws.workspaceId, branch, ...opts });
  }

  /** workspace/exportPatch: the changes as one patch that `git apply` takes. */
  async exportPatch(paths?: string[]): Promise<{ patch: string; files: number }> {
    const ws = await this.requireWorkspace();
    return this.client.request(Methods.WorkspaceExportPatch, { workspaceId: ws.workspaceId, paths });
  }

  /** workspace/fork: a new workspace that starts with a copy of this one's changes. */
  async fork(name?: string): Promise<WorkspaceInfo> {
    const ws = await this.requireWorkspace();
    return this.client.request(Methods.WorkspaceFork, { workspaceId: ws.workspaceId, name: name || undefined });
  }

  /**
   * Makes another workspace (a fork) this session's: files' kernels start there from now on
   * (the kernels of the workspace before keep running; Pick Kernel lists them).
   */
  useWorkspace(ws: WorkspaceInfo) {
    this.workspace = ws;
    this.kernels.clear();
    this._onKernels.fire();
  }

  /** The kernels of this session, for interrupt/restart/shutdown. */
  kernelById(kernelId: string): KernelHandle | undefined {
    return [...this.kernels.values(), ...this.extra.values()].find((k) => k.kernelId === kernelId);
  }

  async interrupt(language: string) {
    const k = this.kernels.get(language);
    if (k) await this.client.request(Methods.KernelInterrupt, { kernelId: k.kernelId });
  }

  async restart(language: string) {
    const k = this.kernels.get(language);
    if (k) await this.client.request(Methods.KernelRestart, { kernelId: k.kernelId });
  }

  async shutdown(language: string) {
    const k = this.kernels.get(language);
    if (!k) return;
    this.kernels.delete(language);
    this._onKernels.fire();
    await this.client.request(Methods.KernelShutdown, { kernelId: k.kernelId });
  }

  dispose() {
    this._onModel.dispose();
    this._onKernels.dispose();
  }
}
