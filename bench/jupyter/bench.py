# bench/jupyter.sh's program: the cellbox-python Jupyter kernel (the
# kernelspec `cellbox jupyter install --language python` writes, which runs
# `cellbox jupyter-kernel`) side by side with ipykernel (the kernelspec
# python3), both driven through jupyter_client as a Jupyter client drives a
# kernel, in one run, interleaved in a new random order each iteration.
#
# Run by Debian's /usr/bin/python3, with python3-jupyter-client and
# python3-ipykernel. Everything of the run (Jupyter's data, config and
# runtime dirs, IPython's, the daemon's state and runtime dirs, the project
# the kernels start in) is in a temporary directory, removed at the end; the
# daemon the first cellbox kernel starts (as `cellbox connect` would) is
# stopped at the end.
#
# Figures, each timed in this process with time.perf_counter_ns():
#   start   KernelManager(kernel_name) + start_kernel + client() +
#           start_channels + wait_for_ready: the kernel answers kernel_info
#           with iopub connected; also the moment wait_for_ready saw that
#           (before its final drain of iopub, which waits 200 ms for a
#           message that does not come, on either side). The daemon runs
#           already (a user's daemon is long-lived); the very first cellbox
#           start, which starts the daemon too, is printed apart.
#   rtt     execute `1+1` to its idle status on iopub and its execute_reply
#           (the result checked), on one kernel of each side; also over
#           plain blocking pyzmq sockets (no jupyter_client), the kernels'
#           own share.
#   flood   execute `for i in range(100000): print(i)` to idle, every line
#           checked, with the number of stream messages and the time to the
#           first one, and the CPU time the processes spent on it.
# Over plain pyzmq the round trips of kernel_info are taken too: cellbox-python
# answers it in its own process, without the daemon.
# With --probe (bench/jupyter/probe, built by bench/jupyter.sh), the same
# three are also taken, interleaved, the way `cellbox jupyter-kernel` takes
# them from the daemon (its websocket, cellbox's protocol), without ZeroMQ:
# what is left of cellbox-python's figures is its process, its ZeroMQ
# sockets and Jupyter's messages.
import argparse
import glob
import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

now = time.perf_counter_ns

FLOOD_LINES = 100000
FLOOD_CODE = "for i in range(100000): print(i)"
FLOOD_TEXT = "".join("%d\n" % i for i in range(FLOOD_LINES))
CELLBOX = "cellbox-python"
IPYKERNEL = "python3"
PROBE = "probe"


def log(*a):
    print("jupyter-bench:", *a, file=sys.stderr, flush=True)


def ms(ns):
    return ns / 1e6


# --- statistics ------------------------------------------------------------

def quantile(sorted_ms, q):
    """Nearest-rank q-quantile, as bench/kernel's."""
    if not sorted_ms:
        return None
    i = int(len(sorted_ms) * q + 0.999999) - 1
    return sorted_ms[min(max(i, 0), len(sorted_ms) - 1)]


class Series:
    def __init__(self, name):
        self.name = name
        self.ms = []

    def add(self, x):
        self.ms.append(x)

    def p(self, q):
        return quantile(sorted(self.ms), q)

    def row(self):
        s = sorted(self.ms)
        if not s:
            return "  %-66s %5d" % (self.name, 0)
        return "  %-66s %5d %10s %10s %10s %10s %10s %10s" % (
            self.name, len(s), fmt(quantile(s, .5)), fmt(quantile(s, .9)), fmt(quantile(s, .99)),
            fmt(s[0]), fmt(sum(s) / len(s)), fmt(s[-1]))


def fmt(x):
    if x is None:
        return "-"
    if x < 10:
        return "%.2f ms" % x
    if x < 1000:
        return "%.1f ms" % x
    return "%.0f ms" % x


# --- talking to a kernel through jupyter_client -----------------------------

