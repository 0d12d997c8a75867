# The Jupyter side of issue 5's kernel benchmark (bench/kernel.sh). The Go
# program (main.go) embeds this file and runs it with /usr/bin/python3 -c, so
# that Debian's python3-jupyter-client and python3-ipykernel are the ones
# measured; it sends one JSON command a line on stdin and reads one JSON
# answer a line on stdout, so the two sides run interleaved in one run.
#
# Every figure is taken as a Jupyter client sees it, through jupyter_client's
# KernelManager and BlockingKernelClient (kernel_name python3, ipykernel, or
# the command's "kernel"),
# timed with time.perf_counter_ns() in this process:
#   cold       KernelManager + start_kernel + start_channels, to the first
#              kernel_info reply, then (after kernel_info "nudges" until
#              iopub is connected, as Jupyter's clients do) to the `1+1`
#              execute_result ("2") with its execute_reply and idle status
#   rtt        execute `1+1`, wait for the idle status on iopub (and the
#              execute_reply on shell); n times, each one's time
#   rttraw     the same over plain blocking pyzmq sockets with the kernel's
#              Session, no asyncio client: ipykernel's own share
#   flood      execute the print loop, collect the iopub streams until idle
#   interrupt  execute `while True: pass`, wait for the busy status (or 50
#              ms) and settleMs more, km.interrupt_kernel(), time to the
#              execute_reply (a KeyboardInterrupt error)
import json
import os
import queue
import subprocess
import sys
import time

# The answers go to our own copy of stdout; nothing else may write there.
_out = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)

os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")

import zmq  # noqa: E402
from jupyter_client import KernelManager  # noqa: E402

now = time.perf_counter_ns
kernels = {}  # name -> (km, kc)
LOST_AFTER = 5  # seconds after an interrupt that a loop still running counts as a lost interrupt
raw = {}  # name -> (ctx, shell, iopub, session)


def ms(ns):
    return ns / 1e6


