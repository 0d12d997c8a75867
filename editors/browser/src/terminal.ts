// The xterm.js terminal on pty/*: input through pty/write (in order, one
// request at a time, batching keystrokes typed meanwhile), resize through
// pty/resize, output acknowledged with pty/ack once xterm has rendered it
// (flow control: the daemon stops reading a terminal that runs ahead).
import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import { Methods, type CellboxClient, type NetworkMode, type PtyExitParams, type PtyOutputParams } from "../client/client";
import { el } from "./dom";

export class TerminalPanel {
  ptyId?: string;
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

  constructor(
    private client: CellboxClient,
    private workspaceId: string,
    root: HTMLElement,
    /** network and allow for pty/open: the workspace's live rules (NetworkPanel.startParams). */
    private networkParams: () => { network?: NetworkMode; allow?: string[] } = () => ({}),
  ) {
    this.host = el("div", { class: "xterm-host" });
    this.bar = el("div", { class: "panel-title" }, el("span", {}, "Terminal"), el("span", { class: "spacer" }));
    const again = el("button", { class: "new-terminal" }, "New terminal");
    again.onclick = () => void this.open();
    this.bar.append(again);
    root.append(this.bar, this.host);
    this.term = new Terminal({ fontSize: 13, scrollback: 5000, cursorBlink: true, fontFamily: "ui-monospace, Menlo, Consolas, monospace", theme: { background: "#1e1e1e" } });
    this.term.loadAddon(this.fit);
    this.term.open(this.host);
    this.term.onData((d) => this.input(d));
    this.term.onResize(() => this.sendSize());
    new ResizeObserver(() => this.fitNow()).observe(this.host);
    client.on(Methods.PtyOutput, (p: PtyOutputParams) => {
      if (p.ptyId !== this.ptyId) return;
      this.term.write(p.data, () => this.ack(p.ptyId, p.seq));
    });
    client.on(Methods.PtyExit, (p: PtyExitParams) => {
      if (p.ptyId !== this.ptyId) return;
      this.term.write(`\r\n\x1b[2m[exited with code ${p.exitCode}${p.signal ? `, ${p.signal}` : ""}]\x1b[0m\r\n`);
      client.unfollowPty(p.ptyId);
      this.ptyId = undefined;
    });
  }

  // sendSize tells the pty the terminal's size, once per burst of resizes.
  private sendSize() {
    if (this.sizeTimer) clearTimeout(this.sizeTimer);
    this.sizeTimer = setTimeout(() => {
      this.sizeTimer = undefined;
      const { cols, rows } = this.term;
      if (!this.ptyId || (cols === this.sent.cols && rows === this.sent.rows)) return;
      this.sent = { cols, rows };
      void this.client.request(Methods.PtyResize, { ptyId: this.ptyId, cols, rows }).catch(() => {});
    }, 50);
  }

  private fitNow() {
    try {
      if (this.host.clientWidth > 0 && this.host.clientHeight > 0) this.fit.fit();
    } catch {
      // not laid out yet
    }
  }

  async open() {
    if (this.ptyId) {
      const old = this.ptyId;
      this.client.unfollowPty(old);
      this.ptyId = undefined;
      await this.client.request(Methods.PtyClose, { ptyId: old }).catch(() => {});
    }
    this.fitNow();
    this.term.reset();
    this.acked = this.written = 0;
    this.sent = { cols: this.term.cols, rows: this.term.rows };
    const r = await this.client.request(Methods.PtyOpen, { workspaceId: this.workspaceId, ...this.sent, ...this.networkParams(), env: { TERM: "xterm-256color" } });
    this.ptyId = r.ptyId;
    await this.client.followPty(r.ptyId, false);
    this.sendSize(); // in case it changed while opening
  }

  private input(d: string) {
    this.inbox += d;
    if (!this.writing) void this.flush();
  }

  private async flush() {
    this.writing = true;
    while (this.inbox && this.ptyId) {
      const data = this.inbox;
      this.inbox = "";
      try {
        await this.client.request(Methods.PtyWrite, { ptyId: this.ptyId, data });
      } catch {
        // lost with the connection: keystrokes typed while offline are dropped
      }
    }
    this.writing = false;
  }

  private ack(ptyId: string, seq: number) {
    this.written = Math.max(this.written, seq);
    if (this.ackTimer) return;
    this.ackTimer = setTimeout(() => {
      this.ackTimer = undefined;
      if (ptyId !== this.ptyId || this.written <= this.acked) return;
      const seq = this.written;
      void this.client.request(Methods.PtyAck, { ptyId, seq }).then(() => (this.acked = Math.max(this.acked, seq)), () => {});
    }, 20);
  }
}
