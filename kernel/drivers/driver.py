# cellbox Python kernel driver, run by the kernel manager as `python3 -c SRC`.
#
# The contract with the manager is kernel/drivers/README.md: requests are JSON lines on fd 3, events
# JSON lines on fd 4, fds 1 and 2 are the user code's stdout and stderr, fd 0 is /dev/null.
#
# Threads: the main thread runs user code, so that SIGINT (delivered to the main thread) raises
# KeyboardInterrupt in it. One more thread reads requests: it hands executions to the main thread,
# answers complete/inspect/isComplete/variables itself (also while code runs), and pushes
# buffered output every 50 ms while code runs. It blocks SIGINT. (One thread, not three: glibc
# reserves 64 MiB of address space per thread that allocates, and memoryBytes is RLIMIT_AS.)
#
# Idle memory matters: only cheap modules are imported here (_ast, not ast); traceback, inspect,
# pprint, asyncio, jedi... are imported when first needed, and linecache and getpass are patched
# when something first imports them (ImportHooks).
import _ast
import binascii
import builtins
import fcntl
import io
import json
import os
import resource
import select
import signal
import sys
import termios
import threading
import time
from _queue import SimpleQueue

DRIVER_GLOBALS = globals()
Module = type(sys)
CO_COROUTINE = 0x80
FUTURE_FLAGS = 0x3FE0000  # CO_FUTURE_* compiler flags (only `annotations` still matters)
SIGINT_ONLY = (signal.SIGINT,)


# ---------------------------------------------------------------------------------------------
# Channel to the manager

def high_cloexec(fd):
    """A close-on-exec copy of fd at a high number (lower if RLIMIT_NOFILE is small)."""
    for low in (200, 64, 10):
        try:
            return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, low)
        except OSError:
            pass
    return os.dup(fd)  # non-inheritable by default


REQ_FD, EVT_FD = high_cloexec(3), high_cloexec(4)
os.close(3)
os.close(4)
PID = os.getpid()
IN_FORK = False  # set in a child forked by user code: it must never speak on the channel


def _forked():
    global IN_FORK
    IN_FORK = True


os.register_at_fork(after_in_child=_forked)


WRITTEN = {1: 0, 2: 0}  # bytes our streams wrote to fds 1 and 2: stdoutBytes/stderrBytes


def text_stream(fd, name, line_buffering):
    raw = io.FileIO(fd, "w", closefd=False)
    raw.name = name
    file_write = io.FileIO.write

    def counted_write(b):
        n = file_write(raw, b)
        if n:
            WRITTEN[fd] += n
        return n

    # An instance attribute, not a subclass: raw stays an exact FileIO, which keeps
    # TextIOWrapper's fast paths (a FileIO subclass makes print ~15% slower).
    raw.write = counted_write
    stream = io.TextIOWrapper(io.BufferedWriter(raw, 1 << 16), encoding="utf-8",
                              errors="backslashreplace", line_buffering=line_buffering)
    stream.mode = "w"
    return stream


def open_streams():
    global STDOUT, STDERR
    STDOUT = sys.stdout = sys.__stdout__ = text_stream(1, "<stdout>", False)
    STDERR = sys.stderr = sys.__stderr__ = text_stream(2, "<stderr>", True)


open_streams()
EMIT_LOCK = threading.Lock()


def flush_std():
    for stream in (STDOUT, STDERR):
        try:
            stream.flush()
        except Exception:  # closed by the user, the manager gone...: never fatal
            pass


def emit(event, flush=True, counts=False):
    """Write one event. Execution events first flush stdout/stderr (README: Ordering).

    counts adds stdoutBytes/stderrBytes, for events made while code may go on printing
    (display, clear): the manager then delivers exactly the output written before them.
    Bytes that C code or child processes write to fds 1/2 are not counted, so events made
    once the code has stopped (result, error, input, done) go without, and the manager
    delivers all that the pipes hold before them: nothing the cell wrote comes after done."""
    if IN_FORK:
        return
    if flush:
        flush_std()
        if counts:
            event["stdoutBytes"], event["stderrBytes"] = WRITTEN[1], WRITTEN[2]
    data = (json.dumps(event) + "\n").encode()  # ASCII: lone surrogates stay escaped
    # A KeyboardInterrupt in the middle of the write would leave half an event on the pipe.
    old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGINT_ONLY)
    try:
        with EMIT_LOCK:
            view = memoryview(data)
            while view:
                view = view[os.write(EVT_FD, view):]
    except OSError:  # the manager is gone
        os._exit(0)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def block_sigint():
    signal.pthread_sigmask(signal.SIG_BLOCK, SIGINT_ONLY)