def until_idle(kc, msg_id, deadline, collect=None):
    """Reads iopub until the idle status of msg_id; collect(msg) sees each
    message of that parent."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no idle status for " + msg_id)
        try:
            msg = kc.get_iopub_msg(timeout=left)
        except queue.Empty:
            raise TimeoutError("no idle status for " + msg_id) from None
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if collect is not None:
            collect(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return


def shell_reply(kc, msg_id, deadline):
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no shell reply for " + msg_id)
        try:
            msg = kc.get_shell_msg(timeout=left)
        except queue.Empty:
            raise TimeoutError("no shell reply for " + msg_id) from None
        if msg["parent_header"].get("msg_id") == msg_id:
            return msg


def execute(kc, code, timeout=60, collect=None):
    deadline = time.monotonic() + timeout
    msg_id = kc.execute(code)
    until_idle(kc, msg_id, deadline, collect)
    return shell_reply(kc, msg_id, deadline)


def connect_iopub(kc, deadline):
    """iopub is a SUB socket: until its subscription reaches the kernel, what
    the kernel publishes is lost. Like Jupyter's own clients (the server's
    "nudge"), send kernel_info until an iopub message arrives. Returns how
    many it sent."""
    nudges = 0
    while True:
        try:
            kc.get_iopub_msg(timeout=0.02)
            return nudges
        except queue.Empty:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError("iopub never connected")
        nudges += 1
        shell_reply(kc, kc.kernel_info(), deadline)


def launch(kernel="python3"):
    km = KernelManager(kernel_name=kernel)
    # The kernel's stderr is ours, which the Go side shows when something fails.
    km.start_kernel(stdout=subprocess.DEVNULL)
    kc = km.client()
    kc.start_channels()
    return km, kc


def op_cold(cmd):
    if cmd["k"] in kernels:  # left by a failed run
        op_shutdown(cmd)
    t0 = now()
    km, kc = launch(cmd.get("kernel", "python3"))
    kernels[cmd["k"]] = (km, kc)
    deadline = time.monotonic() + 60
    msg_id = kc.kernel_info()
    try:
        info = shell_reply(kc, msg_id, deadline)
    except TimeoutError as e:
        alive = km.is_alive()
        op_shutdown(cmd)
        raise TimeoutError("%s (the kernel is %s)" % (e, "alive" if alive else "dead")) from None
    t1 = now()
    try:
        nudges = connect_iopub(kc, deadline)
    except TimeoutError:
        op_shutdown(cmd)
        raise
    t_iopub = now()
    results = []

    def collect(msg):
        if msg["msg_type"] == "execute_result":
            results.append(msg["content"]["data"].get("text/plain"))

    try:
        reply = execute(kc, "1+1", collect=collect)
    except TimeoutError:
        op_shutdown(cmd)
        raise
    t2 = now()
    if results != ["2"] or reply["content"]["status"] != "ok":
        return {"error": "1+1 gave %r (%s)" % (results, reply["content"]["status"])}
    li = info["content"].get("language_info", {})
    return {"kernelInfoMs": ms(t1 - t0), "iopubMs": ms(t_iopub - t0), "nudges": nudges, "firstResultMs": ms(t2 - t0), "pid": km.provisioner.pid,
            "version": li.get("version", ""), "implementation": info["content"].get("implementation_version", "")}


def op_start(cmd):
    km, kc = launch(cmd.get("kernel", "python3"))
    kernels[cmd["k"]] = (km, kc)
    kc.wait_for_ready(timeout=60)
    connect_iopub(kc, time.monotonic() + 60)
    execute(kc, "1+1")
    return {"pid": km.provisioner.pid}


def op_rtt(cmd):
    km, kc = kernels[cmd["k"]]
    out = []
    for _ in range(cmd["n"]):
        t0 = now()
        reply = execute(kc, "1+1", timeout=30)
        out.append(ms(now() - t0))
        if reply["content"]["status"] != "ok":
            return {"error": "1+1: " + reply["content"]["status"]}
    return {"ms": out}


def raw_sockets(name):
    """Plain blocking pyzmq sockets to the kernel's shell and iopub, signed
    with the kernel's own Session."""
    if name in raw:
        return raw[name]
    km, kc = kernels[name]
    info = km.get_connection_info(session=True)
    ctx = zmq.Context()
    shell = ctx.socket(zmq.DEALER)
    shell.connect("%s://%s:%d" % (info["transport"], info["ip"], info["shell_port"]))
    iopub = ctx.socket(zmq.SUB)
    iopub.setsockopt(zmq.SUBSCRIBE, b"")
    iopub.connect("%s://%s:%d" % (info["transport"], info["ip"], info["iopub_port"]))
    session = info["session"]
    raw[name] = (ctx, shell, iopub, session)
    time.sleep(0.3)  # let the SUB socket join before the first message
    return raw[name]


def raw_execute(s, code):
    ctx, shell, iopub, session = s
    msg = session.send(shell, "execute_request", {"code": code, "silent": False, "store_history": True,
                                                  "user_expressions": {}, "allow_stdin": False, "stop_on_error": True})
    msg_id = msg["header"]["msg_id"]
    idle = reply = None
    while idle is None or reply is None:
        if idle is None:
            _, parts = session.feed_identities(iopub.recv_multipart())
            m = session.deserialize(parts)
            if (m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "status"
                    and m["content"]["execution_state"] == "idle"):
                idle = m
        if reply is None and (idle is not None or shell.poll(0)):
            _, parts = session.feed_identities(shell.recv_multipart())
            m = session.deserialize(parts)
            if m["parent_header"].get("msg_id") == msg_id:
                reply = m
    return reply


def op_rttraw(cmd):
    s = raw_sockets(cmd["k"])
    out = []
    for _ in range(cmd["n"]):
        t0 = now()
        reply = raw_execute(s, "1+1")
        out.append(ms(now() - t0))
        if reply["content"]["status"] != "ok":
            return {"error": "1+1: " + reply["content"]["status"]}
    # The client's own iopub socket got every message too: drain it, so that
    # its full queue does not drop the next execution's messages.
    km, kc = kernels[cmd["k"]]
    while True:
        try:
            kc.get_iopub_msg(timeout=0.05)
        except Exception:
            break
    return {"ms": out}


