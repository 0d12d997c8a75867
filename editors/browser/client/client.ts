// The cellbox websocket client: JSON-RPC 2.0 over one websocket, one message
// per text frame (PROTOCOL.md §1), with reconnection that re-attaches the
// kernels and terminals it follows so no output shown is lost. It runs in
// browsers and in Node (>= 22, or 20 with --experimental-websocket, or pass
// any WHATWG-compatible WebSocket constructor). See README.md next to it.

import {
  Methods,
  ProtocolVersion,
  type ClientCapabilities,
  type ClientInfo,
  type ErrorData,
  type InitializeResult,
  type KernelOutputParams,
  type NotificationMethod,
  type Notifications,
  type ParamsArg,
  type PtyAttachResult,
  type PtyOutputParams,
  type RequestMethod,
  type RequestParams,
  type RequestResult,
  type ServerNotificationMethod,
  type ServerNotifications,
  type ServerRequestMethod,
  type ServerRequests,
} from "../../protocol/protocol";

export * from "../../protocol/protocol";

/** State of a {@link CellboxClient}'s connection. */
export type ConnectionState = "connecting" | "open" | "reconnecting" | "closed";

/** Options of {@link CellboxClient.connect}. */
export interface ClientOptions {
  /** url of the daemon's websocket endpoint, e.g. ws://127.0.0.1:8765/rpc. */
  url: string;
  /** token the daemon printed; sent as ?token= (browsers cannot set headers on websockets). */
  token: string;
  /** clientInfo sent with initialize. */
  clientInfo?: ClientInfo;
  /** capabilities sent with initialize. */
  capabilities?: ClientCapabilities;
  /** reconnect after the connection drops (default true). */
  reconnect?: boolean;
  /** backoff between reconnection attempts: initialMs (250) doubling up to maxMs (10000), with jitter. */
  backoff?: { initialMs?: number; maxMs?: number };
  /** WebSocket constructor; default globalThis.WebSocket. */
  WebSocket?: WebSocketCtor;
  /** timeoutMs for requests without their own signal (default 0: none). */
  requestTimeoutMs?: number;
}

/** The part of a WHATWG WebSocket the client uses. */
export interface WebSocketLike {
  readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: unknown) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
}
export type WebSocketCtor = new (url: string) => WebSocketLike;

/** RPCError is a JSON-RPC error response (PROTOCOL.md §7). */
export class RPCError extends Error {
  readonly code: number;
  readonly data?: ErrorData;
  constructor(code: number, message: string, data?: ErrorData) {
    super(message);
    this.name = "RPCError";
    this.code = code;
    this.data = data;
  }
}

/**
 * ConnectionLostError rejects the requests in flight when the connection
 * drops: their results are lost (the work itself may have completed; a
 * kernel/execute's output is replayed by the re-attach).
 */
export class ConnectionLostError extends Error {
  constructor(message = "connection to cellbox lost") {
    super(message);
    this.name = "ConnectionLostError";
  }
}

/** Options of one request. */
export interface RequestOptions {
  /** signal cancels the request with $/cancelRequest (it then rejects with -32800 from the server). */
  signal?: AbortSignal;
}

type Handler = (params: unknown) => void;
type RequestHandler = (params: unknown) => unknown;

/** A handler of the server-to-client request M: its result, or a promise of it. */
export type ServerRequestHandler<M extends ServerRequestMethod> = (
  params: ServerRequests[M]["params"],
) => ServerRequests[M]["result"] | Promise<ServerRequests[M]["result"]>;

/**
 * A JSON-RPC message as received (it is checked before use): a response
 * (id, and result or error), a request (id and method) or a notification.
 */
interface Message {
  id?: number | string | null;
  method?: unknown;
  params?: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: ErrorData };
}

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
  method: string;
}

/**
 * CellboxClient is one logical connection to the daemon that survives
 * dropped websockets: it reconnects with backoff, initializes again, and
 * re-attaches every kernel and terminal it follows from the seq after the
 * last notification it delivered, dropping duplicates, so a handler sees
 * each kernel/output and pty/output once and in order.
 */
