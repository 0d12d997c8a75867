// The cellbox client: a vscode-jsonrpc MessageConnection to the daemon, over the stdio of a
// spawned `cellbox connect` (or any command), or over a websocket with a token. No `vscode`
// import here: the tests run this file against the real daemon under plain Node.
import { spawn, ChildProcess } from "node:child_process";
import {
  createMessageConnection,
  MessageConnection,
  StreamMessageReader,
  StreamMessageWriter,
  CancellationToken,
  Disposable,
  Emitter,
  Event,
  ResponseError,
} from "vscode-jsonrpc/node";
import {
  Methods,
  ProtocolVersion,
  type InitializeResult,
  type KernelOutputParams,
  type KernelStatusParams,
  type KernelInputRequestParams,
  type KernelInputReply,
  type ProgressParams,
  type PtyOutputParams,
  type PtyExitParams,
  type FsDidChangeParams,
  type NetworkBlockedParams,
  type WorkspacePortsParams,
  type RequestMethod,
  type RequestParams,
  type RequestResult,
  type NotificationMethod,
  type Notifications,
  type ParamsArg,
} from "../../protocol/protocol";
import { WebSocketTransport } from "./wsTransport";

export interface ConnectOptions {
  /** The cellbox executable (setting cellbox.path); spawned as `PATH connect`. */
  path?: string;
  /** Arguments instead of ["connect"] (tests use ["serve", "--stdio"]). */
  args?: string[];
  /** A websocket URL (setting cellbox.connection.url): ws://HOST:PORT/rpc. */
  url?: string;
  /** The server token for url (setting cellbox.connection.token). */
  token?: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  clientName?: string;
  clientVersion?: string;
  /** Receives the daemon's stderr lines and client log lines. */
  log?: (line: string) => void;
}

/** The error a request failed with, with cellbox's `data.errorCode` and `detail`. */
export function errorMessage(err: unknown): string {
  if (err instanceof ResponseError) {
    const d = err.data as { detail?: string } | undefined;
    return d?.detail && !err.message.includes(d.detail) ? `${err.message}: ${d.detail}` : err.message;
  }
  return err instanceof Error ? err.message : String(err);
}

export class CellboxClient implements Disposable {
  readonly connection: MessageConnection;
  private child?: ChildProcess;
  private ws?: WebSocketTransport;
  private closed = false;
  info?: InitializeResult;

  private readonly _onOutput = new Emitter<KernelOutputParams>();
  private readonly _onStatus = new Emitter<KernelStatusParams>();
  private readonly _onProgress = new Emitter<ProgressParams>();
  private readonly _onPtyOutput = new Emitter<PtyOutputParams>();
  private readonly _onPtyExit = new Emitter<PtyExitParams>();
  private readonly _onFsChange = new Emitter<FsDidChangeParams>();
  private readonly _onBlocked = new Emitter<NetworkBlockedParams>();
  private readonly _onPorts = new Emitter<WorkspacePortsParams>();
  private readonly _onClose = new Emitter<void>();
  readonly onOutput: Event<KernelOutputParams> = this._onOutput.event;
  readonly onStatus: Event<KernelStatusParams> = this._onStatus.event;
  readonly onProgress: Event<ProgressParams> = this._onProgress.event;
  readonly onPtyOutput: Event<PtyOutputParams> = this._onPtyOutput.event;
  readonly onPtyExit: Event<PtyExitParams> = this._onPtyExit.event;
  readonly onFsChange: Event<FsDidChangeParams> = this._onFsChange.event;
  /** network/blocked (PROTOCOL.md §9): a connection a program of a workspace tried and the daemon refused. */
  readonly onBlocked: Event<NetworkBlockedParams> = this._onBlocked.event;
  /** workspace/ports (PROTOCOL.md §11): the ports servers listen on in a workspace's sandbox, when that set changes. */
  readonly onPorts: Event<WorkspacePortsParams> = this._onPorts.event;
  readonly onClose: Event<void> = this._onClose.event;

  /** Answers kernel/inputRequest (VS Code: an input box). Absent: the read sees end of file. */
  inputHandler?: (p: KernelInputRequestParams, token: CancellationToken) => Promise<string | undefined>;

  private constructor(connection: MessageConnection, private readonly opts: ConnectOptions) {
    this.connection = connection;
    connection.onNotification(Methods.KernelOutput, (p: KernelOutputParams) => this._onOutput.fire(p));
    connection.onNotification(Methods.KernelStatus, (p: KernelStatusParams) => this._onStatus.fire(p));
    connection.onNotification(Methods.Progress, (p: ProgressParams) => this._onProgress.fire(p));
    connection.onNotification(Methods.PtyOutput, (p: PtyOutputParams) => this._onPtyOutput.fire(p));
    connection.onNotification(Methods.PtyExit, (p: PtyExitParams) => this._onPtyExit.fire(p));
    connection.onNotification(Methods.FsDidChange, (p: FsDidChangeParams) => this._onFsChange.fire(p));
    connection.onNotification(Methods.NetworkBlocked, (p: NetworkBlockedParams) => this._onBlocked.fire(p));
    connection.onNotification(Methods.WorkspacePorts, (p: WorkspacePortsParams) => this._onPorts.fire(p));
    connection.onRequest(Methods.KernelInputRequest, async (p: KernelInputRequestParams, token): Promise<KernelInputReply> => {
      if (!this.inputHandler) {
        return { value: "" };
      }
      const v = await this.inputHandler(p, token);
      return { value: v ?? "" };
    });
    connection.onClose(() => this.markClosed());
    connection.onError(([e]) => this.log(`connection error: ${e.message}`));
  }

  private log(line: string) {
    this.opts.log?.(line);
  }

  private markClosed() {
    if (!this.closed) {
      this.closed = true;
      this._onClose.fire();
    }
  }

  get isClosed() {
    return this.closed;
  }

  /** Spawns `cellbox connect` (or connects to opts.url), then initializes. */
  static async connect(opts: ConnectOptions): Promise<CellboxClient> {
    let client: CellboxClient;
    if (opts.url) {
      const ws = await WebSocketTransport.open(opts.url, opts.token);
      const conn = createMessageConnection(ws.reader, ws.writer);
      client = new CellboxClient(conn, opts);
      client.ws = ws;
    } else {
      const child = spawn(opts.path || "cellbox", opts.args ?? ["connect"], {
        stdio: ["pipe", "pipe", "pipe"],
        env: opts.env ?? process.env,
        cwd: opts.cwd,
      });
      const spawned = new Promise<void>((resolve, reject) => {
        child.once("spawn", () => resolve());
        child.once("error", (e) => reject(new Error(`cannot start ${opts.path || "cellbox"}: ${e.message}`)));
      });
      await spawned;
      const conn = createMessageConnection(new StreamMessageReader(child.stdout!), new StreamMessageWriter(child.stdin!));
      client = new CellboxClient(conn, opts);
      client.child = child;
      child.stdin!.on("error", () => client.markClosed());
      let buf = "";
      child.stderr!.setEncoding("utf8");
      child.stderr!.on("data", (d: string) => {
        buf += d;
        let i;
        while ((i = buf.indexOf("\n")) >= 0) {
          opts.log?.(buf.slice(0, i));
          buf = buf.slice(i + 1);
        }
      });
      child.on("exit", (code, signal) => {
        opts.log?.(`cellbox exited (${signal ?? code})`);
        client.markClosed();
      });
    }
    client.connection.listen();
    client.info = await client.connection.sendRequest<InitializeResult>(Methods.Initialize, {
      protocolVersion: ProtocolVersion,
      clientInfo: { name: opts.clientName ?? "cellbox-vscode", version: opts.clientVersion ?? "0.1.0" },
      capabilities: { inputRequest: true, positionEncoding: "utf-16" },
    });
    void client.notify(Methods.Initialized, {});
    return client;
  }

  /**
   * Sends a request, typed by method (protocol.ts's Requests): its params may be left out when
   * every field is optional. Cancelling the token sends $/cancelRequest (kernel/execute: an
   * interrupt).
   */
  request<M extends RequestMethod>(method: M, ...args: [...ParamsArg<RequestParams<M>>, token?: CancellationToken]): Promise<RequestResult<M>>;
  request(method: string, params?: unknown, token?: CancellationToken): Promise<unknown> {
    if (this.closed) {
      return Promise.reject(new Error("cellbox: the connection is closed"));
    }
    return token ? this.connection.sendRequest(method, params, token) : this.connection.sendRequest(method, params);
  }

  /** Sends a notification, typed by method (protocol.ts's Notifications). */
  notify<M extends NotificationMethod>(method: M, ...args: ParamsArg<Notifications[M]>): Promise<void>;
  notify(method: string, params?: unknown): Promise<void> {
    return params === undefined ? this.connection.sendNotification(method) : this.connection.sendNotification(method, params);
  }

  /**
   * Closes the transport without `shutdown`: the daemon keeps this connection's kernels and
   * terminals running (PROTOCOL.md §2), so a later `cellbox connect` can attach to them.
   */
  close(): void {
    this.closed = true;
    this.connection.dispose();
    this.ws?.close();
    if (this.child && this.child.exitCode === null) {
      this.child.stdin?.end();
      const c = this.child;
      const t = setTimeout(() => c.kill("SIGTERM"), 2000);
      c.once("exit", () => clearTimeout(t));
    }
  }

  /** shutdown + exit (this connection's kernels and terminals stop), then ends the child / socket. */
  async dispose(): Promise<void> {
    if (!this.closed) {
      try {
        await Promise.race([this.connection.sendRequest(Methods.Shutdown), new Promise((r) => setTimeout(r, 3000))]);
        await this.notify(Methods.Exit);
      } catch {
        // already gone
      }
    }
    this.close();
  }
}