# ---------------------------------------------------------------------------------------------
# State

main_module = Module("__main__")
NS = main_module.__dict__  # the user's namespace; sys.modules["__main__"] so pickle finds classes
NS["__builtins__"] = builtins
sys.modules["__main__"] = main_module
sys.argv = [""]

BUSY = False       # user code runs on the main thread: SIGINT raises KeyboardInterrupt
RECEIVED = FINISHED = 0  # executions received (reader thread) and ended (main thread)
PENDING_INTERRUPT = False  # SIGINT came for the execution in progress, outside user code
READ_LOCK = threading.Lock()
READ_BYTES = 0     # bytes of requests read so far
INTERRUPT_BEFORE = 0  # an execute request starting before this offset came before a SIGINT
EXEC_ID = None     # the execution whose events we emit (displays from threads use the last one)
EXEC_QUEUE = SimpleQueue()
compile_flags = _ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
CELL_LINES = {}    # linecache entries of the code run, also before linecache is imported
silent_runs = 0
loop = None        # asyncio loop for top-level await, made on first use


def unread(fd):
    return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), sys.byteorder)


def on_sigint(signum, frame):
    global PENDING_INTERRUPT, INTERRUPT_BEFORE
    if BUSY:
        raise KeyboardInterrupt
    # Not in user code. Idle: ignore it (no stray KeyboardInterrupt later). But the manager may
    # have sent an execute just before: one still in the request pipe, or received and not
    # started yet, or ending. The interrupt is for that one.
    with READ_LOCK:
        try:
            INTERRUPT_BEFORE = READ_BYTES + unread(REQ_FD)
        except OSError:
            pass
    if RECEIVED > FINISHED:
        PENDING_INTERRUPT = True


signal.signal(signal.SIGINT, on_sigint)


def extend_path():
    """What plain `python3` has on sys.path: the cwd, PYTHONPATH, the user site. The manager runs
    `python3 -c` (not -I), so python normally did this already; this restores what an isolated
    start would have dropped."""
    extra = [""] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[0:0] = [p for p in extra if p not in sys.path]
    import site
    if site.ENABLE_USER_SITE or os.environ.get("PYTHONNOUSERSITE"):
        return  # python did it (not isolated), or the user does not want it
    n = len(sys.path)
    try:
        site.ENABLE_USER_SITE = True
        site.addusersitepackages(set(sys.path))
    except Exception:
        pass
    added = sys.path[n:]
    del sys.path[n:]
    pos = next((i for i, p in enumerate(sys.path) if p.endswith("-packages")), len(sys.path))
    sys.path[pos:pos] = added


extend_path()


# ---------------------------------------------------------------------------------------------
# Standard input: the request's `stdin` string, then `input` events (allowStdin), then EOF.

class StdinState:
    fed = ""
    allow = False
    replies = SimpleQueue()  # `input` requests for the current execution


def read_line(prompt="", password=False, size=-1):
    """The next line of standard input with its newline; '' at end of file."""
    st = StdinState
    if st.fed or not st.allow:
        if prompt:  # as python's input() does when stdin is not a terminal
            sys.stdout.write(prompt)
        n = st.fed.find("\n") + 1 or len(st.fed)
        if size >= 0:
            n = min(n, size)
        line, st.fed = st.fed[:n], st.fed[n:]
        return line
    while not st.replies.empty():  # answers to an interrupted read
        st.replies.get()
    emit({"ev": "input", "id": EXEC_ID, "prompt": prompt, "password": password})
    reply = st.replies.get()  # SIGINT interrupts this wait
    if reply.get("eof"):
        if prompt:
            sys.stdout.write(prompt + "\n")
        return ""
    value = str(reply.get("value") or "")
    sys.stdout.write(prompt + ("" if password else value) + "\n")  # the transcript reads well
    st.fed = value + "\n"
    return read_line("", password, size)


class Stdin(io.TextIOBase):
    encoding = "utf-8"
    errors = "strict"
    name = "<stdin>"

    def readable(self):
        return True

    def isatty(self):
        return False

    def fileno(self):
        return 0

    def close(self):  # site's exit() closes stdin (for IDLE); the kernel goes on reading
        pass

    def readline(self, size=-1):
        return read_line(size=-1 if size is None else size)

    def read(self, size=-1):
        size = -1 if size is None else size
        parts, n = [], 0
        while size < 0 or n < size:
            line = read_line(size=-1 if size < 0 else size - n)
            if not line:
                break
            parts.append(line)
            n += len(line)
        return "".join(parts)


