// The xterm.js terminal on pty/*: input through pty/write (in order, one
// request at a time, batching keystrokes typed meanwhile), resize through
// pty/resize, output acknowledged with pty/ack once xterm has rendered it
// (flow control: the daemon stops reading a terminal that runs ahead).
//
// Terminals lives in the workbench's terminal tabs: "+" opens another
// terminal (a new pty next to the others, never instead of one); closing a
// tab closes its pty; a shell that exits says so in its tab and offers
// restart. The open terminals are kept in the session (ptyId and the seq of
// the last output rendered), so a reload re-attaches them with their
// scrollback instead of opening new ones.
import { Terminal, type ITheme } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import { ErrorCodes, Methods, RPCError, type CellboxClient, type NetworkMode, type PtyExitParams, type PtyOutputParams } from "../client/client";
import { el } from "./dom";
import type { Workbench } from "./workbench";

/** What a terminal tab tells its owner. */
export interface TerminalEvents {
  /** Output up to seq was rendered (for the session). */
  rendered?(seq: number): void;
  /** The program ended (or the terminal is gone), or it runs again after restart. */
  state?(exited: boolean): void;
}

/** The most pty/output a terminal keeps aside while its pty/open is answered. */
const maxEarly = 256;

export class TerminalPanel {
  ptyId?: string;
  /** The seq of the last pty/output xterm has rendered. */
  seq = 0;
  /** How the program ended, once it has. */
  exited?: PtyExitParams;
  readonly term: Terminal;
  private fit = new FitAddon();
  private inbox = "";
  private writing = false;
  private acked = 0;
  private written = 0;
  private ackTimer?: ReturnType<typeof setTimeout>;
  private sizeTimer?: ReturnType<typeof setTimeout>;
  private sent = { cols: 0, rows: 0 };
  private host: HTMLElement;
  private bar: HTMLElement;
  private barText: HTMLElement;
  // While pty/open is in flight: pty/output of terminals not yet known (the
  // first output of a new terminal may come before the answer naming it).
  private early?: PtyOutputParams[];
  private off: (() => void)[] = [];
  private resize: ResizeObserver;
  private disposed = false;

  constructor(
    private client: CellboxClient,
    private workspaceId: string,
    root: HTMLElement,
    /** network and allow for pty/open: the workspace's live rules (NetworkPanel.startParams). */
    private networkParams: () => { network?: NetworkMode; allow?: string[] } = () => ({}),
    private events: TerminalEvents = {},
  ) {
    this.host = el("div", { class: "xterm-host" });
    this.barText = el("span", { class: "term-exit-text" });
    const restart = el("button", { class: "term-restart", title: "start a new shell in this tab" }, "restart");
    restart.onclick = () => void this.restart();
    this.bar = el("div", { class: "term-exit", role: "status", hidden: "" }, this.barText, restart);
    root.append(this.bar, this.host);
    this.term = new Terminal({ fontSize: 13, scrollback: 5000, cursorBlink: true, fontFamily: "ui-monospace, Menlo, Consolas, monospace", theme: terminalTheme() });
    this.term.loadAddon(this.fit);
    this.term.open(this.host);
    this.term.onData((d) => this.input(d));
    this.term.onResize(() => this.sendSize());
    this.resize = new ResizeObserver(() => this.fitNow());
    this.resize.observe(this.host);
    this.off.push(
      client.on(Methods.PtyOutput, (p: PtyOutputParams) => {
        if (p.ptyId === this.ptyId) this.output(p);
        else if (this.early && this.early.length < maxEarly) this.early.push(p);
      }),
      client.on(Methods.PtyExit, (p: PtyExitParams) => {
        if (p.ptyId !== this.ptyId) return;
        client.unfollowPty(p.ptyId);
        this.ended(p, `[exited with code ${p.exitCode}${p.signal ? `, ${p.signal}` : ""}]`, `The shell exited with code ${p.exitCode}${p.signal ? ` (${p.signal})` : ""}.`);
      }),
    );
  }

  /** Takes the page's colours again (the system switched between light and dark). */
  applyTheme() {
    this.term.options.theme = terminalTheme();
  }