export class CellboxClient {
  readonly options: ClientOptions;
  /** initializeResult of the current connection. */
  initializeResult?: InitializeResult;
  private ws?: WebSocketLike;
  private nextId = 1;
  private pending = new Map<number, Pending>();
  private handlers = new Map<string, Set<Handler>>();
  private requestHandlers = new Map<string, RequestHandler>();
  private stateHandlers = new Set<(s: ConnectionState, detail?: string) => void>();
  private reconnectedHandlers = new Set<() => void | Promise<void>>();
  private kernels = new Map<string, number>(); // kernelId -> last seq delivered
  private ptys = new Map<string, number>(); // ptyId -> last seq delivered
  private _state: ConnectionState = "connecting";
  private closedByUser = false;
  private attempt = 0;
  private timer?: ReturnType<typeof setTimeout>;
  private abandon?: (code: number, reason: string) => void;

  private constructor(options: ClientOptions) {
    this.options = options;
  }

  /** connect opens the websocket and runs initialize/initialized; it rejects if the first attempt fails. */
  static async connect(options: ClientOptions): Promise<CellboxClient> {
    const c = new CellboxClient(options);
    await c.open();
    return c;
  }

  /** state of the connection. */
  get state(): ConnectionState {
    return this._state;
  }

  /** onState is called on every state change; it returns an unsubscribe function. */
  onState(fn: (s: ConnectionState, detail?: string) => void): () => void {
    this.stateHandlers.add(fn);
    return () => this.stateHandlers.delete(fn);
  }

  /**
   * onReconnected is called after a reconnect, once the kernels and
   * terminals are re-attached (watches are per connection: re-create them here).
   */
  onReconnected(fn: () => void | Promise<void>): () => void {
    this.reconnectedHandlers.add(fn);
    return () => this.reconnectedHandlers.delete(fn);
  }

  /** on subscribes to a server notification (e.g. "kernel/output"); it returns an unsubscribe function. */
  on<M extends ServerNotificationMethod>(method: M, fn: (params: ServerNotifications[M]) => void): () => void {
    let set = this.handlers.get(method);
    if (!set) this.handlers.set(method, (set = new Set()));
    const h = fn as Handler;
    set.add(h);
    return () => set!.delete(h);
  }

  /** handle answers a server-to-client request (e.g. "kernel/inputRequest") with fn's result. */
  handle<M extends ServerRequestMethod>(method: M, fn: ServerRequestHandler<M>): void {
    this.requestHandlers.set(method, fn as RequestHandler);
  }

  /**
   * request sends a request, typed by method (protocol.ts's Requests; params
   * may be left out when every field is optional), and resolves with its
   * result, or rejects with an RPCError or ConnectionLostError.
   */
  request<M extends RequestMethod>(method: M, ...args: [...ParamsArg<RequestParams<M>>, opts?: RequestOptions]): Promise<RequestResult<M>>;
  request(method: string, params?: unknown, opts: RequestOptions = {}): Promise<unknown> {
    if (this._state !== "open" || !this.ws) {
      return Promise.reject(new ConnectionLostError(`cannot send ${method}: connection is ${this._state}`));
    }
    return this.rawRequest(method, params, opts);
  }

  /** notify sends a notification, typed by method. It is dropped (returns false) while disconnected. */
  notify<M extends NotificationMethod>(method: M, ...args: ParamsArg<Notifications[M]>): boolean;
  notify(method: string, params?: unknown): boolean {
    if (this._state !== "open" || !this.ws) return false;
    this.send(params === undefined ? { jsonrpc: "2.0", method } : { jsonrpc: "2.0", method, params });
    return true;
  }