class Kernel:
    """A kernel started by jupyter_client's KernelManager, and its client."""

    def __init__(self, name, project, logfile):
        from jupyter_client import KernelManager
        self.name = name
        self.marks = {"kernel_info": 0}
        t0 = now()
        self.km = KernelManager(kernel_name=name)
        # Both start in the project: a cellbox kernel runs in the overlay
        # workspace of its directory, as Jupyter starts kernels in the
        # notebook's.
        self.km.start_kernel(cwd=project, stdout=subprocess.DEVNULL, stderr=logfile)
        t_launched = now()
        kc = self.kc = self.km.client()
        kc.start_channels()
        # Mark the moment wait_for_ready has its kernel_info reply with iopub
        # connected (it calls _handle_kernel_info_reply then, before its final
        # iopub drain), and count the kernel_info requests it sent.
        orig_handle, orig_info = kc._handle_kernel_info_reply, kc.kernel_info

        def handle(msg):
            self.marks["ready"] = now()
            self.info = msg["content"]
            return orig_handle(msg)

        def info():
            self.marks["kernel_info"] += 1
            return orig_info()
        kc._handle_kernel_info_reply = handle
        kc.kernel_info = info
        try:
            kc.wait_for_ready(timeout=60)
        except Exception:
            self.shutdown()
            raise
        t1 = now()
        self.start_ms = ms(t1 - t0)
        self.ready_ms = ms(self.marks["ready"] - t0)
        self.launch_ms = ms(t_launched - t0)
        self.kernel_infos = self.marks["kernel_info"]
        self.raw = None

    def execute(self, code, timeout=60, collect=None):
        """execute_request to the idle status on iopub and the execute_reply."""
        kc = self.kc
        deadline = time.monotonic() + timeout
        msg_id = kc.execute(code)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("%s: no idle status for %r" % (self.name, code[:40]))
            try:
                msg = kc.get_iopub_msg(timeout=left)
            except queue.Empty:
                raise TimeoutError("%s: no idle status for %r" % (self.name, code[:40])) from None
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if collect is not None:
                collect(msg)
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("%s: no execute_reply" % self.name)
            try:
                msg = kc.get_shell_msg(timeout=left)
            except queue.Empty:
                raise TimeoutError("%s: no execute_reply" % self.name) from None
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg

    def one_plus_one(self):
        results = []

        def collect(msg):
            if msg["msg_type"] == "execute_result":
                results.append(msg["content"]["data"].get("text/plain"))
        reply = self.execute("1+1", collect=collect)
        if reply["content"]["status"] != "ok" or results != ["2"]:
            raise RuntimeError("%s: 1+1 gave %r, %s" % (self.name, results, reply["content"]["status"]))

    def flood(self):
        out, err, first = [], [], []
        t0 = now()

        def collect(msg):
            if msg["msg_type"] == "stream":
                if not first:
                    first.append(now())
                (out if msg["content"]["name"] == "stdout" else err).append(msg["content"]["text"])
        reply = self.execute(FLOOD_CODE, collect=collect)
        t1 = now()
        text = "".join(out)
        if reply["content"]["status"] != "ok" or text != FLOOD_TEXT:
            raise RuntimeError("%s: flood: status %s, %d bytes and %d lines of stdout (want %d and %d), stderr %r" % (
                self.name, reply["content"]["status"], len(text), text.count("\n"), len(FLOOD_TEXT), FLOOD_LINES,
                "".join(err)[:300]))
        return ms(t1 - t0), len(out), ms(first[0] - t0)

    # The same round trip over plain blocking pyzmq sockets, signed with
    # the kernel's own Session: no jupyter_client channel threads.
    def raw_rtt(self, info=False):
        """execute `1+1` (or, info, kernel_info) to idle and the reply."""
        import zmq
        if self.raw is None:
            info = self.km.get_connection_info(session=True)
            ctx = zmq.Context()
            shell = ctx.socket(zmq.DEALER)
            shell.connect("%s://%s:%d" % (info["transport"], info["ip"], info["shell_port"]))
            iopub = ctx.socket(zmq.SUB)
            iopub.setsockopt(zmq.SUBSCRIBE, b"")
            iopub.connect("%s://%s:%d" % (info["transport"], info["ip"], info["iopub_port"]))
            self.raw = (ctx, shell, iopub, info["session"])
            time.sleep(0.3)  # let the SUB socket join before the first message
        ctx, shell, iopub, session = self.raw
        t0 = now()
        if info:
            msg = session.send(shell, "kernel_info_request", {})
        else:
            msg = session.send(shell, "execute_request", {"code": "1+1", "silent": False, "store_history": True,
                                                          "user_expressions": {}, "allow_stdin": False,
                                                          "stop_on_error": True})
        msg_id = msg["header"]["msg_id"]
        idle = reply = None
        while idle is None or reply is None:
            if idle is None:
                if not iopub.poll(30000):
                    raise TimeoutError("%s: raw: no idle status" % self.name)
                _, parts = session.feed_identities(iopub.recv_multipart())
                m = session.deserialize(parts)
                if (m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "status"
                        and m["content"]["execution_state"] == "idle"):
                    idle = m
            if reply is None and (idle is not None or shell.poll(0)):
                if not shell.poll(30000):
                    raise TimeoutError("%s: raw: no execute_reply" % self.name)
                _, parts = session.feed_identities(shell.recv_multipart())
                m = session.deserialize(parts)
                if m["parent_header"].get("msg_id") == msg_id:
                    reply = m
        d = ms(now() - t0)
        if reply["content"]["status"] != "ok":
            raise RuntimeError("%s: raw %s: %s" % (self.name, msg["msg_type"], reply["content"]["status"]))
        return d

    def drain_iopub(self):
        """The client's own iopub got the raw round trips' messages too."""
        while True:
            try:
                self.kc.get_iopub_msg(timeout=0.05)
            except queue.Empty:
                return

    def shutdown(self):
        t0 = now()
        if self.raw is not None:
            ctx, shell, iopub, _ = self.raw
            shell.close(0)
            iopub.close(0)
            ctx.term()
            self.raw = None
        try:
            self.kc.stop_channels()
        finally:
            self.km.shutdown_kernel()  # politely: shutdown_request, then wait for the process
        return ms(now() - t0)