STDIN = sys.stdin = sys.__stdin__ = Stdin()
builtin_input = builtins.input


def input(prompt=""):
    if sys.stdin is not STDIN:
        return builtin_input(prompt)
    line = read_line(str(prompt))
    if not line:
        raise EOFError("EOF when reading a line")
    return line[:-1] if line.endswith("\n") else line


builtin_getpass = None


def getpass(prompt="Password: ", stream=None):
    if sys.stdin is not STDIN:
        return builtin_getpass(prompt, stream)
    line = read_line(str(prompt), password=True)
    if not line:
        raise EOFError("EOF when reading a line")
    return line[:-1] if line.endswith("\n") else line


def after_getpass(module):
    global builtin_getpass
    builtin_getpass, module.getpass = module.getpass, getpass


builtins.input = input


# ---------------------------------------------------------------------------------------------
# Rich output

REPRS = (("text/html", "_repr_html_"), ("text/markdown", "_repr_markdown_"),
         ("image/svg+xml", "_repr_svg_"), ("image/png", "_repr_png_"),
         ("image/jpeg", "_repr_jpeg_"), ("application/json", "_repr_json_"),
         ("text/latex", "_repr_latex_"), ("application/javascript", "_repr_javascript_"),
         ("application/pdf", "_repr_pdf_"))
CONTAINERS = (list, tuple, dict, set, frozenset)


def report_repr_error(obj, what):
    """A repr hook that raised: say so on stderr, keep the kernel going."""
    e = sys.exc_info()[1]
    try:
        import traceback
        lines = traceback.format_exception(type(e), e, user_tb(e.__traceback__))
        STDERR.write(f"{what} of {type(obj).__qualname__} failed:\n" + "".join(lines))
    except Exception:
        pass


def repr_method(obj, name):
    try:
        m = getattr(obj, name, None)
    except Exception:
        return None
    return m if callable(m) else None


def call_repr(obj, name, *args, **kwargs):
    m = repr_method(obj, name)
    if m is None:
        return None
    try:
        return m(*args, **kwargs)
    except Exception:
        report_repr_error(obj, name)
        return None


def is_json_mime(mime):
    return mime == "application/json" or mime.endswith("+json")


def put(data, mime, value):
    """Store one representation as the wire wants it: text, base64 for binary, JSON values."""
    if not isinstance(mime, str):
        return
    if is_json_mime(mime):
        if isinstance(value, (str, bytes)):
            try:
                value = json.loads(value)
            except ValueError:
                return
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            return
    elif isinstance(value, (bytes, bytearray, memoryview)):
        if mime.startswith("text/") or mime == "image/svg+xml":
            value = bytes(value).decode("utf-8", "replace")
        else:
            value = binascii.b2a_base64(value, newline=False).decode()
    elif not isinstance(value, str):
        value = str(value)
    data[mime] = value


def plain(obj):
    """text/plain: repr (pprint for big built-in containers, when cheap)."""
    try:
        text = repr(obj)
    except Exception:
        report_repr_error(obj, "repr")
        text = object.__repr__(obj)
    if 79 < len(text) <= 20000 and type(obj) in CONTAINERS:
        try:
            import pprint
            text = pprint.pformat(obj, sort_dicts=False)
        except Exception:
            pass
    return text


def figure_png(fig):
    """A matplotlib figure as base64 png (None if nothing is drawn), as the inline backend does."""
    if not fig.axes and not fig.lines and not fig.images and not fig.texts and not fig.patches:
        return None
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    # Shown: a later change to the figure (or its artists) sets fig.stale again.
    fig._cellbox_shown, fig.stale = True, False
    return binascii.b2a_base64(buf.getvalue(), newline=False).decode()


def is_figure(obj):
    mf = sys.modules.get("matplotlib.figure")
    return mf is not None and isinstance(obj, mf.Figure)


def bundle(obj, include=None, exclude=None):
    """(data, metadata) for obj: _repr_mimebundle_, then each _repr_*_, text/plain always."""
    data, meta = {}, {}
    # Skip classes (their _repr_*_ are unbound) and objects claiming every attribute (mocks).
    canary = repr_method(obj, "_ipython_canary_method_should_not_exist_")
    if not isinstance(obj, type) and canary is None:
        if is_figure(obj):
            try:
                png = figure_png(obj)
                if png:
                    data["image/png"] = png
            except Exception:
                report_repr_error(obj, "savefig")
        r = call_repr(obj, "_repr_mimebundle_", include=include, exclude=exclude)
        d, md = r if isinstance(r, tuple) and len(r) == 2 else (r, None)
        if isinstance(d, dict):
            for mime, value in d.items():
                put(data, mime, value)
        if isinstance(md, dict):
            meta.update(md)
        for mime, name in REPRS:
            if mime in data:
                continue
            r = call_repr(obj, name)
            if isinstance(r, tuple) and len(r) == 2:
                r, meta[mime] = r
            if r is not None:
                put(data, mime, r)
    if "text/plain" not in data:
        data["text/plain"] = plain(obj)
    if include:
        data = {k: v for k, v in data.items() if k in include or k == "text/plain"}
    if exclude:
        data = {k: v for k, v in data.items() if k not in exclude}
    return data, json_safe(meta)


