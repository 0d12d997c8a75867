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
WRITE_CODES = set()  # the code of our streams' raw writes (on_sigint)


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
    WRITE_CODES.add(counted_write.__code__)
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
DEFERRED_SIGINT = None  # the execution a SIGINT came for during our streams' raw write (on_sigint)
MAIN_THREAD = threading.get_ident()
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
        if frame is not None and frame.f_code in WRITE_CODES:
            # In our stream's raw write, whose bytes may have reached the fd: raised there, the
            # KeyboardInterrupt would leave them in the BufferedWriter, which writes them again
            # at the next flush. The reader thread signals again within 50 ms (reader_loop).
            global DEFERRED_SIGINT
            DEFERRED_SIGINT = EXEC_ID
            return
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


def env_site():
    """The workspace's environment (/env, a virtual environment that workspace/install and %pip
    fill): its site-packages of this python's version, on sys.path after the interpreter's own,
    whether it exists yet or not (an install later in the session is then importable)."""
    env = os.environ.get("CELLBOX_ENV")
    if not env:
        return None
    d = os.path.join(env, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
    if d not in sys.path:
        import site
        n = len(sys.path)
        site.addsitedir(d)  # its .pth files too
        if d not in sys.path[n:]:
            sys.path.append(d)
    return d


ENV_SITE = env_site()


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
INLINE_ASKED = False  # %matplotlib ran
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
    # `%matplotlib inline` asks for it whatever MPLBACKEND says.
    if INLINE_ASKED or not os.environ.get("MPLBACKEND"):
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
# IPython forms (PROTOCOL.md §8): `!cmd`, `x = !cmd`, `!!cmd`, `%magic`, `%%magic`, `obj?`.
#
# A cell that may hold one is rewritten before it is compiled, one line for one line, so that
# tracebacks keep their line numbers: a form at the start of a logical line (not inside brackets
# or a string, nor after a backslash) becomes a call of `__cellbox__`, a builtin module of the
# functions below. Only a line that starts with `!`, `%` or `?`, ends with `?`, or assigns
# `= !...` or `= %...` can be one; a cell without any of the three characters is not looked at.

class UsageError(Exception):
    """A magic that does not exist or is used wrongly: shown as IPython shows it, one line."""


FORMS_RE = None  # the patterns, compiled on first use (re is not imported at start)


def forms_re():
    global FORMS_RE
    if FORMS_RE is None:
        import re
        FORMS_RE = (
            # a line that may hold a form: each pattern starts with a literal, which re finds fast
            (re.compile(r"\n[ \t]*[!%?]"), re.compile(r"\?[ \t]*$", re.M),
             re.compile(r"=[ \t]*[!%]")),
            # what changes the state of a line: a quote, a comment, a bracket
            re.compile(r"'''|\"\"\"|'|\"|#|[(\[{]|[)\]}]"),
            # the end of each kind of string, past its escapes
            {q: re.compile(r"\\(?:.|$)|" + q) for q in ("'''", '"""', "'", '"')},
            # ?obj, obj?, obj??: a dotted name with subscripts (as IPython), or a %magic
            re.compile(r"(\?\??)?(%{0,2}(?!\d)\w+(?:\.\w+|\[[^\[\]]+\])*)(\?\??)?"),
            # x = !cmd, a, b = %magic args
            re.compile(r"([\w.]+(?:[ \t]*,[ \t]*[\w.]+)*)[ \t]*=[ \t]*([!%])(.*)"),
        )
    return FORMS_RE


def transform_cell(code):
    """(code with its IPython forms made calls of __cellbox__, one line for one line;
    (name, arg) of a %%magic on the cell's first line, which is then blank, or None)."""
    candidates, outer, ends, help_re, assign_re = forms_re()
    last = -1  # a position on the last line that may hold a form
    for i, pattern in enumerate(candidates):
        for m in pattern.finditer("\n" + code if i == 0 else code):
            last = max(last, m.end() - 1 - (i == 0))  # on the line (the first: on "\n" + code)
    if last < 0:
        return code, None
    lines = code.split("\n")
    cell = None
    for i, line in enumerate(lines):
        if line.strip():
            if line.startswith("%%"):
                cell, lines[i] = split_magic(line[2:]), ""
            break
    depth, quote, cont = 0, None, False
    for i in range(code.count("\n", 0, last) + 1):  # up to the last line that may hold one
        line = lines[i]
        if not (depth or quote or cont):
            new = transform_line(line, help_re, assign_re)
            if new is not None:
                lines[i] = new
                continue
        depth, quote, cont = scan_line(line, depth, quote, outer, ends)
    return "\n".join(lines), cell


def split_magic(text):
    """'name  args' -> ('name', 'args')."""
    parts = text.split(None, 1)
    return (parts[0] if parts else ""), (parts[1].rstrip() if len(parts) > 1 else "")


def transform_line(line, help_re, assign_re):
    """The line as a call of __cellbox__, or None if it holds no form."""
    s = line.lstrip()
    if not s:
        return None
    indent = line[:len(line) - len(s)]
    s = s.rstrip()
    c = s[0]
    if c == "!":
        if s.startswith("!!"):
            return f"{indent}__cellbox__.getoutput({s[2:]!r})"
        return f"{indent}__cellbox__.system({s[1:]!r})"
    if c == "?" or s[-1] == "?":
        m = help_re.fullmatch(s)
        if m and (m.group(1) or m.group(3)):
            detail = int("??" in (m.group(1), m.group(3)))
            return f"{indent}__cellbox__.pinfo({m.group(2)!r}, {detail})"
    if c == "%":
        return "%s__cellbox__.magic(%r, %r)" % (indent, *split_magic(s[1:]))
    if "=" in s:
        m = assign_re.fullmatch(s)
        if m:
            lhs, kind, rest = m.groups()
            if kind == "!":
                return f"{indent}{lhs} = __cellbox__.getoutput({rest.strip()!r})"
            return "%s%s = __cellbox__.magic(%r, %r)" % (indent, lhs, *split_magic(rest))
    return None


def scan_line(line, depth, quote, outer, ends):
    """(bracket depth, the quote of a string still open, backslash continuation) after line,
    given the depth and open string before it."""
    i = 0
    while True:
        if quote is not None:
            end = ends[quote]
            while True:
                m = end.search(line, i)
                if m is None:  # a one-quote string ends with its line (the compiler says so)
                    return depth, (quote if len(quote) == 3 else None), False
                t, i = m.group(), m.end()
                if t == quote:
                    quote = None
                    break
                if t == "\\":  # a backslash ends the line: the string goes on
                    return depth, quote, False
        m = outer.search(line, i)
        if m is None:
            return depth, None, line.endswith("\\")
        t, i = m.group(), m.end()
        if t == "#":
            return depth, None, False
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth = max(depth - 1, 0)
        else:
            quote = t


class SList(list):
    """The lines of a command's output (IPython's SList): .n joins them with newlines, .s with
    spaces, .l is a plain list."""
    n = nlstr = property(lambda self: "\n".join(self))
    s = spstr = property(lambda self: " ".join(self))
    l = property(lambda self: [*self])  # noqa: E741 (IPython's name)


def var_expand(text, glob, loc):
    """IPython's expansion of {expression} and $name in a command or a magic's argument, with
    the caller's names; the text as it is if any of it fails ($$ is a $)."""
    if "{" not in text and "$" not in text:
        return text
    import re
    import string
    ns = dict(glob)
    if loc is not glob:
        ns.update(loc)
    out = []
    try:
        for literal, field, spec, conv in string.Formatter().parse(text):
            pos = 0
            for m in re.finditer(r"(.*?)\$(\$?[\w.]+)(?=([^']*'[^']*')*[^']*$)", literal):
                name = m.group(2)
                out += [m.group(1), name if name[0] == "$" else format(eval(name, ns), "")]
                pos = m.end()
            out.append(literal[pos:])
            if field is not None:
                value = eval(f"{field}:{spec}" if spec else field, ns)  # [1:2] is not a spec
                if conv:
                    value = {"r": repr, "s": str, "a": ascii}[conv](value)
                out.append(format(value, ""))
    except Exception:
        return text
    return "".join(out)


def system(cmd):
    """!cmd: run cmd with /bin/sh; its output goes to the cell's stdout and stderr as it comes."""
    import subprocess
    frame = sys._getframe(1)
    cmd = var_expand(cmd, frame.f_globals, frame.f_locals)
    proc = subprocess.Popen(["/bin/sh", "-c", cmd], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    pipes = {proc.stdout.fileno(): [sys.stdout, None], proc.stderr.fileno(): [sys.stderr, None]}
    try:
        while pipes:
            ready = select.select(list(pipes), [], [], 0.1)[0]
            if not ready and proc.poll() is not None:
                break  # the shell is gone; what it left running in the background has the pipes
            for fd in ready:
                data = os.read(fd, 1 << 16)
                if data:
                    relay(pipes[fd], data)
                else:
                    del pipes[fd]
        proc.wait()
    except BaseException:  # an interrupt (the command had the SIGINT too): end it, go on up
        proc.kill()
        proc.wait()
        raise
    finally:
        proc.stdout.close()
        proc.stderr.close()
    NS["_exit_code"] = proc.returncode


def relay(target, data):
    """Write a child's bytes to a stream of the cell at once. target: [stream, text decoder]."""
    stream = target[0]
    if isinstance(stream, io.TextIOWrapper):
        stream.flush()
        stream.buffer.write(data)
        stream.buffer.flush()
        return
    if target[1] is None:  # a stream without bytes (the code's own): write text
        import codecs
        target[1] = codecs.getincrementaldecoder("utf-8")("replace")
    stream.write(target[1].decode(data))
    stream.flush()


def getoutput(cmd):
    """x = !cmd, !!cmd: what cmd writes to stdout and stderr, as a list of lines."""
    import subprocess
    frame = sys._getframe(1)
    cmd = var_expand(cmd, frame.f_globals, frame.f_locals)
    if cmd.rstrip().endswith("&"):
        raise OSError("Background processes not supported.")
    proc = subprocess.Popen(["/bin/sh", "-c", cmd], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        out = proc.communicate()[0]
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        proc.stdout.close()
    NS["_exit_code"] = proc.returncode
    return SList(out.decode("utf-8", "replace").splitlines())


def magic(name, arg):
    """%name arg."""
    fn = LINE_MAGICS.get(name)
    if fn is None:
        raise UsageError(f"Line magic function `%{name}` not found.")
    frame = sys._getframe(1)
    return fn(arg, frame.f_globals, frame.f_locals)


def pinfo(name, detail):
    """obj?, ?obj (detail 0), obj?? (detail 1, with the source): what kernel/inspect says of
    obj, as a display."""
    if name.startswith("%"):
        import inspect
        fn = LINE_MAGICS.get(name.lstrip("%"))
        if fn is None:
            print(f"Object `{name}` not found.")
            return
        text = "Docstring:\n" + inspect.getdoc(fn)
    else:
        frame = sys._getframe(1)
        try:
            try:
                if frame.f_locals is not NS:
                    raise LookupError(name)
                obj = lookup(name)  # runs no property or __getattr__
            except Exception:
                obj = eval(name, frame.f_globals, frame.f_locals)
        except Exception:
            print(f"Object `{name}` not found.")
            return
        text = info_text(name, obj, detail)
    # Jupyter shows help in its pager: the metadata marks it for cellbox jupyter-kernel, which
    # sends it as the execute_reply's page payload.
    display({"text/plain": text}, raw=True, metadata={"cellbox.page": True})


PREVIOUS_DIR = None


def magic_cd(arg, glob, loc):
    """%cd [-q] [DIR]: change the working directory to DIR (`~` expands; home without DIR; the
    previous one for `-`) and print it (not with -q)."""
    global PREVIOUS_DIR
    arg = var_expand(arg, glob, loc)
    quiet = arg == "-q" or arg.startswith("-q ")
    if quiet:
        arg = arg[2:].strip()
    if len(arg) > 1 and arg[0] == arg[-1] and arg[0] in "'\"":
        arg = arg[1:-1]
    if arg == "-":
        if PREVIOUS_DIR is None:
            raise UsageError("%cd -: No previous directory to change to.")
        arg = PREVIOUS_DIR
    try:
        old = os.getcwd()
    except OSError:  # it was removed
        old = None
    try:
        os.chdir(os.path.expanduser(arg or "~"))
    except OSError as e:
        print(e, file=sys.stderr)
        return
    PREVIOUS_DIR = old
    if not quiet:
        print(os.getcwd())


def magic_env(arg, glob, loc):
    """%env: the environment, as a dict (values of names with key, token or secret hidden);
    %env NAME: its value; %env NAME=VALUE or %env NAME VALUE: set it."""
    arg = var_expand(arg, glob, loc).strip()
    if not arg:
        return {k: "<hidden>" if any(s in k.lower() for s in ("key", "token", "secret")) else v
                for k, v in os.environ.items()}
    if "=" in arg:
        name, value = arg.split("=", 1)
    else:
        name, value = (arg.split(None, 1) + [None])[:2]
    name = name.strip()
    if value is None:
        if name not in os.environ:
            raise UsageError(f"Environment does not have key: {name}")
        return os.environ[name]
    if not name or any(c.isspace() for c in name):
        raise UsageError(f"refusing to set env var with whitespace: {name!r}")
    value = value.strip()
    os.environ[name] = value
    print(f"env: {name}={value}")


def format_time(seconds, precision=3):
    """A duration as IPython writes it: 1.23 s, 45.6 ms, 7.89 µs, 12 ns, 1min 3s."""
    if seconds >= 60.0:
        parts = []
        for unit, length in (("d", 86400), ("h", 3600), ("min", 60), ("s", 1)):
            value = int(seconds / length)
            if value > 0:
                seconds %= length
                parts.append(f"{value}{unit}")
            if seconds < 1:
                break
        return " ".join(parts)
    import math
    order = min(-int(math.floor(math.log10(seconds)) // 3), 3) if seconds > 0 else 3
    return "%.*g %s" % (precision, seconds * 1000 ** order, ("s", "ms", "µs", "ns")[order])


def clock():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime, time.perf_counter()


def print_times(start):
    user, sys_, wall = (b - a for a, b in zip(start, clock()))
    print(f"CPU times: user {format_time(user)}, sys: {format_time(sys_)}, "
          f"total: {format_time(user + sys_)}")
    print(f"Wall time: {format_time(wall)}")


def magic_time(arg, glob, loc):
    """%time STATEMENT: run it, print the CPU and wall time it took, and return its value.
    %%time on a cell's first line does the same for the cell."""
    try:
        code = compile(arg, "<timed eval>", "eval", compile_flags, dont_inherit=True)
    except SyntaxError:
        code = compile(arg, "<timed exec>", "exec", compile_flags, dont_inherit=True)
    start = clock()
    value = eval(code, glob, loc)
    if code.co_flags & CO_COROUTINE:
        value = run_async(value)
    print_times(start)
    return value


class TimeitResult:
    """What %timeit -o returns (IPython's): loops, repeat, all_runs (s), timings (s a loop),
    best, worst, average, stdev."""

    def __init__(self, loops, all_runs, precision=3):
        self.loops, self.repeat, self.all_runs = loops, len(all_runs), all_runs
        self.timings = [t / loops for t in all_runs]
        self.best, self.worst = min(self.timings), max(self.timings)
        self.average = sum(self.timings) / self.repeat
        self.stdev = (sum((t - self.average) ** 2 for t in self.timings) / self.repeat) ** 0.5
        self._precision = precision

    def __str__(self):
        p = self._precision
        return (f"{format_time(self.average, p)} ± {format_time(self.stdev, p)} per loop "
                f"(mean ± std. dev. of {self.repeat} run{'s' * (self.repeat != 1)}, "
                f"{self.loops:,} loop{'s' * (self.loops != 1)} each)")

    def __repr__(self):
        return f"<TimeitResult : {self}>"


def timeit_options(arg):
    opts = {"n": 0, "r": 7, "p": 3, "q": False, "o": False}
    rest = arg.strip()
    while len(rest) > 1 and rest[0] == "-" and rest[1].isalpha():
        flag, rest = rest[1], rest[2:]
        if flag in "nrp":
            parts = rest.split(None, 1)
            if not parts:
                raise UsageError(f"option -{flag} requires argument")
            try:
                opts[flag] = int(parts[0])
            except ValueError:
                raise UsageError(f"option -{flag}: {parts[0]!r} is not a number") from None
            rest = parts[1] if len(parts) > 1 else ""
        elif flag in "qotc":  # -t and -c chose a clock in python 2: ignored, as IPython does
            opts[flag] = True
            if rest[:1].isalpha():  # -qo
                rest = "-" + rest
                continue
        else:
            raise UsageError(f"option -{flag} not recognized")
        rest = rest.lstrip()
    if opts["n"] < 0 or opts["r"] < 1:
        raise UsageError("%timeit: -n must be at least 0 (0: find it) and -r at least 1")
    return opts, rest


def magic_timeit(arg, glob, loc, cell=None):
    """%timeit [-n N] [-r R] [-p P] [-q] [-o] STATEMENT: time it with the timeit module, R runs
    (7) of N loops (without -n, as many as take 0.2 s) and print the mean and standard deviation
    of a loop; -p: digits shown (3), -q: print nothing, -o: return a TimeitResult.
    %%timeit on a cell's first line times the cell; the statement of the line, if any, is then
    the setup."""
    import timeit
    opts, stmt = timeit_options(arg)
    setup = "pass"
    if cell is not None:
        setup, stmt = stmt or "pass", cell
    timer = timeit.Timer(stmt or "pass", setup, globals=glob if loc is glob else {**glob, **loc})
    number = opts["n"] or timer.autorange()[0]
    result = TimeitResult(number, timer.repeat(opts["r"], number), opts["p"])
    if not opts["q"]:
        if result.worst > 4 * result.best > 0 and result.worst > 1e-6:
            print(f"The slowest run took {result.worst / result.best:0.2f} times longer than "
                  "the fastest. This could mean that an intermediate result is being cached.")
        print(result)
    return result if opts["o"] else None


def magic_matplotlib(arg, glob, loc):
    """%matplotlib [inline]: figures show inline, as png (the default, and the only backend a
    sandbox has); this switches back to it if the code chose another."""
    global INLINE_ASKED
    gui = (arg.split() or [""])[0]
    if gui not in ("", "inline"):
        print(f"%matplotlib {gui}: a cellbox kernel shows figures inline", file=sys.stderr)
    INLINE_ASKED = True
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        if plt.get_backend() != INLINE:
            plt.switch_backend(INLINE)
    elif "matplotlib" in sys.modules:
        sys.modules["matplotlib"].rcParams["backend"] = INLINE


def magic_config(arg, glob, loc):
    """%config CLASS.TRAIT = VALUE: IPython's configuration. Jupyter front ends send some when a
    kernel starts (VS Code: Completer.use_jedi, InlineBackend.figure_formats); a cellbox kernel
    is not IPython, so they are accepted and change nothing. Without arguments, says so."""
    if not arg.strip():
        print("a cellbox kernel has no IPython configuration; %config settings are accepted "
              "and have no effect")


def magic_pip(arg, glob, loc):
    """%pip ARGS: pip in the workspace's environment (/env, made on first use: a virtual
    environment with the system's packages), as Jupyter's %pip runs pip of the kernel's python.
    Packages come through the daemon's verified package cache (PROTOCOL.md §9); installed ones
    are importable at once and in every kernel of the workspace."""
    import shlex
    env = os.environ.get("CELLBOX_ENV")
    if not env:
        raise UsageError("%pip: this kernel has no workspace environment (CELLBOX_ENV is not set)")
    words = shlex.split(var_expand(arg, glob, loc))
    if not words:
        raise UsageError("%pip: usage: %pip install PACKAGE ...")
    py = os.path.join(env, "bin", "python")
    cmd = " ".join(shlex.quote(w) for w in words)
    if not os.access(py, os.X_OK):
        system("%s -m venv --system-site-packages %s" % (shlex.quote(sys.executable), shlex.quote(env)))
    system("%s -m pip %s" % (shlex.quote(py), cmd))
    import importlib
    importlib.invalidate_caches()
    if ENV_SITE and ENV_SITE not in sys.path:
        sys.path.append(ENV_SITE)
    if words[0] in ("install", "uninstall"):
        print("Note: packages installed into %s are importable now; one already imported needs "
              "a restart to change." % env)


LINE_MAGICS = {"cd": magic_cd, "env": magic_env, "time": magic_time, "timeit": magic_timeit,
               "matplotlib": magic_matplotlib, "pip": magic_pip, "config": magic_config}
FORMS = Module("__cellbox__")
FORMS.system, FORMS.getoutput, FORMS.magic, FORMS.pinfo = system, getoutput, magic, pinfo
builtins.__cellbox__ = FORMS


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
    pad = "\n" * (first - 1)  # line numbers as in the editor's file
    remember_source(filename, pad + code, first)
    cell = None
    if "!" in code or "%" in code or "?" in code:
        code, cell = transform_cell(code)  # IPython forms
        if cell is not None:
            name, arg = cell
            if name == "timeit":
                show_result(magic_timeit(arg, NS, NS, cell=code), silent)
                return
            if name != "time":
                raise UsageError(f"Cell magic `%%{name}` not found.")
            if arg:
                raise UsageError("Can't use statement directly after '%%time'!")
    text = pad + code
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
    start = clock() if cell else None  # %%time
    for co in codes:
        value = eval(co, NS)
        if co.co_flags & CO_COROUTINE:
            value = run_async(value)
    if start:
        print_times(start)
    if last is not None and value is not None and not ends_with_semicolon(text, last):
        show_result(value, silent)


def show_result(value, silent):
    if silent or value is None:
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
        if isinstance(e, UsageError):  # as IPython shows it
            lines = [f"UsageError: {evalue}"]
        else:
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
    if code[code.rfind("\n", 0, pos) + 1:pos].lstrip()[:1] == "%":
        return complete_names(code, pos)  # a magic's argument (jedi sees no python there)
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
    code = str(req.get("code") or "")
    pos = max(0, min(len(code), int(req.get("cursorPos") or 0)))
    name = name_at(code, pos)
    try:
        obj = lookup(name)
    except Exception:
        return {"found": False}
    return {"found": True,
            "data": {"text/plain": info_text(name, obj, int(req.get("detailLevel") or 0))}}


def info_text(name, obj, detail):
    """What kernel/inspect and obj? show of obj: signature, type, value, file, docstring, and
    with detail 1 the source."""
    import inspect
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
    if detail >= 1:
        try:
            lines.append("Source:\n" + inspect.getsource(obj).rstrip("\n"))
        except (OSError, TypeError):
            pass
    return "\n".join(lines)


def is_complete(req):
    code = str(req.get("code") or "")
    if "!" in code or "%" in code or "?" in code:
        code, cell = transform_cell(code)  # IPython forms
        if cell is not None:  # a %%magic takes the lines up to an empty one, as in IPython
            if code.rsplit("\n", 1)[-1].strip():
                return {"status": "incomplete", "indent": ""}
            return {"status": "complete"}
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
    global READ_BYTES, DEFERRED_SIGINT
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
        if DEFERRED_SIGINT is not None:  # on_sigint put it off; the write is over now
            if BUSY and EXEC_ID == DEFERRED_SIGINT:  # (an execution that ended needs none)
                signal.pthread_kill(MAIN_THREAD, signal.SIGINT)
            DEFERRED_SIGINT = None
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
