// The workbench: what the page's parts share. main.ts builds the layout
// (header, the tree and side panels on the left, documents in tabs in the
// middle, terminals in tabs below) and hands this to each part.
import type { CellboxClient, LanguageCapability, NetworkMode } from "../client/client";
import type { Session } from "./session";
import type { Tabs } from "./tabs";

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
  /** Asks the user to confirm something that cannot be undone lightly (commit, discard, restart). */
  confirm(message: string, action?: string): Promise<boolean>;
}