def json_safe(meta):
    try:
        json.dumps(meta, allow_nan=False)
        return meta
    except (TypeError, ValueError):
        return {}


class DisplayHandle:
    """Returned by display(..., display_id=...): update or re-display that output."""

    def __init__(self, display_id=None):
        self.display_id = display_id or new_display_id()

    def __repr__(self):
        return f"<DisplayHandle display_id={self.display_id}>"

    def display(self, obj, **kwargs):
        display(obj, display_id=self.display_id, **kwargs)

    def update(self, obj, **kwargs):
        display(obj, display_id=self.display_id, update=True, **kwargs)


def new_display_id():
    return os.urandom(16).hex()


def display(*objs, include=None, exclude=None, metadata=None, transient=None, display_id=None,
            raw=False, clear=False, update=False, **kwargs):
    """Show objects as rich output (IPython's signature). With display_id, returns a handle."""
    if display_id is True:
        display_id = new_display_id()
    if clear:
        clear_output(wait=True)
    for obj in objs:
        if raw:
            data = {}
            for mime, value in dict(obj).items():
                put(data, mime, value)
            md = {}
        else:
            data, md = bundle(obj, include, exclude)
        if metadata:
            md = json_safe({**md, **metadata})
        event = {"ev": "display", "id": EXEC_ID, "data": data, "metadata": md}
        if display_id is not None:
            event["displayId"] = str(display_id)
        if update:
            event["update"] = True
        emit(event, counts=True)
    if display_id is not None:
        return DisplayHandle(str(display_id))
    return None


def update_display(obj, *, display_id, **kwargs):
    display(obj, display_id=display_id, update=True, **kwargs)


def clear_output(wait=False):
    emit({"ev": "clear", "id": EXEC_ID, "wait": bool(wait)}, counts=True)


builtins.display = display
builtins.update_display = update_display
builtins.clear_output = clear_output


# ---------------------------------------------------------------------------------------------
# matplotlib: an inline backend without importing matplotlib now.

INLINE = "module://cellbox_inline"
inline_module = Module("cellbox_inline")


def inline_getattr(name):
    """PEP 562: the first lookup copies the Agg backend's canvas, manager and factories in.
    pyplot builds its backend class from vars(module), so they must land in the module dict."""
    from matplotlib.backends import backend_agg
    names = vars(inline_module)
    for key in ("FigureCanvas", "FigureManager", "new_figure_manager",
                "new_figure_manager_given_figure", "draw_if_interactive", "backend_version"):
        if hasattr(backend_agg, key):
            names.setdefault(key, getattr(backend_agg, key))
    if name in names:
        return names[name]
    raise AttributeError(name)


def show_figures(*args, unchanged=True, **kwargs):
    """plt.show(): display every open figure as png and close them (unchanged=False: not those
    already shown, as a result or by display(), and not changed since)."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        for num in plt.get_fignums():
            fig = plt.figure(num)
            if not unchanged and getattr(fig, "_cellbox_shown", False) and not fig.stale:
                continue
            png = figure_png(fig)
            if png:
                display({"image/png": png, "text/plain": plain(fig)}, raw=True)
    finally:
        plt.close("all")


inline_module.__getattr__ = inline_getattr
inline_module.show = show_figures
sys.modules["cellbox_inline"] = inline_module


def flush_figures():
    """After an execution: show what pyplot still has open, if our backend is in use."""
    mpl = sys.modules.get("matplotlib")
    if "matplotlib.pyplot" in sys.modules and mpl.get_backend() == INLINE:
        show_figures(unchanged=False)


def after_matplotlib(module):
    # The same as MPLBACKEND=module://cellbox_inline at import, without putting it in the
    # environment of the user's child processes (which could not import cellbox_inline).
    if not os.environ.get("MPLBACKEND"):
        module.rcParams["backend"] = INLINE


def after_ipython_display(module):
    # Libraries calling IPython.display.display outside IPython would only print(): use ours.
    module.display = display
    module.update_display = update_display
    module.clear_output = clear_output


class ImportHooks:
    """A meta path finder that runs a function right after a module's first import."""

    def __init__(self, hooks):
        self.hooks = hooks

    def find_spec(self, name, path=None, target=None):
        hook = self.hooks.get(name)
        if hook is None:
            return None
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            if self.hooks.pop(name, None) is not None:
                try:
                    hook(module)
                except Exception:
                    pass
            if not self.hooks and self in sys.meta_path:
                sys.meta_path.remove(self)

        spec.loader.exec_module = exec_module
        return spec


