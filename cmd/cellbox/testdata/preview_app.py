# A web app for the preview tests and bench/preview (the same code on both
# sides of the benchmark: in a sandbox behind a preview, and a plain python3
# on the host), written with the standard library only (the sandbox has no
# packages). HTTP/1.1 keep-alive, every response with its Content-Length:
#   /small   1 KiB
#   /close   1 KiB, then the server closes the connection (Connection: close)
#   /big     1 MiB
#   /conns   how many connections the server has accepted
#   /ws      a websocket that echoes each text message back, "echo:" first
#   any other path: "hello from the sandbox PATH"
# TCP_NODELAY on every connection (disable_nagle_algorithm), as a
# production server sets it: python writes a response's head and its body
# apart, and Nagle's algorithm would hold the body until the client's
# delayed ACK (40 ms on Linux).
# start(port) serves it from a thread and returns the server.
import base64, hashlib, http.server, threading

SMALL = b"s" * 1024
BIG = b"b" * (1 << 20)
_conns = 0
_lock = threading.Lock()

class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def setup(self):
        global _conns
        super().setup()
        with _lock:
            _conns += 1

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/ws":
            return self._websocket()
        kind = "application/octet-stream"
        if self.path in ("/small", "/close"):
            body = SMALL
        elif self.path == "/big":
            body = BIG
        elif self.path == "/conns":
            with _lock:
                body = str(_conns).encode()
        else:
            body, kind = ("hello from the sandbox " + self.path).encode(), "text/html; charset=utf-8"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        if self.path == "/close":
            self.send_header("Connection", "close")  # also sets close_connection
        self.end_headers()
        self.wfile.write(body)

    def _websocket(self):
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        f = self.rfile
        while True:
            head = f.read(2)
            if len(head) < 2:
                return
            op, n = head[0] & 15, head[1] & 127
            if n == 126:
                n = int.from_bytes(f.read(2), "big")
            elif n == 127:
                n = int.from_bytes(f.read(8), "big")
            mask = f.read(4)
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(f.read(n)))
            if op == 8:
                return
            out = b"echo:" + data[:100]
            self.wfile.write(bytes([0x81, len(out)]) + out)
            self.wfile.flush()

def start(port, host="127.0.0.1"):
    srv = http.server.ThreadingHTTPServer((host, port), _Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv
