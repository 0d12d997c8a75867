// "cellbox: New Sandboxed Terminal": a vscode.Pseudoterminal backed by pty/* (PROTOCOL.md §5).
import * as vscode from "vscode";
import type { CellboxClient } from "./client";
import { errorMessage } from "./client";
import { Methods, type NetworkMode } from "../../protocol/protocol";

export interface PtyTerminalOptions {
  workspaceId?: string;
  kernelId?: string;
  command?: string[];
  cwd?: string;
  /** The sandbox's network (§9): the workspace's mode and rules (Session.network.startParams). */
  network?: NetworkMode;
  allow?: string[];
}

/** Acknowledge output every this many chunks (pty/ack flow control). */
const ACK_EVERY = 16;

export class CellboxPseudoterminal implements vscode.Pseudoterminal {
  private readonly writeEmitter = new vscode.EventEmitter<string>();
  private readonly closeEmitter = new vscode.EventEmitter<number | void>();
  readonly onDidWrite = this.writeEmitter.event;
  readonly onDidClose = this.closeEmitter.event;
  ptyId?: string;
  private subs: { dispose(): void }[] = [];
  private dims?: vscode.TerminalDimensions;
  private pendingInput: string[] = [];
  private lastAck = 0;
  private exited = false;
  /** Resolves once pty/open answered (or failed). */
  readonly ready: Promise<void>;
  private resolveReady!: () => void;

  constructor(private readonly client: CellboxClient, private readonly opts: PtyTerminalOptions = {}) {
    this.ready = new Promise((r) => (this.resolveReady = r));
  }

  async open(initialDimensions: vscode.TerminalDimensions | undefined): Promise<void> {
    this.dims = initialDimensions;
    this.subs.push(
      this.client.onPtyOutput((p) => {
        if (p.ptyId !== this.ptyId) return;
        this.writeEmitter.fire(p.data);
        if (p.seq - this.lastAck >= ACK_EVERY) {
          this.lastAck = p.seq;
          this.client.request(Methods.PtyAck, { ptyId: p.ptyId, seq: p.seq }).catch(() => undefined);
        }
      }),
      this.client.onPtyExit((p) => {
        if (p.ptyId !== this.ptyId) return;
        this.exited = true;
        this.writeEmitter.fire(`\r\n[process exited with ${p.signal ?? p.exitCode}]\r\n`);
        this.closeEmitter.fire(p.exitCode);
      }),
    );
    try {
      const res = await this.client.request(Methods.PtyOpen, {
        workspaceId: this.opts.workspaceId,
        kernelId: this.opts.kernelId,
        command: this.opts.command,
        cwd: this.opts.cwd,
        network: this.opts.network,
        allow: this.opts.allow,
        cols: initialDimensions?.columns ?? 80,
        rows: initialDimensions?.rows ?? 24,
      });
      this.ptyId = res.ptyId;
      for (const d of this.pendingInput.splice(0)) {
        await this.client.request(Methods.PtyWrite, { ptyId: res.ptyId, data: d });
      }
    } catch (e) {
      this.writeEmitter.fire(`cellbox: cannot open a terminal: ${errorMessage(e)}\r\n`);
      this.closeEmitter.fire(1);
    } finally {
      this.resolveReady();
    }
  }

  handleInput(data: string): void {
    if (!this.ptyId) {
      this.pendingInput.push(data);
      return;
    }
    this.client.request(Methods.PtyWrite, { ptyId: this.ptyId, data }).catch((e) => this.writeEmitter.fire(`\r\ncellbox: ${errorMessage(e)}\r\n`));
  }

  setDimensions(d: vscode.TerminalDimensions): void {
    this.dims = d;
    if (this.ptyId) this.client.request(Methods.PtyResize, { ptyId: this.ptyId, cols: d.columns, rows: d.rows }).catch(() => undefined);
  }

  close(): void {
    for (const s of this.subs.splice(0)) s.dispose();
    if (this.ptyId && !this.exited) this.client.request(Methods.PtyClose, { ptyId: this.ptyId }).catch(() => undefined);
  }
}