# --- the run -----------------------------------------------------------------

class Bench:
    def __init__(self, a, base):
        self.a = a
        self.base = base
        self.project = os.path.join(base, "project")
        self.logs = {}
        self.rng = random.Random()
        s = Series
        self.start = {CELLBOX: s("cellbox-python"), IPYKERNEL: s("ipykernel")}
        self.ready = {CELLBOX: s("cellbox-python"), IPYKERNEL: s("ipykernel")}
        self.launch = {CELLBOX: s("cellbox-python"), IPYKERNEL: s("ipykernel")}
        self.shut = {CELLBOX: s("cellbox-python"), IPYKERNEL: s("ipykernel")}
        self.infos = {CELLBOX: [], IPYKERNEL: []}
        self.rtt = {CELLBOX: s("cellbox-python"), IPYKERNEL: s("ipykernel")}
        self.raw = {CELLBOX: s("cellbox-python"), IPYKERNEL: s("ipykernel")}
        self.raw_info = {CELLBOX: s("cellbox-python"), IPYKERNEL: s("ipykernel")}
        self.flood = {CELLBOX: s("cellbox-python"), IPYKERNEL: s("ipykernel")}
        self.first_stream = {CELLBOX: s("cellbox-python"), IPYKERNEL: s("ipykernel")}
        self.msgs = {CELLBOX: [], IPYKERNEL: []}
        self.flood_cpu = {n: {"kernel": s("kernel"), "daemon": s("daemon"), "client": s("client")} for n in (CELLBOX, IPYKERNEL)}
        self.first_ever = None
        self.kernels = []
        self.versions = {}
        self.probe = Probe(a.probe, self.logfile("probe")) if a.probe else None
        self.pstart = {}
        for d in (self.rtt, self.flood, self.first_stream):
            d[PROBE] = s("cellbox protocol")
        self.msgs[PROBE] = []

    def logfile(self, name):
        if name not in self.logs:
            self.logs[name] = open(os.path.join(self.base, name + ".stderr"), "ab")
        return self.logs[name]

    def log_tail(self, name):
        try:
            with open(os.path.join(self.base, name + ".stderr"), "rb") as f:
                f.seek(0, 2)
                f.seek(max(f.tell() - 2000, 0))
                t = f.read().decode(errors="replace").strip()
        except OSError:
            return ""
        return ("\n--- %s's stderr (the end) ---\n%s" % (name, t)) if t else ""

    def kernel(self, name):
        try:
            k = Kernel(name, self.project, self.logfile(name))
        except Exception as e:
            raise RuntimeError("start %s: %s%s" % (name, e, self.log_tail(name))) from None
        self.kernels.append(k)
        return k

    def close(self, k):
        self.kernels.remove(k)
        return k.shutdown()

    def daemons(self):
        """The daemons' runtime files: pid and path."""
        out = []
        for p in glob.glob(os.path.join(os.environ["XDG_RUNTIME_DIR"], "cellbox", "server-*.json")):
            try:
                with open(p) as f:
                    out.append((json.load(f)["pid"], p))
            except (OSError, ValueError, KeyError):
                pass
        return out

    def starts(self):
        a = self.a
        if self.daemons():
            raise RuntimeError("a daemon runs already in the run's runtime dir")
        # The first cellbox kernel ever: it starts the daemon.
        k = self.kernel(CELLBOX)
        self.first_ever = (k.start_ms, k.ready_ms, k.launch_ms, k.kernel_infos)
        k.one_plus_one()
        self.close(k)
        d = self.daemons()
        if len(d) != 1:
            raise RuntimeError("after the first cellbox kernel: %d daemons, want 1" % len(d))
        self.daemon_pid = d[0][0]
        log("  the first cellbox-python start (starting the daemon, pid %d): %s" % (self.daemon_pid, fmt(k.start_ms)))
        order = [CELLBOX, IPYKERNEL] + ([PROBE] if self.probe else [])
        for it in range(-a.warmup, a.n):
            self.rng.shuffle(order)
            for name in order:
                if name == PROBE:
                    t = self.probe.do(op="start", root=self.project)
                    if it >= 0:
                        for k, v in t.items():
                            self.pstart.setdefault(k, Series(k)).add(v)
                    continue
                k = self.kernel(name)
                k.one_plus_one()  # it works: not timed
                self.versions.setdefault(name, k.info)
                sd = self.close(k)
                if it >= 0:
                    self.start[name].add(k.start_ms)
                    self.ready[name].add(k.ready_ms)
                    self.launch[name].add(k.launch_ms)
                    self.shut[name].add(sd)
                    self.infos[name].append(k.kernel_infos)

    def round_trips(self):
        a = self.a
        ks = {name: self.kernel(name) for name in (CELLBOX, IPYKERNEL)}
        self.main = ks
        for k in ks.values():
            for _ in range(50):
                k.one_plus_one()
            for _ in range(20):
                k.raw_rtt()
            k.drain_iopub()
        if self.probe:
            self.probe.do(op="open", root=self.project)
            self.probe.do(op="rtt", n=50)
        block = 50
        order = [CELLBOX, IPYKERNEL] + ([PROBE] if self.probe else [])
        done = 0
        while done < a.rtt:
            n = min(block, a.rtt - done)
            self.rng.shuffle(order)
            for name in order:
                if name == PROBE:
                    for x in self.probe.do(op="rtt", n=n)["ms"]:
                        self.rtt[PROBE].add(x)
                    continue
                k = ks[name]
                for _ in range(n):
                    t0 = now()
                    k.one_plus_one()
                    self.rtt[name].add(ms(now() - t0))
            raw_order = [CELLBOX, IPYKERNEL]
            self.rng.shuffle(raw_order)
            for name in raw_order:
                k = ks[name]
                for _ in range(n):
                    self.raw[name].add(k.raw_rtt())
                for _ in range(n):
                    self.raw_info[name].add(k.raw_rtt(info=True))
                k.drain_iopub()
            done += n

    def floods(self):
        a = self.a
        order = [CELLBOX, IPYKERNEL] + ([PROBE] if self.probe else [])
        for it in range(-a.flood_warmup, a.floods):
            self.rng.shuffle(order)
            for name in order:
                if name == PROBE:
                    r = self.probe.do(op="flood", code=FLOOD_CODE)
                    if r["status"] != "ok" or r["stdout"] != FLOOD_TEXT:
                        raise RuntimeError("probe flood: status %s, %d bytes of stdout, want %d" % (
                            r["status"], len(r["stdout"]), len(FLOOD_TEXT)))
                    d, n, first = r["ms"], r["notifications"], r["firstMs"]
                else:
                    k = self.main[name]
                    c0 = (cpu_ms(k.km.provisioner.pid), cpu_ms(self.daemon_pid), time.process_time())
                    d, n, first = k.flood()
                    c1 = (cpu_ms(k.km.provisioner.pid), cpu_ms(self.daemon_pid), time.process_time())
                    if it >= 0:
                        self.flood_cpu[name]["kernel"].add(c1[0] - c0[0])
                        self.flood_cpu[name]["client"].add((c1[2] - c0[2]) * 1e3)
                        if name == CELLBOX:
                            self.flood_cpu[name]["daemon"].add(c1[1] - c0[1])
                if it >= 0:
                    self.flood[name].add(d)
                    self.first_stream[name].add(first)
                    self.msgs[name].append(n)

    def floor(self):
        """Python printing the lines to a pipe, timed by itself."""
        code = ("import sys, time\nt = time.perf_counter_ns()\nfor i in range(100000): print(i)\n"
                "sys.stdout.flush()\nsys.stderr.write('%d\\n' % (time.perf_counter_ns() - t))\n")
        s = Series("python's own loop to a pipe")
        for _ in range(5):
            p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True)
            s.add(int(p.stderr) / 1e6)
        return s