  // sendSize tells the pty the terminal's size, once per burst of resizes.
  private sendSize() {
    if (this.sizeTimer) clearTimeout(this.sizeTimer);
    this.sizeTimer = setTimeout(() => {
      this.sizeTimer = undefined;
      const { cols, rows } = this.term;
      // A hidden tab has no size of its own: it tells its size when shown.
      if (!this.ptyId || this.exited || !this.host.clientWidth || (cols === this.sent.cols && rows === this.sent.rows)) return;
      this.sent = { cols, rows };
      void this.client.request(Methods.PtyResize, { ptyId: this.ptyId, cols, rows }).catch(() => {});
    }, 50);
  }

  /** Fits xterm to its box (when the tab shows: a hidden one has no size). */
  fitNow() {
    try {
      if (this.host.clientWidth > 0 && this.host.clientHeight > 0) this.fit.fit();
    } catch {
      // not laid out yet
    }
  }

  focus() {
    this.term.focus();
  }

  /** Opens a new terminal (a pty of its own) in this panel. */
  async open() {
    this.fitNow();
    this.sent = { cols: this.term.cols, rows: this.term.rows };
    this.early = [];
    let ptyId: string;
    try {
      const r = await this.client.request(Methods.PtyOpen, { workspaceId: this.workspaceId, ...this.sent, ...this.networkParams(), env: { TERM: "xterm-256color" } });
      ptyId = r.ptyId;
    } catch (e) {
      this.early = undefined;
      this.ended(undefined, `[cannot open a terminal: ${(e as Error).message}]`, `Cannot open a terminal: ${(e as Error).message}`);
      throw e;
    }
    const early = this.early.filter((p) => p.ptyId === ptyId).sort((a, b) => a.seq - b.seq);
    this.early = undefined;
    this.ptyId = ptyId;
    this.setRunning();
    // The client drops what it delivered already after a reconnect: it
    // starts from the last seq shown here.
    const last = early.length ? early[early.length - 1].seq : 0;
    await this.client.followPty(ptyId, false, last + 1);
    if (this.disposed) return;
    for (const p of early) this.output(p);
    this.sendSize(); // in case it changed while opening
  }

  /**
   * Re-attaches a terminal of an earlier page (a reload): its kept
   * scrollback is replayed from fromSeq (1: all of it, for an empty
   * xterm), each chunk once. False when the daemon no longer has it.
   */
  async attach(ptyId: string, fromSeq = 1): Promise<boolean> {
    this.ptyId = ptyId;
    this.setRunning();
    try {
      const r = await this.client.followPty(ptyId, true, fromSeq);
      if (r?.dropped) this.term.write(`\x1b[2m[the output before this was dropped from the terminal's scrollback]\x1b[0m\r\n`);
      this.fitNow();
      this.sendSize();
      return true;
    } catch (e) {
      this.client.unfollowPty(ptyId);
      this.ptyId = undefined;
      if (e instanceof RPCError && e.code === ErrorCodes.NotFound) return false;
      this.ended(undefined, `[cannot re-attach the terminal: ${(e as Error).message}]`, `Cannot re-attach the terminal: ${(e as Error).message}`);
      return true;
    }
  }

  /** A new shell in this tab, after the last one ended. */
  async restart() {
    const old = this.ptyId;
    this.ptyId = undefined;
    if (old) {
      this.client.unfollowPty(old);
      await this.client.request(Methods.PtyClose, { ptyId: old }).catch(() => {}); // forget the ended one
    }
    this.term.reset();
    this.seq = this.acked = this.written = 0;
    await this.open();
  }

  /** Closes the terminal: its pty (the program and everything it started) and the xterm. */
  async close() {
    const id = this.ptyId;
    this.dispose();
    if (id) {
      this.client.unfollowPty(id);
      await this.client.request(Methods.PtyClose, { ptyId: id }).catch(() => {});
    }
  }

  /** Lets the xterm and the handlers go; the pty runs on. */
  dispose() {
    if (this.disposed) return;
    this.disposed = true;
    for (const f of this.off) f();
    this.resize.disconnect();
    if (this.ackTimer) clearTimeout(this.ackTimer);
    if (this.sizeTimer) clearTimeout(this.sizeTimer);
    this.term.dispose();
  }

