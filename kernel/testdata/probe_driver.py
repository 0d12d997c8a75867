# A driver for the manager's own tests (kernel/manager_test.go): it speaks
# drivers/README.md but runs "commands" instead of code, so each test can
# make the exact interleaving of fd 1/2 bytes and events it needs.
import json, os, signal, sys, time

req = os.fdopen(os.dup(3), "rb", buffering=0)
ev = os.fdopen(os.dup(4), "wb", buffering=0)
os.close(3)
os.close(4)
busy = False
written = {1: 0, 2: 0}


def write(fd, b):
    os.write(fd, b)
    written[fd] += len(b)


def on_int(signum, frame):
    if busy:
        raise KeyboardInterrupt


signal.signal(signal.SIGINT, on_int)


def send(**o):
    o["stdoutBytes"], o["stderrBytes"] = written[1], written[2]
    ev.write((json.dumps(o) + "\n").encode())


def lines():
    buf = b""
    while True:
        try:
            chunk = req.read(65536)
        except KeyboardInterrupt:
            continue
        if not chunk:
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            yield json.loads(line)


time.sleep(float(os.environ.get("PROBE_START_DELAY", "0")))
send(ev="ready", version="probe-1", pid=os.getpid())
it = lines()
for r in it:
    if r["op"] != "execute":
        send(ev="reply", id=r["id"], result={"matches": ["probe"], "cursorStart": 0, "cursorEnd": r.get("cursorPos", 0)})
        continue
    busy = True
    status, err = "ok", None
    try:
        for cmd in r["code"].split(";"):
            name, _, arg = cmd.strip().partition(" ")
            if name == "out":
                write(1, arg.encode() + b"\n")
            elif name == "rawout":  # as C code would: not counted
                os.write(1, arg.encode() + b"\n")
            elif name == "bytes":  # any bytes, in hex
                write(1, bytes.fromhex(arg))
            elif name == "err":
                write(2, arg.encode() + b"\n")
            elif name == "display":
                send(ev="display", id=r["id"], data={"text/plain": arg})
            elif name == "flood":
                n = int(arg)
                write(1, b"".join(b"%d\n" % i for i in range(n)))
            elif name == "sleep":
                time.sleep(float(arg))
            elif name == "ignoreint":
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                while True:
                    pass
            elif name == "exit":
                os._exit(int(arg))
            elif name == "input":
                send(ev="input", id=r["id"], prompt=arg, password=False)
                ans = next(it)
                write(1, ("eof" if ans.get("eof") else "value " + ans.get("value", "")).encode() + b"\n")
            elif name == "fail":
                status, err = "error", {"ename": "Probe", "evalue": arg, "traceback": ["probe: " + arg]}
                send(ev="error", id=r["id"], **err)
    except KeyboardInterrupt:
        status, err = "interrupted", {"ename": "KeyboardInterrupt", "evalue": "", "traceback": []}
    busy = False
    send(ev="done", id=r["id"], status=status, error=err, cpuMs=0.5, peakMemoryBytes=1234)
