"""cellbox's r and ruby kernels against their peers, in one run.

r: cellbox (`cellbox serve --stdio`, JSON-RPC) against IRkernel (the kernelspec `ir`, driven by
jupyter_client), interleaved: cold start to the first result of `1+1`, and the `1+1` round trip
(p50/p99), with the ratio cellbox/IRkernel; a 100,000-line print (`FLOOD`) in a running cellbox r
kernel against `Rscript -e` printing it to a pipe (its start included). ruby: cellbox's start and round trip next to a bare
`ruby -e 'p 1+1'` (there is no Jupyter kernel for Ruby here).
"""
import argparse
import json
import os
import statistics
import subprocess
import time


FLOOD = "cat(paste0(0:99999, '\\n'), sep = '')"


class Daemon:
    def __init__(self, binary):
        self.p = subprocess.Popen([binary, "serve", "--stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)
        self.n = 0
        self.call("initialize", {"protocolVersion": 1, "clientInfo": {"name": "bench", "version": "1"}})

    def call(self, method, params):
        self.n += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}).encode()
        self.p.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.p.stdin.flush()
        while True:
            length = 0
            while True:
                line = self.p.stdout.readline()
                if line in (b"\r\n", b"\n"):
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            msg = json.loads(self.p.stdout.read(length))
            if msg.get("id") == self.n and "method" not in msg:
                if "error" in msg:
                    raise RuntimeError(msg["error"])
                return msg["result"]

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def cellbox_start(d, lang, code):
    t = time.perf_counter()
    kid = d.call("kernel/start", {"language": lang})["kernelId"]
    d.call("kernel/execute", {"kernelId": kid, "code": code})
    return time.perf_counter() - t, kid


def cellbox_rtt(d, kid, code, n):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        d.call("kernel/execute", {"kernelId": kid, "code": code})
        out.append(time.perf_counter() - t)
    return out


def jupyter_start(name):
    from jupyter_client.manager import start_new_kernel
    t = time.perf_counter()
    km, kc = start_new_kernel(kernel_name=name)
    kc.execute_interactive("1+1", timeout=60, output_hook=lambda m: None)
    return time.perf_counter() - t, km, kc


def jupyter_rtt(kc, n):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        kc.execute_interactive("1+1", timeout=60, output_hook=lambda m: None)
        out.append(time.perf_counter() - t)
    return out


def ms(x):
    return f"{x * 1000:8.1f} ms"


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cellbox", required=True)
    ap.add_argument("-n", type=int, default=5)
    ap.add_argument("--rtt", type=int, default=200)
    ap.add_argument("--flood", type=int, default=3, help="100,000-line prints per side")
    a = ap.parse_args()
    d = Daemon(a.cellbox)
    cb_start, ir_start, rb_start, bare_rb = [], [], [], []
    cb_rtt = ir_rtt = rb_rtt = []
    for i in range(a.n):
        s, kid = cellbox_start(d, "r", "1+1")
        cb_start.append(s)
        if i == a.n - 1:
            cb_rtt = cellbox_rtt(d, kid, "1+1", a.rtt)
        d.call("kernel/shutdown", {"kernelId": kid})
        s, km, kc = jupyter_start("ir")
        ir_start.append(s)
        if i == a.n - 1:
            ir_rtt = jupyter_rtt(kc, a.rtt)
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        s, kid = cellbox_start(d, "ruby", "1+1")
        rb_start.append(s)
        if i == a.n - 1:
            rb_rtt = cellbox_rtt(d, kid, "1+1", a.rtt)
        d.call("kernel/shutdown", {"kernelId": kid})
        t = time.perf_counter()
        subprocess.run(["ruby", "-e", "p 1+1"], stdout=subprocess.DEVNULL, check=True)
        bare_rb.append(time.perf_counter() - t)
    cb_flood, rs_flood = [], []
    kid = d.call("kernel/start", {"language": "r"})["kernelId"]
    for _ in range(a.flood):
        t = time.perf_counter()
        d.call("kernel/execute", {"kernelId": kid, "code": FLOOD})
        cb_flood.append(time.perf_counter() - t)
        t = time.perf_counter()
        out = subprocess.run(["Rscript", "-e", FLOOD], stdout=subprocess.PIPE, check=True).stdout
        rs_flood.append(time.perf_counter() - t)
        if len(out) != 588890:
            raise RuntimeError(f"Rscript printed {len(out)} bytes")
    d.call("kernel/shutdown", {"kernelId": kid})
    d.close()
    med = statistics.median
    print(f"{'':34}{'cellbox':>12}{'peer':>12}{'ratio':>8}")
    print(f"{'r: start to first result (median)':34}{ms(med(cb_start))}{ms(med(ir_start))}  {med(cb_start) / med(ir_start):5.2f}x  (peer: IRkernel)")
    print(f"{'r: 1+1 round trip p50':34}{ms(pct(cb_rtt, .5))}{ms(pct(ir_rtt, .5))}  {pct(cb_rtt, .5) / pct(ir_rtt, .5):5.2f}x")
    print(f"{'r: 1+1 round trip p99':34}{ms(pct(cb_rtt, .99))}{ms(pct(ir_rtt, .99))}  {pct(cb_rtt, .99) / pct(ir_rtt, .99):5.2f}x")
    if cb_flood:
        print(f"{'r: 100,000-line print (median)':34}{ms(med(cb_flood))}{ms(med(rs_flood))}  {med(cb_flood) / med(rs_flood):5.2f}x  (peer: Rscript -e, its start included)")
    print(f"{'ruby: start to first result':34}{ms(med(rb_start))}{ms(med(bare_rb))}  {med(rb_start) / med(bare_rb):5.2f}x  (peer: bare ruby -e 'p 1+1')")
    print(f"{'ruby: 1+1 round trip p50':34}{ms(pct(rb_rtt, .5))}")
    print(f"{'ruby: 1+1 round trip p99':34}{ms(pct(rb_rtt, .99))}")


if __name__ == "__main__":
    main()