  /** The terminal went away without a pty/exit (gone after a reconnect). */
  lost() {
    if (!this.ptyId || this.exited) return;
    this.ended(undefined, "[the terminal is gone]", "The terminal is gone (the daemon closed it).");
  }

  private output(p: PtyOutputParams) {
    if (this.disposed) return;
    this.term.write(p.data, () => {
      this.seq = Math.max(this.seq, p.seq);
      this.events.rendered?.(this.seq);
      this.ack(p.ptyId, p.seq);
    });
  }

  private setRunning() {
    this.exited = undefined;
    this.bar.hidden = true;
    this.events.state?.(false);
  }

  private ended(p: PtyExitParams | undefined, line: string, text: string) {
    this.exited = p ?? { ptyId: this.ptyId ?? "", exitCode: -1 };
    // The line, and no cursor: nothing reads what is typed now.
    if (!this.disposed) this.term.write(`\r\n\x1b[2m${line}\x1b[0m\r\n\x1b[?25l`);
    this.barText.textContent = text;
    this.bar.hidden = false;
    this.events.state?.(true);
  }

  private input(d: string) {
    this.inbox += d;
    if (!this.writing) void this.flush();
  }

  private async flush() {
    this.writing = true;
    while (this.inbox && this.ptyId && !this.exited) {
      const data = this.inbox;
      this.inbox = "";
      try {
        await this.client.request(Methods.PtyWrite, { ptyId: this.ptyId, data });
      } catch {
        // lost with the connection: keystrokes typed while offline are dropped
      }
    }
    this.inbox = "";
    this.writing = false;
  }

  private ack(ptyId: string, seq: number) {
    this.written = Math.max(this.written, seq);
    if (this.ackTimer) return;
    this.ackTimer = setTimeout(() => {
      this.ackTimer = undefined;
      if (ptyId !== this.ptyId || this.written <= this.acked || this.exited) return;
      const seq = this.written;
      void this.client.request(Methods.PtyAck, { ptyId, seq }).then(() => (this.acked = Math.max(this.acked, seq)), () => {});
    }, 20);
  }
}

/** A terminal the session keeps: re-attached after a reload. */
interface SavedTerminal {
  ptyId: string;
  /** Its number in the tab's title ("Terminal 2"). */
  n: number;
  /** The seq of the last output rendered. */
  seq: number;
  /** The tab in front. */
  active?: boolean;
}

interface Open {
  n: number;
  tabId: string;
  panel: TerminalPanel;
}

const dark = window.matchMedia?.("(prefers-color-scheme: dark)");

/** The terminal tabs of the workbench. */
export class Terminals {
  private open: Open[] = [];
  private saveTimer?: ReturnType<typeof setTimeout>;

  constructor(private wb: Workbench) {
    const add = el("button", { class: "new-terminal", title: "New terminal", "aria-label": "New terminal" }, "+");
    add.onclick = () => void this.create().catch(() => {});
    wb.terms.tools.append(add);
    dark?.addEventListener("change", () => {
      for (const o of this.open) o.panel.applyTheme();
    });
    wb.client.onReconnected(() => {
      const following = new Set(wb.client.following().ptys);
      for (const o of this.open) if (o.panel.ptyId && !following.has(o.panel.ptyId)) o.panel.lost();
      this.save();
    });
    window.addEventListener("pagehide", () => this.saveNow());
  }

  /** The panels of the open terminal tabs, in tab order. */
  get panels(): TerminalPanel[] {
    return this.wb.terms.all.map((t) => this.open.find((o) => o.tabId === t.id)?.panel).filter((p): p is TerminalPanel => !!p);
  }

  /** The terminal in front. */
  get current(): TerminalPanel | undefined {
    const id = this.wb.terms.current?.id;
    return this.open.find((o) => o.tabId === id)?.panel;
  }