  /**
   * followKernel makes the client deliver the kernel's kernel/output and
   * re-attach it after a reconnect. The connection that started a kernel
   * is attached already: follow it with attach=false.
   */
  async followKernel(kernelId: string, attach = true, fromSeq?: number): Promise<void> {
    if (!this.kernels.has(kernelId)) this.kernels.set(kernelId, fromSeq !== undefined ? fromSeq - 1 : 0);
    if (attach) await this.request(Methods.KernelAttach, fromSeq !== undefined ? { kernelId, fromSeq } : { kernelId });
  }

  /** unfollowKernel stops re-attaching a kernel (after kernel/shutdown or detach). */
  unfollowKernel(kernelId: string): void {
    this.kernels.delete(kernelId);
  }

  /** followPty is followKernel for terminals; pty/attach's result is returned when attach is true. */
  async followPty(ptyId: string, attach = true, fromSeq?: number): Promise<PtyAttachResult | undefined> {
    if (!this.ptys.has(ptyId)) this.ptys.set(ptyId, fromSeq !== undefined ? fromSeq - 1 : 0);
    if (attach) return this.request(Methods.PtyAttach, fromSeq !== undefined ? { ptyId, fromSeq } : { ptyId });
    return undefined;
  }

  /** unfollowPty stops re-attaching a terminal. */
  unfollowPty(ptyId: string): void {
    this.ptys.delete(ptyId);
  }

  /** following lists the kernels and terminals re-attached after a reconnect. */
  following(): { kernels: string[]; ptys: string[] } {
    return { kernels: [...this.kernels.keys()], ptys: [...this.ptys.keys()] };
  }

  /** lastSeq is the seq of the last kernel/output (or pty/output) delivered for id, 0 if none. */
  lastSeq(id: string): number {
    return this.kernels.get(id) ?? this.ptys.get(id) ?? 0;
  }

  /**
   * drop closes the websocket as a network failure would: the client
   * reconnects. For tests and for a "reconnect now" button.
   */
  drop(): void {
    this.abandon?.(4000, "dropped by client");
  }

  /** close sends shutdown and exit when connected, then closes for good (no reconnect). */
  async close(opts: { shutdown?: boolean } = {}): Promise<void> {
    if (opts.shutdown && this._state === "open") {
      try {
        await this.request(Methods.Shutdown);
        this.notify(Methods.Exit);
      } catch {
        // closing anyway
      }
    }
    this.closedByUser = true;
    if (this.timer) clearTimeout(this.timer);
    this.ws?.close(1000, "client closed");
    this.setState("closed");
    this.failPending(new ConnectionLostError("client closed"));
  }

  // --- internals ---

  private setState(s: ConnectionState, detail?: string) {
    if (this._state === s && detail === undefined) return;
    this._state = s;
    for (const fn of this.stateHandlers) {
      try {
        fn(s, detail);
      } catch (e) {
        console.error("cellbox: state handler", e);
      }
    }
  }

  private wsURL(): string {
    const u = new URL(this.options.url);
    u.searchParams.set("token", this.options.token);
    return u.toString();
  }