def op_flood(cmd):
    km, kc = kernels[cmd["k"]]
    parts = []
    errs = []
    msgs = [0]

    def collect(msg):
        if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
            parts.append(msg["content"]["text"])
            msgs[0] += 1
        elif msg["msg_type"] == "stream":
            errs.append(msg["content"]["text"])

    t0 = now()
    reply = execute(kc, cmd["code"], collect=collect)
    t1 = now()
    text = "".join(parts)
    return {"ms": ms(t1 - t0), "bytes": len(text.encode()), "lines": text.count("\n"),
            "exact": text == cmd["expect"], "messages": msgs[0], "status": reply["content"]["status"],
            "stderr": "".join(errs)}


def op_interrupt(cmd):
    km, kc = kernels[cmd["k"]]
    deadline = time.monotonic() + 60
    t_req = now()
    # stop_on_error=False: else ipykernel aborts what arrives just after the
    # KeyboardInterrupt, such as the next interrupt run's request.
    msg_id = kc.execute("while True: pass", stop_on_error=False)
    busy = False
    end = time.monotonic() + 0.05
    while not busy and time.monotonic() < end:
        try:
            msg = kc.get_iopub_msg(timeout=max(end - time.monotonic(), 0))
        except Exception:
            break
        busy = (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status"
                and msg["content"]["execution_state"] == "busy")
    t_busy = now()
    time.sleep(cmd["settleMs"] / 1e3)
    t0 = now()
    km.interrupt_kernel()
    t_sig = now()
    try:
        reply = shell_reply(kc, msg_id, time.monotonic() + LOST_AFTER)
    except TimeoutError:
        # Lost: interrupt again until the loop stops, and say so.
        for _ in range(10):
            km.interrupt_kernel()
            try:
                shell_reply(kc, msg_id, time.monotonic() + 1)
                until_idle(kc, msg_id, deadline)
                return {"error": "interrupt lost: `while True: pass` still ran %ds after the interrupt (busy seen: %s); "
                                 "another ended it" % (LOST_AFTER, busy)}
            except TimeoutError:
                pass
        return {"error": "interrupt lost: `while True: pass` still runs after 10 more interrupts"}
    t1 = now()
    until_idle(kc, msg_id, deadline)
    c = reply["content"]
    return {"ms": ms(t1 - t0), "signalMs": ms(t_sig - t0), "busySeen": busy, "busyMs": ms(t_busy - t_req),
            "status": c["status"], "ename": c.get("ename", "")}


def op_shutdown(cmd):
    name = cmd["k"]
    if name in raw:
        ctx, shell, iopub, _ = raw.pop(name)
        shell.close(0)
        iopub.close(0)
        ctx.term()
    km, kc = kernels.pop(name)
    kc.stop_channels()
    km.shutdown_kernel(now=True)
    return {}


def op_versions(cmd):
    import ipykernel
    import jupyter_client
    return {"python": sys.version.split()[0], "ipykernel": ipykernel.__version__,
            "jupyter_client": jupyter_client.__version__, "zmq": zmq.zmq_version(),
            "pyzmq": zmq.__version__}


ops = {"cold": op_cold, "start": op_start, "rtt": op_rtt, "rttraw": op_rttraw, "flood": op_flood,
       "interrupt": op_interrupt, "shutdown": op_shutdown, "versions": op_versions}


def main():
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "quit":
            break
        try:
            ans = ops[cmd["op"]](cmd)
        except Exception as e:  # reported, and the Go side decides
            ans = {"error": "%s: %s" % (type(e).__name__, e)}
        _out.write(json.dumps(ans) + "\n")
    for name in list(kernels):
        try:
            op_shutdown({"k": name})
        except Exception:
            pass


main()