  /**
   * Re-attaches the terminals of the session (those the daemon no longer
   * has are dropped from it); on a first visit, or when none of them is
   * left, opens one. A page whose terminals were all closed opens none.
   */
  async restore() {
    const saved = this.wb.session.get<SavedTerminal[] | undefined>("terminals", undefined);
    if (!saved) {
      await this.create();
      return;
    }
    const seen = new Set<number>();
    const valid = (Array.isArray(saved) ? saved : []).filter((s) => s && typeof s.ptyId === "string" && Number.isInteger(s.n) && s.n > 0 && !seen.has(s.n) && seen.add(s.n));
    await Promise.all(
      valid.map(async (s) => {
        const o = this.tab(s.n);
        if (await o.panel.attach(s.ptyId, 1)) return;
        // Gone (closed elsewhere, or ended and forgotten): not in the session any more.
        o.panel.dispose();
        this.forget(o);
        await this.wb.terms.close(o.tabId, false);
      }),
    );
    const front = this.open.find((o) => o.n === valid.find((s) => s.active)?.n) ?? this.open.find((o) => o.panel === this.panels[0]);
    if (front) this.wb.terms.activate(front.tabId);
    // Terminals were open and none is left (the daemon restarted): a fresh one.
    else if (valid.length) await this.create();
    this.save();
  }

  /** Opens a new terminal in a tab of its own ("Terminal N"). */
  async create(): Promise<TerminalPanel> {
    const n = Math.max(0, ...this.open.map((o) => o.n)) + 1;
    const o = this.tab(n);
    await o.panel.open();
    this.save();
    return o.panel;
  }

  private tab(n: number): Open {
    const root = el("section", { class: "term-panel", "data-term": String(n) });
    const tabId = `term:${n}`;
    const title = `Terminal ${n}`;
    const o: Open = { n, tabId, panel: undefined as unknown as TerminalPanel };
    o.panel = new TerminalPanel(this.wb.client, this.wb.workspaceId, root, () => this.wb.networkParams(), {
      rendered: () => this.save(500),
      state: (exited) => {
        this.wb.terms.update(tabId, { title: exited ? `${title} (exited)` : title });
        this.save();
      },
    });
    this.open.push(o);
    this.wb.terms.open({
      id: tabId,
      title,
      body: root,
      close: async () => {
        this.forget(o);
        await o.panel.close();
        this.save();
        return true;
      },
      activate: () => {
        this.save();
        requestAnimationFrame(() => {
          o.panel.fitNow();
          // Not away from an editor the user is typing in (a tab opened by the page).
          const f = document.activeElement;
          if (!f || f === document.body || this.wb.terms.root.contains(f)) o.panel.focus();
        });
      },
    });
    return o;
  }

  private forget(o: Open) {
    this.open = this.open.filter((x) => x !== o);
  }

  /** Writes the open terminals to the session (soon: output comes in bursts). */
  private save(ms = 0) {
    if (this.saveTimer) {
      if (ms > 0) return;
      clearTimeout(this.saveTimer);
    }
    this.saveTimer = setTimeout(() => this.saveNow(), ms);
  }

  private saveNow() {
    if (this.saveTimer) clearTimeout(this.saveTimer);
    this.saveTimer = undefined;
    const list: SavedTerminal[] = [];
    const front = this.wb.terms.current?.id;
    for (const o of this.open) if (o.panel.ptyId) list.push({ ptyId: o.panel.ptyId, n: o.n, seq: o.panel.seq, ...(o.tabId === front ? { active: true } : {}) });
    this.wb.session.set("terminals", list);
  }
}

const ansi = ["black", "red", "green", "yellow", "blue", "magenta", "cyan", "white", "brightBlack", "brightRed", "brightGreen", "brightYellow", "brightBlue", "brightMagenta", "brightCyan", "brightWhite"] as const;

/** xterm's colours from the page's (style.css: --term-bg, --term-fg, ...). */
function terminalTheme(): ITheme {
  const css = getComputedStyle(document.documentElement);
  const v = (name: string) => css.getPropertyValue(name).trim() || undefined;
  const theme: ITheme = {
    background: v("--term-bg") ?? "#1e1e1e",
    foreground: v("--term-fg"),
    cursor: v("--term-cursor"),
    cursorAccent: v("--term-bg"),
    selectionBackground: v("--term-selection"),
  };
  // A light background needs darker ANSI colours than xterm's (made for dark ones).
  const palette = v("--term-palette")?.split(/\s+/);
  if (palette?.length === ansi.length) ansi.forEach((name, i) => (theme[name] = palette[i]));
  return theme;
}