  // open makes one connection attempt and initializes it.
  private open(): Promise<void> {
    const Ctor: WebSocketCtor | undefined = this.options.WebSocket ?? (globalThis as { WebSocket?: WebSocketCtor }).WebSocket;
    if (!Ctor) return Promise.reject(new Error("no WebSocket implementation: pass options.WebSocket"));
    return new Promise<void>((resolve, reject) => {
      let opened = false;
      let settled = false;
      const ws = new Ctor(this.wsURL());
      this.ws = ws;
      ws.onopen = () => {
        opened = true;
        this.setState(this.attempt > 0 ? "reconnecting" : "connecting", "initializing");
        this.initialize().then(
          () => {
            settled = true;
            resolve();
          },
          (e) => {
            settled = true;
            reject(e);
            ws.close(4001, "initialize failed");
          },
        );
      };
      ws.onmessage = (ev) => this.receive(ev.data);
      // A failed handshake (401, 403, refused) fires error and, in
      // browsers, close 1006; some WebSocket implementations fire only
      // error. An error after open is followed by close; a timer covers
      // implementations that skip it.
      ws.onerror = () => {
        if (!opened) lost(1006, "handshake failed");
        else setTimeout(() => lost(1006, "connection error"), 2000);
      };
      ws.onclose = (ev) => lost(ev.code, ev.reason);
      // drop() does not wait for the closing handshake (the daemon may
      // answer it late): the connection is lost now, as on a network failure.
      this.abandon = (code, reason) => lost(code, reason);
      const lost = (code: number, reason: string) => {
        if (this.ws !== ws) return;
        this.ws = undefined;
        try {
          ws.close(code >= 4000 ? code : 1000, reason);
        } catch {
          // closed already
        }
        this.failPending(new ConnectionLostError(`connection to cellbox lost (${code}${reason ? ": " + reason : ""})`));
        if (!settled) {
          settled = true;
          reject(new ConnectionLostError(opened ? `connection closed during initialize (${code} ${reason})` : `cannot connect to ${this.options.url} (${code}${reason ? ": " + reason : ""}; wrong token or daemon not running?)`));
        }
        if (this.closedByUser) return;
        if (this._state === "open" || this.attempt > 0) this.scheduleReconnect(`${code}${reason ? " " + reason : ""}`);
      };
    });
  }

  private async initialize(): Promise<void> {
    const res = await this.rawRequest<InitializeResult>(Methods.Initialize, {
      protocolVersion: ProtocolVersion,
      clientInfo: this.options.clientInfo ?? { name: "cellbox-browser-client" },
      capabilities: this.options.capabilities ?? {},
    });
    this.initializeResult = res;
    this.send({ jsonrpc: "2.0", method: Methods.Initialized, params: {} });
    const reconnect = this.attempt > 0;
    if (reconnect) {
      // Re-attach from the seq after the last one delivered; what the
      // buffer no longer holds is gone, which attach reports for ptys.
      for (const [kernelId, last] of this.kernels) {
        try {
          await this.rawRequest(Methods.KernelAttach, { kernelId, fromSeq: last + 1 });
        } catch (e) {
          if (e instanceof RPCError) this.kernels.delete(kernelId); // gone (culled or shut down)
          else throw e;
        }
      }
      for (const [ptyId, last] of this.ptys) {
        try {
          await this.rawRequest(Methods.PtyAttach, { ptyId, fromSeq: last + 1 });
        } catch (e) {
          if (e instanceof RPCError) this.ptys.delete(ptyId);
          else throw e;
        }
      }
    }
    this.attempt = 0;
    this.setState("open");
    if (reconnect) {
      for (const fn of this.reconnectedHandlers) {
        try {
          await fn();
        } catch (e) {
          console.error("cellbox: reconnected handler", e);
        }
      }
    }
  }