def after_linecache(module):
    module.cache.update(CELL_LINES)


sys.meta_path.insert(0, ImportHooks({"matplotlib": after_matplotlib,
                                     "IPython.core.display_functions": after_ipython_display,
                                     "linecache": after_linecache, "getpass": after_getpass}))


# ---------------------------------------------------------------------------------------------
# Execution

def cell_file(req):
    """(filename, first line) for the code: the editor's file when `source` is given."""
    global silent_runs
    src = req.get("source") or {}
    if src.get("path"):
        return str(src["path"]), max(1, int(src.get("line") or 1))
    count = req.get("count") or 0
    if count:
        return f"<cell-{count}>", 1
    silent_runs += 1
    return f"<silent-{silent_runs}>", 1


def remember_source(filename, code, first):
    """Put the code in linecache at its line numbers so tracebacks and inspect show it."""
    lines = [line + "\n" for line in code.split("\n")]
    if not filename.startswith("<"):
        # An editor's file: overlay the code on what we knew of the file (or the file on disk).
        old = CELL_LINES.get(filename)
        if old:
            base = list(old[2])
        else:
            base = []
            try:
                if os.path.isfile(filename) and os.path.getsize(filename) < 1 << 22:
                    with open(filename, encoding="utf-8", errors="replace") as f:
                        base = f.readlines()
            except OSError:
                pass
        lines = lines[first - 1:]  # code is padded to its first line
        base.extend(["\n"] * (first - 1 + len(lines) - len(base)))
        base[first - 1:first - 1 + len(lines)] = lines
        lines = base
    # mtime None: linecache.checkcache keeps the entry.
    CELL_LINES[filename] = (sum(map(len, lines)), None, lines, filename)
    if "linecache" in sys.modules:
        sys.modules["linecache"].cache[filename] = CELL_LINES[filename]


def ends_with_semicolon(text, node):
    line = text.split("\n")[node.end_lineno - 1]
    rest = line.encode()[node.end_col_offset:].decode("utf-8", "replace")
    return rest.lstrip().startswith(";")


def run_async(coro):
    """Run a top-level-await code object's coroutine on the driver's event loop."""
    global loop
    import asyncio
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
    task = loop.create_task(coro)
    try:
        return loop.run_until_complete(task)
    except BaseException:
        if not task.done():  # interrupted while awaiting: do not leave it pending in the loop
            task.cancel()
            try:
                loop.run_until_complete(task)
            except BaseException:
                pass
        raise


CELL_CODES = ()  # code objects of the current execution: tracebacks start at them


def run_cell(req, silent):
    """Compile and run the code; emit the result of a last expression."""
    global compile_flags, CELL_CODES
    code = req.get("code") or ""
    filename, first = cell_file(req)
    text = "\n" * (first - 1) + code  # line numbers as in the editor's file
    remember_source(filename, text, first)
    tree = compile(text, filename, "exec", compile_flags | _ast.PyCF_ONLY_AST, dont_inherit=True)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], _ast.Expr) else None
    codes = []
    if tree.body:
        codes.append(compile(tree, filename, "exec", compile_flags, dont_inherit=True))
    if last is not None:
        codes.append(compile(_ast.Expression(last.value), filename, "eval", compile_flags,
                             dont_inherit=True))
    CELL_CODES = tuple(codes)
    for co in codes:
        compile_flags |= co.co_flags & FUTURE_FLAGS  # `from __future__ import ...` persists
    value = None
    for co in codes:
        value = eval(co, NS)
        if co.co_flags & CO_COROUTINE:
            value = run_async(value)
    if last is None or silent or value is None or ends_with_semicolon(text, last):
        return
    NS["_"] = value
    data, meta = bundle(value)
    emit({"ev": "result", "id": EXEC_ID, "data": data, "metadata": meta})