class Probe:
    """bench/jupyter/probe: one JSON command a line in, one answer out."""

    def __init__(self, binary, logfile):
        self.p = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=logfile, text=True)

    def do(self, **cmd):
        self.p.stdin.write(json.dumps(cmd) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("probe: %s: it ended (exit %s)" % (cmd["op"], self.p.wait()))
        ans = json.loads(line)
        if "error" in ans:
            raise RuntimeError("probe: %s: %s" % (cmd["op"], ans["error"]))
        return ans

    def close(self):
        try:
            self.p.stdin.write('{"op":"quit"}\n')
            self.p.stdin.close()
            self.p.wait(timeout=30)
        except Exception:
            self.p.kill()
            self.p.wait()


def cpu_ms(pid):
    """The CPU time of all threads of pid so far (schedstat), in ms."""
    total = 0
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return 0.0
    for t in tasks:
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e6


def stop_daemons(b):
    """SIGTERM every daemon of the run and wait for it to go (10 s, then
    SIGKILL its process group)."""
    for pid, path in b.daemons():
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        end = time.monotonic() + 10
        while time.monotonic() < end and alive(pid):
            time.sleep(0.05)
        if alive(pid):
            log("the daemon %d did not end within 10 s of SIGTERM: killing its group" % pid)
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def alive(pid):
    """pid exists and is not a zombie (the daemon is not our child)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def remove_tree(d):
    # An overlay's work/work dir has mode 000: open it up first.
    for root, dirs, _ in os.walk(d):
        for x in dirs:
            try:
                os.chmod(os.path.join(root, x), 0o700)
            except OSError:
                pass
    shutil.rmtree(d, ignore_errors=True)


def setup(cellbox):
    base = tempfile.mkdtemp(prefix="cellbox-jupyter-bench-")
    env = {
        "JUPYTER_DATA_DIR": "jupyter/data", "JUPYTER_CONFIG_DIR": "jupyter/config",
        "JUPYTER_RUNTIME_DIR": "jupyter/runtime", "IPYTHONDIR": "ipython", "MPLCONFIGDIR": "mpl",
        "CELLBOX_STATE_DIR": "state", "XDG_RUNTIME_DIR": "run",
    }
    for k, d in env.items():
        os.makedirs(os.path.join(base, d), mode=0o700, exist_ok=True)
        os.environ[k] = os.path.join(base, d)
    os.makedirs(os.path.join(base, "project"))
    with open(os.path.join(base, "project", "hello.py"), "w") as f:
        f.write("print('hello')\n")
    # The kernels get this environment: no PYTHON* (PYTHONUNBUFFERED would
    # make every print a write), no JUPYTER_PATH of the caller's, no other
    # CELLBOX_* setting.
    for k in list(os.environ):
        if k.startswith("PYTHON") or k == "JUPYTER_PATH" or (k.startswith("CELLBOX_") and k != "CELLBOX_STATE_DIR"):
            del os.environ[k]
    os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    p = subprocess.run([cellbox, "jupyter", "install", "--language", "python"], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("cellbox jupyter install --language python: exit %d: %s" % (p.returncode, p.stderr.strip()))
    return base


def report(b, a, load0):
    import ipykernel
    import jupyter_client
    import zmq
    out = sys.stdout
    who = "%s (uid %d)" % (os.environ.get("USER") or os.environ.get("LOGNAME") or "?", os.getuid())
    try:
        import pwd
        who = "%s (uid %d)" % (pwd.getpwuid(os.getuid()).pw_name, os.getuid())
    except KeyError:
        pass
    cv = subprocess.run([a.cellbox, "version"], capture_output=True, text=True).stdout.strip()
    li = {n: (b.versions.get(n) or {}).get("language_info", {}) for n in (CELLBOX, IPYKERNEL)}
    print("== Jupyter kernels through jupyter_client: cellbox-python side by side with ipykernel%s" % (
        " — " + a.label if a.label else ""), file=out)
    print("   as %s; Linux %s; %d cores; load average %s at the start" % (who, os.uname().release, os.cpu_count(), load0), file=out)
    print("   cellbox-python: %s jupyter-kernel (%s), python %s in its sandbox, the daemon already running (pid %d)" % (
        a.cellbox, cv, li[CELLBOX].get("version", "?"), b.daemon_pid), file=out)
    print("   ipykernel: %s (python %s); jupyter_client %s, pyzmq %s (libzmq %s), client python %s" % (
        ipykernel.__version__, li[IPYKERNEL].get("version", "?"), jupyter_client.__version__, zmq.__version__,
        zmq.zmq_version(), sys.version.split()[0]), file=out)
    print("   N=%d starts per side after %d unmeasured; %d round trips per side in blocks of 50; %d floods per side after %d;"
          % (a.n, a.warmup, a.rtt, a.floods, a.flood_warmup), file=out)
    print("   the sides interleave in a new random order each iteration.", file=out)

    rows = []

    def ratio(c, j):
        return j / c if c else 0

    def add(figure, c, j, aim=None):
        r = ratio(c, j)
        met = "" if aim is None else ("met" if r >= aim else "MISSED")
        rows.append((figure, fmt(c), fmt(j), "%.1fx" % r, ">= %gx" % aim if aim else "", met))

    C, J = CELLBOX, IPYKERNEL
    add("start to kernel_info ready, p50 (wait_for_ready returned)", b.start[C].p(.5), b.start[J].p(.5), 3)
    add("  the same, p90", b.start[C].p(.9), b.start[J].p(.9))
    add("  ready before wait_for_ready's 200 ms iopub drain, p50", b.ready[C].p(.5), b.ready[J].p(.5), 3)
    fe = b.first_ever
    rows.append(("first-ever cellbox start, the daemon started too (one)", fmt(fe[0]), fmt(b.start[J].p(.5)),
                 "%.1fx" % ratio(fe[0], b.start[J].p(.5)), "", ""))
    add("`1+1` round trip to idle, p50", b.rtt[C].p(.5), b.rtt[J].p(.5), 3)
    add("`1+1` round trip to idle, p99", b.rtt[C].p(.99), b.rtt[J].p(.99), 3)
    add("  p50 over plain pyzmq sockets (no jupyter_client)", b.raw[C].p(.5), b.raw[J].p(.5))
    add("100,000-line print to idle, p50", b.flood[C].p(.5), b.flood[J].p(.5), 2)
    mc, mj = b.msgs[C], b.msgs[J]
    rows.append(("  stream messages per flood (min-max)", rng(mc), rng(mj), "", "", ""))
    f = "  %-58s %14s %11s %7s  %-7s %s"
    print(file=out)
    print(f % ("figure", "cellbox-python", "ipykernel", "ratio", "aim", "met?"), file=out)
    print(f % ("-" * 58, "-" * 14, "-" * 11, "-" * 7, "-" * 7, "----"), file=out)
    for r in rows:
        print(f % r, file=out)
    print("  ratio: ipykernel's figure over cellbox-python's (above 1: cellbox is faster).", file=out)

    print("\nraw numbers (timed in this python client)", file=out)
    print("  %-66s %5s %10s %10s %10s %10s %10s %10s" % ("", "n", "p50", "p90", "p99", "min", "mean", "max"), file=out)

    def group(title, d, suffix=""):
        print(title, file=out)
        for name in (C, J):
            s = d[name]
            s.name = ("cellbox-python" if name == C else "ipykernel") + suffix
            print(s.row(), file=out)
    group("start: KernelManager + start_kernel + start_channels + wait_for_ready", b.start)
    group("  of which start_kernel (the kernel process launched)", b.launch)
    group("  to wait_for_ready's kernel_info reply with iopub connected (before its 200 ms drain)", b.ready)
    group("  shutdown_kernel afterwards (shutdown_request, the process waited for)", b.shut)
    print("  kernel_info requests wait_for_ready sent per start: cellbox-python %s, ipykernel %s" % (
        rng(b.infos[C]), rng(b.infos[J])), file=out)
    print("  first-ever cellbox-python start, the daemon started by it: %s (kernel_info ready %s, start_kernel %s, %d kernel_info)" % (
        fmt(fe[0]), fmt(fe[1]), fmt(fe[2]), fe[3]), file=out)
    group("`1+1`: execute_request to the idle status and execute_reply, through BlockingKernelClient", b.rtt)
    group("  the same over plain blocking pyzmq sockets and the kernel's Session", b.raw)
    group("  kernel_info to idle and reply over those sockets (cellbox-python answers it without the daemon)", b.raw_info)
    group("%r: to idle, every line checked" % FLOOD_CODE, b.flood)
    group("  to the first stream message", b.first_stream)
    fc = b.flood_cpu
    print("  CPU per flood (all threads' schedstat; this client's: process_time)", file=out)
    fc[C]["kernel"].name = "  cellbox-python's process (cellbox jupyter-kernel)"
    fc[C]["daemon"].name = "  the daemon (not the python in its sandbox)"
    fc[C]["client"].name = "  this client, with cellbox-python"
    fc[J]["kernel"].name = "  ipykernel's process (the loop's python itself)"
    fc[J]["client"].name = "  this client, with ipykernel"
    for x in (fc[C]["kernel"], fc[C]["daemon"], fc[C]["client"], fc[J]["kernel"], fc[J]["client"]):
        print(x.row(), file=out)
    fl = b.floor_series
    print(fl.row(), file=out)
    print("  stream messages per flood: cellbox-python %s, ipykernel %s" % (rng(mc), rng(mj)), file=out)
    if b.probe:
        where(b, out)
    print("load average (1, 5, 15 min): %s at the start, %s at the end" % (load0, loadavg()), file=out)


def where(b, out):
    """cellbox-python's figures against what its process asks of the daemon."""
    C, P = CELLBOX, PROBE
    ps = b.pstart
    print("\nwhere cellbox-python's time goes: the same asked of the daemon over its websocket, as `cellbox jupyter-kernel`", file=out)
    print("asks it (bench/jupyter/probe, interleaved with the above), without ZeroMQ and Jupyter's messages", file=out)
    print("  %-66s %5s %10s %10s %10s %10s %10s %10s" % ("", "n", "p50", "p90", "p99", "min", "mean", "max"), file=out)
    for key, label in (("readyMs", "start: rpc.Dial + workspace/open + kernel/start"),
                       ("dialMs", "  rpc.Dial (runtime file, /healthz, websocket, initialize)"),
                       ("workspaceOpenMs", "  workspace/open of the project (overlay)"),
                       ("kernelStartMs", "  kernel/start python"),
                       ("firstResultMs", "  then the first `1+1`"),
                       ("shutdownMs", "  then kernel/shutdown and close")):
        if key in ps:
            ps[key].name = label
            print(ps[key].row(), file=out)
    b.rtt[P].name = "`1+1`: kernel/execute to its response"
    print(b.rtt[P].row(), file=out)
    b.flood[P].name = "flood: kernel/execute to its response, every line checked"
    print(b.flood[P].row(), file=out)
    b.first_stream[P].name = "  to the first kernel/output"
    print(b.first_stream[P].row(), file=out)
    print("  kernel/output notifications per flood: %s" % rng(b.msgs[P]), file=out)
    r = ps.get("readyMs")
    if r and r.ms:
        print("  start: of cellbox-python's %s to kernel_info ready (p50), the daemon's part is %s: the rest, %s, is the" % (
            fmt(b.ready[C].p(.5)), fmt(r.p(.5)), fmt(b.ready[C].p(.5) - r.p(.5))), file=out)
        print("         jupyter-kernel process, its ZeroMQ sockets and jupyter_client's connecting and kernel_info", file=out)
    print("  `1+1`: p50 %s over the websocket, %s over plain pyzmq (+ the kernel process's ZeroMQ and Jupyter messages)," % (
        fmt(b.rtt[P].p(.5)), fmt(b.raw[C].p(.5))), file=out)
    print("         %s through jupyter_client (+ its client); kernel_info, which the kernel process answers by itself" % fmt(b.rtt[C].p(.5)), file=out)
    print("         (3 messages), %s over plain pyzmq" % fmt(b.raw_info[C].p(.5)), file=out)
    print("  flood: p50 %s over the websocket, %s through jupyter_client; the first stream message at %s (the kernel process" % (
        fmt(b.flood[P].p(.5)), fmt(b.flood[C].p(.5)), fmt(b.first_stream[C].p(.5))), file=out)
    print("         gathers stream text for 50 ms before it sends it; the execution's end sends what it has at once)", file=out)


def rng(xs):
    if not xs:
        return "-"
    lo, hi = min(xs), max(xs)
    return str(lo) if lo == hi else "%d-%d" % (lo, hi)


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cellbox", required=True, help="the cellbox binary (absolute path)")
    ap.add_argument("-n", type=int, default=20, help="measured starts per side")
    ap.add_argument("--warmup", type=int, default=2, help="unmeasured starts per side first")
    ap.add_argument("--rtt", type=int, default=500, help="measured `1+1` round trips per side")
    ap.add_argument("--floods", type=int, default=20, help="measured floods per side")
    ap.add_argument("--flood-warmup", type=int, default=2, help="unmeasured floods per side first")
    ap.add_argument("--label", default="", help="text naming this run")
    ap.add_argument("--probe", default="", help="bench/jupyter/probe's binary: also time what cellbox-python asks of the daemon")
    a = ap.parse_args()
    a.cellbox = os.path.abspath(a.cellbox)
    # SIGTERM (or a hangup) ends the run through the finally below.
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, lambda *_: sys.exit(1))
    base = setup(a.cellbox)
    b = Bench(a, base)
    load0 = loadavg()
    ok = False
    try:
        for what, f in (("starts: %d+%d per side (and the first-ever cellbox start)" % (a.warmup, a.n), b.starts),
                        ("round trips: %d per side" % a.rtt, b.round_trips),
                        ("floods: %d+%d per side" % (a.flood_warmup, a.floods), b.floods)):
            log(what + "...")
            t0 = time.monotonic()
            f()
            log("  %.1f s" % (time.monotonic() - t0))
        b.floor_series = b.floor()
        for k in list(b.kernels):
            b.close(k)
        report(b, a, load0)
        ok = True
    except Exception as e:
        log("FAILED: %s" % e)
    finally:
        for k in list(b.kernels):
            try:
                k.shutdown()
            except Exception:
                pass
        if b.probe:
            b.probe.close()
        stop_daemons(b)
        for f in b.logs.values():
            f.close()
        if not ok:
            for name in b.logs:
                t = b.log_tail(name)
                if t:
                    log(t)
            dl = os.path.join(base, "state", "daemon.log")
            if os.path.exists(dl):
                with open(dl, errors="replace") as f:
                    t = f.read()[-2000:].strip()
                if t:
                    log("--- daemon.log (the end) ---\n" + t)
        remove_tree(base)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
