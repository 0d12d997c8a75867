// The workbench: what the page's parts share. main.ts builds the layout
// (header, the tree and side panels on the left, documents in tabs in the
// middle, terminals in tabs below) and hands this to each part.
import type { CellboxClient, ExecutionRecord, LanguageCapability, NetworkMode } from "../client/client";
import type { Session } from "./session";
import type { Tabs } from "./tabs";

/** A notebook's kernel, as the side panels and messages name it. */
export interface KernelRef {
  kernelId: string;
  language: string;
  /** The notebook's name ("analysis.ipynb"). */
  title: string;
}

/** What an execution changed, as the changes panel shows it (Files implements it). */
export interface ChangesView {
  /** A line of links to what an execution changed (each opens its diff). */
  filesLine(files: ExecutionRecord["filesChanged"] | undefined, more?: number): HTMLElement;
  /** Restores the checkpoint taken before an execution, after asking; true when restored. */
  undo(t: Pick<ExecutionRecord, "executionId" | "executionCount" | "checkpoint"> & { language?: string }): Promise<boolean>;
  /** Refreshes the changes soon (after a run or a save). */
  schedule(ms?: number): void;
  /** Opens the diff of a changed path (both paths of a rename), else the file. */
  openChange?(path: string): Promise<void>;
}

/** Opens a workspace path in the main area: a notebook, a file editor or a viewer. */
export interface Opener {
  /** Whether this opener takes the path (by its name; .ipynb for notebooks). */
  accepts(path: string): boolean;
  open(path: string): Promise<void>;
}

export interface Workbench {
  client: CellboxClient;
  workspaceId: string;
  /** The project's directory on the host (for titles). */
  root: string;
  languages: LanguageCapability[];
  /** Notebooks, file editors and viewers. */
  docs: Tabs;
  /** Terminals. */
  terms: Tabs;
  /** The left column's panels below the tree: each part appends its own <section>. */
  side: HTMLElement;
  /** The header's tool area (network, packages). */
  tools: HTMLElement;
  /** The bars over the documents (blocked connections). */
  bars: HTMLElement;
  /** What the page keeps across reloads and tabs, per workspace. */
  session: Session;
  /** A short status line in the header (kernel start progress). */
  progress(s: string): void;
  /** network and allow for kernel/start and pty/open: the workspace's live rules. */
  networkParams(): { network?: NetworkMode; allow?: string[] };
  /** Openers, asked in order; the first that accepts a path opens it. */
  openers: Opener[];
  /** Opens a path with the first opener that takes it. */
  openPath(path: string): Promise<void>;
  /** The changes panel (set once it exists). */
  changes?: ChangesView;
  /**
   * The page's kernels: each notebook registers its kernel here (and removes
   * it when it shuts it down), so that panels and messages can say whose a
   * kernel is, and the variables panel follows the active notebook.
   */
  kernels: KernelRegistry;
  /** Asks the user to confirm something that cannot be undone lightly (commit, discard, restart). */
  confirm(message: string, action?: string): Promise<boolean>;
}

/** The kernels the page's notebooks hold, and which notebook is in front. */
export class KernelRegistry {
  private owned = new Map<string, KernelRef>();
  private activeId?: string;
  private listeners: (() => void)[] = [];

  /** A notebook took this kernel (start or re-attach). */
  set(k: KernelRef) {
    this.owned.set(k.kernelId, k);
    this.changed();
  }

  /** A notebook let its kernel go (shutdown, or a change of language). */
  delete(kernelId: string) {
    this.owned.delete(kernelId);
    if (this.activeId === kernelId) this.activeId = undefined;
    this.changed();
  }

  get(kernelId: string): KernelRef | undefined {
    return this.owned.get(kernelId);
  }

  get all(): KernelRef[] {
    return [...this.owned.values()];
  }

  /** The active notebook's kernel (the variables panel shows it). */
  get active(): KernelRef | undefined {
    return this.activeId ? this.owned.get(this.activeId) : undefined;
  }

  setActive(kernelId: string | undefined) {
    if (this.activeId === kernelId) return;
    this.activeId = kernelId;
    this.changed();
  }

  /** Called after any change of the set or of the active kernel. */
  onChange(fn: () => void) {
    this.listeners.push(fn);
  }

  private changed() {
    for (const fn of this.listeners) fn();
  }
}