def guarded(fn, *args):
    """Run fn with SIGINT raising KeyboardInterrupt; return what it raised, or None."""
    global BUSY, PENDING_INTERRUPT
    try:
        BUSY = True
        if PENDING_INTERRUPT:
            PENDING_INTERRUPT = False
            raise KeyboardInterrupt
        fn(*args)
    except BaseException as e:
        BUSY = False  # first: no signal check happens before this store
        return e
    finally:
        BUSY = False
    return None


def user_tb(tb, cells=None):
    """The traceback without the driver's frames (and, given cells, without what precedes them)."""
    head = tb
    while cells and head is not None and head.tb_frame.f_code not in cells:
        head = head.tb_next
    if head is not None:  # else the error came from elsewhere (a repr, say): keep its frames
        tb = head
    keep = []
    while tb is not None:
        if tb.tb_frame.f_globals is not DRIVER_GLOBALS:
            keep.append(tb)
        tb = tb.tb_next
    out = None
    for t in reversed(keep):  # a new chain: types.TracebackType(tb_next, frame, lasti, lineno)
        out = type(t)(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


def error_info(e):
    import traceback
    tb = user_tb(e.__traceback__, CELL_CODES)
    sys.last_type, sys.last_value, sys.last_traceback = type(e), e, tb
    try:
        evalue = str(e)
    except Exception:
        evalue = "<exception str() failed>"
    try:
        lines = "".join(traceback.format_exception(type(e), e, tb)).splitlines()
    except Exception:
        lines = [f"{type(e).__name__}: {evalue}"]
    return {"ename": type(e).__name__, "evalue": evalue, "traceback": lines}


def cpu_seconds():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def execute(req):
    global EXEC_ID, CELL_CODES, FINISHED, PENDING_INTERRUPT
    EXEC_ID = req.get("id")
    if req.get("_sigint"):  # a SIGINT came after the request was sent
        PENDING_INTERRUPT = True
    StdinState.fed = str(req.get("stdin") or "")
    StdinState.allow = bool(req.get("allowStdin"))
    CELL_CODES = ()
    cpu = cpu_seconds()
    err = guarded(run_cell, req, bool(req.get("silent")))
    if IN_FORK:  # a child forked by the cell came back here: it has no business in the driver
        flush_std()
        os._exit(1 if err else 0)
    info = None
    if err is not None:
        info = error_info(err)
        emit({"ev": "error", "id": EXEC_ID, **info})
        del err
    fig_err = guarded(flush_figures)
    if isinstance(fig_err, KeyboardInterrupt) and info is None:
        info = error_info(fig_err)
        emit({"ev": "error", "id": EXEC_ID, **info})
    elif fig_err is not None:
        import traceback
        STDERR.write("".join(traceback.format_exception(type(fig_err), fig_err,
                                                        user_tb(fig_err.__traceback__))))
    del fig_err
    tidy()
    done = {"ev": "done", "id": EXEC_ID, "status": "ok",
            "cpuMs": round((cpu_seconds() - cpu) * 1000, 3),
            "peakMemoryBytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    if info is not None:
        done["status"] = "interrupted" if info["ename"] == "KeyboardInterrupt" else "error"
        done["error"] = info
    FINISHED += 1
    PENDING_INTERRUPT = False
    emit(done, counts=True)


def tidy():
    """Undo what user code may have broken in the driver's machinery."""
    if STDOUT.closed or STDERR.closed:
        was_out, was_err = sys.stdout, sys.stderr
        open_streams()
        if not (was_out is None or getattr(was_out, "closed", False)):
            sys.stdout = was_out
        if not (was_err is None or getattr(was_err, "closed", False)):
            sys.stderr = was_err
    if signal.getsignal(signal.SIGINT) is not on_sigint:
        signal.signal(signal.SIGINT, on_sigint)


def main_loop():
    global BUSY, FINISHED, PENDING_INTERRUPT
    emit({"ev": "ready", "version": "%d.%d.%d" % sys.version_info[:3], "pid": PID})
    while True:
        req = None
        try:
            req = EXEC_QUEUE.get()  # a SIGINT now runs on_sigint, which ignores it
            execute(req)
        except BaseException as e:  # a bug in the driver or an ill-timed interrupt: keep going
            BUSY = False
            if req is not None:
                FINISHED, PENDING_INTERRUPT = RECEIVED, False
                try:
                    emit({"ev": "done", "id": req.get("id"), "status": "error",
                          "error": {"ename": type(e).__name__, "evalue": str(e),
                                    "traceback": [f"cellbox driver error: {e!r}"]}})
                except BaseException:
                    pass


# ---------------------------------------------------------------------------------------------
# Requests answered while code runs

def complete(req):
    code = str(req.get("code") or "")
    pos = max(0, min(len(code), int(req.get("cursorPos") or 0)))
    try:
        import jedi
    except ImportError:
        jedi = None
    if jedi is not None:
        try:
            return complete_jedi(jedi, code, pos)
        except Exception:
            pass
    return complete_names(code, pos)


def complete_jedi(jedi, code, pos):
    jedi.Interpreter._allow_descriptor_getattr_default = False  # never run properties from here
    before = code[:pos]
    line = before.count("\n") + 1
    column = pos - (before.rfind("\n") + 1)
    comps = jedi.Interpreter(code, [NS]).complete(line, column)
    if not comps:
        return {"matches": [], "cursorStart": pos, "cursorEnd": pos}
    start = pos - comps[0].get_completion_prefix_length()
    typed = code[start:pos]
    matches = []
    for c in comps:
        text = c.name_with_symbols
        if c.get_completion_prefix_length() != pos - start:  # rare: re-base on our span
            text = typed[:len(typed) - c.get_completion_prefix_length()] + text
        matches.append(text)
    return {"matches": matches, "cursorStart": start, "cursorEnd": pos}


def complete_names(code, pos):
    """Without jedi: names of the namespace, builtins and keywords, or attributes after a dot."""
    import keyword
    import re
    text = re.search(r"[\w.]*$", code[:pos]).group()
    expr, dot, prefix = text.rpartition(".")
    if dot:
        try:
            names = dir(lookup(expr))
        except Exception:
            names = []
    else:
        names = set(NS) | set(dir(builtins)) | set(keyword.kwlist)
    matches = sorted(n for n in names if n.startswith(prefix)
                     and (prefix.startswith("_") or not n.startswith("_")))
    return {"matches": matches, "cursorStart": pos - len(prefix), "cursorEnd": pos}


def lookup(name):
    """The object a dotted name refers to, without running properties or __getattr__ of objects."""
    import inspect
    parts = name.split(".")
    if not all(p.isidentifier() for p in parts):
        raise LookupError(name)
    if parts[0] in NS:
        obj = NS[parts[0]]
    elif hasattr(builtins, parts[0]):
        obj = getattr(builtins, parts[0])
    else:
        raise LookupError(name)
    for part in parts[1:]:
        if isinstance(obj, Module):
            obj = getattr(obj, part)  # module attributes are plain (or lazily imported) values
        else:
            obj = inspect.getattr_static(obj, part)
            if isinstance(obj, (classmethod, staticmethod)):
                obj = obj.__func__
    return obj


def name_at(code, pos):
    """The dotted name under the cursor, else the callee of the innermost open call."""
    import re
    left = re.search(r"[\w.]*$", code[:pos]).group()
    right = re.match(r"\w*", code[pos:]).group()
    name = (left + right).strip(".")
    if name:
        return name
    depth = 0
    for i in range(pos - 1, -1, -1):
        ch = code[i]
        if ch in ")]}":
            depth += 1
        elif ch in "([{":
            if depth == 0:
                if ch != "(":
                    return ""
                return re.search(r"[\w.]*$", code[:i].rstrip()).group().strip(".")
            depth -= 1
    return ""


SAFE_REPR = (int, float, complex, bool, str, bytes, list, tuple, dict, set, frozenset, type(None))


def inspect_request(req):
    import inspect
    code = str(req.get("code") or "")
    pos = max(0, min(len(code), int(req.get("cursorPos") or 0)))
    name = name_at(code, pos)
    try:
        obj = lookup(name)
    except Exception:
        return {"found": False}
    lines = []
    if callable(obj):
        try:
            lines.append(f"Signature: {name}{inspect.signature(obj)}")
        except (TypeError, ValueError):
            pass
    lines.append(f"Type:      {type(obj).__qualname__}")
    if isinstance(obj, SAFE_REPR):
        import reprlib
        lines.append(f"Value:     {reprlib.repr(obj)}")
    try:
        lines.append(f"File:      {inspect.getsourcefile(obj) or inspect.getfile(obj)}")
    except TypeError:
        pass
    doc = inspect.getdoc(obj)
    if doc:
        lines.append("Docstring:\n" + doc)
    if int(req.get("detailLevel") or 0) >= 1:
        try:
            lines.append("Source:\n" + inspect.getsource(obj).rstrip("\n"))
        except (OSError, TypeError):
            pass
    return {"found": True, "data": {"text/plain": "\n".join(lines)}}


def is_complete(req):
    code = str(req.get("code") or "")
    flags = (compile_flags | _ast.PyCF_ONLY_AST | _ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
             | 0x4000 | 0x200)  # PyCF_ALLOW_INCOMPLETE_INPUT | PyCF_DONT_IMPLY_DEDENT
    lines = code.split("\n")
    last = next((line for line in reversed(lines) if line.strip()), "")
    indent = last[:len(last) - len(last.lstrip())]
    try:
        compile(code, "<input>", "exec", flags, dont_inherit=True)
    except SyntaxError as e:
        if "incomplete input" not in str(e.msg):
            return {"status": "invalid"}
        return {"status": "incomplete",
                "indent": indent + ("    " if last.rstrip().endswith(":") else "")}
    except (ValueError, TypeError, OverflowError):  # e.g. NUL bytes
        return {"status": "invalid"}
    if lines[-1].strip() and indent:  # inside a block: like a console, wait for an empty line
        return {"status": "incomplete", "indent": indent}
    return {"status": "complete"}


def variables(req):
    """The user's names. While code runs, only values of built-in types are repr'd (a user
    __repr__ must not run on this thread meanwhile); the others say their type."""
    import reprlib
    summary = reprlib.Repr()
    summary.maxstring = summary.maxother = 80
    summary.maxlevel = 2
    out = []
    for name, value in sorted(NS.copy().items()):
        if name.startswith("_") or isinstance(value, Module):
            continue
        entry = {"name": name, "type": type(value).__qualname__}
        plain_value = type(value) in SAFE_REPR
        try:
            if plain_value or not BUSY:
                entry["summary"] = summary.repr(value)[:120]
            else:
                entry["summary"] = f"<{type(value).__qualname__}>"
            if plain_value and isinstance(value, (str, bytes, *CONTAINERS)) or (
                    not BUSY and hasattr(type(value), "__len__") and hasattr(value, "shape")):
                entry["size"] = len(value)
        except Exception:
            entry.setdefault("summary", object.__repr__(value))
        out.append(entry)
    return {"variables": out}


QUERIES = {"complete": complete, "inspect": inspect_request, "isComplete": is_complete,
           "variables": variables}


def answer(req):
    try:
        event = {"ev": "reply", "id": req.get("id"), "result": QUERIES[req["op"]](req)}
    except BaseException as e:
        event = {"ev": "reply", "id": req.get("id"), "error": f"{type(e).__name__}: {e}"}
    try:
        emit(event, flush=False)
    except Exception:  # e.g. an unserialisable value: still answer
        emit({"ev": "reply", "id": req.get("id"), "error": "internal error"}, flush=False)


def handle(line, offset):
    global RECEIVED
    try:
        req = json.loads(line)
        op = req.get("op")
    except (ValueError, AttributeError):
        return  # not a request: nothing to answer
    if op == "execute":
        RECEIVED += 1  # before reading INTERRUPT_BEFORE: see on_sigint
        if offset < INTERRUPT_BEFORE:
            req["_sigint"] = True
        EXEC_QUEUE.put(req)
    elif op == "input":
        if req.get("id") == EXEC_ID:
            StdinState.replies.put(req)
    elif op in QUERIES:
        answer(req)
    elif "id" in req:
        emit({"ev": "reply", "id": req.get("id"), "error": f"unknown op {op!r}"}, flush=False)


def reader_loop():
    global READ_BYTES
    block_sigint()
    buf = bytearray()
    offset = 0  # of buf[0] in the request stream
    flushed = time.monotonic()
    while True:
        # While an execution is in flight (or user threads may print), wake up to flush.
        printing = RECEIVED > FINISHED or threading.active_count() > 2
        try:
            ready = select.select([REQ_FD], [], [], 0.05 if printing else None)[0]
            chunk = None
            if ready:
                with READ_LOCK:  # on_sigint sees READ_BYTES and the pipe consistently
                    chunk = os.read(REQ_FD, unread(REQ_FD) or 1 << 16)  # data is there, or EOF
                    READ_BYTES += len(chunk)
        except OSError:
            chunk = b""
        if printing and time.monotonic() - flushed >= 0.05:
            flush_std()
            flushed = time.monotonic()
        if chunk is None:
            continue
        if not chunk:  # the manager closed the request pipe: exit 0
            flush_std()
            os._exit(0)
        start = len(buf)
        buf += chunk
        if buf.find(b"\n", start) < 0:
            continue
        *lines, buf = buf.split(b"\n")
        for line in lines:
            if line.strip():
                try:
                    handle(line, offset)
                except Exception:
                    pass
            offset += len(line) + 1


threading.Thread(target=reader_loop, name="cellbox-reader", daemon=True).start()
main_loop()
