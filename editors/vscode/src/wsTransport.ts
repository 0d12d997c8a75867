// A websocket transport for vscode-jsonrpc: one JSON-RPC message per text frame
// (PROTOCOL.md §1), token as `Authorization: Bearer` (the `ws` package can set headers).
import WebSocket from "ws";
import { AbstractMessageReader, AbstractMessageWriter, DataCallback, Disposable, Message } from "vscode-jsonrpc/node";

class WsReader extends AbstractMessageReader {
  private callback?: DataCallback;
  private pending: Message[] = [];
  constructor(private readonly socket: WebSocket) {
    super();
    socket.on("message", (data, isBinary) => {
      if (isBinary) {
        return;
      }
      let msg: Message;
      try {
        msg = JSON.parse(data.toString());
      } catch (e) {
        this.fireError(e);
        return;
      }
      if (this.callback) {
        this.callback(msg);
      } else {
        this.pending.push(msg);
      }
    });
    socket.on("close", () => this.fireClose());
    socket.on("error", (e) => this.fireError(e));
  }
  listen(callback: DataCallback): Disposable {
    this.callback = callback;
    for (const m of this.pending.splice(0)) {
      callback(m);
    }
    return Disposable.create(() => (this.callback = undefined));
  }
}

class WsWriter extends AbstractMessageWriter {
  constructor(private readonly socket: WebSocket) {
    super();
  }
  write(msg: Message): Promise<void> {
    return new Promise((resolve, reject) => {
      this.socket.send(JSON.stringify(msg), (err) => {
        if (err) {
          this.fireError([err, msg, undefined]);
          reject(err);
        } else {
          resolve();
        }
      });
    });
  }
  end(): void {
    this.socket.close();
  }
}

export class WebSocketTransport {
  readonly reader: WsReader;
  readonly writer: WsWriter;
  private constructor(readonly socket: WebSocket) {
    this.reader = new WsReader(socket);
    this.writer = new WsWriter(socket);
  }

  /** Opens url; a `?token=` already in the URL works too. */
  static open(url: string, token?: string): Promise<WebSocketTransport> {
    const headers: Record<string, string> = {};
    if (token) {
      headers.Authorization = `Bearer ${token}`;
    }
    const socket = new WebSocket(url, { headers, maxPayload: 64 << 20 });
    const t = new WebSocketTransport(socket);
    return new Promise((resolve, reject) => {
      socket.once("open", () => resolve(t));
      socket.once("unexpected-response", (_req, res) =>
        reject(new Error(`cellbox websocket ${url}: HTTP ${res.statusCode}${res.statusCode === 401 ? " (wrong or missing token)" : ""}`)),
      );
      socket.once("error", (e) => reject(e));
    });
  }

  close() {
    this.socket.close();
  }
}
