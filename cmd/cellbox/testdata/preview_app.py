# A web app for the preview tests: plain HTTP and a websocket echo at /ws,
# written with the standard library only (the sandbox has no packages).
# start(port) serves it from a thread and returns the server.
import base64, hashlib, http.server, threading

class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/ws":
            return self._websocket()
        body = ("hello from the sandbox " + self.path).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
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