  private scheduleReconnect(why: string) {
    if (this.options.reconnect === false) {
      this.setState("closed", why);
      return;
    }
    const initial = this.options.backoff?.initialMs ?? 250;
    const max = this.options.backoff?.maxMs ?? 10_000;
    const base = Math.min(max, initial * 2 ** this.attempt);
    const delay = Math.round(base / 2 + (Math.random() * base) / 2);
    this.attempt++;
    this.setState("reconnecting", `${why}; retrying in ${delay} ms`);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.closedByUser) return;
      this.open().catch(() => {
        // onclose has scheduled the next attempt
      });
    }, delay);
  }

  private rawRequest<R>(method: string, params: unknown, opts: RequestOptions = {}): Promise<R> {
    const id = this.nextId++;
    return new Promise<R>((resolve, reject) => {
      if (!this.ws) return reject(new ConnectionLostError(`cannot send ${method}: not connected`));
      let timeout: ReturnType<typeof setTimeout> | undefined;
      const done = () => {
        if (timeout) clearTimeout(timeout);
        opts.signal?.removeEventListener("abort", onAbort);
      };
      const onAbort = () => this.notify(Methods.CancelRequest, { id });
      this.pending.set(id, {
        method,
        resolve: (v) => {
          done();
          resolve(v as R); // the result of method, as the daemon sent it
        },
        reject: (e) => {
          done();
          reject(e);
        },
      });
      if (opts.signal) {
        if (opts.signal.aborted) queueMicrotask(onAbort);
        else opts.signal.addEventListener("abort", onAbort, { once: true });
      } else if (this.options.requestTimeoutMs) {
        timeout = setTimeout(() => onAbort(), this.options.requestTimeoutMs);
      }
      this.send(params === undefined ? { jsonrpc: "2.0", id, method } : { jsonrpc: "2.0", id, method, params });
    });
  }

  private send(msg: unknown) {
    this.ws?.send(JSON.stringify(msg));
  }

  private failPending(err: Error) {
    const p = [...this.pending.values()];
    this.pending.clear();
    for (const x of p) x.reject(err);
  }

  private receive(data: unknown) {
    let msg: Message | null;
    try {
      msg = JSON.parse(typeof data === "string" ? data : String(data));
    } catch {
      console.error("cellbox: unparsable message", data);
      return;
    }
    if (msg && typeof msg === "object" && "id" in msg && !("method" in msg)) {
      const id = msg.id as number; // a response's id is one of our requests'
      const p = this.pending.get(id);
      if (!p) return;
      this.pending.delete(id);
      if (msg.error) p.reject(new RPCError(msg.error.code, msg.error.message, msg.error.data));
      else p.resolve(msg.result);
      return;
    }
    if (msg && typeof msg.method === "string") {
      if ("id" in msg) {
        void this.answer(msg.id, msg.method, msg.params);
        return;
      }
      this.dispatch(msg.method, msg.params);
    }
  }

  private async answer(id: unknown, method: string, params: unknown) {
    const fn = this.requestHandlers.get(method);
    if (!fn) {
      this.send({ jsonrpc: "2.0", id, error: { code: -32601, message: `method not found: ${method}` } });
      return;
    }
    try {
      const result = await fn(params);
      this.send({ jsonrpc: "2.0", id, result: result ?? null });
    } catch (e) {
      this.send({ jsonrpc: "2.0", id, error: { code: -32603, message: String((e as Error)?.message ?? e) } });
    }
  }

  private dispatch(method: string, params: unknown) {
    // Sequence bookkeeping: drop replays already delivered.
    if (method === Methods.KernelOutput) {
      const p = params as KernelOutputParams;
      const last = this.kernels.get(p.kernelId);
      if (last !== undefined) {
        if (p.seq <= last) return;
        this.kernels.set(p.kernelId, p.seq);
      }
    } else if (method === Methods.PtyOutput) {
      const p = params as PtyOutputParams;
      const last = this.ptys.get(p.ptyId);
      if (last !== undefined) {
        if (p.seq <= last) return;
        this.ptys.set(p.ptyId, p.seq);
      }
    }
    const set = this.handlers.get(method);
    if (!set) return;
    for (const fn of set) {
      try {
        fn(params);
      } catch (e) {
        console.error(`cellbox: ${method} handler`, e);
      }
    }
  }
}

/**
 * tokenFromPage reads the token once: from ?token= of the page's URL (then
 * kept in sessionStorage and removed from the address bar, so the URL
 * shown, bookmarked or shared carries no token), else from sessionStorage.
 */
export function tokenFromPage(loc: Location = location, storage: Storage | undefined = globalThis.sessionStorage): string | undefined {
  const u = new URL(loc.href);
  const t = u.searchParams.get("token");
  if (t) {
    try {
      storage?.setItem("cellbox.token", t);
    } catch {
      // storage disabled: memory only
    }
    u.searchParams.delete("token");
    history.replaceState(history.state, "", u.pathname + (u.search || "") + u.hash);
    return t;
  }
  try {
    return storage?.getItem("cellbox.token") ?? undefined;
  } catch {
    return undefined;
  }
}
